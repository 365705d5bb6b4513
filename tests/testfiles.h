// Scratch files for the C tests: a mkdtemp directory (set tmpdir before use),
// paths inside it, and small file helpers.
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[256];

// tmpdir/name; the last 8 results stay valid.
static const char *tpath(const char *name) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n)) { perror(path); exit(2); }
    fclose(f);
}
