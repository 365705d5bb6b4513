// mhar bench's report of one run (bench_run): the throughput table, the
// routed schemes against their traffic floors, the PyTorch peers, and the
// whole run as one JSON object on the last line.
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../kernels/ops.h"
#include "../residual/residual.h"

// A growing JSON text (the last line).
typedef struct { char buf[65536]; size_t len; } Json;
static void jput(Json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jput(Json *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, ap);
    va_end(ap);
    if (k > 0) j->len = j->len + (size_t)k < sizeof j->buf ? j->len + (size_t)k : sizeof j->buf - 1;
}
// A JSON string body: the helper's error messages may hold quotes.
static void jstr(Json *j, const char *s) {
    jput(j, "\"");
    for (; *s; s++)
        if (*s == '"' || *s == '\\') jput(j, "\\%c", *s);
        else if ((unsigned char)*s >= 0x20) jput(j, "%c", *s);
    jput(j, "\"");
}

static void print_table(const BenchPlan *p, const BenchRun *b) {
    const double base_mem = b->r[b->base >= 0 ? b->base : 0].peak_mb;
    printf("blas: %s\n", ops_library_name());
    printf("machine: sgemm %.1f GFLOP/s (2048³ between the timed steps; median of %d schemes x %d rounds, range "
           "%.1f-%.1f); memory read %.1f GB/s, read-modify-write %.1f GB/s (%.0f MiB arrays; median of %d rounds)\n",
           b->sgemm_gflops, p->n, b->rounds, b->sgemm_min, b->sgemm_max, b->bw.read_gbs, b->bw.rmw_gbs,
           b->bw.array_mib, b->rounds);
    const char *ref = b->base >= 0 ? "base" : "first";
    char tok_h[16], mem_h[16], range_h[24];
    snprintf(tok_h, sizeof tok_h, "tok/%s", ref);
    snprintf(mem_h, sizeof mem_h, "mem/%s", ref);
    snprintf(range_h, sizeof range_h, "rounds' tok/%s", ref);
    if (b->rounds > 1)
        printf("mfu: each round's model FLOP/s over the sgemm rate between its steps, median of the rounds (range at the "
               "right)\n");
    printf("%-12s %10s %12s %8s %9s %9s %9s", "scheme", "tok/s", "model GF/s", "mfu", "peak MB", tok_h, mem_h);
    if (b->rounds > 1) printf("  %-16s  %s", range_h, "rounds' mfu");
    printf("\n");
    for (int i = 0; i < p->n; i++) {
        const BenchResult *r = &b->r[i];
        double gf = r->flops * r->tok_s / 1e9;
        printf("%-12s %10.0f %12.1f %7.1f%% %9.0f %9.3f %9.3f", p->scheme[i].name, r->tok_s, gf, 100 * r->mfu,
               r->peak_mb, r->tok_ratio, r->peak_mb / base_mem);
        if (b->rounds > 1) {
            char range[40];
            snprintf(range, sizeof range, "%.3f-%.3f", r->ratio_min, r->ratio_max);
            printf("  %-16s  %.1f-%.1f%%", range, 100 * r->mfu_min, 100 * r->mfu_max);
        }
        printf("\n");
    }
}

// The routed schemes against their traffic floor.
static void print_floors(const BenchPlan *p, const BenchRun *b) {
    int any = 0;
    for (int i = 0; i < p->n; i++) {
        if (!residual_is_routed(residual_find(p->scheme[i].mode))) continue;
        if (!any++) {
            if (b->base < 0) { printf("routing floors: add baseline to --residual to compare against it\n"); return; }
            printf("routing over baseline, per step (floor: the extra traffic at the measured bandwidths; sources "
                   "%.0f MB, last-level cache %.0f MB):\n", b->sources_mb, b->bw.llc_mb);
            printf("%-12s %9s %9s %10s %10s %9s %12s\n", "scheme", "step ms", "extra ms", "+read MB", "+write MB",
                   "floor ms", "extra/floor");
        }
        const BenchResult *r = &b->r[i], *base = &b->r[b->base];
        if (isnan(r->floor_ms)) { printf("%-12s %9.1f   (traffic not modelled)\n", p->scheme[i].name, r->step_ms); continue; }
        printf("%-12s %9.1f %9.1f %10.1f %10.1f %9.1f %12.2f\n", p->scheme[i].name, r->step_ms, r->extra_ms,
               (r->bytes.read - base->bytes.read) / 1e6, (r->bytes.write - base->bytes.write) / 1e6, r->floor_ms,
               r->extra_ms / r->floor_ms);
    }
}

// An op's ms per step in r's profile (0 when r never called it).
static double prof_ms(const BenchResult *r, const char *name) {
    for (int q = 0; q < r->n_prof; q++)
        if (!r->prof[q].region && !strcmp(r->prof[q].name, name)) return 1e3 * r->prof[q].seconds;
    return 0;
}

// The ops (not regions) of every scheme's profile that `keep` accepts in
// some scheme, each once, in the order first seen: how many (at most cap).
typedef int (*OpFilter)(const OpsProfileEntry *e, const BenchResult *r);
static int op_names(const BenchPlan *p, const BenchRun *b, OpFilter keep, const char **names, int cap) {
    int n = 0;
    for (int i = 0; i < p->n; i++)
        for (int q = 0; q < b->r[i].n_prof; q++) {
            const OpsProfileEntry *e = &b->r[i].prof[q];
            int seen = 0;
            for (int k = 0; k < n; k++) seen |= !strcmp(names[k], e->name);
            if (!e->region && !seen && n < cap && keep(e, &b->r[i])) names[n++] = e->name;
        }
    return n;
}

static int takes_a_percent(const OpsProfileEntry *e, const BenchResult *r) {
    return 1e3 * e->seconds >= 0.01 * r->prof_step_ms;
}

static int counts_flops(const OpsProfileEntry *e, const BenchResult *r) {
    (void)r;
    return e->flops > 0;
}

// Where each scheme's step goes: every op that takes >= 1% of some scheme's
// step, by the first scheme's time; the rest summed; the time outside ops.
static void print_profile(const BenchPlan *p, const BenchRun *b) {
    const char *names[OPS_PROFILE_MAX * BENCH_MAX_SCHEMES];
    const int n = op_names(p, b, takes_a_percent, names, OPS_PROFILE_MAX * BENCH_MAX_SCHEMES);
    if (!n) return;
    for (int a = 1; a < n; a++)   // by the first scheme's time, largest first
        for (int c = a; c > 0 && prof_ms(&b->r[0], names[c]) > prof_ms(&b->r[0], names[c - 1]); c--) {
            const char *t = names[c]; names[c] = names[c - 1]; names[c - 1] = t;
        }
    printf("where the step goes, ms per step (op profile of the round with the median step, mean over its steps; "
           "an op >= 1%% of some step):\n%-24s", "op");
    for (int i = 0; i < p->n; i++) printf(" %11s", p->scheme[i].name);
    printf("\n");
    for (int k = 0; k < n; k++) {
        printf("%-24s", names[k]);
        for (int i = 0; i < p->n; i++) printf(" %11.2f", prof_ms(&b->r[i], names[k]));
        printf("\n");
    }
    const char *rows[4] = {"other ops", "all ops", "outside ops", "step (mean)"};
    for (int row = 0; row < 4; row++) {
        printf("%-24s", rows[row]);
        for (int i = 0; i < p->n; i++) {
            const BenchResult *r = &b->r[i];
            double all = 0, listed = 0;
            for (int q = 0; q < r->n_prof; q++)
                if (!r->prof[q].region) all += 1e3 * r->prof[q].seconds;
            for (int k = 0; k < n; k++) listed += prof_ms(r, names[k]);
            const double v[4] = {all - listed, all, r->prof_step_ms - all, r->prof_step_ms};
            printf(" %11.2f", v[row]);
        }
        printf("\n");
    }
}

// The ops that count their FLOPs (the matrix products: matmuls and
// attention) in r's profile: their FLOPs and ms per step.
static void products(const BenchResult *r, double *gflop, double *ms) {
    *gflop = *ms = 0;
    for (int q = 0; q < r->n_prof; q++)
        if (!r->prof[q].region && r->prof[q].flops > 0) *gflop += r->prof[q].flops / 1e9, *ms += 1e3 * r->prof[q].seconds;
}

// The mfu r's step would have if only its products took time: the part of
// the gap to the sgemm rate the products' own speed accounts for.
static double products_only_mfu(const BenchPlan *p, const BenchResult *r) {
    double gflop, ms;
    products(r, &gflop, &ms);
    return ms > 0 && r->prof_sgemm > 0 ? r->flops * p->batch * p->seq / 1e9 / (ms / 1e3) / r->prof_sgemm : 0;
}

// The products' rate against the sgemm probe between the same steps, op by
// op, and what the rest of the step costs: the gap between mfu and 1 split
// into the products' speed on these shapes and the time outside them.
static void print_products(const BenchPlan *p, const BenchRun *b) {
    const char *names[OPS_PROFILE_MAX * BENCH_MAX_SCHEMES];
    const int n = op_names(p, b, counts_flops, names, OPS_PROFILE_MAX * BENCH_MAX_SCHEMES);
    if (!n) return;
    printf("the matrix products' rate, GFLOP/s and %% of the sgemm probe between the same steps (the profile's "
           "round; attention counts its causal pairs only):\n%-24s", "op");
    for (int i = 0; i < p->n; i++) printf(" %17s", p->scheme[i].name);
    printf("\n");
    for (int k = 0; k <= n; k++) {
        printf("%-24s", k < n ? names[k] : "all products");
        for (int i = 0; i < p->n; i++) {
            const BenchResult *r = &b->r[i];
            double gflop = 0, ms = 0;
            if (k == n) products(r, &gflop, &ms);
            else
                for (int q = 0; q < r->n_prof; q++)
                    if (!r->prof[q].region && !strcmp(r->prof[q].name, names[k]))
                        gflop = r->prof[q].flops / 1e9, ms = 1e3 * r->prof[q].seconds;
            if (ms > 0 && r->prof_sgemm > 0) printf(" %9.1f (%4.0f%%)", gflop / (ms / 1e3), 100 * gflop / (ms / 1e3) / r->prof_sgemm);
            else printf(" %17s", "-");
        }
        printf("\n");
    }
    printf("%-24s", "outside products, ms");
    for (int i = 0; i < p->n; i++) {
        double gflop, ms;
        products(&b->r[i], &gflop, &ms);
        printf(" %17.1f", b->r[i].prof_step_ms - ms);
    }
    printf("\n%-24s", "mfu, products alone");
    for (int i = 0; i < p->n; i++) printf(" %16.1f%%", 100 * products_only_mfu(p, &b->r[i]));
    printf("\n");
}

// Each scheme's own work inside the step (the model's "residual" region:
// its reads, writes, their backwards and the zeroing of the source
// gradients) against the floor of its traffic, whole and beyond baseline's.
static void print_residual_work(const BenchPlan *p, const BenchRun *b) {
    int any = 0;
    for (int i = 0; i < p->n; i++) any |= b->r[i].residual_ms > 0 && !isnan(b->r[i].residual_floor_ms);
    if (!any) return;
    const BenchResult *base = b->base >= 0 ? &b->r[b->base] : NULL;
    printf("the scheme's own work in the step (its reads, writes and backwards, timed in place) against its "
           "traffic floor:\n%-12s %9s %9s %11s", "scheme", "work ms", "floor ms", "work/floor");
    if (base) printf(" %11s %13s %13s", "+work ms", "+floor ms", "+work/floor");
    printf("\n");
    for (int i = 0; i < p->n; i++) {
        const BenchResult *r = &b->r[i];
        if (isnan(r->residual_floor_ms)) continue;
        printf("%-12s %9.2f %9.2f %11.2f", p->scheme[i].name, r->residual_ms, r->residual_floor_ms,
               r->residual_ms / r->residual_floor_ms);
        if (base && !isnan(r->floor_ms))
            printf(" %11.2f %13.2f %13.2f", r->residual_ms - base->residual_ms, r->floor_ms,
                   (r->residual_ms - base->residual_ms) / r->floor_ms);
        printf("\n");
    }
}

static void print_torch(const BenchPlan *p, const BenchRun *b) {
    const BenchTorch *t = &b->torch;
    if (t->error[0]) { fprintf(stderr, "warning: the PyTorch comparison failed: %s\n", t->error); return; }
    printf("PyTorch %s peers (%d threads, fp32, same shape, warm-up excluded%s):\n", t->version, t->threads,
           t->rounds > 1 ? "; after every round, tokens/s the median and mhar / peer paired by round" : "");
    printf("%-14s %10s %12s %8s   %-34s %s\n", "peer", "tok/s", "model GF/s", "mfu", "mhar / peer", "what");
    for (int k = 0; k < t->n; k++) {
        const BenchPeer *e = &t->peer[k];
        const int i = e->vs;  // the mhar scheme it is compared with
        if (i < 0 || i >= p->n) continue;
        if (!e->tok_s) { printf("%-14s failed: %s\n", e->name, e->error); continue; }
        double gf = b->r[i].flops * e->tok_s / 1e9;
        char ratio[64];
        if (t->rounds > 1)
            snprintf(ratio, sizeof ratio, "%s %.2fx (%.2f-%.2f)", p->scheme[i].name, e->ratio, e->ratio_min,
                     e->ratio_max);
        else snprintf(ratio, sizeof ratio, "%s %.2fx", p->scheme[i].name, e->ratio);
        printf("%-14s %10.0f %12.1f %7.1f%%   %-34s %s\n", e->name, e->tok_s, gf, 100 * gf / b->sgemm_gflops, ratio,
               e->what);
    }
}

static void scheme_json(Json *j, const BenchPlan *p, const BenchRun *b, int i) {
    const BenchResult *r = &b->r[i], *base = &b->r[b->base >= 0 ? b->base : 0];
    double gf = r->flops * r->tok_s / 1e9;
    jput(j, "\"tok_per_s\": %.1f, \"model_gflops\": %.2f, \"mfu\": %.4f, \"mfu_min\": %.4f, \"mfu_max\": %.4f, "
         "\"peak_rss_mb\": %.1f, \"step_ms\": %.3f", r->tok_s, gf, r->mfu, r->mfu_min, r->mfu_max, r->peak_mb, r->step_ms);
    if (p->n > 1)
        jput(j, ", \"tok_ratio\": %.4f, \"tok_ratio_min\": %.4f, \"tok_ratio_max\": %.4f, \"mem_ratio\": %.4f",
             r->tok_ratio, r->ratio_min, r->ratio_max, r->peak_mb / base->peak_mb);
    jput(j, ", \"round_tok_per_s\": [");
    for (int k = 0; k < b->rounds; k++) jput(j, "%s%.1f", k ? ", " : "", r->round_tok_s[k]);
    jput(j, "], \"round_sgemm_gflops\": [");
    for (int k = 0; k < b->rounds; k++) jput(j, "%s%.2f", k ? ", " : "", r->round_sgemm[k]);
    jput(j, "]");
    if (r->modelled) jput(j, ", \"route_read_bytes\": %.0f, \"route_write_bytes\": %.0f", r->bytes.read, r->bytes.write);
    if (!isnan(r->floor_ms))
        jput(j, ", \"extra_ms\": %.3f, \"floor_ms\": %.4f, \"extra_over_floor\": %.4f", r->extra_ms, r->floor_ms,
             r->extra_ms / r->floor_ms);
    if (!isnan(r->residual_floor_ms))
        jput(j, ", \"residual_work_ms\": %.4f, \"residual_floor_ms\": %.4f", r->residual_ms, r->residual_floor_ms);
    if (!isnan(r->floor_ms) && b->base >= 0)
        jput(j, ", \"extra_work_over_floor\": %.4f", (r->residual_ms - base->residual_ms) / r->floor_ms);
    jput(j, ", \"profile_step_ms\": %.3f, \"profile_ms\": {", r->prof_step_ms);
    for (int q = 0, first = 1; q < r->n_prof; q++)
        if (!r->prof[q].region) {
            jput(j, "%s\"%s\": %.4f", first ? "" : ", ", r->prof[q].name, 1e3 * r->prof[q].seconds);
            first = 0;
        }
    jput(j, "}, \"profile_gflop\": {");
    for (int q = 0, first = 1; q < r->n_prof; q++)
        if (!r->prof[q].region && r->prof[q].flops > 0) {
            jput(j, "%s\"%s\": %.9f", first ? "" : ", ", r->prof[q].name, r->prof[q].flops / 1e9);
            first = 0;
        }
    jput(j, "}, \"profile_sgemm_gflops\": %.2f, \"mfu_products_only\": %.4f", r->prof_sgemm,
         products_only_mfu(p, r));
    const int k = p->torch ? bench_torch_peer(&b->torch, &p->scheme[i]) : -1;
    if (k >= 0 && b->torch.peer[k].tok_s > 0)
        jput(j, ", \"torch_peer\": \"%s\", \"torch_peer_tok_per_s\": %.1f, \"over_torch_peer\": %.4f, "
             "\"over_torch_peer_min\": %.4f, \"over_torch_peer_max\": %.4f", b->torch.peer[k].name,
             b->torch.peer[k].tok_s, b->torch.peer[k].ratio, b->torch.peer[k].ratio_min, b->torch.peer[k].ratio_max);
}

static void print_json(const BenchPlan *p, const BenchRun *b) {
    static Json j;
    j.len = 0;
    jput(&j, "{\"blas\": ");
    jstr(&j, ops_library_name());
    jput(&j, ", \"preset\": \"%s\", \"batch\": %d, \"seq\": %d, \"vocab\": %d, \"sgemm_gflops\": %.2f, "
             "\"read_gbs\": %.3f, \"rmw_gbs\": %.3f, \"bandwidth_array_mib\": %.1f, \"llc_mb\": %.1f, "
             "\"sources_mb\": %.2f, \"probe_rounds\": %d, \"sgemm_gflops_min\": %.2f, \"sgemm_gflops_max\": %.2f, ",
         p->preset, p->batch, p->seq, p->vocab, b->sgemm_gflops, b->bw.read_gbs, b->bw.rmw_gbs, b->bw.array_mib,
         b->bw.llc_mb, b->sources_mb, b->rounds, b->sgemm_min, b->sgemm_max);
    if (p->n == 1) {
        jput(&j, "\"residual\": \"%s\", ", p->scheme[0].name);
        scheme_json(&j, p, b, 0);
    } else {
        jput(&j, "\"schemes\": {");
        for (int i = 0; i < p->n; i++) {
            jput(&j, "%s\"%s\": {", i ? ", " : "", p->scheme[i].name);
            scheme_json(&j, p, b, i);
            jput(&j, "}");
        }
        jput(&j, "}");
    }
    if (p->torch) {
        const BenchTorch *t = &b->torch;
        jput(&j, ", \"torch\": {\"version\": ");
        jstr(&j, t->version);
        jput(&j, ", \"threads\": %d, ", t->threads);
        if (t->error[0]) { jput(&j, "\"error\": "); jstr(&j, t->error); }
        jput(&j, "%s\"peers\": {", t->error[0] ? ", " : "");
        for (int k = 0; k < t->n; k++) {
            jput(&j, "%s\"%s\": {\"what\": ", k ? ", " : "", t->peer[k].name);
            jstr(&j, t->peer[k].what);
            if (t->peer[k].tok_s > 0) {
                jput(&j, ", \"tok_per_s\": %.1f, \"round_tok_per_s\": [", t->peer[k].tok_s);
                for (int r = 0; r < t->rounds; r++) jput(&j, "%s%.1f", r ? ", " : "", t->peer[k].round_tok_s[r]);
                jput(&j, "]}");
            }
            else { jput(&j, ", \"error\": "); jstr(&j, t->peer[k].error); jput(&j, "}"); }
        }
        jput(&j, "}}");
        const int c = bench_torch_peer(t, NULL);
        if (c >= 0 && b->base >= 0 && t->peer[c].tok_s > 0)
            jput(&j, ", \"baseline_over_compile\": %.4f", t->peer[c].ratio);
    }
    jput(&j, "}");
    puts(j.buf);
}

void bench_print(const BenchPlan *p, const BenchRun *b) {
    print_table(p, b);
    print_floors(p, b);
    print_residual_work(p, b);
    print_profile(p, b);
    print_products(p, b);
    if (p->torch) print_torch(p, b);
    print_json(p, b);
}
