// Directories: create with parents, make a rename inside durable, and the
// two questions every walker asks. MHAR_OK / MHAR_ERR with a message naming
// the directory and the reason.
#pragma once

// mkdir -p: dir and every missing parent (mode 0755). An existing directory
// is fine; an existing non-directory is an error.
int mkdir_p(const char *dir);
// fsync a directory, so entries renamed or created in it survive a crash.
// Filesystems that cannot sync directories (EINVAL, EROFS) are not an error:
// the data is durable already and the rename done.
int fsync_dir(const char *dir);
// fsync_dir of the directory holding path ("." for a bare name).
int fsync_parent(const char *path);
// 1 if path is (follows to) a regular file / a directory, else 0.
int path_is_file(const char *path);
int path_is_dir(const char *path);
