// The width-disagreement probe and the head deviation (analysis/probe.h):
// constructed cases with known answers, a naive reference on random data,
// and agreement with the model's own route kernel.
#include "check.h"
#include "analysis/probe.h"
#include "analysis/probe_run.h"
#include "data/tokens.h"
#include "io/atomic.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "util/common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <stdlib.h>
#include <string.h>

// The probes are ops (kernels/ops.h) over one strided buffer of sources; the
// cases below build their sources as separate rows, packed here.
static OpsContext *ctx;

static RouteSources pack(const float *const *src, int n, int T, int D) {
    static float *buf;
    static size_t cap;
    size_t td = (size_t)T * D;
    if ((size_t)n * td > cap) { free(buf); cap = (size_t)n * td; buf = malloc(cap * sizeof(float)); }
    for (int i = 0; i < n; i++) memcpy(buf + i * td, src[i], td * sizeof(float));
    return (RouteSources){buf, td, n, NULL};
}
static void width(double *out, const float *const *src, int n, int T, const float *q, const float *g, int D, int S,
                  float eps) {
    route_probe_width(ctx, out, pack(src, n, T, D), q, g, T, D, S, eps);
}
static void heads(double *out, const float *const *src, int n, int T, const float *q, const float *g, int D, int H,
                  float eps) {
    route_probe_heads(ctx, out, pack(src, n, T, D), q, g, T, D, H, eps);
}
#include <sys/stat.h>
#include <unistd.h>

static double kl2(double p0, double r0) {   // KL((p0, 1-p0) || (r0, 1-r0))
    return p0 * log(p0 / r0) + (1 - p0) * log((1 - p0) / (1 - r0));
}

// Identical keys: sources that are positive power-of-two multiples of one
// vector have identical keys K_n = S_n·ρ_n ⊙ g (ρ takes the scale out, and
// with eps = 0 and powers of two exactly so), hence identical logits in every
// slice and over the full width: every a_s and α are the same (uniform)
// distribution and the disagreement is exactly 0, whatever q and g are.
// This is the only way slices can all agree with the full width: if every
// slice had the same non-uniform logits c, α = softmax(S·c) would be sharper
// than each a_s = softmax(c) (see the hand-computed case below).
static void test_identical_keys(void) {
    enum { N = 5, T = 3, D = 16 };
    float src_buf[N][T * D], q[D], g[D];
    const float *src[N];
    Rng rng;
    rng_seed(&rng, 11);
    for (int k = 0; k < D; k++) { q[k] = 3 * rng_normal(&rng); g[k] = 1 + 0.5f * rng_normal(&rng); }
    for (int t = 0; t < T; t++)
        for (int k = 0; k < D; k++) {
            float v = rng_normal(&rng);
            for (int n = 0; n < N; n++) src_buf[n][t * D + k] = v * (float)(1 << n);   // 1, 2, 4, 8, 16 × v
        }
    for (int n = 0; n < N; n++) src[n] = src_buf[n];
    double out[T * 4];
    int exact = 1;
    for (int S = 1; S <= 16; S *= 2) {
        width(out, src, N, T, q, g, D, S, 0.0f);
        for (int t = 0; t < T; t++) exact &= out[t] == 0.0;
    }
    CHECK(exact, "width_disagreement_identical_keys_is_exactly_0", "got %g (S 16, token 0)", out[0]);
    heads(out, src, N, T, q, g, D, 4, 0.0f);
    double worst = 0;
    for (int i = 0; i < T * 4; i++) worst = fmax(worst, fabs(out[i]));
    CHECK(worst < 1e-15, "head_deviation_identical_heads_is_0", "got %g", worst);
}

// One slice (S = 1) is the full width: a_0 = α, disagreement exactly 0.
static void test_one_slice(void) {
    enum { N = 4, T = 5, D = 8 };
    float buf[N * T * D], q[D], g[D];
    const float *src[N];
    Rng rng;
    rng_seed(&rng, 3);
    for (int i = 0; i < N * T * D; i++) buf[i] = rng_normal(&rng);
    for (int k = 0; k < D; k++) { q[k] = 2 * rng_normal(&rng); g[k] = 1; }
    for (int n = 0; n < N; n++) src[n] = buf + n * T * D;
    double out[T];
    width(out, src, N, T, q, g, D, 1, 1e-6f);
    int zero = 1;
    for (int t = 0; t < T; t++) zero &= out[t] == 0.0;
    CHECK(zero, "width_disagreement_one_slice_is_exactly_0", "got %g", out[0]);
    width(out, src, 1, T, q, g, D, 4, 1e-6f);
    CHECK(out[0] == 0.0, "width_disagreement_one_source_is_0", "got %g", out[0]);
}

// Two sources, d = 4, S = 2 slices {0,1} and {2,3}, g = 1, eps = 0:
//   S_0 = ( 1, 1,  1, 1): ρ_0 = 1,   K_0 = (1, 1, 1, 1)
//   S_1 = (-2, 2, -2, 2): ρ_1 = 1/2, K_1 = (-1, 1, -1, 1)
// With u = ln(3)/2, a slice whose query part is (u, 0) has logits (u, -u),
// so softmax (e^{2u}/(e^{2u}+1), ...) = (3/4, 1/4).
// Case 1, q = (u, 0, 0, 0): a_0 = (3/4, 1/4), a_1 = (1/2, 1/2) (logits 0, 0),
//   full logits (u, -u): α = (3/4, 1/4). Disagreement
//   = (KL(a_0‖α) + KL(a_1‖α)) / 2 = (0 + ½ln(½/¾) + ½ln(½/¼)) / 2 = ¼ ln(4/3) = 0.0719205.
//   Heads (H = 2): w̄ = (5/8, 3/8); KL(w_0‖w̄) = ¾ ln(6/5) + ¼ ln(2/3) = 0.0353749,
//   KL(w_1‖w̄) = ½ ln(4/5) + ½ ln(4/3) = 0.0322693.
// Case 2, q = (u, 0, u, 0): both slices (3/4, 1/4), identical; full logits
//   (2u, -2u): α = (9/10, 1/10). Disagreement = KL((¾,¼)‖(9/10,1/10))
//   = ¾ ln(5/6) + ¼ ln(5/2) = 0.0923315: identical slices, not zero.
static void test_hand_two_sources(void) {
    const float s0[4] = {1, 1, 1, 1}, s1[4] = {-2, 2, -2, 2}, g[4] = {1, 1, 1, 1};
    const float *src[2] = {s0, s1};
    const float u = (float)(log(3.0) / 2);
    double uu = (double)u;   // the float the probe sees
    double p = exp(2 * uu) / (exp(2 * uu) + 1);   // 3/4 up to the rounding of u
    const float q1[4] = {u, 0, 0, 0}, q2[4] = {u, 0, u, 0};
    double out[2];
    width(out, src, 2, 1, q1, g, 4, 2, 0.0f);
    double want = (0 + kl2(0.5, p)) / 2;
    CHECK(fabs(out[0] - want) < 1e-12 && fabs(out[0] - 0.25 * log(4.0 / 3.0)) < 1e-7, "width_disagreement_hand_case_1",
          "got %.10f, want %.10f (= 1/4 ln 4/3 = %.10f)", out[0], want, 0.25 * log(4.0 / 3.0));
    width(out, src, 2, 1, q2, g, 4, 2, 0.0f);
    double a = exp(4 * uu) / (exp(4 * uu) + 1);   // 9/10
    want = kl2(p, a);
    double exact = 0.75 * log(5.0 / 6.0) + 0.25 * log(5.0 / 2.0);
    CHECK(fabs(out[0] - want) < 1e-12 && fabs(out[0] - exact) < 1e-7, "width_disagreement_hand_case_identical_slices",
          "got %.10f, want %.10f (= 3/4 ln 5/6 + 1/4 ln 5/2 = %.10f)", out[0], want, exact);
    heads(out, src, 2, 1, q1, g, 4, 2, 0.0f);
    double mean = (p + 0.5) / 2;
    double w0 = kl2(p, mean), w1 = kl2(0.5, mean);
    CHECK(fabs(out[0] - w0) < 1e-12 && fabs(out[1] - w1) < 1e-12 &&
              fabs(out[0] - (0.75 * log(1.2) + 0.25 * log(2.0 / 3.0))) < 1e-7 &&
              fabs(out[1] - 0.5 * (log(0.8) + log(4.0 / 3.0))) < 1e-7,
          "head_deviation_hand_case", "got %.10f %.10f, want %.10f %.10f", out[0], out[1], w0, w1);
}

// A naive reference: K materialised, softmax by exp / sum, KL as Σ p log(p/r).
static double naive_width(const float *const *src, int N, int t, const float *q, const float *g, int d, int S,
                          double eps, int heads_mode, int h_out) {
    double K[16][64], lf[16], ls[16][16], pf[16], ps[16][16];
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int k = 0; k < d; k++) ss += (double)src[n][t * d + k] * src[n][t * d + k];
        for (int k = 0; k < d; k++) K[n][k] = src[n][t * d + k] / sqrt(ss / d + eps) * g[k];
        lf[n] = 0;
        for (int s = 0; s < S; s++) {
            ls[s][n] = 0;
            for (int k = s * (d / S); k < (s + 1) * (d / S); k++) ls[s][n] += q[k] * K[n][k];
            lf[n] += ls[s][n];
        }
    }
    double z = 0;
    for (int n = 0; n < N; n++) z += exp(lf[n]);
    for (int n = 0; n < N; n++) pf[n] = exp(lf[n]) / z;
    for (int s = 0; s < S; s++) {
        z = 0;
        for (int n = 0; n < N; n++) z += exp(ls[s][n]);
        for (int n = 0; n < N; n++) ps[s][n] = exp(ls[s][n]) / z;
    }
    if (heads_mode) {   // KL(w_h ‖ mean) for head h_out
        double m[16] = {0}, r = 0;
        for (int s = 0; s < S; s++) for (int n = 0; n < N; n++) m[n] += ps[s][n] / S;
        for (int n = 0; n < N; n++) r += ps[h_out][n] * log(ps[h_out][n] / m[n]);
        return r;
    }
    double r = 0;
    for (int s = 0; s < S; s++)
        for (int n = 0; n < N; n++) r += ps[s][n] * log(ps[s][n] / pf[n]) / S;
    return r;
}

static void test_against_naive(void) {
    enum { N = 7, T = 9, D = 32 };
    static float buf[N * T * D];
    float q[D], g[D];
    const float *src[N];
    Rng rng;
    rng_seed(&rng, 5);
    for (int i = 0; i < N * T * D; i++) buf[i] = rng_normal(&rng) * (1 + (i / (T * D)));   // sources of different scale
    for (int k = 0; k < D; k++) { q[k] = 0.7f * rng_normal(&rng); g[k] = 1 + 0.3f * rng_normal(&rng); }
    for (int n = 0; n < N; n++) src[n] = buf + n * T * D;
    double out[T * 8], worst = 0, big = 0;
    for (int S = 2; S <= 8; S *= 2) {
        width(out, src, N, T, q, g, D, S, 1e-6f);
        for (int t = 0; t < T; t++) {
            double ref = naive_width(src, N, t, q, g, D, S, 1e-6f, 0, 0);
            worst = fmax(worst, fabs(out[t] - ref));
            big = fmax(big, ref);
        }
    }
    CHECK(worst < 1e-12 && big > 0.05, "width_disagreement_vs_naive", "max error %g (largest value %g)", worst, big);
    worst = 0;
    heads(out, src, N, T, q, g, D, 4, 1e-6f);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < 4; h++) worst = fmax(worst, fabs(out[t * 4 + h] - naive_width(src, N, t, q, g, D, 4, 1e-6f, 1, h)));
    CHECK(worst < 1e-12, "head_deviation_vs_naive", "max error %g", worst);
}

// The probe's distributions are the model's: route_forward's saved weights.
static void test_matches_route_kernel(void) {
    enum { N = 6, T = 11, D = 64 };
    static float buf[N * T * D], x[T * D], w[N * T * 8];
    float *scratch = calloc(route_scratch_floats(ctx, N, D, 8), sizeof(float));
    float q[D], g[D];
    Rng rng;
    rng_seed(&rng, 9);
    for (int i = 0; i < N * T * D; i++) buf[i] = rng_normal(&rng);
    for (int k = 0; k < D; k++) { q[k] = 0.5f * rng_normal(&rng); g[k] = 1 + 0.2f * rng_normal(&rng); }
    const RouteSources src = {buf, (size_t)T * D, N, NULL};
    for (int H = 1; H <= 8; H *= 8) {
        route_forward(ctx, x, w, scratch, src, q, g, T, D, H, 1e-6f);
        double e = route_probe_weight_error(ctx, w, src, q, g, T, D, H, 1e-6f);
        char name[64];
        snprintf(name, sizeof name, "probe_matches_route_forward_H%d", H);
        CHECK(e < 1e-5, name, "max |w - a| = %g", e);
    }
    free(scratch);
}

static void test_random_query(void) {
    enum { D = 32 };
    float q[D], r[D], z[D] = {0};
    Rng rng;
    rng_seed(&rng, 2);
    for (int k = 0; k < D; k++) q[k] = (k < 8 ? 3.0f : 0.1f) * rng_normal(&rng);   // head 0 far larger
    int ok = 1;
    for (int blocks = 1; blocks <= 4; blocks *= 4) {
        probe_random_query(r, q, D, blocks, &rng);
        for (int b = 0; b < blocks; b++) {
            double nq = 0, nr = 0, dot = 0;
            for (int k = b * D / blocks; k < (b + 1) * D / blocks; k++) {
                nq += q[k] * q[k]; nr += r[k] * r[k]; dot += q[k] * r[k];
            }
            ok &= fabs(sqrt(nr) / sqrt(nq) - 1) < 1e-5 && fabs(dot) < 0.999 * sqrt(nq * nr);
        }
    }
    CHECK(ok, "random_query_matched_norm", "a block's norm differs from the query's (or it is the query)");
    probe_random_query(r, z, D, 4, &rng);
    double n = 0;
    for (int k = 0; k < D; k++) n += fabs(r[k]);
    CHECK(n == 0, "random_query_of_zero_is_zero", "norm %g", n);
}

// ---- probe_run: the whole probe on a saved model (nano made smaller)

static char rundir[256];

// A run directory for scheme mode (H heads, N blocks) with perturbed
// weights (the routing queries start at 0), a validation file and, with
// state, a checkpoint/state.json naming it with batch 2 x 16.
static const char *make_run(const char *name, const char *mode, int H, int N, int state) {
    static char dir[512];
    char path[700];
    snprintf(dir, sizeof dir, "%s/%s", rundir, name);
    mkdir(dir, 0755);
    Config c;
    config_preset("nano", &c);   // made smaller: 2 layers of width 64
    c.vocab_size = 64;
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.intermediate_size = 128;
    snprintf(c.attnres_mode, sizeof c.attnres_mode, "%s", mode);
    c.attnres_num_heads = H;
    c.attnres_num_blocks = N;
    Model m;
    if (model_create(&m, &c)) { printf("model_create: %s\n", mhar_error()); return dir; }
    model_init_weights(&m, 5);
    Rng rng;
    rng_seed(&rng, 9);
    for (size_t i = 0; i < m.table.total; i++) m.params[i] += 0.3f * rng_normal(&rng);
    if (model_save(&m, dir)) printf("model_save: %s\n", mhar_error());
    model_free(&m);
    int tok[1000];
    for (int i = 0; i < 1000; i++) tok[i] = (int)((i * 7 + i / 13) % 64);
    snprintf(path, sizeof path, "%s/val.bin", rundir);
    tokens_save(path, tok, 1000, 64);
    if (state) {
        char st[900];
        snprintf(st, sizeof st, "{\"val\": \"%s\", \"batch\": 2, \"seq\": 16}", path);
        snprintf(path, sizeof path, "%s/checkpoint", dir);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/checkpoint/state.json", dir);
        atomic_write_file(path, st, strlen(st));
    }
    return dir;
}

static double mean_of_sites(const ProbeResult *r) {
    double s = 0;
    for (int i = 0; i < r->n_sites; i++) s += r->sites[i].trained;
    return s / r->n_sites;
}

static void test_run_attnres(void) {
    const char *dir = make_run("att", "attnres", 1, 0, 1);
    ProbeOptions o = {.run = dir, .slices = 4, .draws = 2, .batches = 2, .seed = 1};
    ProbeResult r;
    int rc = probe_run(&o, &r);
    CHECK(rc == 0, "probe_run_attnres", "%s", mhar_error());
    if (rc) return;
    CHECK(r.width && r.n_sites == 4 && r.tokens == 64 && !strcmp(r.sites[0].site, "layers.0.mlp") &&
          r.sites[0].n_sources == 2 && !strcmp(r.sites[3].site, "final") && r.sites[3].n_sources == 5,
          "probe_run_sites", "width %d, %d sites, %g tokens, first %s", r.width, r.n_sites, r.tokens, r.sites[0].site);
    CHECK(r.route_check < 1e-4 && r.trained > 0 && r.excess == r.trained - r.null &&
          fabs(r.trained - mean_of_sites(&r)) < 1e-15 && isfinite(r.null_sd), "probe_run_overall",
          "route %g trained %g null %g excess %g", r.route_check, r.trained, r.null, r.excess);
    ProbeResult r2;
    o.batches = 1;
    rc = probe_run(&o, &r2);
    CHECK(rc == 0 && r2.tokens == 32 && r2.trained != r.trained, "probe_run_batches", "rc %d tokens %g", rc, r2.tokens);
    if (!rc) probe_result_free(&r2);
    char *line = NULL, path[600];
    rc = probe_result_save(&r, "none", &line, path, sizeof path);
    cJSON *j = line ? cJSON_Parse(line) : NULL;
    CHECK(rc == 0 && path[0] == 0 && j && !strcmp(cJSON_GetObjectItem(j, "probe")->valuestring, "width_disagreement") &&
          cJSON_GetObjectItem(j, "slices")->valueint == 4 && cJSON_GetArraySize(cJSON_GetObjectItem(j, "sites")) == 4 &&
          !cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "sites"), 0), "per_head"),
          "probe_result_json", "%.200s", line ? line : "(none)");
    cJSON_Delete(j);
    free(line);
    rc = probe_result_save(&r, NULL, &line, path, sizeof path);
    char *text = NULL, want[600];
    size_t n = 0;
    snprintf(want, sizeof want, "%s/probe.json", dir);
    int same = rc == 0 && !strcmp(path, want) && read_file(path, &text, &n) == 0 && line && n == strlen(line) + 1 &&
               !memcmp(text, line, n - 1) && text[n - 1] == '\n';
    CHECK(same, "probe_result_saved_with_newline", "rc %d, path %s", rc, path);
    free(text);
    free(line);
    probe_result_free(&r);
}

static void test_run_mhar(void) {
    ProbeOptions o = {.run = make_run("mh", "mhar", 2, 0, 1), .slices = 4, .draws = 1, .batches = 1, .seed = 3};
    ProbeResult r;
    int rc = probe_run(&o, &r);
    CHECK(rc == 0, "probe_run_mhar", "%s", mhar_error());
    if (rc) return;
    int ok = !r.width && r.heads == 2 && r.n_sites == 4 && isnan(r.null_sd);
    for (int i = 0; ok && i < r.n_sites; i++)
        ok &= r.sites[i].per_head && fabs(r.sites[i].trained - (r.sites[i].per_head[0] + r.sites[i].per_head[1]) / 2) < 1e-12;
    CHECK(ok && r.route_check < 1e-4, "probe_run_mhar_per_head", "width %d heads %d", r.width, r.heads);
    probe_result_free(&r);
}

static void expect_refused(const char *name, const ProbeOptions *o, const char *want) {
    ProbeResult r;
    int rc = probe_run(o, &r);
    CHECK(rc != 0 && strstr(mhar_error(), want), name, "rc %d: %s", rc, mhar_error());
    if (!rc) probe_result_free(&r);
}

static void test_run_refused(void) {
    char names[128];
    CHECK(!strcmp(probe_scheme_names(names, sizeof names, " or "), "attnres or mhar"), "probe_schemes_from_registry",
          "got '%s'", names);
    ProbeOptions o = {.run = make_run("base", "baseline", 1, 0, 1), .slices = 4, .draws = 1, .batches = 1, .seed = 1};
    expect_refused("probe_run_refuses_baseline", &o, "full depth routing (attnres or mhar) and this scheme does not route");
    o.run = make_run("blk", "block", 2, 2, 1);
    expect_refused("probe_run_refuses_block", &o, "not yet block routing's summaries");
    o.run = make_run("dmh", "delta_mh", 2, 2, 1);
    expect_refused("probe_run_refuses_delta_mh", &o, "not yet a converted model's gated reads");
    o.run = make_run("att3", "attnres", 1, 0, 1);
    o.slices = 3;
    expect_refused("probe_run_slices_must_divide", &o, "--slices 3 does not divide the width d = 64");
    o.slices = 4;
    o.run = make_run("nostate", "attnres", 1, 0, 0);
    expect_refused("probe_run_needs_data", &o, "give --data");
    o.run = "/nonexistent/run";
    expect_refused("probe_run_missing_model", &o, "/nonexistent/run: cannot load the model: /nonexistent/run/");
    // the reason once, not the message formatted into itself
    CHECK(strstr(strstr(mhar_error(), "cannot load") + 1, "cannot load the model") == NULL,
          "probe_run_missing_model_said_once", "%s", mhar_error());
}

int main(void) {
    ctx = ops_open();
    if (!ctx) return 1;
    test_identical_keys();
    test_one_slice();
    test_hand_two_sources();
    test_against_naive();
    test_matches_route_kernel();
    test_random_query();
    snprintf(rundir, sizeof rundir, "/tmp/mhar_test_probe.XXXXXX");
    if (!mkdtemp(rundir)) { perror("mkdtemp"); return 2; }
    test_run_attnres();
    test_run_mhar();
    test_run_refused();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", rundir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", rundir);
    CHECK_EXIT();
}
