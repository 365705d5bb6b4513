// Text files for training and tokenizing: every regular file under a
// directory, and whole-file reads of any size.
#pragma once
#include <stddef.h>
#include <string.h>

typedef struct { char **path; size_t n; } FileList;

// Every regular file under dir, recursively (symbolic links not followed),
// sorted by path so that results do not depend on directory order.
int filelist_scan(const char *dir, FileList *fl);
void filelist_free(FileList *fl);
// Whole file, any size, as bytes: read_file_max(path, SIZE_MAX, ...) of
// util/file.h (NUL-terminated too).
int read_all(const char *path, unsigned char **data, size_t *n);
// Binary files hold NUL bytes; text never does.
static inline int is_binary(const unsigned char *s, size_t n) { return n && memchr(s, 0, n) != NULL; }
