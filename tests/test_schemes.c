// Conformance of every registered residual scheme on every model family:
// the test walks the registry (residual_count / residual_at) and names no
// scheme, so a new scheme is tested by registering it. On a tiny model (d 16,
// 3 layers, vocab 32, B 2, T 6; H and N from the scheme's default_heads and
// needs_blocks), in the qwen3 family with plain RoPE and in the llama family
// (no q/k norm) with llama3 RoPE scaling whose three frequency bands are all
// present and whose original context (4) is shorter than T, with every
// parameter moved off its initial value (the
// zero-initialised routing queries and delta_mh tensors included, so no
// gradient is trivially 0):
//   (a) gradients: every parameter tensor's gradient against central
//       differences of the loss, on sampled coordinates and along the
//       gradient's own direction;
//   (b) causality: changing token t of one sequence changes no logit before
//       t and nothing in the other sequence, bit for bit, and does change
//       the logits at t;
//   (c) decoding: model_decode_step over the sequence gives the full
//       forward pass's logits.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "model/model.h"
#include "residual/residual.h"
#ifdef _OPENMP
#include <omp.h>
#endif

enum { B = 2, T = 6, V = 32 };

static int tiny_config(const ResidualScheme *s, int family, Config *c) {
    if (config_preset("nano", c)) return MHAR_ERR;
    c->family = family;
    if (family == FAMILY_LLAMA) {  // hd 8, theta 10000: wavelengths 6.3, 63, 628, 6283
        c->rope_type = ROPE_LLAMA3;
        c->rope_factor = 4;
        c->rope_low_freq_factor = 0.01;   // above 400: divided by 4
        c->rope_high_freq_factor = 0.5;   // below 8: kept; between: blended
        c->rope_original_max_position_embeddings = 4;
    }
    c->vocab_size = V;
    c->hidden_size = 16;
    c->num_hidden_layers = 3;  // with N = 2 blocks: one of 2 layers and a shorter one
    c->num_attention_heads = 2;
    c->num_key_value_heads = 1;
    c->head_dim = 8;
    c->intermediate_size = 32;
    c->max_position_embeddings = 16;
    snprintf(c->attnres_mode, sizeof c->attnres_mode, "%s", s->name);
    c->attnres_num_heads = s->default_heads;
    c->attnres_num_blocks = s->needs_blocks ? 2 : 0;
    return MHAR_OK;
}

// Weights of a trained-looking scale: matrices N(0, 0.2²) (the init's 0.02
// makes a tiny model almost linear, its deep gradients ~0), norms 1 ± 0.2,
// zero-initialised tensors N(0, 0.25²), scheme-initialised ones ± 0.1.
static void perturb(Model *m, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    model_init_weights(m, seed);
    for (int i = 0; i < m->table.n; i++) {
        const ParamInfo *p = &m->table.p[i];
        float *w = m->params + p->offset;
        for (size_t j = 0; j < p->numel; j++) {
            const float z = rng_normal(&rng);
            if (p->init == INIT_NORMAL) w[j] *= 10;
            else if (p->init == INIT_ONES) w[j] = 1 + 0.2f * z;
            else if (p->init == INIT_ZEROS) w[j] = 0.25f * z;
            else w[j] += 0.1f * z;
        }
    }
}

static int g_family;  // the family under test

// "llama/mhar": the family and the scheme, for the check names.
static const char *label(const ResidualScheme *s) {
    static char buf[64];
    snprintf(buf, sizeof buf, "%s/%s", config_family_name(g_family), s->name);
    return buf;
}

static int make_model(Model *m, const ResidualScheme *s, int b, int t) {
    Config c;
    if (tiny_config(s, g_family, &c) || model_create(m, &c)) return MHAR_ERR;
    perturb(m, 11);
    return model_alloc_grads(m) || model_alloc_acts(m, b, t);
}

static void tokens(int *tok, int *tgt, uint64_t seed) {
    Rng rng;
    rng_seed(&rng, seed);
    for (int i = 0; i < B * T; i++) tok[i] = (int)rng_below(&rng, V), tgt[i] = (int)rng_below(&rng, V);
}

// ---- (a) gradients by finite differences -------------------------------------

// The model computes in fp32: the loss carries rounding noise of about
// FLT_EPSILON·|L| (measured 2e-8 .. 6e-7 at L ≈ 4), which a difference
// divides by its step; and a wide step meets the model's curvature (with
// H = 1 routing, moving one coordinate of a norm weight by 0.1 doubled its
// difference quotient). So each difference is a 4th-order central one,
// taken at steps h and h/2: their gap estimates the truncation error of
// the second (gap/15 for a 4th-order stencil), and twice that estimate plus
// NOISE·FLT_EPSILON·|L| / (h/2) is the slack: what the differences cannot
// resolve, added to the tolerance.
// - One coordinate moves by COORD_STEP of its tensor's RMS and passes when
//   |g − fd| <= COORD_REL·|fd| + slack.
// - Along the tensor's own gradient direction u = g / |g| (a random unit
//   direction where g = 0, whose derivative must then be 0), no coordinate
//   moving by more than DIR_STEP of the RMS, the signal is the whole
//   gradient norm: |fd − |g|| <= DIR_REL·|g| + slack. Checked to fail when
//   one scheme gradient is scaled by 1.01 (mhar's site query, denseformer's
//   α, hc's β, delta_mh's α: 2.3× to 7.6× the tolerance), while the correct
//   code stays below 0.6× of it over seven seeds.
#define COORD_STEP 3e-2
#define COORD_SAMPLES 6
#define COORD_REL 1e-2
#define DIR_STEP 1e-2
#define DIR_REL 1e-3
#define NOISE 1

static const int *g_tok, *g_tgt;

// The mean loss summed in double from the per-token fp32 losses: model_forward
// returns it rounded to fp32, whose half-ulp (1.2e-7 at L ≈ 3.5) would be
// the largest part of the noise.
static double loss_at(Model *m) {
    model_forward(m, g_tok, g_tgt);
    double sum = 0;
    for (int i = 0; i < B * T; i++) sum += m->losses[i];
    return sum / (B * T);
}

// d/dε L(p + ε·u) at ε = 0 for the parameters p[0..n) moved along u (u =
// NULL: only p[k], by 1), 4th-order central differences with step h.
static double stencil(Model *m, float *p, size_t n, size_t k, const double *u, double h) {
    float *keep = malloc(n * sizeof(float));
    memcpy(keep, p, n * sizeof(float));
    static const double off[4] = {1, -1, 2, -2};
    double L[4];
    for (int s = 0; s < 4; s++) {
        if (u) for (size_t i = 0; i < n; i++) p[i] = (float)(keep[i] + off[s] * h * u[i]);
        else p[k] = (float)(keep[k] + off[s] * h);
        L[s] = loss_at(m);
    }
    memcpy(p, keep, n * sizeof(float));
    free(keep);
    return (8 * (L[0] - L[1]) - (L[2] - L[3])) / (12 * h);
}

// The derivative at step h/2, and in *slack what it cannot resolve: twice
// its estimated truncation error plus the loss noise over the step.
static double derivative(Model *m, float *p, size_t n, size_t k, const double *u, double h, double noise,
                         double *slack) {
    const double wide = stencil(m, p, n, k, u, h), fine = stencil(m, p, n, k, u, h / 2);
    *slack = 2 * fabs(wide - fine) / 15 + noise / (h / 2);
    return fine;
}

static void test_gradients(const ResidualScheme *s) {
    Model m;
    char name[240];
    if (make_model(&m, s, B, T)) {
        snprintf(name, sizeof name, "scheme %s gradients", label(s));
        CHECK(0, name, "model: %s", mhar_error());
        return;
    }
    int tok[B * T], tgt[B * T];
    tokens(tok, tgt, 5);
    g_tok = tok, g_tgt = tgt;
    model_zero_grad(&m);
    const double L0 = model_forward(&m, tok, tgt);
    model_backward(&m, 1.0f);
    float *grad = malloc(m.table.total * sizeof(float));
    memcpy(grad, m.grads, m.table.total * sizeof(float));
    const double noise = NOISE * FLT_EPSILON * fabs(L0);

    Rng rng;
    rng_seed(&rng, 99);
    double worst_c = 0, worst_d = 0;
    char at_c[200] = "-", at_d[200] = "-";
    int zero = 0;
    for (int t = 0; t < m.table.n; t++) {
        const ParamInfo *p = &m.table.p[t];
        float *w = m.params + p->offset;
        const float *g = grad + p->offset;
        double rms = 0, gnorm = 0;
        for (size_t i = 0; i < p->numel; i++) rms += (double)w[i] * w[i], gnorm += (double)g[i] * g[i];
        rms = rms > 0 ? sqrt(rms / p->numel) : 1, gnorm = sqrt(gnorm);

        const double hc = COORD_STEP * rms;
        size_t ns = p->numel < COORD_SAMPLES ? p->numel : COORD_SAMPLES;
        for (size_t j = 0; j < ns; j++) {
            size_t k = ns == p->numel ? j : j == 0 ? 0 : (size_t)rng_below(&rng, p->numel);
            double slack, fd = derivative(&m, w, p->numel, k, NULL, hc, noise, &slack);
            double r = fabs(g[k] - fd) / (COORD_REL * fabs(fd) + slack);
            if (r > worst_c || isnan(r)) {
                worst_c = isnan(r) ? INFINITY : r;
                snprintf(at_c, sizeof at_c, "%s[%zu]: grad %.6g, differences %.6g", p->name, k, g[k], fd);
            }
        }

        double *u = malloc(p->numel * sizeof(double)), umax = 0;
        for (size_t i = 0; i < p->numel; i++) u[i] = gnorm > 0 ? g[i] / gnorm : rng_normal(&rng);
        if (gnorm == 0) {
            zero++;
            double un = 0;
            for (size_t i = 0; i < p->numel; i++) un += u[i] * u[i];
            for (size_t i = 0; i < p->numel; i++) u[i] /= sqrt(un);
        }
        for (size_t i = 0; i < p->numel; i++) umax = fmax(umax, fabs(u[i]));
        const double hd = DIR_STEP * rms / umax;
        double slack, fd = derivative(&m, w, p->numel, 0, u, hd, noise, &slack);
        double r = fabs(fd - gnorm) / (DIR_REL * gnorm + slack);
        if (r > worst_d || isnan(r)) {
            worst_d = isnan(r) ? INFINITY : r;
            snprintf(at_d, sizeof at_d, "%s: |grad| %.6g, differences %.6g", p->name, gnorm, fd);
        }
        free(u);
    }
    snprintf(name, sizeof name, "scheme %s: gradients vs finite differences, %d coordinates of each of %d "
             "tensors (worst %.2f of tol)", label(s), COORD_SAMPLES, m.table.n, worst_c);
    CHECK(worst_c <= 1, name, "at %s (tol %.0e·|fd| + what the differences resolve)", at_c, COORD_REL);
    snprintf(name, sizeof name, "scheme %s: gradients vs finite differences along each tensor's gradient, "
             "%d of them zero (worst %.2f of tol)", label(s), zero, worst_d);
    CHECK(worst_d <= 1, name, "at %s (tol %.0e relative + what the differences resolve)", at_d, DIR_REL);
    free(grad);
    model_free(&m);
}

// ---- (b) causality, (c) decoding -----------------------------------------------

static void test_causal_decode(const ResidualScheme *s) {
    Model m, dec;
    char name[160];
    if (make_model(&m, s, B, T) || make_model(&dec, s, 1, 1)) {
        snprintf(name, sizeof name, "scheme %s causal", label(s));
        CHECK(0, name, "model: %s", mhar_error());
        return;
    }
    const size_t row = V * sizeof(float);
    int tok[B * T], tgt[B * T], tok2[B * T];
    tokens(tok, tgt, 7);
    float *a = malloc(B * T * row);
    model_forward(&m, tok, NULL);
    memcpy(a, m.logits, B * T * row);

    // Change token t of sequence 0, for every t: same shapes, deterministic
    // kernels, so the logits that must not see it are bit-identical.
    int leaks = 0, crosses = 0, blind = 0;
    for (int t = 0; t < T; t++) {
        memcpy(tok2, tok, sizeof tok);
        tok2[t] = (tok[t] + 5) % V;
        model_forward(&m, tok2, NULL);
        leaks += memcmp(a, m.logits, t * row) != 0;
        blind += memcmp(a + t * V, m.logits + t * V, row) == 0;
        crosses += memcmp(a + T * V, m.logits + T * V, T * row) != 0;
    }
    snprintf(name, sizeof name, "scheme %s causal: a token changes no earlier logit, bit for bit", label(s));
    CHECK(leaks == 0 && blind == 0, name, "%d of %d changed tokens leaked backwards, %d left their own logits unchanged",
          leaks, T, blind);
    snprintf(name, sizeof name, "scheme %s: a token changes nothing in another sequence of the batch", label(s));
    CHECK(crosses == 0, name, "%d of %d changed tokens changed the other sequence's logits", crosses, T);

    // The decoder sums the same products in another order (its own
    // attention loop, one token at a time): fp32 rounding, 1e-5 relative.
    KVCache kv;
    double worst = 0;
    if (kvcache_init(&kv, &dec, T) == MHAR_OK) {
        for (int t = 0; t < T; t++) {
            const float *lg = model_decode_step(&dec, &kv, tok[t], t);
            double ref[V];
            for (int v = 0; v < V; v++) ref[v] = a[t * V + v];
            worst = fmax(worst, rel_err(lg, ref, V));
        }
        kvcache_free(&kv);
    } else worst = INFINITY;
    snprintf(name, sizeof name, "scheme %s: KV-cache decoding matches the full forward (err %.2e, tol 1e-5)",
             label(s), worst);
    CHECK(worst < 1e-5, name, "worst rel err %.3g over %d positions", worst, T);
    free(a);
    model_free(&m);
    model_free(&dec);
}

// ---- (c) the backward announces each gradient range once, when final ----------

// What model_backward's grads_ready hook saw: the ranges in order and a copy
// of each range's gradients at the moment it was announced.
typedef struct {
    const Model *m;
    int n;
    size_t lo[64], hi[64];
    float *seen;   // [total] the gradients as announced
} Announced;

static void record_ready(void *arg, size_t lo, size_t hi) {
    Announced *a = arg;
    if (a->n < 64) a->lo[a->n] = lo, a->hi[a->n] = hi;
    a->n++;
    memcpy(a->seen + lo, a->m->grads + lo, sizeof(float) * (hi - lo));
}

// Data-parallel training sends each range as soon as it is announced: the
// ranges must cover the table exactly once, and nothing may change a range
// after its announcement.
static void test_grads_ready(const ResidualScheme *s) {
    char name[160];
    Model m;
    int tok[B * T], tgt[B * T];
    if (make_model(&m, s, B, T)) {
        snprintf(name, sizeof name, "%s: grads_ready: builds the model", label(s));
        CHECK(0, name, "%s", mhar_error());
        return;
    }
    const size_t n = m.table.total;
    Announced a = {.m = &m, .n = 0, .seen = calloc(n, sizeof(float))};
    unsigned char *covered = calloc(n, 1);
    m.grads_ready = record_ready;
    m.grads_ready_arg = &a;
    tokens(tok, tgt, 5);
    model_zero_grad(&m);
    model_forward(&m, tok, tgt);
    model_backward(&m, 1.0f);
    int overlaps = 0, ordered = a.n <= 64;
    size_t missing = 0, changed = 0;
    for (int i = 0; i < a.n && i < 64; i++)
        for (size_t j = a.lo[i]; j < a.hi[i]; j++) overlaps += covered[j]++ > 0;
    for (size_t j = 0; j < n; j++) {
        missing += !covered[j];
        changed += memcmp(&a.seen[j], &m.grads[j], sizeof(float)) != 0;
    }
    snprintf(name, sizeof name, "%s: grads_ready ranges cover the %zu parameters once", label(s), n);
    CHECK(ordered && !overlaps && !missing, name, "%d ranges, %d announced twice, %zu never", a.n, overlaps, missing);
    snprintf(name, sizeof name, "%s: no gradient changes after its range is announced", label(s));
    CHECK(!changed, name, "%zu gradients changed later", changed);
    free(a.seen);
    free(covered);
    model_free(&m);
}

// route_query_init normal (the paper's head-sweep init): in every routing
// scheme the queries, and only they, start N(0, 0.02) from the scheme's own
// stream, so every other initial weight equals the zero-init model's bit for
// bit; config.json records it and reads it back; a scheme without routing
// queries refuses it.
static void test_query_init(const ResidualScheme *s) {
    char name[128];
    Config c;
    if (tiny_config(s, g_family, &c)) return;
    c.hidden_size = 64;  // 7 sites x 64: enough draws for the spread to say N(0, 0.02)
    c.num_attention_heads = 4;
    c.head_dim = 16;
    c.attnres_num_heads = s->heads == HEADS_ANY ? 4 : s->default_heads;
    c.route_query_init = ROUTE_QUERY_NORMAL;
    snprintf(name, sizeof name, "query_init.%s.validate", label(s));
    int ok = config_validate(&c, "test") == MHAR_OK;
    if (!residual_is_routed(s)) {
        CHECK(!ok && strstr(mhar_error(), "no routing queries"), name, "a scheme without queries took normal: %s",
              ok ? "accepted" : mhar_error());
        return;
    }
    CHECK(ok, name, "%s", mhar_error());
    Model zero, normal;
    Config cz = c;
    cz.route_query_init = ROUTE_QUERY_ZERO;
    if (model_create(&zero, &cz) || model_create(&normal, &c)) {
        CHECK(0, name, "model_create: %s", mhar_error());
        return;
    }
    model_init_weights(&zero, 5);
    model_init_weights(&normal, 5);
    int others_equal = zero.table.n == normal.table.n, queries = 0;
    double sum = 0, sum2 = 0, zero_max = 0;
    size_t count = 0;
    for (int i = 0; others_equal && i < zero.table.n; i++) {
        const ParamInfo *p = &zero.table.p[i];
        const float *a = zero.params + p->offset, *b = normal.params + normal.table.p[i].offset;
        if (!strstr(p->name, "res_proj.weight")) {
            others_equal = memcmp(a, b, p->numel * sizeof(float)) == 0;
            continue;
        }
        queries++;
        for (size_t j = 0; j < p->numel; j++) {
            sum += b[j], sum2 += (double)b[j] * b[j], count++;
            if (fabs(a[j]) > zero_max) zero_max = fabs(a[j]);
        }
    }
    double mean = count ? sum / count : 0, sd = count ? sqrt(sum2 / count - mean * mean) : 0;
    snprintf(name, sizeof name, "query_init.%s.others_unchanged", label(s));
    CHECK(others_equal && queries > 0, name, "%d query tensors; the other weights %s", queries,
          others_equal ? "equal" : "differ");
    // 448 draws of N(0, 0.02²): the sample sd is within 10% of 0.02 and the
    // mean within 3 standard errors (0.003) of 0, or the init is not N(0, 0.02).
    snprintf(name, sizeof name, "query_init.%s.normal_0.02", label(s));
    CHECK(zero_max == 0 && fabs(sd - 0.02) < 0.002 && fabs(mean) < 0.003, name,
          "zero init max |q| %g; normal init over %zu values: mean %.5f sd %.5f", zero_max, count, mean, sd);
    char dir[] = "/tmp/mhar_qinit_XXXXXX", path[64];
    Config back;
    snprintf(name, sizeof name, "query_init.%s.config_json", label(s));
    if (mkdtemp(dir)) {
        snprintf(path, sizeof path, "%s/config.json", dir);
        int rc = config_save(path, &c) || config_load(path, &back);
        CHECK(!rc && back.route_query_init == ROUTE_QUERY_NORMAL && config_equal(&back, &c), name,
              "%s", rc ? mhar_error() : "read back differently");
        remove(path);
        rmdir(dir);
    } else {
        CHECK(0, name, "mkdtemp failed");
    }
    model_free(&zero);
    model_free(&normal);
}

int main(void) {
#ifdef _OPENMP
    // A tiny model runs thousands of forward passes here: one thread, as
    // OpenMP's fork-join per op would cost ~10× the arithmetic.
    omp_set_num_threads(1);
#endif
    CHECK(residual_count() > 0, "schemes: the registry is not empty", "residual_count() = %d", residual_count());
    for (g_family = FAMILY_QWEN3; g_family <= FAMILY_LLAMA; g_family++)
        for (int i = 0; i < residual_count(); i++) {
            const ResidualScheme *s = residual_at(i);
            test_gradients(s);
            test_causal_decode(s);
            test_grads_ready(s);
            test_query_init(s);
        }
    CHECK_EXIT();
}
