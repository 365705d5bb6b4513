// The CPU backend's context (context.c) and the op timer of the profile
// (profile.c; ops.h says what it measures).
#pragma once
#include "kernels/ops.h"

struct OpsContext {
    int threads;   // OpenMP threads when the context was opened (sizes per-thread scratch)
    // the profile: on, how deep in ops the caller is (only the outermost op
    // is timed), and the sums by name
    int profiling, depth;
    double op_flops;   // the outermost op's floating-point operations so far
    OpsProfileEntry prof[OPS_PROFILE_MAX];
    int n_prof;
};

// The outermost op's start time, or < 0 (not profiling, or inside an op).
double ops_op_begin(OpsContext *ctx);
void ops_op_end(OpsContext *ctx, const char *name, double start);
// An op's floating-point operations, counted in the outermost op's entry.
static inline void ops_op_flops(OpsContext *ctx, double flops) {
    if (ctx && ctx->profiling) ctx->op_flops += flops;
}

typedef struct { OpsContext *ctx; const char *name; double start; } OpsOpTimer;
static inline void ops_op_timer_end(OpsOpTimer *t) { ops_op_end(t->ctx, t->name, t->start); }
// First line of an op: times it, under the function's name, until it returns.
#define OPS_TIMED(ctx)                                                          \
    OpsOpTimer ops_op_timer_ __attribute__((cleanup(ops_op_timer_end), unused)) = { \
        (ctx), __func__, ops_op_begin(ctx)}
