#include "dpkg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/file.h"

int dpkg_version(const char *pkg, char *out, size_t cap) {
    char *status;
    size_t len;
    if (read_file("/var/lib/dpkg/status", &status, &len)) return 0;
    int found = 0;
    char key[160];
    snprintf(key, sizeof key, "Package: %s\n", pkg);
    size_t klen = strlen(key);
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
        found = 1;
        break;
    }
    free(status);
    return found;
}
