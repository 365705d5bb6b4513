// main() for a fuzz target outside libFuzzer: runs every file of the target's
// corpus directory (FUZZ_CORPUS, or argv[1]) through LLVMFuzzerTestOneInput
// once, in name order, and prints "PASS fuzz_replay.NAME/FILE" for each input
// that returns; a violated property or a sanitizer report aborts the run.
// The corpus holds the committed seeds and the input of every crash the
// fuzzer found, so `make test` (and `make asan-test`) re-checks all of them.
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#ifndef FUZZ_CORPUS
#error "build with -DFUZZ_CORPUS='\"fuzz/corpus/NAME\"'"
#endif

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : FUZZ_CORPUS;
    // Results go to a copy of stdout: a target may silence stdout/stderr.
    FILE *out = fdopen(dup(1), "w");
    if (!out) return 1;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(out, "FAIL fuzz_replay: cannot open the corpus %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof *names);
            if (!p) return 1;
            names = p;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    const char *target = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    int ran = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        struct stat st;
        if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
            if (f) fclose(f);
            free(names[i]);
            continue;
        }
        // An exact-size copy, so an over-read hits the sanitizer's red zone.
        size_t size = (size_t)st.st_size;
        uint8_t *data = malloc(size ? size : 1);
        if (!data || fread(data, 1, size, f) != size) {
            fprintf(out, "FAIL fuzz_replay.%s/%s: cannot read\n", target, names[i]);
            return 1;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(data, size);
        free(data);
        fprintf(out, "PASS fuzz_replay.%s/%s\n", target, names[i]);
        fflush(out);
        free(names[i]);
        ran++;
    }
    free(names);
    if (!ran) fprintf(out, "FAIL fuzz_replay.%s: no input in %s\n", target, dir);
    fclose(out);
    return ran ? 0 : 1;
}
