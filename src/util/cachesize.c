#include "cachesize.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

// One line of a sysfs file into buf (newline dropped); 0 on success.
static int read_line(const char *dir, const char *name, char *buf, size_t cap) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    const int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

// "32K", "1024K", "32768K", "2M" or a plain byte count -> bytes (0: unparsable).
static long parse_size(const char *s) {
    long v = 0;
    char unit = '\0';
    const int n = sscanf(s, "%ld%c", &v, &unit);
    if (n < 1 || v <= 0) return 0;
    if (n == 1) return v;
    switch (unit) {
    case 'K': return v << 10;
    case 'M': return v << 20;
    case 'G': return v << 30;
    default: return 0;
    }
}

long cache_bytes_sysfs(const char *root, int level) {
    long best = 0;
    for (int i = 0; i < 16; i++) {  // index0 .. index15; they are numbered without gaps
        char dir[384], text[64];
        snprintf(dir, sizeof dir, "%s/cpu0/cache/index%d", root, i);
        if (read_line(dir, "level", text, sizeof text)) break;
        int lv = 0;
        if (sscanf(text, "%d", &lv) != 1 || lv != level) continue;
        if (read_line(dir, "type", text, sizeof text) || !strcmp(text, "Instruction")) continue;
        if (read_line(dir, "size", text, sizeof text)) continue;
        const long b = parse_size(text);
        if (b > best) best = b;
    }
    return best;
}

long cache_bytes(int level) {
    const long b = cache_bytes_sysfs("/sys/devices/system/cpu", level);
    if (b > 0) return b;
    const int names[] = {0, _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE,
                         _SC_LEVEL4_CACHE_SIZE};
    if (level < 1 || level > 4) return 0;
    const long s = sysconf(names[level]);
    return s > 0 ? s : 0;
}

long llc_bytes(void) {
    for (int level = 4; level >= 2; level--) {
        const long b = cache_bytes(level);
        if (b > 0) return b;
    }
    return 0;
}
