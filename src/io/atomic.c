#include "atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/common.h"

// read_file is for configs and JSON; anything larger is not what we expect.
#define READ_FILE_MAX ((size_t)64 << 20)

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
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
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

// fsync the directory holding path so the rename itself survives a crash.
// Filesystems that cannot sync directories (EINVAL) are not an error: the
// data is already durable and the rename is done.
static int sync_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        size_t n = (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return mhar_fail("%s: cannot open directory '%s' to sync: %s", path, dir,
                                 strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0 && err != EINVAL && err != EROFS)
        return mhar_fail("%s: fsync of directory '%s' failed: %s", path, dir, strerror(err));
    return MHAR_OK;
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
    return sync_dir(a->path);
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

int read_file(const char *path, char **data, size_t *n) {
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
    if ((unsigned long long)st.st_size > READ_FILE_MAX) {
        fclose(f);
        return mhar_fail("%s: %lld bytes, more than the 64 MiB limit for this kind of file",
                         path, (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        fclose(f);
        return mhar_fail("%s: out of memory reading %zu bytes", path, size);
    }
    size_t got = fread(buf, 1, size, f);
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
