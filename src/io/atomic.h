// Atomic file writes: write to "<path>.tmp.<pid>", fsync, rename over path,
// fsync the directory. A crash leaves either the old file or the new one.
#pragma once
#include <stdio.h>
#include <stddef.h>

#include "../util/common.h"
#include "../util/file.h" // read_file, the reading side, lives there

typedef struct {
    FILE *f;
    char path[MHAR_PATH_MAX];
    char tmp[MHAR_PATH_MAX];  // path + ".tmp.<pid>"
    int failed;
} AtomicFile;

int atomic_open(AtomicFile *a, const char *path);           // MHAR_OK / MHAR_ERR
int atomic_write(AtomicFile *a, const void *data, size_t n); // marks failure
int atomic_commit(AtomicFile *a);  // flush, fsync, rename; removes tmp on error
void atomic_abort(AtomicFile *a);  // remove the temp file
// Convenience: whole buffer to path.
int atomic_write_file(const char *path, const void *data, size_t n);
// A byte-for-byte copy of the regular file src to dst, written atomically.
int atomic_copy_file(const char *src, const char *dst);
