// Training batches from a token file: the file is cut into non-overlapping
// windows of T+1 tokens, visited in a seeded shuffled order, one permutation
// per epoch. The position (epoch, index) is part of a checkpoint, so a
// resumed run sees exactly the batches it would have seen.
#pragma once
#include <stdint.h>
#include "tokens.h"

typedef struct {
    const TokenFile *tf;
    int T;
    uint64_t seed;
    long n_windows;
    long epoch, pos;     // next window: perm[pos] of epoch `epoch`
    long *perm;          // [n_windows] order of the current epoch
} Loader;

int loader_init(Loader *ld, const TokenFile *tf, int T, uint64_t seed);
// Move to (epoch, pos), e.g. after a resume.
int loader_seek(Loader *ld, long epoch, long pos);
// Fill inputs, targets [B, T] with the next B windows.
void loader_next(Loader *ld, int B, int *inputs, int *targets);
// Pass over the next B windows (another rank's micro-batch).
void loader_skip(Loader *ld, int B);
// The i-th window in file order (evaluation reads the file sequentially).
void loader_window(const Loader *ld, long i, int *inputs, int *targets);
void loader_free(Loader *ld);
