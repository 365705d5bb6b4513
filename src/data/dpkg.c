#include "dpkg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/file.h"

int dpkg_status_version(const char *status, const char *pkg, char *out, size_t cap) {
    char key[160];
    int klen = snprintf(key, sizeof key, "Package: %s\n", pkg);
    if (klen < 0 || (size_t)klen >= sizeof key || cap == 0) return 0; // no such package name
    for (const char *p = status; (p = strstr(p, key)); p += klen) {
        if (p != status && p[-1] != '\n') continue;
        const char *end = strstr(p, "\n\n");
        if (!end) end = p + strlen(p);
        const char *st = strstr(p, "\nStatus: ");
        if (!st || st > end || strncmp(st + 9, "install ok installed", 20)) continue;
        const char *v = strstr(p, "\nVersion: ");
        if (!v || v > end) continue;
        v += 10;
        size_t n = strcspn(v, "\n");
        if (n >= cap) n = cap - 1;
        memcpy(out, v, n);
        out[n] = '\0';
        return 1;
    }
    return 0;
}

int dpkg_version(const char *pkg, char *out, size_t cap) {
    char *status;
    if (read_file(DPKG_STATUS, &status, NULL)) return 0;
    int found = dpkg_status_version(status, pkg, out, cap);
    free(status);
    return found;
}
