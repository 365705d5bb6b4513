#include "hf_remote.h"

#include "../io/atomic.h"
#include "../util/common.h"
#include "../util/file.h"

int hf_remote_save(const char *dir) {
    char path[MHAR_PATH_MAX];
    for (int i = 0; i < hf_remote_file_count; i++) {
        const EmbeddedFile *f = &hf_remote_files[i];
        if (path_join(path, sizeof path, dir, f->name) || atomic_write_file(path, f->data, f->size))
            return MHAR_ERR;
    }
    return MHAR_OK;
}
