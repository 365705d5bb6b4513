// The op profile of mhar bench (ops.h): wall time per op and per region,
// summed by name in the context. Ops run synchronously on the CPU, so an
// op's time is its call's.
#include <stdio.h>
#include <string.h>

#include "context.h"
#include "util/common.h"

static void add(OpsContext *ctx, const char *name, double seconds, int region, double flops) {
    int i = 0;
    while (i < ctx->n_prof && strcmp(ctx->prof[i].name, name)) i++;
    if (i == ctx->n_prof) {
        if (i == OPS_PROFILE_MAX) return;   // more names than the table holds: the rest go uncounted
        snprintf(ctx->prof[i].name, sizeof ctx->prof[i].name, "%s", name);
        ctx->prof[i].seconds = 0, ctx->prof[i].calls = 0, ctx->prof[i].region = region, ctx->prof[i].flops = 0;
        ctx->n_prof++;
    }
    ctx->prof[i].seconds += seconds;
    ctx->prof[i].calls++;
    ctx->prof[i].flops += flops;
}

void ops_profile(OpsContext *ctx, int on) {
    if (on) ctx->n_prof = 0, ctx->depth = 0, ctx->op_flops = 0;
    ctx->profiling = on;
}

int ops_profile_read(const OpsContext *ctx, OpsProfileEntry *out, int cap) {
    int n = ctx->n_prof < cap ? ctx->n_prof : cap;
    memcpy(out, ctx->prof, sizeof *out * (size_t)n);
    return n;
}

double ops_profile_clock(OpsContext *ctx) { return ctx && ctx->profiling ? now_seconds() : -1; }

void ops_profile_region(OpsContext *ctx, const char *name, double start) {
    if (start >= 0 && ctx->profiling) add(ctx, name, now_seconds() - start, 1, 0);
}

double ops_op_begin(OpsContext *ctx) {
    if (!ctx || !ctx->profiling) return -1;
    if (ctx->depth++) return -1;
    ctx->op_flops = 0;
    return now_seconds();
}

void ops_op_end(OpsContext *ctx, const char *name, double start) {
    if (!ctx || !ctx->profiling) return;
    ctx->depth--;
    if (start >= 0) add(ctx, name, now_seconds() - start, 0, ctx->op_flops);
}
