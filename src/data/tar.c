#include "tar.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int tar_octal(const uint8_t *p, size_t n, size_t *out) {
    size_t v = 0;
    if (p[0] & 0x80) { // GNU base-256 for big sizes
        for (size_t i = 1; i < n; i++) v = v << 8 | p[i];
        *out = v;
        return MHAR_OK;
    }
    size_t i = 0;
    while (i < n && p[i] == ' ') i++;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) v = v * 8 + (p[i] - '0');
    if (i < n && p[i] != ' ' && p[i] != '\0') return MHAR_ERR;
    *out = v;
    return MHAR_OK;
}

static int tar_read(Tar *t, void *buf, size_t n) {
    if (fread(buf, 1, n, t->f) != n) return mhar_fail("%s: archive ends early", t->what);
    return MHAR_OK;
}

int tar_skip(Tar *t, size_t n) {
    char buf[65536];
    size_t left = (n + 511) / 512 * 512;
    while (left) {
        size_t k = left < sizeof buf ? left : sizeof buf;
        if (tar_read(t, buf, k)) return MHAR_ERR;
        left -= k;
    }
    return MHAR_OK;
}

// Read an entry's data (and its padding) into a malloc'd buffer, with a NUL
// after it so header records can be parsed as strings.
int tar_data(Tar *t, char **data) {
    char *buf = malloc(t->size + 1);
    if (!buf) return mhar_fail("%s: out of memory (%zu bytes)", t->what, t->size);
    if (tar_read(t, buf, t->size)) { free(buf); return MHAR_ERR; }
    buf[t->size] = '\0';
    size_t pad = (512 - t->size % 512) % 512;
    char junk[512];
    if (pad && tar_read(t, junk, pad)) { free(buf); return MHAR_ERR; }
    *data = buf;
    return MHAR_OK;
}

// Next entry's header: 1 = entry (name, size, type set; its data must be read
// or skipped next), 0 = end of archive, MHAR_ERR = damaged archive. GNU long
// names ('L') and pax path/size records ('x') are applied to the entry after them.
int tar_next(Tar *t) {
    char long_name[MHAR_PATH_MAX] = "";
    size_t pax_size = (size_t)-1;
    for (;;) {
        uint8_t h[512];
        size_t got = fread(h, 1, 512, t->f);
        if (got == 0) return 0; // some writers omit the two zero blocks
        if (got != 512) return mhar_fail("%s: archive ends inside a header", t->what);
        int zero = 1;
        for (int i = 0; i < 512 && zero; i++) zero = h[i] == 0;
        if (zero) return 0;
        // The checksum field counts as spaces; old writers summed signed bytes.
        size_t sum = 0, want;
        long ssum = 0;
        for (int i = 0; i < 512; i++) {
            int in_field = i >= 148 && i < 156;
            sum += in_field ? ' ' : h[i];
            ssum += in_field ? ' ' : (signed char)h[i];
        }
        if (tar_octal(h + 148, 8, &want) || (want != sum && (long)want != ssum) ||
            tar_octal(h + 124, 12, &t->size))
            return mhar_fail("%s: not a tar archive, or damaged (bad header checksum)", t->what);
        t->type = (char)h[156];
        if (t->type == 'L' || t->type == 'x') {
            char *data;
            if (t->size > (1 << 20)) return mhar_fail("%s: oversized extended header", t->what);
            if (tar_data(t, &data)) return MHAR_ERR;
            if (t->type == 'L') {
                size_t n = strnlen(data, t->size);
                if (n >= sizeof long_name) n = sizeof long_name - 1;
                memcpy(long_name, data, n);
                long_name[n] = '\0';
            } else { // records "LEN key=value\n"
                for (size_t off = 0; off < t->size;) {
                    size_t len = strtoul(data + off, NULL, 10);
                    if (len == 0 || off + len > t->size) break;
                    const char *kv = memchr(data + off, ' ', len), *rec_end = data + off + len - 1; // at '\n'
                    if (kv && kv + 1 < rec_end) {
                        kv++;
                        size_t kvlen = (size_t)(rec_end - kv);
                        if (kvlen > 5 && !strncmp(kv, "path=", 5) && kvlen - 5 < sizeof long_name) {
                            memcpy(long_name, kv + 5, kvlen - 5);
                            long_name[kvlen - 5] = '\0';
                        } else if (!strncmp(kv, "size=", 5)) {
                            pax_size = strtoull(kv + 5, NULL, 10);
                        }
                    }
                    off += len;
                }
            }
            free(data);
            continue;
        }
        if (long_name[0]) {
            memcpy(t->name, long_name, strlen(long_name) + 1);
        } else { // ustar: prefix "/" name
            char name[101], prefix[156];
            memcpy(name, h, 100); name[100] = '\0';
            memcpy(prefix, h + 345, 155); prefix[155] = '\0';
            if (memcmp(h + 257, "ustar\0", 6) == 0 && prefix[0])
                snprintf(t->name, sizeof t->name, "%s/%s", prefix, name);
            else
                snprintf(t->name, sizeof t->name, "%s", name);
        }
        if (pax_size != (size_t)-1) t->size = pax_size;
        return 1;
    }
}
