// Directories: create with parents, make a rename inside durable, and the
// two questions every walker asks. MHAR_OK / MHAR_ERR with a message naming
// the directory and the reason.
#pragma once
#include <stddef.h>

// mkdir -p: dir and every missing parent (mode 0755). An existing directory
// is fine; an existing non-directory is an error.
int mkdir_p(const char *dir);
// fsync a directory, so entries renamed or created in it survive a crash.
// Filesystems that cannot sync directories (EINVAL, EROFS) are not an error:
// the data is durable already and the rename done.
int fsync_dir(const char *dir);
// fsync_dir of the directory holding path ("." for a bare name).
int fsync_parent(const char *path);
// mkdir_p of the directory holding path: for an output file whose folder a
// fresh machine does not have yet (tokenizer train --out data/full/x.bpe).
int mkdir_parent(const char *path);
// 1 if path is (follows to) a regular file / a directory, else 0.
int path_is_file(const char *path);
int path_is_dir(const char *path);

// An output directory that must come into being whole or not at all (an
// imported model, an export): dir_check_new, files written into the staging
// directory dir_stage makes (DIR.tmp.<pid>, beside DIR), then dir_publish,
// or dir_discard on any error.
// dir must not exist or be an empty directory (else an error saying so).
int dir_check_new(const char *dir);
// Create DIR.tmp.<pid> into tmp[cap].
int dir_stage(const char *dir, char *tmp, size_t cap);
// Rename tmp to dir (replacing an empty one) and make it durable; on
// failure tmp is discarded.
int dir_publish(const char *tmp, const char *dir);
// Remove tmp and the files in it (a staging directory holds no subdirectory).
void dir_discard(const char *tmp);
