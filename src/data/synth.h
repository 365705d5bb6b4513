// Synthetic token streams for tests and the quickstart.
#pragma once
#include <stddef.h>
#include <stdint.h>

// "random": i.i.d. uniform ids. "pattern": documents that repeat a random
// motif (4..16 tokens) with 5% noise, so a model can learn to copy (loss
// falls well below log V); documents are separated by id 0.
int synth_tokens(int *out, size_t count, int vocab, const char *kind, uint64_t seed);
