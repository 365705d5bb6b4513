// mhar bench's measurements: the scheme list, the machine's sgemm rate and
// memory bandwidth through the model's own ops, timed training steps of one
// scheme in a child process (so its peak memory is its own), the traffic
// floors, and one whole run of them.
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../data/synth.h"
#include "../kernels/ops.h"
#include "../model/model.h"
#include "../train/data_parallel.h"
#include "../train/optim.h"
#include "../util/cachesize.h"
#include "../util/median.h"

static BenchScheme scheme_of(const ResidualScheme *s, int heads, int blocks) {
    return (BenchScheme){s->name, s->name, s->heads == HEADS_ANY ? heads : 1, s->needs_blocks ? blocks : 0};
}

static int scheme_config(const char *preset, const BenchScheme *s, int vocab, Config *c) {
    if (config_preset(preset, c)) return MHAR_ERR;
    c->vocab_size = vocab;
    snprintf(c->attnres_mode, sizeof c->attnres_mode, "%s", s->mode);
    c->attnres_num_heads = s->heads;
    c->attnres_num_blocks = s->blocks;
    return MHAR_OK;
}

int bench_find(const BenchScheme *list, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0) return i;
    return -1;
}

static int parse_list(const char *spec, int heads, int blocks, BenchScheme *out, int *n) {
    char names[256];
    residual_names(names, sizeof names, ", ", NULL);
    *n = 0;
    if (strcmp(spec, "all") == 0) {
        for (int i = 0; i < residual_count() && *n < BENCH_MAX_SCHEMES; i++)
            if (residual_at(i)->from_scratch) out[(*n)++] = scheme_of(residual_at(i), heads, blocks);
        return MHAR_OK;
    }
    for (const char *p = spec;; p++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[64];
        if (len == 0) return mhar_fail("--residual '%s': an empty name in the list", spec);
        if (len >= sizeof name) return mhar_fail("--residual '%s': a name is too long", spec);
        memcpy(name, p, len);
        name[len] = '\0';
        if (strcmp(name, "all") == 0)
            return mhar_fail("--residual '%s': 'all' stands alone, not in a list", spec);
        const ResidualScheme *s = residual_find(name);
        if (!s) return mhar_fail("--residual '%s': unknown residual scheme '%s' (%s, or all)", spec, name, names);
        if (bench_find(out, *n, s->name) >= 0)
            return mhar_fail("--residual '%s': '%s' is listed twice", spec, name);
        if (*n == BENCH_MAX_SCHEMES) return mhar_fail("--residual '%s': more than %d schemes", spec, BENCH_MAX_SCHEMES);
        out[(*n)++] = scheme_of(s, heads, blocks);
        if (!end) return MHAR_OK;
        p = end;
    }
}

int bench_parse_schemes(const char *spec, const char *preset, int vocab, int heads, int blocks, BenchScheme *out,
                        int *n) {
    if (parse_list(spec, heads, blocks, out, n)) return MHAR_ERR;
    for (int i = 0; i < *n; i++) {  // refuse a bad shape before timing anything
        Config c;
        if (scheme_config(preset, &out[i], vocab, &c) || config_validate(&c, "bench options")) return MHAR_ERR;
    }
    return MHAR_OK;
}

// The sgemm probe: square 2048³ products through the model's own matmul op,
// in a context of its own (so that a scheme's op profile does not count it).
typedef struct { OpsContext *ctx; float *a, *b, *c; } SgemmProbe;
enum { PROBE_N = 2048 };

static void probe_close(SgemmProbe *p) {
    if (p->ctx) { ops_free(p->ctx, p->a); ops_free(p->ctx, p->b); ops_free(p->ctx, p->c); ops_close(p->ctx); }
    memset(p, 0, sizeof *p);
}

static int probe_open(SgemmProbe *p) {
    const size_t n = (size_t)PROBE_N * PROBE_N;
    memset(p, 0, sizeof *p);
    if (!(p->ctx = ops_open())) return MHAR_ERR;
    p->a = ops_alloc(p->ctx, sizeof(float) * n), p->b = ops_alloc(p->ctx, sizeof(float) * n);
    p->c = ops_alloc(p->ctx, sizeof(float) * n);
    if (!p->a || !p->b || !p->c) { probe_close(p); return MHAR_ERR; }
    for (size_t i = 0; i < n; i++) p->a[i] = (float)(i % 7) * 0.1f, p->b[i] = (float)(i % 5) * 0.1f, p->c[i] = 0;
    return MHAR_OK;
}

// One product's rate, GFLOP/s.
static double probe_gflops(SgemmProbe *p) {
    double t0 = now_seconds();
    matmul_forward(p->ctx, p->c, p->a, p->b, PROBE_N, PROBE_N, PROBE_N);
    ops_sync(p->ctx);
    return 2.0 * PROBE_N * PROBE_N * PROBE_N / (now_seconds() - t0) / 1e9;
}

// The machine's sgemm rate: median of 5 products after a warm-up (GFLOP/s).
double bench_sgemm_gflops(void) {
    SgemmProbe p;
    if (probe_open(&p)) return 0;
    double g[5];
    probe_gflops(&p);  // warm-up
    for (int r = 0; r < 5; r++) g[r] = probe_gflops(&p);
    probe_close(&p);
    return median(g, 5);
}

// Resident memory of this process, MiB (statm), for the probe's share of a
// child's peak; 0 if unknown.
static double resident_mib(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    int got = fscanf(f, "%ld %ld", &pages, &resident);
    fclose(f);
    return got == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0 : 0;
}

int bench_bandwidth(BenchBandwidth *out) {
    enum { PASSES = 7 };
    const double llc = (double)llc_bytes();
    size_t n = (size_t)fmax(256.0 * 1048576, 4 * llc) / sizeof(float);
    n = (n + 15) / 16 * 16;
    memset(out, 0, sizeof *out);
    out->llc_mb = llc / 1e6;
    out->array_mib = n * sizeof(float) / 1048576.0;
    OpsContext *ctx = ops_open();
    if (!ctx) return MHAR_ERR;
    float *a = ops_alloc(ctx, n * sizeof(float)), *b = ops_alloc(ctx, n * sizeof(float));
    int rc = a && b ? MHAR_OK : MHAR_ERR;
    double tr[PASSES], tw[PASSES], sink = 0;
    vec_zero(ctx, b, n);  // b = 0: the updates leave a unchanged and finite
    for (int p = -1; p < PASSES && !rc; p++) {  // pass -1: the warm-up
        double t0 = now_seconds();
        sink += stream_sum(ctx, a, n);
        ops_sync(ctx);
        double t1 = now_seconds();
        vec_scale_acc(ctx, a, b, 0.5f, n);
        ops_sync(ctx);
        double t2 = now_seconds();
        if (p >= 0) tr[p] = t1 - t0, tw[p] = t2 - t1;
    }
    ops_free(ctx, a); ops_free(ctx, b);
    ops_close(ctx);
    if (rc) return rc;
    if (sink != 0) return mhar_fail("bandwidth probe: the sum of zeros is %g", sink);
    out->read_gbs = 4.0 * n / median(tr, PASSES) / 1e9;
    out->rmw_gbs = 12.0 * n / median(tw, PASSES) / 1e9;
    return MHAR_OK;
}

int bench_route_bytes(const char *preset, const BenchScheme *s, int vocab, int n_tok, RouteBytes *out) {
    Config c;
    *out = (RouteBytes){0, 0};
    const ResidualScheme *rs = residual_find(s->mode);
    if (!rs || scheme_config(preset, s, vocab, &c)) return 0;
    return residual_route_bytes(rs, &c, n_tok, out);
}

double bench_floor_s(RouteBytes scheme, RouteBytes base, const BenchBandwidth *bw) {
    return (scheme.read - base.read) / (bw->read_gbs * 1e9) + (scheme.write - base.write) / (bw->rmw_gbs * 1e9);
}

static int build_model(Model *m, const char *preset, const BenchScheme *s, int vocab, int B, int T) {
    Config c;
    if (scheme_config(preset, s, vocab, &c) || model_create(m, &c)) return MHAR_ERR;
    model_init_weights(m, 1);
    return model_alloc_grads(m) || model_alloc_acts(m, B, T);
}

static int build(Model *m, AdamW *opt, const char *preset, const BenchScheme *s, int vocab, int B, int T) {
    if (build_model(m, preset, s, vocab, B, T)) return MHAR_ERR;
    return adamw_init(opt, m->ctx, m->table.total);
}

// In the child: the timed steps into *out (tok_s < 0 on failure). The sgemm
// probe runs one product before the first timed step and one after each,
// so the rate an mfu is taken against is the machine's during these very
// steps: on a shared host the rate drifts by a quarter within seconds, and
// a probe run a round earlier pairs a fast spell with a slow one. Its
// matrices (48 MiB) are left out of the peak memory reported.
static void time_steps(const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps,
                       double budget_s, BenchSample *out) {
    Model m;
    AdamW opt = {0};
    SgemmProbe probe;
    memset(&m, 0, sizeof m);
    out->tok_s = -1;
    const double rss0 = resident_mib();
    if (probe_open(&probe)) { mhar_fail("sgemm probe: no memory for its 2048² matrices"); return; }
    out->probe_mib = resident_mib() - rss0;
    if (build(&m, &opt, preset, s, vocab, B, T)) { probe_close(&probe); return; }
    size_t n = (size_t)B * T + 1;
    int *tok = mhar_alloc(sizeof(int) * n);
    double *t = mhar_alloc(sizeof(double) * steps), *g = mhar_alloc(sizeof(double) * (steps + 1));
    if (!tok || !t || !g) {
        mhar_free(tok); mhar_free(t); mhar_free(g);
        probe_close(&probe); adamw_free(&opt); model_free(&m);
        return;
    }
    synth_tokens(tok, n, vocab, "random", 7);
    for (int i = -1; i < steps; i++) {  // one untimed warm-up step
        if (i == 0) {
            g[0] = probe_gflops(&probe);
            ops_profile(m.ctx, 1);
        }
        double t0 = now_seconds();
        model_zero_grad(&m);
        model_forward(&m, tok, tok + 1);
        model_backward(&m, 1.0f);
        adamw_step(&opt, m.params, m.grads, grad_global_norm(m.ctx, m.grads, m.table.total), 1e-4f);
        double dt = now_seconds() - t0;
        if (i >= 0) t[i] = dt, g[i + 1] = probe_gflops(&probe);
        else if (budget_s > 0 && budget_s / dt < steps) steps = budget_s / dt < 1 ? 1 : (int)(budget_s / dt);
    }
    out->flops = model_train_flops_per_token(&m, T);
    out->params = (double)m.table.total;
    ops_profile(m.ctx, 0);
    out->n_prof = ops_profile_read(m.ctx, out->prof, OPS_PROFILE_MAX);
    for (int k = 0; k < out->n_prof; k++) out->prof[k].seconds /= steps, out->prof[k].flops /= steps;
    out->step_mean_s = 0;
    for (int k = 0; k < steps; k++) out->step_mean_s += t[k] / steps;
    out->steps = steps;
    out->tok_s = B * T / median(t, steps);
    out->sgemm_gflops = median(g, steps + 1);
    mhar_free(tok); mhar_free(t); mhar_free(g);
    probe_close(&probe);
    adamw_free(&opt);
    model_free(&m);
}

// fn(arg, res) in a forked child, its result (size bytes) back through a
// pipe; *ru: the child's resource use (its peak RSS). Fork before this
// process starts OpenMP or OpenBLAS threads.
static int in_child(int (*fn)(const void *arg, void *res), const void *arg, void *res, size_t size,
                    struct rusage *ru) {
    int fd[2];
    if (pipe(fd)) return mhar_fail("pipe failed");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return mhar_fail("fork failed");
    if (pid == 0) {
        close(fd[0]);
        int rc = fn(arg, res);
        if (rc) fprintf(stderr, "error: %s\n", mhar_error());
        ssize_t w = write(fd[1], res, size);
        _exit(w == (ssize_t)size && !rc ? 0 : 1);
    }
    close(fd[1]);
    size_t got = 0;   // a result larger than the pipe's atomic size arrives in pieces
    for (ssize_t k; got < size && (k = read(fd[0], (char *)res + got, size - got)) > 0;) got += (size_t)k;
    close(fd[0]);
    int status;
    wait4(pid, &status, 0, ru);
    return got == size && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? MHAR_OK : MHAR_ERR;
}

typedef struct { const char *preset; const BenchScheme *s; int vocab, B, T, steps; double budget_s; } SchemeJob;

static int scheme_child(const void *arg, void *res) {
    const SchemeJob *j = arg;
    BenchSample *out = res;
    memset(out, 0, sizeof *out);
    time_steps(j->preset, j->s, j->vocab, j->B, j->T, j->steps, j->budget_s, out);
    return out->tok_s > 0 ? MHAR_OK : mhar_fail("%s: %s", j->s->name, mhar_error());
}

int bench_scheme(const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps, double budget_s,
                 BenchSample *out) {
    const SchemeJob job = {preset, s, vocab, B, T, steps, budget_s};
    BenchSample res;
    struct rusage ru;
    if (in_child(scheme_child, &job, &res, sizeof res, &ru)) return mhar_fail("scheme %s failed", s->name);
    *out = res;
    out->peak_mb = ru.ru_maxrss / 1024.0 - res.probe_mib;
    return MHAR_OK;
}

static int limits_child(const void *arg, void *res) {
    (void)arg;
    BenchLimits *out = res;
    memset(out, 0, sizeof *out);
    out->sgemm_gflops = bench_sgemm_gflops();
    if (out->sgemm_gflops <= 0) return mhar_fail("sgemm probe: no memory for its 2048² matrices");
    return bench_bandwidth(&out->bw);
}

int bench_limits(BenchLimits *out) {
    struct rusage ru;
    return in_child(limits_child, NULL, out, sizeof *out, &ru) ? mhar_fail("the machine's probes failed") : MHAR_OK;
}

static int memory_child(const void *arg, void *res) {
    (void)arg;
    return bench_bandwidth(res);
}

int bench_memory(BenchBandwidth *out) {
    struct rusage ru;
    return in_child(memory_child, NULL, out, sizeof *out, &ru) ? mhar_fail("the machine's memory probe failed")
                                                               : MHAR_OK;
}

// A scheme's op profile over its K rounds: that of the round whose mean
// step is the median (the lower of the middle two), so that its ops add up
// to its step; the "residual" region on its own, the median over the
// rounds (the figure set against the floor). v: K doubles.
static void profile_medians(BenchResult *r, const BenchSample *s, int K, double *v) {
    for (int k = 0; k < K; k++) v[k] = s[k].step_mean_s;
    const double mid = median(v, K);
    int km = 0;
    for (int k = 0; k < K; k++)
        if (fabs(s[k].step_mean_s - mid) < fabs(s[km].step_mean_s - mid)) km = k;
    r->n_prof = s[km].n_prof;
    memcpy(r->prof, s[km].prof, sizeof *r->prof * (size_t)r->n_prof);
    r->prof_step_ms = 1e3 * s[km].step_mean_s;
    r->prof_sgemm = s[km].sgemm_gflops;
    for (int k = 0; k < K; k++) {
        v[k] = 0;
        for (int f = 0; f < s[k].n_prof; f++)
            if (s[k].prof[f].region && !strcmp(s[k].prof[f].name, "residual")) v[k] = 1e3 * s[k].prof[f].seconds;
    }
    r->residual_ms = median(v, K);
}

// Round k of the PyTorch peers: the helper once, each peer's tokens/s kept
// by name (round 0 names the peers; a peer failing in a later round fails).
static int torch_round(const BenchPlan *p, BenchTorch *t, int k) {
    BenchTorch now;
    if (bench_torch(p->preset, p->vocab, p->batch, p->seq, p->steps, p->scheme, p->n, &now)) return MHAR_ERR;
    if (k == 0) *t = now;
    else if (now.error[0] && !t->error[0]) snprintf(t->error, sizeof t->error, "round %d: %.200s", k + 1, now.error);
    t->rounds = k + 1;
    for (int e = 0; e < t->n; e++) {
        BenchPeer *peer = &t->peer[e];
        int f = 0;
        while (f < now.n && strcmp(now.peer[f].name, peer->name)) f++;
        const BenchPeer *got = f < now.n ? &now.peer[f] : NULL;
        peer->round_tok_s[k] = got ? got->tok_s : 0;
        if (peer->tok_s > 0 && !(peer->round_tok_s[k] > 0)) {
            peer->tok_s = 0;
            snprintf(peer->error, sizeof peer->error, "round %d: %.200s", k + 1, got ? got->error : "not reported");
        }
    }
    return MHAR_OK;
}

// Each peer against its mhar scheme (qwen3_compile against baseline), paired
// by round: the machine's drift between rounds moves both sides of a pair.
static void torch_pairs(const BenchPlan *p, BenchRun *out, double *v) {
    BenchTorch *t = &out->torch;
    const int K = t->rounds;
    for (int e = 0; e < t->n; e++) {
        BenchPeer *peer = &t->peer[e];
        peer->vs = strcmp(peer->name, "qwen3_compile") == 0 ? out->base : -1;
        for (int i = 0; i < p->n && peer->vs < 0; i++)
            if (bench_torch_peer(t, &p->scheme[i]) == e) peer->vs = i;
        peer->ratio = peer->ratio_min = peer->ratio_max = NAN;
        if (!(peer->tok_s > 0)) continue;
        peer->tok_s = spread(peer->round_tok_s, K).median;
        if (peer->vs < 0) continue;
        for (int k = 0; k < K; k++) v[k] = out->r[peer->vs].round_tok_s[k] / peer->round_tok_s[k];
        const Spread r = spread(v, K);
        peer->ratio = r.median, peer->ratio_min = r.min, peer->ratio_max = r.max;
    }
}

// Rounds of every scheme, each round led by the memory probe (so the
// bandwidths drift with the machine as the schemes do), each scheme's mfu
// against the sgemm probe between its own steps; then the medians.
static int run_rounds(const BenchPlan *p, BenchRun *out) {
    const int n = p->n, K = p->repeat;
    double *tok = mhar_alloc(sizeof(double) * n * K), *mem = mhar_alloc(sizeof(double) * n * K);
    double *sg = mhar_alloc(sizeof(double) * n * K), *rd = mhar_alloc(sizeof(double) * K * 2), *rmw = rd + K;
    BenchSample *samples = mhar_alloc(sizeof *samples * n * K);
    int rc = tok && mem && sg && rd && samples ? MHAR_OK : MHAR_ERR;
    for (int k = 0; k < K && !rc; k++) {
        BenchBandwidth bw;
        if ((rc = bench_memory(&bw))) break;
        rd[k] = bw.read_gbs, rmw[k] = bw.rmw_gbs;
        out->bw.array_mib = bw.array_mib, out->bw.llc_mb = bw.llc_mb;
        fprintf(stderr, "  round %d  machine: read %.1f GB/s, read-modify-write %.1f GB/s\n", k + 1, rd[k], rmw[k]);
        for (int i = 0; i < n && !rc; i++) {
            BenchSample s = {0};
            rc = bench_scheme(p->preset, &p->scheme[i], p->vocab, p->batch, p->seq, p->steps, 0, &s);
            if (rc) break;
            tok[i * K + k] = s.tok_s;
            mem[i * K + k] = s.peak_mb;
            sg[i * K + k] = out->r[i].round_sgemm[k] = s.sgemm_gflops;
            samples[i * K + k] = s;
            out->r[i].flops = s.flops;
            fprintf(stderr, "  round %d  %-12s %8.0f tok/s  %7.0f MB  (sgemm %.1f GFLOP/s between its steps)\n", k + 1,
                    p->scheme[i].name, s.tok_s, s.peak_mb, s.sgemm_gflops);
        }
        if (!rc && p->torch) rc = torch_round(p, &out->torch, k);
    }
    if (!rc) {
        const Spread s = spread(sg, (size_t)n * K);
        out->rounds = K;
        out->sgemm_gflops = s.median, out->sgemm_min = s.min, out->sgemm_max = s.max;
        out->bw.read_gbs = median(rd, K);
        out->bw.rmw_gbs = median(rmw, K);
    }
    const int ref = out->base >= 0 ? out->base : 0;
    double *v = mhar_alloc(sizeof(double) * K);
    if (!v) rc = MHAR_ERR;
    for (int i = 0; i < n && !rc; i++) {
        BenchResult *r = &out->r[i];
        const double *t = tok + i * K, *t_ref = tok + ref * K;
        memcpy(r->round_tok_s, t, sizeof(double) * K);
        for (int k = 0; k < K; k++) v[k] = t[k] / t_ref[k];
        const Spread ratio = spread(v, K);
        r->tok_ratio = ratio.median, r->ratio_min = ratio.min, r->ratio_max = ratio.max;
        for (int k = 0; k < K; k++) v[k] = r->flops * t[k] / 1e9 / r->round_sgemm[k];
        const Spread mfu = spread(v, K);
        r->mfu = mfu.median, r->mfu_min = mfu.min, r->mfu_max = mfu.max;
        for (int k = 0; k < K; k++) v[k] = 1e3 * p->batch * p->seq * (1 / t[k] - 1 / t_ref[k]);
        r->extra_ms = median(v, K);  // kept for the routed schemes against baseline only (bench_run)
        r->peak_mb = median(mem + i * K, K);
        r->tok_s = spread(t, K).median;  // not median(): the reference's rounds must stay in order
        r->step_ms = 1e3 * p->batch * p->seq / r->tok_s;
        profile_medians(r, samples + i * K, K, v);
    }
    if (!rc && p->torch) torch_pairs(p, out, v);
    mhar_free(tok); mhar_free(mem); mhar_free(sg); mhar_free(rd); mhar_free(v); mhar_free(samples);
    return rc;
}

int bench_run(const BenchPlan *p, BenchRun *out) {
    memset(out, 0, sizeof *out);
    // The children are forked before this process starts any OpenMP or
    // OpenBLAS threads: libgomp does not survive a fork after its first use.
    if (p->repeat > BENCH_MAX_ROUNDS) return mhar_fail("--repeat %d: at most %d rounds", p->repeat, BENCH_MAX_ROUNDS);
    out->base = bench_find(p->scheme, p->n, "baseline");
    if (run_rounds(p, out)) return MHAR_ERR;
    Config c;
    if (config_preset(p->preset, &c)) return MHAR_ERR;
    const int n_tok = p->batch * p->seq;
    out->sources_mb = (2.0 * c.num_hidden_layers + 1) * n_tok * c.hidden_size * sizeof(float) / 1e6;
    for (int i = 0; i < p->n; i++) {
        BenchResult *r = &out->r[i];
        r->modelled = bench_route_bytes(p->preset, &p->scheme[i], p->vocab, n_tok, &r->bytes);
        r->floor_ms = NAN;
        r->residual_floor_ms = r->modelled ? 1e3 * bench_floor_s(r->bytes, (RouteBytes){0, 0}, &out->bw) : NAN;
    }
    for (int i = 0; i < p->n; i++) {
        BenchResult *r = &out->r[i];
        const BenchResult *b = out->base >= 0 ? &out->r[out->base] : NULL;
        if (b && residual_is_routed(residual_find(p->scheme[i].mode)) && r->modelled && b->modelled)
            r->floor_ms = 1e3 * bench_floor_s(r->bytes, b->bytes, &out->bw);
        else r->extra_ms = NAN;
    }
    return MHAR_OK;
}

// Timed data-parallel steps on comm's ranks, `accum_global` micro-batches of
// B × T a step: median step seconds and communication seconds per step.
static int dp_time(Comm *comm, const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps,
                   int accum_global, int overlap, double *step_s, double *comm_s, double *opt_mb) {
    Model m = {0};
    AdamW opt = {0};
    DataParallel dp = {0};
    int rc = build_model(&m, preset, s, vocab, B, T);
    if (!rc) rc = dp_init(&dp, comm, &m, accum_global);
    if (!rc) dp_set_overlap(&dp, &m, overlap);
    if (!rc) rc = adamw_init(&opt, m.ctx, dp.n_mine);
    size_t n = (size_t)B * T + 1;
    int *tok = mhar_alloc(sizeof(int) * n);
    double *t = mhar_alloc(sizeof(double) * steps), *c = mhar_alloc(sizeof(double) * steps);
    double *loss = mhar_alloc(sizeof(double) * (dp.accum > 0 ? dp.accum : 1));
    if (!tok || !t || !c || !loss) rc = MHAR_ERR;
    rc = comm_agree(comm, rc);
    if (!rc) synth_tokens(tok, n, vocab, "random", 7 + comm->rank);
    for (int i = -1; i < steps && !rc; i++) {  // one untimed warm-up step
        rc = comm_barrier(comm);
        double t0 = now_seconds(), norm, mean;
        dp.comm_seconds = 0;
        for (int k = 0; k < dp.accum && !rc; k++) {
            model_zero_grad(&m);
            loss[k] = model_forward(&m, tok, tok + 1);
            model_backward(&m, 1.0f / accum_global);
            rc = dp_reduce(&dp, m.grads, k);
        }
        if (!rc) rc = dp_loss(&dp, loss, &mean) || dp_grad_norm(&dp, &norm) || dp_update(&dp, &opt, m.params, norm, 1e-4f);
        if (i >= 0) t[i] = now_seconds() - t0, c[i] = dp.comm_seconds;
    }
    if (!rc) {
        *step_s = median(t, steps);
        *comm_s = median(c, steps);
        *opt_mb = sizeof(float) * 2.0 * dp.n_mine / 1e6;
    }
    mhar_free(tok); mhar_free(t); mhar_free(c); mhar_free(loss);
    dp_free(&dp);
    adamw_free(&opt);
    model_free(&m);
    return rc;
}

int bench_data_parallel(Comm *comm, const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps,
                        int repeat, BenchScaling *out) {
    memset(out, 0, sizeof *out);
    out->ranks = comm->size;
    out->threads = ops_threads();
    double *ranks_tok = mhar_alloc(sizeof(double) * repeat), *one_tok = mhar_alloc(sizeof(double) * repeat);
    double *comm_ms = mhar_alloc(sizeof(double) * repeat), *step_ms = mhar_alloc(sizeof(double) * repeat);
    double *serial_tok = mhar_alloc(sizeof(double) * repeat), *serial_comm = mhar_alloc(sizeof(double) * repeat);
    if (!ranks_tok || !one_tok || !comm_ms || !step_ms || !serial_tok || !serial_comm) return MHAR_ERR;
    Comm solo = {.rank = 0, .size = 1};
    snprintf(solo.host, sizeof solo.host, "%s", comm->host);
    int rc = MHAR_OK;
    for (int k = 0; k < repeat && !rc; k++) {
        double step_s = 0, comm_s = 0, one_s = 0, serial_s = 0, unused;
        rc = dp_time(comm, preset, s, vocab, B, T, steps, comm->size, 1, &step_s, &comm_s, &out->opt_mb_rank);
        // The same without overlap: every gradient sent after the backward.
        if (!rc) rc = dp_time(comm, preset, s, vocab, B, T, steps, comm->size, 0, &serial_s, &serial_comm[k], &unused);
        // 1 rank with every rank's threads takes the same global batch while
        // the others sleep (not spin) at a barrier.
        if (!rc && comm->rank == 0) {
            ops_set_threads(out->ranks * out->threads);
            rc = dp_time(&solo, preset, s, vocab, B, T, steps, comm->size, 0, &one_s, &unused, &out->opt_mb_full);
            ops_set_threads(out->threads);
        }
        if (comm_idle_barrier(comm)) rc = MHAR_ERR;
        rc = comm_agree(comm, rc);
        ranks_tok[k] = (double)B * T * comm->size / step_s;
        serial_tok[k] = (double)B * T * comm->size / serial_s;
        serial_comm[k] *= 1e3;
        one_tok[k] = one_s > 0 ? (double)B * T * comm->size / one_s : 0;
        comm_ms[k] = 1e3 * comm_s;
        step_ms[k] = 1e3 * step_s;
        if (!rc && comm->rank == 0)
            fprintf(stderr, "  round %d  %d ranks x %d threads %8.0f tok/s (communication %.1f ms of %.1f ms; "
                            "without overlap %.0f tok/s, %.1f ms)   1 rank x %d threads %8.0f tok/s\n", k + 1,
                    out->ranks, out->threads, ranks_tok[k], comm_ms[k], 1e3 * step_s, serial_tok[k], serial_comm[k],
                    out->ranks * out->threads, one_tok[k]);
    }
    if (!rc) {
        out->ranks_tok_s = median(ranks_tok, repeat);
        out->single_tok_s = median(one_tok, repeat);
        out->comm_ms = median(comm_ms, repeat);
        out->step_ms = median(step_ms, repeat);
        out->serial_tok_s = median(serial_tok, repeat);
        out->serial_comm_ms = median(serial_comm, repeat);
    }
    mhar_free(serial_tok); mhar_free(serial_comm);
    mhar_free(ranks_tok); mhar_free(one_tok); mhar_free(comm_ms); mhar_free(step_ms);
    return rc;
}
