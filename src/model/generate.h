// Autoregressive generation with the KV cache (model_decode_step): the
// prompt is fed one token at a time, then each next token is drawn from the
// logits with a temperature and a top-k cut, from a seeded RNG, so the same
// options give the same tokens.
#pragma once
#include <stdint.h>

#include "model.h"

typedef struct {
    int steps;          // tokens to generate
    float temperature;  // <= 0: greedy (the first largest logit)
    int top_k;          // sample among the k largest logits; 0: all
    uint64_t seed;
    int stop_id;        // generation ends when this token is drawn (it is kept); -1: never
} GenerateOptions;

// Called with each generated token as it is drawn (not with the stop token);
// a nonzero return stops generation (the token is kept).
typedef int (*GenerateEmit)(void *arg, int token);

// tokens[0..n) is the prompt (n >= 1, ids < vocab); the generated tokens
// follow it, so tokens holds n + o->steps ids. *total: n + the number
// generated (fewer than o->steps when stopped). Sizes the model's arena to
// (1, 1). emit may be NULL.
int generate(Model *m, int *tokens, int n, const GenerateOptions *o, GenerateEmit emit, void *arg, int *total);

// One draw from logits [V]: the argmax when temperature <= 0, else from
// softmax(logits / temperature) restricted to the top_k largest (ties at the
// k-th value included). scratch: V floats.
int sample_token(const float *logits, int V, float temperature, int top_k, float *scratch, Rng *rng);
