// Shared by the fuzz targets fuzz/fuzz_*.c. Each target defines
// LLVMFuzzerTestOneInput (and optionally LLVMFuzzerInitialize) and is built
// two ways: with libFuzzer (`make fuzz`, clang, ASan + UBSan) and with
// fuzz/replay.c, a main() that runs every file of fuzz/corpus/NAME/ once
// (the seeds and the input of every crash ever found) as a normal test.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

// Where a violated property is reported (a target that silences stderr for
// the code under test keeps the real one here).
static FILE *fuzz_report_to __attribute__((unused));

// A property every input must keep: print it and abort, which libFuzzer
// records as a crash (with the input) and the replay test as a failure.
#define FUZZ_ASSERT(cond, ...)                                                \
    do {                                                                      \
        if (!(cond)) {                                                        \
            FILE *to_ = fuzz_report_to ? fuzz_report_to : stderr;             \
            fprintf(to_, "%s:%d: property violated: %s: ", __FILE__, __LINE__, \
                    #cond);                                                   \
            fprintf(to_, __VA_ARGS__);                                        \
            fprintf(to_, "\n");                                               \
            fflush(to_);                                                      \
            abort();                                                          \
        }                                                                     \
    } while (0)

// The input as a file the loaders open by path: one memory file (memfd),
// rewritten for each input, named /proc/self/fd/N. No disk I/O, and the
// loaders see a regular file exactly `size` bytes long.
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("fuzz-input", 0);
        if (fd < 0) {
            perror("memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz_file: writing the memory file");
        abort();
    }
    return path;
}

// A scratch directory for targets that need real paths (removed at exit):
// /dev/shm when there is one, so fsync costs nothing.
static char fuzz_dir_path[64];
static inline void fuzz_dir_remove(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (fuzz_dir_path[0] && system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", fuzz_dir_path);
}
static inline const char *fuzz_dir(void) {
    if (fuzz_dir_path[0]) return fuzz_dir_path;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/mhar-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path)) {
        perror("mkdtemp");
        abort();
    }
    atexit(fuzz_dir_remove);
    return fuzz_dir_path;
}
