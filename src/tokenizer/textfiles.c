#define _FILE_OFFSET_BITS 64
#include "textfiles.h"

#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../util/common.h"
#include "../util/file.h"

// nftw has no user pointer, so the walk collects into this (the walk is not
// reentrant; one at a time is all the commands need).
static FileList *walk_out;
static int walk_failed;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)ftw;
    if (type == FTW_DNR) { walk_failed = mhar_fail("%s: cannot read directory", path); return 1; }
    if (type != FTW_F || !S_ISREG(st->st_mode)) return 0;
    FileList *fl = walk_out;
    if ((fl->n & (fl->n - 1)) == 0) {  // grow at powers of two
        char **p = realloc(fl->path, sizeof(char *) * (fl->n ? 2 * fl->n : 1));
        if (!p) { walk_failed = mhar_fail("out of memory listing files"); return 1; }
        fl->path = p;
    }
    fl->path[fl->n] = strdup(path);
    if (!fl->path[fl->n]) { walk_failed = mhar_fail("out of memory listing files"); return 1; }
    fl->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int filelist_scan(const char *dir, FileList *fl) {
    memset(fl, 0, sizeof *fl);
    struct stat st;
    if (stat(dir, &st) != 0) return mhar_fail("%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return mhar_fail("%s: not a directory", dir);
    walk_out = fl;
    walk_failed = MHAR_OK;
    if (nftw(dir, walk_one, 32, FTW_PHYS) != 0 && walk_failed == MHAR_OK)
        walk_failed = mhar_fail("%s: cannot walk the directory: %s", dir, strerror(errno));
    walk_out = NULL;
    if (walk_failed) { filelist_free(fl); return MHAR_ERR; }
    if (fl->n) qsort(fl->path, fl->n, sizeof(char *), cmp_str);
    return MHAR_OK;
}

void filelist_free(FileList *fl) {
    for (size_t i = 0; i < fl->n; i++) free(fl->path[i]);
    free(fl->path);
    memset(fl, 0, sizeof *fl);
}

int read_all(const char *path, unsigned char **data, size_t *n) {
    char *text;
    int rc = read_file_max(path, SIZE_MAX, &text, n);
    *data = (unsigned char *)text;
    return rc;
}
