// mhar sample: generate token ids from a run directory with a KV cache.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "model/model.h"

static const char *usage =
    "usage: mhar sample --run DIR [--prompt-tokens 1,2,3] [--steps N --temperature X --top-k K --seed S]\n\n"
    "Prints the prompt and the generated token ids, space-separated, on one line.\n"
    "Temperature 0 is greedy decoding; top-k 0 samples from the whole vocabulary.";

static int parse_prompt(const char *text, int *out, int cap, int vocab) {
    int n = 0;
    for (const char *p = text; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= vocab)
            return mhar_fail("--prompt-tokens: '%.20s' is not a token id in [0, %d)", p, vocab);
        if (n == cap) return mhar_fail("--prompt-tokens: more than %d tokens", cap);
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return mhar_fail("--prompt-tokens: expected comma-separated ids");
    }
    return n ? n : mhar_fail("--prompt-tokens is empty");
}

// Sample from logits [V] with temperature and top-k; scratch [V].
static int sample_token(const float *logits, int V, float temperature, int top_k, float *scratch, Rng *rng) {
    int best = 0;
    for (int i = 1; i < V; i++) if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return best;
    float cutoff = -INFINITY;
    if (top_k > 0 && top_k < V) {  // the k-th largest logit, by partial selection
        memcpy(scratch, logits, sizeof(float) * V);
        for (int k = 0; k < top_k; k++) {
            int j = k;
            for (int i = k + 1; i < V; i++) if (scratch[i] > scratch[j]) j = i;
            float t = scratch[k]; scratch[k] = scratch[j]; scratch[j] = t;
        }
        cutoff = scratch[top_k - 1];
    }
    double sum = 0;
    for (int i = 0; i < V; i++)
        sum += scratch[i] = logits[i] >= cutoff ? expf((logits[i] - logits[best]) / temperature) : 0.0f;
    double u = rng_uniform(rng) * sum, acc = 0;
    for (int i = 0; i < V; i++) if ((acc += scratch[i]) > u) return i;
    return best;
}

int cmd_sample(int argc, char **argv) {
    const char *run = NULL, *prompt = "0";
    int steps = 64, top_k = 0;
    float temperature = 1.0f;
    uint64_t seed = 1;
    Flag flags[] = {
        {"run", FLAG_STR, &run, "run directory", 0, 0, 0},
        {"prompt-tokens", FLAG_STR, &prompt, "comma-separated prompt ids (default 0)", 0, 0, 0},
        {"steps", FLAG_INT, &steps, "tokens to generate (default 64)", 1, 1 << 20, 0},
        {"temperature", FLAG_FLOAT, &temperature, "softmax temperature (default 1; 0 = greedy)", 0, 100, 0},
        {"top-k", FLAG_INT, &top_k, "sample among the k most likely (default 0 = all)", 0, 1 << 24, 0},
        {"seed", FLAG_U64, &seed, "sampling seed (default 1)", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!run) { fprintf(stderr, "error: --run DIR is required (see --help)\n"); return 2; }
    Model m;
    KVCache kv = {0};
    int *tokens = NULL;
    float *scratch = NULL;
    int rc = model_load(&m, run), n = 0, total = 0;
    if (!rc) {
        total = (int)strlen(prompt) / 2 + 1 + steps;
        tokens = mhar_alloc(sizeof(int) * total);
        scratch = mhar_alloc(sizeof(float) * m.cfg.vocab_size);
        rc = tokens && scratch ? MHAR_OK : MHAR_ERR;
    }
    if (!rc) rc = (n = parse_prompt(prompt, tokens, total - steps, m.cfg.vocab_size)) < 0;
    if (!rc) rc = model_alloc_acts(&m, 1, 1);
    if (!rc) rc = kvcache_init(&kv, &m, n + steps);
    if (!rc) {
        Rng rng;
        rng_seed(&rng, seed);
        for (int pos = 0; pos < n + steps - 1; pos++) {
            const float *logits = model_decode_step(&m, &kv, tokens[pos], pos);
            if (pos + 1 >= n) tokens[pos + 1] = sample_token(logits, m.cfg.vocab_size, temperature, top_k, scratch, &rng);
        }
        for (int i = 0; i < n + steps; i++) printf(i ? " %d" : "%d", tokens[i]);
        printf("\n");
    } else {
        fprintf(stderr, "error: %s\n", mhar_error());
    }
    kvcache_free(&kv);
    mhar_free(tokens);
    mhar_free(scratch);
    if (m.params) model_free(&m);
    return rc ? 1 : 0;
}
