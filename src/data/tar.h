// A streaming reader of tar archives: ustar, GNU long names ('L') and pax
// path/size records ('x'). It reads from any stream (a pipe from xz), so
// nothing is unpacked to disk and data is only kept when asked for.
//
//   Tar t = {.f = stream, .what = "linux.tar.xz"};
//   while ((rc = tar_next(&t)) == 1) {        // t.name, t.size, t.type
//       ... tar_data(&t, &data) or tar_skip(&t, t.size) ...
//   }                                         // rc 0: end; MHAR_ERR: damaged
#pragma once
#include <stddef.h>
#include <stdio.h>

#include "../util/common.h"

typedef struct {
    FILE *f;
    const char *what;             // the archive's name, for messages
    char name[MHAR_PATH_MAX];     // the current entry's path
    size_t size;                  // its data bytes
    char type;                    // '0' (or '\0', '7') regular file, '5' directory, ...
} Tar;

// Next entry's header: 1 = entry (its data must be read or skipped next),
// 0 = end of archive, MHAR_ERR = damaged archive.
int tar_next(Tar *t);
// Skip n data bytes plus the padding to the next 512-byte block.
int tar_skip(Tar *t, size_t n);
// The entry's data (and its padding) into a malloc'd buffer, NUL after it.
int tar_data(Tar *t, char **data);
