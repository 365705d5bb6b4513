#include "synth.h"

#include <string.h>

#include "../util/common.h"

int synth_tokens(int *out, size_t count, int vocab, const char *kind, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    if (vocab < 2) return mhar_fail("synthetic data needs a vocabulary of at least 2, got %d", vocab);
    if (!strcmp(kind, "random")) {
        for (size_t i = 0; i < count; i++) out[i] = (int)rng_below(&rng, vocab);
        return MHAR_OK;
    }
    if (strcmp(kind, "pattern")) return mhar_fail("unknown synthetic data kind '%s' (random, pattern)", kind);
    int motif[16];
    size_t i = 0;
    while (i < count) {
        int len = 4 + (int)rng_below(&rng, 13);
        for (int k = 0; k < len; k++) motif[k] = 1 + (int)rng_below(&rng, vocab - 1);
        size_t doc = 64 + rng_below(&rng, 449);
        for (size_t k = 0; k < doc && i < count; k++, i++)
            out[i] = rng_uniform(&rng) < 0.05f ? 1 + (int)rng_below(&rng, vocab - 1) : motif[k % len];
        if (i < count) out[i++] = 0;
    }
    return MHAR_OK;
}
