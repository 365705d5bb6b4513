#include "atomic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/common.h"
#include "../util/dir.h"

int atomic_open(AtomicFile *a, const char *path) {
    memset(a, 0, sizeof *a);
    a->failed = 1; // until the temp file is open, commit must refuse
    size_t len = strlen(path);
    if (len == 0) return mhar_fail("atomic write: empty path");
    if (len >= sizeof a->path)
        return mhar_fail("%.64s...: path is %zu characters, limit %zu", path, len,
                         sizeof a->path - 1);
    memcpy(a->path, path, len + 1);
    // Same directory as the target, so rename() stays within one filesystem.
    if (path_format(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid())) {
        a->tmp[0] = '\0'; // nothing created: atomic_abort must not unlink anything
        return mhar_fail("%.64s...: path is %zu characters, too long for its temporary file", path, len);
    }
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        mhar_fail("%s: cannot create temporary file '%s': %s", path, a->tmp, strerror(errno));
        a->tmp[0] = '\0'; // not ours: atomic_abort must not unlink it
        return MHAR_ERR;
    }
    a->failed = 0;
    return MHAR_OK;
}

int atomic_write(AtomicFile *a, const void *data, size_t n) {
    if (a->failed || !a->f) return MHAR_ERR; // first error already recorded
    if (n == 0) return MHAR_OK;
    errno = 0;
    if (fwrite(data, 1, n, a->f) != n) {
        a->failed = 1;
        return mhar_fail("%s: write failed: %s", a->path,
                         errno ? strerror(errno) : "short write");
    }
    return MHAR_OK;
}

void atomic_abort(AtomicFile *a) {
    if (a->f) {
        fclose(a->f);
        a->f = NULL;
    }
    if (a->tmp[0]) unlink(a->tmp);
    a->tmp[0] = '\0';
    a->failed = 1;
}

// On failure: record "path: what: strerror", drop the temp file.
static int commit_fail(AtomicFile *a, const char *what, int err) {
    mhar_fail("%s: %s: %s", a->path, what, strerror(err));
    atomic_abort(a);
    return MHAR_ERR;
}

int atomic_commit(AtomicFile *a) {
    if (a->failed || !a->f) {
        atomic_abort(a); // the failing call recorded the message
        return MHAR_ERR;
    }
    if (fflush(a->f) != 0) return commit_fail(a, "flush failed", errno);
    if (fsync(fileno(a->f)) != 0) return commit_fail(a, "fsync failed", errno);
    int rc = fclose(a->f);
    a->f = NULL;
    if (rc != 0) return commit_fail(a, "close failed", errno);
    if (rename(a->tmp, a->path) != 0) return commit_fail(a, "rename of the temporary file failed", errno);
    a->tmp[0] = '\0';
    // The rename itself must survive a crash: sync the directory.
    if (fsync_parent(a->path)) return mhar_fail("%s: %s", a->path, mhar_error());
    return MHAR_OK;
}

int atomic_write_file(const char *path, const void *data, size_t n) {
    AtomicFile a;
    if (atomic_open(&a, path)) return MHAR_ERR;
    if (atomic_write(&a, data, n)) {
        atomic_abort(&a);
        return MHAR_ERR;
    }
    return atomic_commit(&a);
}

int atomic_copy_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb");
    if (!in) return mhar_fail("%s: cannot open: %s", src, strerror(errno));
    struct stat st;
    if (fstat(fileno(in), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(in);
        return mhar_fail("%s: not a regular file", src);
    }
    AtomicFile a;
    int rc = atomic_open(&a, dst);
    char chunk[1 << 16];
    for (size_t n; rc == MHAR_OK && (n = fread(chunk, 1, sizeof chunk, in)) > 0;) rc = atomic_write(&a, chunk, n);
    if (rc == MHAR_OK && ferror(in)) rc = mhar_fail("%s: read failed", src);
    fclose(in);
    if (rc != MHAR_OK) {
        atomic_abort(&a);
        return MHAR_ERR;
    }
    return atomic_commit(&a);
}
