#include "loader.h"

#include <string.h>

#include "../util/common.h"

static void shuffle_epoch(Loader *ld) {
    Rng rng;
    rng_seed(&rng, ld->seed * 0x9E3779B97F4A7C15ull + (uint64_t)ld->epoch);
    for (long i = 0; i < ld->n_windows; i++) ld->perm[i] = i;
    for (long i = ld->n_windows - 1; i > 0; i--) {  // Fisher-Yates
        long j = (long)rng_below(&rng, (uint64_t)i + 1);
        long t = ld->perm[i]; ld->perm[i] = ld->perm[j]; ld->perm[j] = t;
    }
}

int loader_init(Loader *ld, const TokenFile *tf, int T, uint64_t seed) {
    memset(ld, 0, sizeof *ld);
    ld->tf = tf; ld->T = T; ld->seed = seed;
    ld->n_windows = (long)((tf->count - 1) / (size_t)T);
    if (ld->n_windows < 1)
        return mhar_fail("token file holds %zu tokens, fewer than one sequence of %d + 1", tf->count, T);
    ld->perm = mhar_alloc(sizeof(long) * ld->n_windows);
    if (!ld->perm) return MHAR_ERR;
    shuffle_epoch(ld);
    return MHAR_OK;
}

int loader_seek(Loader *ld, long epoch, long pos) {
    if (epoch < 0 || pos < 0 || pos > ld->n_windows)
        return mhar_fail("data position (epoch %ld, window %ld) is outside the %ld windows of the file",
                         epoch, pos, ld->n_windows);
    ld->epoch = epoch; ld->pos = pos;
    shuffle_epoch(ld);
    return MHAR_OK;
}

void loader_window(const Loader *ld, long i, int *inputs, int *targets) {
    const int *src = ld->tf->tokens + (size_t)i * ld->T;
    memcpy(inputs, src, sizeof(int) * ld->T);
    memcpy(targets, src + 1, sizeof(int) * ld->T);
}

void loader_next(Loader *ld, int B, int *inputs, int *targets) {
    for (int b = 0; b < B; b++) {
        if (ld->pos == ld->n_windows) { ld->epoch++; ld->pos = 0; shuffle_epoch(ld); }
        size_t off = (size_t)b * ld->T;
        loader_window(ld, ld->perm[ld->pos++], inputs + off, targets + off);
    }
}

void loader_skip(Loader *ld, int B) {
    for (int b = 0; b < B; b++) {
        if (ld->pos == ld->n_windows) { ld->epoch++; ld->pos = 0; shuffle_epoch(ld); }
        ld->pos++;
    }
}

void loader_free(Loader *ld) { mhar_free(ld->perm); memset(ld, 0, sizeof *ld); }
