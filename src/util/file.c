#include "file.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common.h"

int read_file_max(const char *path, size_t max, char **data, size_t *n) {
    *data = NULL;
    if (n) *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return mhar_fail("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int err = errno;
        fclose(f);
        return mhar_fail("%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return mhar_fail("%s: not a regular file", path);
    }
    if ((unsigned long long)st.st_size > max || (unsigned long long)st.st_size >= SIZE_MAX) {
        fclose(f);
        if (max % ((size_t)1 << 20) == 0)
            return mhar_fail("%s: %lld bytes, more than the %zu MiB limit for this kind of file", path,
                             (long long)st.st_size, max >> 20);
        return mhar_fail("%s: %lld bytes, more than the %zu-byte limit for this kind of file", path,
                         (long long)st.st_size, max);
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        fclose(f);
        return mhar_fail("%s: out of memory reading %zu bytes", path, size);
    }
    size_t got = size ? fread(buf, 1, size, f) : 0;
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (got != size) {
        free(buf);
        return mhar_fail("%s: read %zu of %zu bytes: %s", path, got, size,
                         err ? strerror(err) : "file shrank while reading");
    }
    buf[size] = '\0';
    *data = buf;
    if (n) *n = size;
    return MHAR_OK;
}

int read_file(const char *path, char **data, size_t *n) {
    return read_file_max(path, READ_FILE_MAX, data, n);
}

int read_stream(FILE *f, const char *what, char **data, size_t *n) {
    *data = NULL;
    if (n) *n = 0;
    size_t cap = (size_t)1 << 20, len = 0;
    char *buf = malloc(cap);
    if (!buf) return mhar_fail("%s: out of memory", what);
    for (;;) {
        if (len + 1 >= cap) { // room for the data and the final NUL
            if (cap > SIZE_MAX / 2) { free(buf); return mhar_fail("%s: output too large", what); }
            char *b = realloc(buf, cap * 2);
            if (!b) { free(buf); return mhar_fail("%s: out of memory (%zu bytes)", what, cap * 2); }
            buf = b;
            cap *= 2;
        }
        size_t r = fread(buf + len, 1, cap - 1 - len, f);
        len += r;
        if (r == 0) break;
    }
    if (ferror(f)) { free(buf); return mhar_fail("%s: read error", what); }
    buf[len] = '\0';
    *data = buf;
    if (n) *n = len;
    return MHAR_OK;
}
