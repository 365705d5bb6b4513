// Whole-file and whole-stream reads into one malloc'd buffer.
// Each returns MHAR_OK or MHAR_ERR (message: the path or stream, and why);
// on success *data is NUL-terminated (one byte past *n) and the caller frees it.
#pragma once
#include <stddef.h>
#include <stdio.h>

// The cap of read_file: configs, JSON and indexes; anything larger is not
// what such a reader expects.
#define READ_FILE_MAX ((size_t)64 << 20)

// A regular file of at most READ_FILE_MAX bytes. n may be NULL.
int read_file(const char *path, char **data, size_t *n);
// A regular file of at most max bytes (SIZE_MAX: any size). n may be NULL.
int read_file_max(const char *path, size_t max, char **data, size_t *n);
// A stream (a pipe from a child process) to its end; what names it in errors.
int read_stream(FILE *f, const char *what, char **data, size_t *n);
