// Generation with the KV cache: prompt feeding and token sampling.
#include "generate.h"

#include <math.h>
#include <string.h>

int sample_token(const float *logits, int V, float temperature, int top_k, float *scratch, Rng *rng) {
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

int generate(Model *m, int *tokens, int n, const GenerateOptions *o, GenerateEmit emit, void *arg, int *total) {
    const int V = m->cfg.vocab_size;
    *total = n;
    if (n < 1) return mhar_fail("generation needs a prompt of at least one token");
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V) return mhar_fail("prompt token %d is not an id in [0, %d)", tokens[i], V);
    KVCache kv = {0};
    float *scratch = mhar_alloc(sizeof(float) * V);
    int rc = scratch ? MHAR_OK : MHAR_ERR;
    if (!rc) rc = model_alloc_acts(m, 1, 1);
    if (!rc) rc = kvcache_init(&kv, m, n + o->steps);
    if (!rc) {
        Rng rng;
        rng_seed(&rng, o->seed);
        for (int pos = 0; pos < n + o->steps - 1; pos++) {
            const float *logits = model_decode_step(m, &kv, tokens[pos], pos);
            if (pos + 1 < n) continue;  // still feeding the prompt
            ops_sync(m->ctx);
            int t = tokens[pos + 1] = sample_token(logits, V, o->temperature, o->top_k, scratch, &rng);
            *total = pos + 2;
            if (t == o->stop_id || (emit && emit(arg, t))) break;
        }
    }
    kvcache_free(&kv);
    mhar_free(scratch);
    return rc;
}
