// Atomic file writes: write to "<path>.tmp.<pid>", fsync, rename over path,
// fsync the directory. A crash leaves either the old file or the new one.
#pragma once
#include <stdio.h>
#include <stddef.h>

typedef struct {
    FILE *f;
    char path[4096];
    char tmp[4200];
    int failed;
} AtomicFile;

int atomic_open(AtomicFile *a, const char *path);           // MHAR_OK / MHAR_ERR
int atomic_write(AtomicFile *a, const void *data, size_t n); // marks failure
int atomic_commit(AtomicFile *a);  // flush, fsync, rename; removes tmp on error
void atomic_abort(AtomicFile *a);  // remove the temp file
// Convenience: whole buffer to path.
int atomic_write_file(const char *path, const void *data, size_t n);
// Read a whole (small) file into a NUL-terminated malloc'd buffer.
int read_file(const char *path, char **data, size_t *n);
