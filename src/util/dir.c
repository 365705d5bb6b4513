#include "dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

static int make_one(const char *dir) {
    if (mkdir(dir, 0755) == 0) return MHAR_OK;
    int err = errno;
    if (err == EEXIST) {
        if (path_is_dir(dir)) return MHAR_OK;
        return mhar_fail("%s: cannot create: exists and is not a directory", dir);
    }
    return mhar_fail("%s: cannot create: %s", dir, strerror(err));
}

int mkdir_p(const char *dir) {
    char buf[MHAR_PATH_MAX];
    if (!dir[0]) return mhar_fail("cannot create a directory with an empty name");
    if (copy_str(buf, sizeof buf, dir)) return MHAR_ERR;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/' || p[-1] == '/') continue; // "a//b": one separator
        *p = '\0';
        int rc = make_one(buf);
        *p = '/';
        if (rc) return MHAR_ERR;
    }
    return make_one(buf);
}

int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return mhar_fail("%s: cannot open directory to sync: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0 && err != EINVAL && err != EROFS)
        return mhar_fail("%s: fsync of the directory failed: %s", dir, strerror(err));
    return MHAR_OK;
}

// The directory holding path into dir: "." for a bare name, "/" at the root.
static int parent_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    size_t n = !slash ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (n >= cap) return mhar_fail("%.60s...: path too long", path);
    if (!slash) n = 1, dir[0] = '.';
    else memcpy(dir, path, n);
    dir[n] = '\0';
    return MHAR_OK;
}

int fsync_parent(const char *path) {
    char dir[MHAR_PATH_MAX];
    return parent_of(path, dir, sizeof dir) ? MHAR_ERR : fsync_dir(dir);
}

int mkdir_parent(const char *path) {
    char dir[MHAR_PATH_MAX];
    return parent_of(path, dir, sizeof dir) ? MHAR_ERR : mkdir_p(dir);
}

int path_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int dir_check_new(const char *dir) {
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno == ENOENT) return MHAR_OK;
        return mhar_fail("%s: cannot check the output directory: %s", dir, strerror(errno));
    }
    if (!S_ISDIR(sb.st_mode)) return mhar_fail("%s already exists and is not a directory", dir);
    DIR *d = opendir(dir);
    if (!d) return mhar_fail("%s: cannot read: %s", dir, strerror(errno));
    int empty = 1;
    for (struct dirent *e; empty && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    return empty ? MHAR_OK : mhar_fail("%s already exists and is not empty; choose a new --out", dir);
}

int dir_stage(const char *dir, char *tmp, size_t cap) {
    if (path_format(tmp, cap, "%s.tmp.%ld", dir, (long)getpid())) return MHAR_ERR;
    if (mkdir(tmp, 0755) != 0) return mhar_fail("%s: cannot create: %s", tmp, strerror(errno));
    return MHAR_OK;
}

void dir_discard(const char *tmp) {
    DIR *d = opendir(tmp);
    if (d) {
        char path[MHAR_PATH_MAX];
        for (struct dirent *e; (e = readdir(d));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !path_join(path, sizeof path, tmp, e->d_name))
                unlink(path);
        closedir(d);
    }
    rmdir(tmp);
}

int dir_publish(const char *tmp, const char *dir) {
    if (rename(tmp, dir) != 0) {
        int err = errno;
        dir_discard(tmp);
        return mhar_fail("%s: cannot move the finished directory into place: %s", dir, strerror(err));
    }
    return fsync_parent(dir); // so the rename survives a crash
}
