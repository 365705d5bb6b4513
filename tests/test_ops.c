// One harness for every op of kernels/ops.h, in the spirit of ggml's
// test-backend-ops: a table of cases (op, shape, input kind, tolerance and
// the reason for it), all run on every backend present. Per case:
//   forward        the op's outputs against a double-precision reference
//                  written here in plain loops (independent of ops.h), on
//                  the same fp32 inputs;
//   backward       the op's input gradients against central differences of
//                  the double reference under the projection loss
//                  L = Σ r ⊙ out (r random): on sampled coordinates (every
//                  coordinate of a small tensor) and along one random
//                  direction that moves every coordinate (so an error that
//                  touches many elements, a wrong index, stride or term, is
//                  caught; one element of a large tensor slightly off can
//                  slip through, which is why each op has a small case);
//   deterministic  a second run gives the same bits;
//   accumulates    gradients that ops.h documents as accumulating (+=) do.
// Each prints one PASS/FAIL line with the measured error and tolerance.
//
// The ops are called only through the adapters at the top: a change of op
// signature (a backend context, one buffer for the routing sources) is an
// edit there. Adding an op: two adapters, a reference, an Op entry, table
// lines. An op whose "forward" is another op (vec_axpy for the gated read
// whose backward is gated_read_backward; hc_write for hc_backward) is
// checked as that pair; an op with no gradient to difference (hc_backward's
// dot sums, the probes, AdamW) is a forward against the double formula.
// Outputs are fp32, or double where Case.f64 says so (ops that return or
// write doubles). Properties that are not op-versus-reference (in-place use,
// NULL arguments, exact zeros, timing) live in test_kernels.c and test_route.c.
//
// Usage: test_ops [SUBSTRING]  runs only the cases whose name contains it.
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "kernels/ops.h"
#include "util/common.h"

enum { MAX_IN = 4, MAX_OUT = 3, MAX_P = 5 };

typedef struct {      // a backend under test
    const char *name;
    OpsContext *ctx;  // its op context
} Backend;

typedef struct Op Op;

// One case's tensors: flat fp32 buffers whose sizes the op's shape() sets
// from p[]. Rows: runs of elements of a common scale (rows of a norm, a
// routing source's token rows); 0 means the whole tensor.
#define WHY_EXACT "a copy or a constant: exact"
#define WHY_ROUND2 "two fp32 roundings per element: <= 2^-23 of the largest value"
#define WHY_ROWS "a copy; the backward's column sums are in double, rounded once to fp32"
#define WHY_F64 "computed in double from the same fp32 inputs: only the order of double sums and libm's exp/log differ (<= n·2^-53 of the terms)"
#define WHY_PROBE "computed in double from the same fp32 inputs: only the order of sums and libm differ (~1e-15 of the logits); KL values near 0 against 1e-6 nats"
#define WHY_ADAMW "a dozen fp32 operations per element (a sqrt, a division): ~1e-6; lr 0.05 makes the step a sizable part of p, so a wrong term is off by 1e-3 or more"
#define WHY_HC "fp32 sums of 5 terms per element; parameter dots of d fp32 products per token, in double over tokens"
#define WHY_STREAM "fp32 lane sums of a few terms each, then double: ~1e-7 of the total for N(0, 1) data; a skipped or repeated chunk is off by 1e-2 or more"
#define WHY_EMA "two fp32 products and a sum per element: <= 1.5·2^-23 of the largest value; a wrong weight is off by 1e-2 or more"

typedef struct {
    const Op *op;
    int p[MAX_P];                 // shape parameters, as Op.pnames names them
    int kind;                     // input distribution (Op.kinds; 0 = default)
    size_t n_in[MAX_IN], n_out[MAX_OUT], n_ids;
    size_t step_row[MAX_IN];      // finite-difference steps scale with this row's RMS
    size_t err_row[MAX_IN];       // input gradients: errors relative to this row's max
    size_t err_row_out[MAX_OUT];  // outputs: errors relative to this row's max
    int f64[MAX_OUT];             // output j is double (an op that returns or writes doubles)
    double err_floor[MAX_OUT];    // double outputs: errors relative to at least this (values near 0)
    float *in[MAX_IN], *out[MAX_OUT];
    double *outd[MAX_OUT];        // the double outputs (their out[j] is NULL); forward only
    float *dout[MAX_OUT], *din[MAX_IN];  // gradient into the outputs, of the inputs
    int *ids;                     // integer inputs: tokens, targets
} Case;

// Constants the adapters and the references share.
#define NORM_EPS 1e-6f    // rmsnorm eps and the routing key-norm eps
#define ROPE_THETA 10000.0f
#define VEC_S (-0.37f)    // vec_scale_acc's factor

// ---- adapters: the only calls into ops.h -----------------------------------------

static void fill_value(float *a, size_t n, float v) {
    for (size_t i = 0; i < n; i++) a[i] = v;
}

static float *scratch_nan(size_t n) { // scratch must need no initialisation
    float *s = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) s[i] = NAN;
    return s;
}

static void matmul_fwd(Backend *be, Case *c) {
    matmul_forward(be->ctx, c->out[0], c->in[0], c->in[1], c->p[0], c->p[1], c->p[2]);
}
static void matmul_bwd(Backend *be, Case *c) {
    matmul_backward(be->ctx, c->din[0], c->din[1], c->dout[0], c->in[0], c->in[1], c->p[0], c->p[1], c->p[2]);
}
static void matmul_add_bwd(Backend *be, Case *c) {
    matmul_backward_add(be->ctx, c->din[0], c->din[1], c->dout[0], c->in[0], c->in[1], c->p[0], c->p[1], c->p[2]);
}

static void embedding_fwd(Backend *be, Case *c) {
    embedding_forward(be->ctx, c->out[0], c->ids, c->in[0], c->p[2], c->p[1]);
}
static void embedding_bwd(Backend *be, Case *c) {
    embedding_backward(be->ctx, c->din[0], c->dout[0], c->ids, c->p[2], c->p[1], c->p[0]);
}

static void rmsnorm_fwd(Backend *be, Case *c) {
    rmsnorm_forward(be->ctx, c->out[0], c->out[1], c->in[0], c->in[1], c->p[0], c->p[1], NORM_EPS);
}
static void rmsnorm_bwd(Backend *be, Case *c) {
    float *scratch = scratch_nan(rmsnorm_scratch_floats(c->p[0], c->p[1]));
    rmsnorm_backward(be->ctx, c->din[0], c->din[1], scratch, c->dout[0], c->in[0], c->in[1], c->out[1], c->p[0],
                     c->p[1]);
    free(scratch);
}

// RoPE frequency j of hd: theta^(-2j/hd), or with `scaled` divided per
// frequency by 1, 8 or 2.5 in turn (as linear/llama3 scaling does).
static double rope_freq(int j, int hd, int scaled) {
    static const double div[3] = {1, 8, 2.5};
    return pow((double)ROPE_THETA, -2.0 * j / hd) / (scaled ? div[j % 3] : 1);
}

static void rope_table_with(Backend *be, float *ct, float *st, int max_pos, int hd, int scaled) {
    double *inv_freq = malloc(sizeof(double) * (size_t)(hd / 2));
    for (int j = 0; j < hd / 2; j++) inv_freq[j] = rope_freq(j, hd, scaled);
    rope_table(be->ctx, ct, st, max_pos, hd, inv_freq);
    free(inv_freq);
}

static void rope_table_fwd(Backend *be, Case *c) {
    rope_table_with(be, c->out[0], c->out[1], c->p[0], c->p[1], c->p[2]);
}

// rope works in place: the adapters copy, then rotate with a table of
// positions 0 .. pos0 + T - 1.
static void rope_apply(Backend *be, Case *c, float *x, int backward) {
    int B = c->p[0], T = c->p[1], nh = c->p[2], hd = c->p[3], pos0 = c->p[4];
    size_t nt = (size_t)(pos0 + T) * (hd / 2);
    float *ct = malloc(nt * sizeof(float)), *st = malloc(nt * sizeof(float));
    rope_table_with(be, ct, st, pos0 + T, hd, 0);
    if (backward) rope_backward(be->ctx, x, B, T, nh, hd, pos0, ct, st);
    else rope_forward(be->ctx, x, B, T, nh, hd, pos0, ct, st);
    free(ct), free(st);
}
static void rope_fwd(Backend *be, Case *c) {
    memcpy(c->out[0], c->in[0], c->n_in[0] * sizeof(float));
    rope_apply(be, c, c->out[0], 0);
}
static void rope_bwd(Backend *be, Case *c) {
    memcpy(c->din[0], c->dout[0], c->n_in[0] * sizeof(float));
    rope_apply(be, c, c->din[0], 1);
}

static void attention_fwd(Backend *be, Case *c) {
    float *scratch = scratch_nan(attention_scratch_floats(be->ctx, c->p[0], c->p[1], c->p[3], c->p[4]));
    attention_forward(be->ctx, c->out[0], c->out[1], scratch, c->in[0], c->in[1], c->in[2], c->p[0], c->p[1],
                      c->p[2], c->p[3], c->p[4]);
    free(scratch);
}
static void attention_bwd(Backend *be, Case *c) {
    float *scratch = scratch_nan(attention_scratch_floats(be->ctx, c->p[0], c->p[1], c->p[3], c->p[4]));
    attention_backward(be->ctx, c->din[0], c->din[1], c->din[2], scratch, c->dout[0], c->out[0], c->out[1],
                       c->in[0], c->in[1], c->in[2], c->p[0], c->p[1], c->p[2], c->p[3], c->p[4]);
    free(scratch);
}

static void swiglu_fwd(Backend *be, Case *c) { swiglu_forward(be->ctx, c->out[0], c->in[0], c->p[0], c->p[1]); }
static void swiglu_bwd(Backend *be, Case *c) {
    swiglu_backward(be->ctx, c->din[0], c->dout[0], c->in[0], c->p[0], c->p[1]);
}

// xent's return value (the sum of the losses) is checked as output 1; its
// backward takes one scale for every row: the gradient of scale · Σ losses.
static void xent_fwd(Backend *be, Case *c) {
    c->out[1][0] = (float)xent_forward(be->ctx, c->out[0], NULL, c->in[0], c->ids, c->p[0], c->p[1]);
}
// The backward takes the forward's lse, as in the model.
static void xent_bwd_after_forward(Backend *be, Case *c, float z_scale) {
    float *losses = malloc(sizeof(float) * (size_t)c->p[0]), *lse = malloc(sizeof(float) * (size_t)c->p[0]);
    xent_forward(be->ctx, losses, lse, c->in[0], c->ids, c->p[0], c->p[1]);
    xent_backward(be->ctx, c->din[0], c->in[0], lse, c->ids, c->p[0], c->p[1], c->dout[0][0], z_scale);
    free(losses);
    free(lse);
}
static void xent_bwd(Backend *be, Case *c) { xent_bwd_after_forward(be, c, 0.0f); }
// With z-loss: outputs losses, lse and XENT_Z·lse² (its own coefficient, so
// a term weighted wrongly against the cross-entropy's shows); the backward
// is the gradient of scale·Σ losses + z_scale·Σ lse², both scales the
// harness's 1/n, the second times XENT_Z.
#define XENT_Z 0.37f
static void xent_z_fwd(Backend *be, Case *c) {
    xent_forward(be->ctx, c->out[0], c->out[1], c->in[0], c->ids, c->p[0], c->p[1]);
    for (int i = 0; i < c->p[0]; i++) c->out[2][i] = XENT_Z * c->out[1][i] * c->out[1][i];
}
static void xent_z_bwd(Backend *be, Case *c) { xent_bwd_after_forward(be, c, c->dout[2][0] * XENT_Z); }

static void token_logprobs_fwd(Backend *be, Case *c) {
    token_logprobs(be->ctx, c->outd[0], c->in[0], c->ids, c->p[0], c->p[1]);
}
static void vec_add_fwd(Backend *be, Case *c) {
    vec_add(be->ctx, c->out[0], c->in[0], c->in[1], c->n_out[0]);
}
static void vec_acc_fwd(Backend *be, Case *c) {
    memcpy(c->out[0], c->in[0], c->n_out[0] * sizeof(float));
    vec_acc(be->ctx, c->out[0], c->in[1], c->n_out[0]);
}
static void vec_scale_acc_fwd(Backend *be, Case *c) {
    memcpy(c->out[0], c->in[0], c->n_out[0] * sizeof(float));
    vec_scale_acc(be->ctx, c->out[0], c->in[1], VEC_S, c->n_out[0]);
}

static void vec_copy_fwd(Backend *be, Case *c) { vec_copy(be->ctx, c->out[0], c->in[0], c->n_out[0]); }
static void vec_zero_fwd(Backend *be, Case *c) { vec_zero(be->ctx, c->out[0], c->n_out[0]); }
static void vec_acc2_fwd(Backend *be, Case *c) {
    memcpy(c->out[0], c->in[0], c->n_out[0] * sizeof(float));
    vec_acc2(be->ctx, c->out[0], c->in[1], c->in[2], c->n_out[0]);
}
static void vec_axpy_fwd(Backend *be, Case *c) {
    vec_axpy(be->ctx, c->out[0], c->in[0], VEC_S, c->in[1], c->n_out[0]);
}

// rows_broadcast's backward is rows_sum: d row += Σ_r dout[r, :].
static void rows_broadcast_fwd(Backend *be, Case *c) {
    rows_broadcast(be->ctx, c->out[0], c->in[0], c->p[0], c->p[1]);
}
static void rows_broadcast_bwd(Backend *be, Case *c) {
    rows_sum(be->ctx, c->din[0], c->dout[0], c->p[0], c->p[1]);
}
static void rows_sum_fwd(Backend *be, Case *c) { // onto the values of in[0]: it accumulates
    memcpy(c->out[0], c->in[0], c->n_out[0] * sizeof(float));
    rows_sum(be->ctx, c->out[0], c->in[1], c->p[0], c->p[1]);
}

static void sum_squares_fwd(Backend *be, Case *c) {
    sum_squares(be->ctx, c->outd[0], c->in[0], c->n_in[0], (size_t)c->p[1]);
}

static void stream_sum_fwd(Backend *be, Case *c) { c->outd[0][0] = stream_sum(be->ctx, c->in[0], c->n_in[0]); }

// One AdamW step from p, m, v, g (inputs 0-3) to p, m, v (outputs 0-2). A
// large lr, so the step is a sizable part of p and a wrong term shows.
static const AdamWStep ADAMW_STEP = {.lr = 0.05f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                     .weight_decay = 0.1f, .bc1 = 0.271f, .bc2_sqrt = 0.3777f,
                                     .grad_scale = 0.5f};
// Kind "mask": weight decay left off every third element (decay[i] = 0).
enum { ADAMW_ALL, ADAMW_MASK };
static int adamw_decayed(const Case *c, size_t i) { return c->kind != ADAMW_MASK || i % 3 != 0; }
static void adamw_fwd(Backend *be, Case *c) {
    for (int j = 0; j < 3; j++) memcpy(c->out[j], c->in[j], c->n_out[j] * sizeof(float));
    unsigned char *decay = NULL;
    if (c->kind == ADAMW_MASK) {
        decay = malloc(c->n_out[0]);
        for (size_t i = 0; i < c->n_out[0]; i++) decay[i] = (unsigned char)adamw_decayed(c, i);
    }
    adamw_update(be->ctx, c->out[0], c->out[1], c->out[2], c->in[3], decay, c->n_out[0], ADAMW_STEP);
    free(decay);
}

// ema (input 0) <- EMA_D·ema + (1 − EMA_D)·p (input 1)
#define EMA_D 0.9f
static void ema_fwd(Backend *be, Case *c) {
    memcpy(c->out[0], c->in[0], c->n_out[0] * sizeof(float));
    ema_update(be->ctx, c->out[0], c->in[1], EMA_D, c->n_out[0]);
}

static void attention_decode_fwd(Backend *be, Case *c) {
    float *scores = scratch_nan((size_t)c->p[0]);
    attention_decode(be->ctx, c->out[0], scores, c->in[0], c->in[1], c->in[2], c->p[0], c->p[1], c->p[2],
                     c->p[3]);
    free(scores);
}

// Routing: the sources are in[0] [n_src, n_tok, d]. As the ops take them:
// that buffer at stride n_tok·d; or, with a tail (block routing's partial
// sum), rows 0..n_src-2 in a copy at a padded stride whose padding and row
// n_src-1 are NaN (a kernel that reads them instead of the tail gives NaN),
// and row n_src-1 apart in the tail, after them in the same copy.
enum { TAIL_PAD = 8 };
static float *tail_layout(const float *src, int N, size_t row) {
    const size_t st = row + TAIL_PAD;
    float *b = scratch_nan(st * N + row);
    for (int n = 0; n < N - 1; n++) memcpy(b + n * st, src + n * row, row * sizeof(float));
    memcpy(b + N * st, src + (N - 1) * row, row * sizeof(float));
    return b;
}
static RouteSources route_sources(const Case *c, int tail, float **own) { // *own: the copy, to free
    const int N = c->p[0];
    const size_t row = (size_t)c->p[1] * c->p[2], st = row + TAIL_PAD;
    if (!tail) return *own = NULL, (RouteSources){c->in[0], row, N, NULL};
    *own = tail_layout(c->in[0], N, row);
    return (RouteSources){*own, st, N, *own + N * st};
}
// Their gradients, laid out the same way: with a tail, a copy of din[0]
// (whatever the harness put there: 0 to accumulate onto, NaN to be written);
// route_grads_done copies it back, and makes din[0] NaN if the op wrote the
// padding or row n_src-1.
static RouteGrads route_grads(Case *c, int tail, float **own) {
    const int N = c->p[0];
    const size_t row = (size_t)c->p[1] * c->p[2], st = row + TAIL_PAD;
    if (!tail) return *own = NULL, (RouteGrads){c->din[0], row, NULL};
    *own = tail_layout(c->din[0], N, row);
    return (RouteGrads){*own, st, *own + N * st};
}
static void route_grads_done(Case *c, float *own) {
    if (!own) return;
    const int N = c->p[0];
    const size_t row = (size_t)c->p[1] * c->p[2], st = row + TAIL_PAD;
    int poisoned = 1;
    for (size_t e = 0; e < st * N; e++)
        if (e % st >= row || e >= (N - 1) * st) poisoned &= isnan(own[e]);
    for (int n = 0; n < N - 1; n++) memcpy(c->din[0] + n * row, own + n * st, row * sizeof(float));
    memcpy(c->din[0] + (N - 1) * row, own + N * st, row * sizeof(float));
    if (!poisoned) fill_value(c->din[0], c->n_in[0], NAN);
    free(own);
}

static void route_fwd_either(Backend *be, Case *c, int tail) {
    int N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3];
    float *own;
    const RouteSources S = route_sources(c, tail, &own);
    float *scratch = scratch_nan(route_scratch_floats(be->ctx, N, d, H));
    route_forward(be->ctx, c->out[0], c->out[1], scratch, S, c->in[1], c->in[2], T, d, H, NORM_EPS);
    free(scratch), free(own);
}
static void route_bwd_either(Backend *be, Case *c, int set, int tail) {
    int N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3];
    float *own, *gown;
    const RouteSources S = route_sources(c, tail, &own);
    const RouteGrads dS = route_grads(c, tail, &gown);
    float *scratch = scratch_nan(route_scratch_floats(be->ctx, N, d, H));
    (set ? route_backward_set : route_backward)(be->ctx, dS, c->din[1], c->din[2], scratch, c->dout[0], c->out[1],
                                                S, c->in[1], c->in[2], T, d, H, NORM_EPS);
    route_grads_done(c, gown);
    free(scratch), free(own);
}
// Full routing source by source (route_keys, route_mix, route_dx_keep,
// route_gather) as one read: the same op as route_forward/backward. The
// keys go to three readers (the read uses the first; the others' must be the
// same logits: route_keys takes readers in pairs, the third alone). Source
// n's gradient is gathered from R = 3 + n % 5 readers that split dx as
// 1/2 + 1/4 + ... + 2^-(R-1) + 2^-(R-1): it is linear in dx, so they sum to
// the one read's. So the gather's groups of four readers run whole and with
// 0-3 left over (R 3-7), its first group's write and later groups' adds;
// route_dx_keep's copy (every reader but 1) and its in-place form (reader 1).
static void route_src_keys(Backend *be, Case *c, float *lg, float *lg2, float *rho, float *scratch) {
    int N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3];
    float *lg3 = scratch_nan((size_t)N * T * H);
    for (int n = 0; n < N; n++) {
        const size_t slot = (size_t)n * T * H;
        const RouteReader rd[3] = {{.q = c->in[1], .g = c->in[2], .lg = lg + slot},
                                   {.q = c->in[1], .g = c->in[2], .lg = lg2 + slot},
                                   {.q = c->in[1], .g = c->in[2], .lg = lg3 + slot}};
        route_keys(be->ctx, rho + (size_t)n * T, rd, 3, scratch, c->in[0] + (size_t)n * T * d, T, d, H,
                   NORM_EPS);
    }
    if (memcmp(lg, lg3, sizeof(float) * N * T * H)) lg[0] = NAN; // the pair's and the lone reader's differ
    free(lg3);
}
static void route_src_fwd(Backend *be, Case *c) {
    int N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3];
    float *lg = scratch_nan((size_t)N * T * H), *lg2 = scratch_nan((size_t)N * T * H);
    float *rho = scratch_nan((size_t)N * T), *scratch = scratch_nan(route_scratch_floats(be->ctx, N > 3 ? N : 3, d, H));
    route_src_keys(be, c, lg, lg2, rho, scratch);
    if (memcmp(lg, lg2, sizeof(float) * N * T * H)) lg[0] = NAN; // readers with one query disagree
    route_mix(be->ctx, c->out[0], c->out[1], lg, (RouteSources){c->in[0], (size_t)T * d, N, NULL}, T, d, H);
    free(lg), free(lg2), free(rho), free(scratch);
}
enum { SRC_READERS = 7 }; // the most readers of a source in route_src_bwd
static void route_src_bwd(Backend *be, Case *c) {
    int N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3];
    float *lg = scratch_nan((size_t)N * T * H), *lg2 = scratch_nan((size_t)N * T * H);
    float *rho = scratch_nan((size_t)N * T);
    float *scratch = scratch_nan(route_scratch_floats(be->ctx, N > SRC_READERS ? N : SRC_READERS, d, H));
    float *dx = scratch_nan((size_t)SRC_READERS * T * d), *keep = scratch_nan((size_t)SRC_READERS * T * d);
    float *cc = scratch_nan((size_t)SRC_READERS * T * H);
    route_src_keys(be, c, lg, lg2, rho, scratch);
    for (int n = 0; n < N; n++) {
        const int R = 3 + n % 5;
        const size_t slot = (size_t)n * T * H;
        RouteReader rd[SRC_READERS];
        for (int r = 0; r < R; r++) {
            const float share = ldexpf(1.0f, -(r + 1 < R ? r + 1 : R - 1)); // 1/2, 1/4, ..., the last two equal
            float *dxr = dx + (size_t)r * T * d, *kept = (r == 1 ? dx : keep) + (size_t)r * T * d;
            for (size_t i = 0; i < (size_t)T * d; i++) dxr[i] = share * c->dout[0][i];
            // Reader 1's dx is already where it is kept (keep = dx); the others keep a copy.
            route_dx_keep(be->ctx, kept, cc + (size_t)r * T * H, dxr, c->out[0], T, d, H);
            rd[r] = (RouteReader){.q = c->in[1], .g = c->in[2], .lg = lg + slot, .w = c->out[1] + slot, .dx = kept,
                                  .c = cc + (size_t)r * T * H, .dq = c->din[1], .dg = c->din[2]};
        }
        route_gather(be->ctx, c->din[0] + (size_t)n * T * d, rd, R, scratch, c->in[0] + (size_t)n * T * d,
                     rho + (size_t)n * T, T, d, H);
    }
    free(lg), free(lg2), free(rho), free(scratch), free(dx), free(keep), free(cc);
}
static void route_fwd(Backend *be, Case *c) { route_fwd_either(be, c, 0); }
static void route_bwd(Backend *be, Case *c) { route_bwd_either(be, c, 0, 0); }
static void route_set_bwd(Backend *be, Case *c) { route_bwd_either(be, c, 1, 0); }
static void route_tail_fwd(Backend *be, Case *c) { route_fwd_either(be, c, 1); }
static void route_tail_bwd(Backend *be, Case *c) { route_bwd_either(be, c, 0, 1); }
static void route_set_tail_bwd(Backend *be, Case *c) { route_bwd_either(be, c, 1, 1); }

// Statistics of saved weights in[0] [n_src, n_tok, H] into entropy, first,
// last (outputs 0-2, double), which start at STATS_BASE: they accumulate.
#define STATS_BASE 0.25
static void route_stats_fwd(Backend *be, Case *c) {
    for (int j = 0; j < 3; j++)
        for (size_t h = 0; h < c->n_out[j]; h++) c->outd[j][h] = STATS_BASE;
    route_weight_stats(be->ctx, c->outd[0], c->outd[1], c->outd[2], c->in[0], c->p[0], c->p[1], c->p[2]);
}
// The probes: sources in[0] (p[4]: with a tail), q in[1], g in[2]; p[3] is
// the slices or heads; the weight error compares in[3] [n_src, n_tok, H].
static void probe_width_fwd(Backend *be, Case *c) {
    float *own;
    route_probe_width(be->ctx, c->outd[0], route_sources(c, c->p[4], &own), c->in[1], c->in[2], c->p[1], c->p[2],
                      c->p[3], NORM_EPS);
    free(own);
}
static void probe_heads_fwd(Backend *be, Case *c) {
    float *own;
    route_probe_heads(be->ctx, c->outd[0], route_sources(c, c->p[4], &own), c->in[1], c->in[2], c->p[1], c->p[2],
                      c->p[3], NORM_EPS);
    free(own);
}
static void probe_weight_error_fwd(Backend *be, Case *c) {
    float *own;
    c->outd[0][0] = route_probe_weight_error(be->ctx, c->in[3], route_sources(c, c->p[4], &own), c->in[1], c->in[2],
                                             c->p[1], c->p[2], c->p[3], NORM_EPS);
    free(own);
}

// Rows of n floats from src into a new buffer at `stride` (NaN padding): the
// models' views are rounded up to 16 floats. n_tok, d, pad: n = n_tok·d,
// stride n + pad.
static float *strided(const float *src, int rows, size_t n, size_t stride) {
    float *b = scratch_nan(rows * stride);
    for (int r = 0; r < rows; r++) memcpy(b + r * stride, src + r * n, n * sizeof(float));
    return b;
}
static void unstrided(float *dst, const float *b, int rows, size_t n, size_t stride) {
    for (int r = 0; r < rows; r++) memcpy(dst + r * n, b + r * stride, n * sizeof(float));
}
static size_t hc_n(const Case *c) { return (size_t)c->p[0] * c->p[1]; }

// hc_read: streams in[0] [4, n] at a padded stride, p in[1] [4] -> x [n]
static void hc_read_fwd(Backend *be, Case *c) {
    const size_t n = hc_n(c), st = n + c->p[2];
    float *H = strided(c->in[0], 4, n, st);
    hc_read(be->ctx, c->out[0], (HcStreams){H, st}, c->in[1], n);
    free(H);
}
// The first read: the four streams are the embedding in[0] [n] (stride 0).
// Output 0 is x, output 1 the streams themselves (the embedding four times,
// a copy: what the later write reads), so the loss's gradient into them is
// the G of hc_first_read_backward, which gives demb.
static void hc_first_read_fwd(Backend *be, Case *c) {
    const size_t n = hc_n(c);
    hc_read(be->ctx, c->out[0], (HcStreams){c->in[0], 0}, c->in[1], n);
    for (int r = 0; r < 4; r++) memcpy(c->out[1] + r * n, c->in[0], n * sizeof(float));
}
static void hc_first_read_bwd(Backend *be, Case *c) {
    const size_t n = hc_n(c), st = n + c->p[2];
    float *G = strided(c->dout[1], 4, n, st);
    hc_first_read_backward(be->ctx, c->din[0], G, st, c->dout[0], c->in[1], n);
    free(G);
}

// hc_write: streams H in[0] [4, n], o in[1] [n], coefficients in[2] [24]
// (A [16], β [4], p [4]) -> new streams [4, n], x = Σ p_j new_j [n]. Its
// backward is hc_backward (read s fused with write s-1: here p is read s's
// weights): G = the gradient into the new streams (absent: fresh), dx the
// one into x; it gives dH (G in place) and do; the coefficients' gradients
// are formed from S as residual/hc.c does: dA[j, i] = S[j][i] + p_j S[4][i],
// dβ_j = S[j][4] + p_j S[4][4], dp_j = Σ_i A[j, i] S[4][i] + β_j S[4][4].
static void hc_write_fwd(Backend *be, Case *c) {
    const size_t n = hc_n(c), st = n + c->p[2];
    const float *k = c->in[2];
    float *H = strided(c->in[0], 4, n, st), *out = scratch_nan(4 * st);
    hc_write(be->ctx, out, st, c->out[1], (HcStreams){H, st}, c->in[1], k, k + 16, k + 20, n);
    unstrided(c->out[0], out, 4, n, st);
    free(H), free(out);
}
static void hc_write_bwd(Backend *be, Case *c) {
    const size_t n = hc_n(c), st = n + c->p[2];
    const int fresh = !c->dout[0];
    const float *k = c->in[2], *A = k, *beta = k + 16, *p = k + 20;
    float *H = strided(c->in[0], 4, n, st), *G = fresh ? scratch_nan(4 * st) : strided(c->dout[0], 4, n, st);
    double S[25];
    hc_backward(be->ctx, S, G, st, c->din[1], c->dout[1], (HcStreams){H, st}, c->in[1], A, beta, p, fresh, c->p[0],
                c->p[1]);
    unstrided(c->din[0], G, 4, n, st);
    float *dk = c->din[2];
    for (int j = 0; j < 4; j++) {
        double dp = beta[j] * S[24];
        for (int i = 0; i < 4; i++) {
            dk[4 * j + i] += (float)(S[5 * j + i] + p[j] * S[20 + i]);
            dp += A[4 * j + i] * S[20 + i];
        }
        dk[16 + j] += (float)(S[5 * j + 4] + p[j] * S[24]);
        dk[20 + j] += (float)dp;
    }
    free(H), free(G);
}

// hc_backward on its own, against the formulas: b rows in[0] [5, n] (H_0..H_3,
// o), a rows in[1] [6, n] (G_0..G_3, dx, and the dout it adds onto),
// coefficients in[2] [24] -> S [25] (double), G after [4, n], dout after [n].
// p[3]: fresh (G is then NaN: it must not be read).
static void hc_backward_fwd(Backend *be, Case *c) {
    const size_t n = hc_n(c), st = n + c->p[2];
    const float *k = c->in[2];
    float *H = strided(c->in[0], 4, n, st), *G = c->p[3] ? scratch_nan(4 * st) : strided(c->in[1], 4, n, st);
    memcpy(c->out[2], c->in[1] + 5 * n, n * sizeof(float));
    hc_backward(be->ctx, c->outd[0], G, st, c->out[2], c->in[1] + 4 * n, (HcStreams){H, st}, c->in[0] + 4 * n, k,
                k + 16, k + 20, c->p[3], c->p[0], c->p[1]);
    unstrided(c->out[1], G, 4, n, st);
    free(H), free(G);
}

// DenseFormer: X in[0] [count, n] (at a padded stride), alpha in[1] [count]
// -> y [n]; with a second output (a copy of y: a second reader of y), the
// backward gets dnext = its gradient. dX is laid out at another stride.
static void dwa_fwd(Backend *be, Case *c) {
    const int count = c->p[0];
    const size_t n = (size_t)c->p[1] * c->p[2], st = n + c->p[3];
    float *X = strided(c->in[0], count, n, st);
    dwa_average(be->ctx, c->out[0], X, st, c->in[1], count, c->p[1], c->p[2]);
    if (c->out[1]) memcpy(c->out[1], c->out[0], n * sizeof(float));
    free(X);
}
static void dwa_bwd(Backend *be, Case *c) {
    const int count = c->p[0];
    const size_t n = (size_t)c->p[1] * c->p[2], st = n + c->p[3], dst = n + 2 * c->p[3];
    float *X = strided(c->in[0], count, n, st), *dX = strided(c->din[0], count, n, dst);
    float *scratch = scratch_nan(dwa_scratch_floats(c->p[2], count));
    dwa_backward(be->ctx, dX, dst, c->din[1], scratch, c->dout[1], c->dout[0], X, st, c->in[1], count, c->p[1],
                 c->p[2]);
    unstrided(c->din[0], dX, count, n, dst);
    free(X), free(dX), free(scratch);
}

// delta_mh's gated read x = r + a·y (vec_axpy, as delta_mh.c forms it): r
// in[0], y in[1], a in[2] [1]; its backward is gated_read_backward.
static void gated_read_fwd(Backend *be, Case *c) {
    vec_axpy(be->ctx, c->out[0], c->in[0], c->in[2][0], c->in[1], c->n_out[0]);
}
static void gated_read_bwd(Backend *be, Case *c) {
    gated_read_backward(be->ctx, c->din[0], c->din[1], c->din[2], c->dout[0], c->in[1], c->in[2][0], c->p[0],
                        c->p[1]);
}

// The backends present. Each opens its op context before its cases and
// closes it after; the CPU backend has no context yet. A second backend is
// one more line (its adapters then move data to and from its memory).
static int cpu_open(Backend *be) { return (be->ctx = ops_open()) ? 0 : -1; }
static void cpu_close(Backend *be) { ops_close(be->ctx); }
static const struct {
    const char *name;
    int (*open)(Backend *be);
    void (*close)(Backend *be);
} BACKENDS[] = {
    {"cpu", cpu_open, cpu_close},
};

// ---- double-precision references: in -> out, plain loops ---------------------------

static void ref_matmul(const Case *c, double *const *in, double *const *out) {
    int M = c->p[0], K = c->p[1], N = c->p[2];
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += in[0][(size_t)m * K + k] * in[1][(size_t)n * K + k];
            out[0][(size_t)m * N + n] = s;
        }
}

static void ref_embedding(const Case *c, double *const *in, double *const *out) {
    int d = c->p[1];
    for (int i = 0; i < c->p[2]; i++)
        for (int j = 0; j < d; j++) out[0][(size_t)i * d + j] = in[0][(size_t)c->ids[i] * d + j];
}

static void ref_rmsnorm(const Case *c, double *const *in, double *const *out) {
    int rows = c->p[0], d = c->p[1];
    for (int r = 0; r < rows; r++) {
        const double *x = in[0] + (size_t)r * d;
        double ss = 0;
        for (int j = 0; j < d; j++) ss += x[j] * x[j];
        double rs = 1 / sqrt(ss / d + (double)NORM_EPS);
        out[1][r] = rs;
        for (int j = 0; j < d; j++) out[0][(size_t)r * d + j] = x[j] * rs * in[1][j];
    }
}

static double rope_angle(int pos, int j, int hd) { return pos * pow((double)ROPE_THETA, -2.0 * j / hd); }

static void ref_rope_table(const Case *c, double *const *in, double *const *out) {
    (void)in;
    int max_pos = c->p[0], hd = c->p[1], half = hd / 2;
    for (int p = 0; p < max_pos; p++)
        for (int j = 0; j < half; j++) {
            const double a = p * rope_freq(j, hd, c->p[2]);
            out[0][(size_t)p * half + j] = cos(a);
            out[1][(size_t)p * half + j] = sin(a);
        }
}

// x [B, T, nh, hd], "rotate half": coordinate j pairs with j + hd/2.
static void ref_rope(const Case *c, double *const *in, double *const *out) {
    int B = c->p[0], T = c->p[1], nh = c->p[2], hd = c->p[3], pos0 = c->p[4], half = hd / 2;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < nh; h++) {
                size_t o = (((size_t)b * T + t) * nh + h) * hd;
                for (int j = 0; j < half; j++) {
                    double a = rope_angle(pos0 + t, j, hd), x1 = in[0][o + j], x2 = in[0][o + j + half];
                    out[0][o + j] = x1 * cos(a) - x2 * sin(a);
                    out[0][o + j + half] = x2 * cos(a) + x1 * sin(a);
                }
            }
}

// q [B, T, nh, hd], k, v [B, T, nkv, hd] -> y [B, T, nh, hd], lse [B, nh, T]
// (the log-sum-exp of row i's scores j <= i); query head h reads kv head
// h / (nh / nkv). The softmax row is formed over all T columns, the masked
// ones exp(-inf) = 0, so the mask is this one comparison.
static void ref_attention(const Case *c, double *const *in, double *const *out) {
    int B = c->p[0], T = c->p[1], nh = c->p[2], nkv = c->p[3], hd = c->p[4];
    double scale = 1 / sqrt((double)hd), *p = malloc(sizeof(double) * (size_t)T);
#define QI(b, t, h) ((((size_t)(b) * T + (t)) * nh + (h)) * hd)
#define KI(b, t, g) ((((size_t)(b) * T + (t)) * nkv + (g)) * hd)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++) {
            int g = h / (nh / nkv);
            for (int i = 0; i < T; i++) {
                double m = -INFINITY, z = 0;
                for (int j = 0; j < T; j++) {
                    double a = 0;
                    for (int e = 0; e < hd && j <= i; e++) a += in[0][QI(b, i, h) + e] * in[1][KI(b, j, g) + e];
                    p[j] = j <= i ? a * scale : -INFINITY;
                    m = fmax(m, p[j]);
                }
                for (int j = 0; j < T; j++) z += p[j] = exp(p[j] - m);
                out[1][((size_t)b * nh + h) * T + i] = m + log(z);
                for (int e = 0; e < hd; e++) {
                    double a = 0;
                    for (int j = 0; j <= i; j++) a += p[j] / z * in[2][KI(b, j, g) + e];
                    out[0][QI(b, i, h) + e] = a;
                }
            }
        }
#undef QI
#undef KI
    free(p);
}

static void ref_swiglu(const Case *c, double *const *in, double *const *out) {
    const int rows = c->p[0], f = c->p[1];
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < f; i++) {
            const double g = in[0][(size_t)r * 2 * f + i], u = in[0][(size_t)r * 2 * f + f + i];
            out[0][(size_t)r * f + i] = g / (1 + exp(-g)) * u;
        }
}

// logits [n, V], targets -> losses [n] (natural log), their sum [1]
static void ref_xent(const Case *c, double *const *in, double *const *out) {
    int n = c->p[0], V = c->p[1];
    out[1][0] = 0;
    for (int i = 0; i < n; i++) {
        const double *r = in[0] + (size_t)i * V;
        double m = -INFINITY, z = 0;
        for (int j = 0; j < V; j++) m = fmax(m, r[j]);
        for (int j = 0; j < V; j++) z += exp(r[j] - m);
        out[0][i] = log(z) + m - r[c->ids[i]];
        out[1][0] += out[0][i];
    }
}

// logits [n, V], targets -> log softmax at the target [n]
static void ref_token_logprobs(const Case *c, double *const *in, double *const *out) {
    double *loss[2] = {out[0], &(double){0}};
    ref_xent(c, in, loss);
    for (int i = 0; i < c->p[0]; i++) out[0][i] = -out[0][i];
}

// The same with lse [n] and XENT_Z·lse² [n]
static void ref_xent_z(const Case *c, double *const *in, double *const *out) {
    int n = c->p[0], V = c->p[1];
    for (int i = 0; i < n; i++) {
        const double *r = in[0] + (size_t)i * V;
        double m = -INFINITY, z = 0;
        for (int j = 0; j < V; j++) m = fmax(m, r[j]);
        for (int j = 0; j < V; j++) z += exp(r[j] - m);
        out[1][i] = log(z) + m;
        out[0][i] = out[1][i] - r[c->ids[i]];
        out[2][i] = (double)XENT_Z * out[1][i] * out[1][i];
    }
}

static void ref_vec_add(const Case *c, double *const *in, double *const *out) {
    for (size_t i = 0; i < c->n_out[0]; i++) out[0][i] = in[0][i] + in[1][i];
}
static void ref_vec_scale_acc(const Case *c, double *const *in, double *const *out) {
    for (size_t i = 0; i < c->n_out[0]; i++) out[0][i] = in[0][i] + (double)VEC_S * in[1][i];
}

// Route(S, q, g, H) of SPEC §2.2, per token t, head h owning the slice
// [h·hw, (h+1)·hw): ρ_n = rsqrt(mean S_n² + eps), ℓ_nh = Σ_k∈h q_k ρ_n g_k S_nk,
// w_nh = softmax_n ℓ_nh, x_k = Σ_n w_n,h(k) S_nk. S [N, T, d] -> x [T, d], w [N, T, H].
static void ref_route(const Case *c, double *const *in, double *const *out) {
    int N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3], hw = d / H;
    const double *q = in[1], *g = in[2];
    double *lg = malloc(sizeof(double) * (size_t)N * H);
    for (int t = 0; t < T; t++) {
        for (int n = 0; n < N; n++) {
            const double *s = in[0] + ((size_t)n * T + t) * d;
            double ms = 0;
            for (int k = 0; k < d; k++) ms += s[k] * s[k];
            double rho = 1 / sqrt(ms / d + (double)NORM_EPS);
            for (int h = 0; h < H; h++) {
                double l = 0;
                for (int k = h * hw; k < (h + 1) * hw; k++) l += q[k] * s[k] * rho * g[k];
                lg[(size_t)n * H + h] = l;
            }
        }
        for (int h = 0; h < H; h++) {
            double mx = -INFINITY, z = 0;
            for (int n = 0; n < N; n++) mx = fmax(mx, lg[(size_t)n * H + h]);
            for (int n = 0; n < N; n++) z += exp(lg[(size_t)n * H + h] - mx);
            for (int n = 0; n < N; n++) out[1][((size_t)n * T + t) * H + h] = exp(lg[(size_t)n * H + h] - mx) / z;
        }
        for (int k = 0; k < d; k++) {
            double x = 0;
            for (int n = 0; n < N; n++)
                x += out[1][((size_t)n * T + t) * H + k / hw] * in[0][((size_t)n * T + t) * d + k];
            out[0][(size_t)t * d + k] = x;
        }
    }
    free(lg);
}

// A logit's fp32 error is ~FLT_EPSILON · Σ_k |q_k K_k| (the size of its
// terms), and a softmax weight's error w(1−w) times that: for saturated
// softmaxes (Σ|q K| ~ 1e3) this dominates every output that depends on w.
static double route_tol_data(const Case *c) {
    int N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3], hw = d / H;
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++) {
            const float *s = c->in[0] + ((size_t)n * T + t) * d;
            double ms = 0;
            for (int k = 0; k < d; k++) ms += (double)s[k] * s[k];
            double rho = 1 / sqrt(ms / d + (double)NORM_EPS);
            for (int h = 0; h < H; h++) {
                double a = 0;
                for (int k = h * hw; k < (h + 1) * hw; k++) a += fabs((double)c->in[1][k] * s[k] * rho * c->in[2][k]);
                worst = fmax(worst, a);
            }
        }
    return 4 * FLT_EPSILON * worst;
}

static void ref_copy(const Case *c, double *const *in, double *const *out) {
    for (size_t i = 0; i < c->n_out[0]; i++) out[0][i] = in[0][i];
}
static void ref_zero(const Case *c, double *const *in, double *const *out) {
    (void)in;
    for (size_t i = 0; i < c->n_out[0]; i++) out[0][i] = 0;
}
static void ref_vec_acc2(const Case *c, double *const *in, double *const *out) {
    for (size_t i = 0; i < c->n_out[0]; i++) out[0][i] = in[0][i] + in[1][i] + in[2][i];
}

// row [d] -> out [rows, d]
static void ref_rows_broadcast(const Case *c, double *const *in, double *const *out) {
    int rows = c->p[0], d = c->p[1];
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < d; k++) out[0][(size_t)r * d + k] = in[0][k];
}
// start [d], in [rows, d] -> start + Σ_r in[r, :]
static void ref_rows_sum(const Case *c, double *const *in, double *const *out) {
    int rows = c->p[0], d = c->p[1];
    for (int k = 0; k < d; k++) {
        double s = in[0][k];
        for (int r = 0; r < rows; r++) s += in[1][(size_t)r * d + k];
        out[0][k] = s;
    }
}

static void ref_sum_squares(const Case *c, double *const *in, double *const *out) {
    for (size_t b = 0; b < c->n_out[0]; b++) out[0][b] = 0;
    for (size_t i = 0; i < c->n_in[0]; i++) out[0][i / (size_t)c->p[1]] += in[0][i] * in[0][i];
}

static void ref_stream_sum(const Case *c, double *const *in, double *const *out) {
    out[0][0] = 0;
    for (size_t i = 0; i < c->n_in[0]; i++) out[0][0] += in[0][i];
}

// torch.optim.AdamW, as ops.h writes it: p, m, v, g -> p, m, v
static void ref_adamw(const Case *c, double *const *in, double *const *out) {
    const AdamWStep s = ADAMW_STEP;
    const double b1 = s.beta1, b2 = s.beta2, lr = s.lr;
    for (size_t i = 0; i < c->n_in[0]; i++) {
        double g = in[3][i] * (double)s.grad_scale;
        double m = b1 * in[1][i] + (1 - b1) * g, v = b2 * in[2][i] + (1 - b2) * g * g;
        const double wd = adamw_decayed(c, i) ? s.weight_decay : 0;
        out[0][i] = in[0][i] * (1 - lr * wd) - lr / s.bc1 * m / (sqrt(v) / s.bc2_sqrt + s.eps);
        out[1][i] = m, out[2][i] = v;
    }
}

static void ref_ema(const Case *c, double *const *in, double *const *out) {
    const double d = EMA_D;
    for (size_t i = 0; i < c->n_out[0]; i++) out[0][i] = d * in[0][i] + (1 - d) * in[1][i];
}

// One query row q [nh, hd] against positions 0..n_pos-1 of k, v [n_pos, nkv,
// hd]: y [nh, hd]; query head h reads kv head h / (nh / nkv). Scale 1/sqrt(hd).
static void ref_attention_decode(const Case *c, double *const *in, double *const *out) {
    int n_pos = c->p[0], nh = c->p[1], nkv = c->p[2], hd = c->p[3];
    double *p = malloc(sizeof(double) * (size_t)n_pos);
    for (int h = 0; h < nh; h++) {
        int g = h / (nh / nkv);
        double m = -INFINITY, z = 0;
        for (int t = 0; t < n_pos; t++) {
            double a = 0;
            for (int e = 0; e < hd; e++) a += in[0][(size_t)h * hd + e] * in[1][((size_t)t * nkv + g) * hd + e];
            p[t] = a / sqrt((double)hd);
            m = fmax(m, p[t]);
        }
        for (int t = 0; t < n_pos; t++) z += p[t] = exp(p[t] - m);
        for (int e = 0; e < hd; e++) {
            double y = 0;
            for (int t = 0; t < n_pos; t++) y += p[t] / z * in[2][((size_t)t * nkv + g) * hd + e];
            out[0][(size_t)h * hd + e] = y;
        }
    }
    free(p);
}

// w [n_src, n_tok, H] -> per head, from STATS_BASE: Σ_t entropy (nats), Σ_t
// w[0, t, h], Σ_t w[n_src-1, t, h]
static void ref_route_stats(const Case *c, double *const *in, double *const *out) {
    int N = c->p[0], T = c->p[1], H = c->p[2];
    for (int h = 0; h < H; h++) {
        double e = STATS_BASE, f = STATS_BASE, l = STATS_BASE;
        for (int t = 0; t < T; t++) {
            for (int n = 0; n < N; n++) {
                double w = in[0][((size_t)n * T + t) * H + h];
                if (w > 0) e -= w * log(w);
            }
            f += in[0][(size_t)t * H + h];
            l += in[0][((size_t)(N - 1) * T + t) * H + h];
        }
        out[0][h] = e, out[1][h] = f, out[2][h] = l;
    }
}

// Token t's routing distributions with the d coordinates cut into `slices`
// contiguous slices (SPEC §2.2, §4), as log-probabilities:
// lp[s·N + n] = log softmax_n ρ_n Σ_{k ∈ s} q_k g_k S_{n,k}, ρ_n over all d.
static void ref_slice_logp(const Case *c, double *const *in, int t, int slices, double *lp) {
    int N = c->p[0], T = c->p[1], d = c->p[2], w = d / slices;
    for (int n = 0; n < N; n++) {
        const double *x = in[0] + ((size_t)n * T + t) * d;
        double ms = 0;
        for (int k = 0; k < d; k++) ms += x[k] * x[k];
        double rho = 1 / sqrt(ms / d + (double)NORM_EPS);
        for (int s = 0; s < slices; s++) {
            double l = 0;
            for (int k = s * w; k < (s + 1) * w; k++) l += in[1][k] * in[2][k] * x[k];
            lp[(size_t)s * N + n] = rho * l;
        }
    }
    for (int s = 0; s < slices; s++) {
        double *l = lp + (size_t)s * N, m = -INFINITY, z = 0;
        for (int n = 0; n < N; n++) m = fmax(m, l[n]);
        for (int n = 0; n < N; n++) z += exp(l[n] - m);
        for (int n = 0; n < N; n++) l[n] = (l[n] - m) - log(z);
    }
}
// KL(p ‖ r) from log-probabilities [n]
static double ref_kl(const double *lp, const double *lr, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += exp(lp[i]) * (lp[i] - lr[i]);
    return s;
}
// out[t] = (1/S) Σ_s KL(a_s ‖ α), α the full-width distribution
static void ref_probe_width(const Case *c, double *const *in, double *const *out) {
    int N = c->p[0], S = c->p[3];
    double *lp = malloc(sizeof(double) * (size_t)(S + 1) * N), *full = lp + (size_t)S * N;
    for (int t = 0; t < c->p[1]; t++) {
        ref_slice_logp(c, in, t, S, lp);
        ref_slice_logp(c, in, t, 1, full);
        double kl = 0;
        for (int s = 0; s < S; s++) kl += ref_kl(lp + (size_t)s * N, full, N);
        out[0][t] = kl / S;
    }
    free(lp);
}
// out[t·H + h] = KL(w_h ‖ w̄), w̄ = (1/H) Σ_h w_h
static void ref_probe_heads(const Case *c, double *const *in, double *const *out) {
    int N = c->p[0], H = c->p[3];
    double *lp = malloc(sizeof(double) * (size_t)(H + 1) * N), *mean = lp + (size_t)H * N;
    for (int t = 0; t < c->p[1]; t++) {
        ref_slice_logp(c, in, t, H, lp);
        for (int n = 0; n < N; n++) {
            double m = 0;
            for (int h = 0; h < H; h++) m += exp(lp[(size_t)h * N + n]);
            mean[n] = log(m / H);
        }
        for (int h = 0; h < H; h++) out[0][(size_t)t * H + h] = ref_kl(lp + (size_t)h * N, mean, N);
    }
    free(lp);
}
// max |w − a_h| over w in[3] [n_src, n_tok, H]
static void ref_probe_weight_error(const Case *c, double *const *in, double *const *out) {
    int N = c->p[0], T = c->p[1], H = c->p[3];
    double *lp = malloc(sizeof(double) * (size_t)H * N), worst = 0;
    for (int t = 0; t < T; t++) {
        ref_slice_logp(c, in, t, H, lp);
        for (int h = 0; h < H; h++)
            for (int n = 0; n < N; n++)
                worst = fmax(worst, fabs(exp(lp[(size_t)h * N + n]) - in[3][((size_t)n * T + t) * H + h]));
    }
    out[0][0] = worst;
    free(lp);
}

// Hyper-connections (SPEC §2.5, residual/hc.c), n = n_tok·d floats a stream.
// x = Σ_r p_r H_r: H in[0] [4, n], p in[1] [4]
static void ref_hc_read(const Case *c, double *const *in, double *const *out) {
    size_t n = hc_n(c);
    for (size_t k = 0; k < n; k++) {
        double x = 0;
        for (int r = 0; r < 4; r++) x += in[1][r] * in[0][r * n + k];
        out[0][k] = x;
    }
}
// The same from the embedding in[0] [n] four times, and the four streams.
static void ref_hc_first_read(const Case *c, double *const *in, double *const *out) {
    size_t n = hc_n(c);
    for (size_t k = 0; k < n; k++) {
        out[0][k] = 0;
        for (int r = 0; r < 4; r++) out[0][k] += in[1][r] * in[0][k], out[1][r * n + k] = in[0][k];
    }
}
// new_j = Σ_i A[j, i] H_i + β_j o, x = Σ_j p_j new_j (coefficients in[2]: A, β, p)
static void ref_hc_write(const Case *c, double *const *in, double *const *out) {
    size_t n = hc_n(c);
    const double *A = in[2], *beta = in[2] + 16, *p = in[2] + 20;
    for (size_t k = 0; k < n; k++) {
        out[1][k] = 0;
        for (int j = 0; j < 4; j++) {
            double y = beta[j] * in[1][k];
            for (int i = 0; i < 4; i++) y += A[4 * j + i] * in[0][i * n + k];
            out[0][j * n + k] = y;
            out[1][k] += p[j] * y;
        }
    }
}
// hc_backward as ops.h writes it: with a = G_0..G_3 (0 when fresh), dx
// (in[1] rows 0-4) and b = H_0..H_3, o (in[0]): S[5l + i] = ⟨a_l, b_i⟩;
// g_j = G_j + p_j dx; G_i ← Σ_j A[j, i] g_j; dout (in[1] row 5) += Σ_j β_j g_j.
static void ref_hc_backward(const Case *c, double *const *in, double *const *out) {
    size_t n = hc_n(c);
    const int fresh = c->p[3];
    const double *A = in[2], *beta = in[2] + 16, *p = in[2] + 20, *dx = in[1] + 4 * n;
    for (int l = 0; l < 5; l++)
        for (int i = 0; i < 5; i++) {
            double s = 0;
            for (size_t k = 0; k < n && (l == 4 || !fresh); k++) s += in[1][l * n + k] * in[0][i * n + k];
            out[0][5 * l + i] = s;
        }
    for (size_t k = 0; k < n; k++) {
        double g[4];
        out[2][k] = in[1][5 * n + k];
        for (int j = 0; j < 4; j++) {
            g[j] = (fresh ? 0 : in[1][j * n + k]) + p[j] * dx[k];
            out[2][k] += beta[j] * g[j];
        }
        for (int i = 0; i < 4; i++) {
            out[1][i * n + k] = 0;
            for (int j = 0; j < 4; j++) out[1][i * n + k] += A[4 * j + i] * g[j];
        }
    }
}

// DenseFormer: y = Σ_j α_j X_j, X in[0] [count, n], α in[1]; output 1 (when
// present) is y again.
static void ref_dwa(const Case *c, double *const *in, double *const *out) {
    size_t n = (size_t)c->p[1] * c->p[2];
    for (size_t k = 0; k < n; k++) {
        double y = 0;
        for (int j = 0; j < c->p[0]; j++) y += in[1][j] * in[0][j * n + k];
        out[0][k] = y;
        if (c->n_out[1]) out[1][k] = y;
    }
}

// x = r + a·y
static void ref_gated_read(const Case *c, double *const *in, double *const *out) {
    for (size_t k = 0; k < c->n_out[0]; k++) out[0][k] = in[0][k] + in[2][0] * in[1][k];
}

// ---- shapes and inputs --------------------------------------------------------------

static void fill_normal(float *a, size_t n, float sd, Rng *rng) {
    for (size_t i = 0; i < n; i++) a[i] = sd * rng_normal(rng);
}
static void init_normal(Case *c, Rng *rng) { // every input N(0, 1)
    for (int i = 0; i < MAX_IN && c->n_in[i]; i++) fill_normal(c->in[i], c->n_in[i], 1, rng);
}

// M, K, N: in [M, K], w [N, K] -> out [M, N]
static void shape_matmul(Case *c) {
    size_t M = c->p[0], K = c->p[1], N = c->p[2];
    c->n_in[0] = M * K, c->n_in[1] = N * K, c->n_out[0] = M * N;
}
static void init_matmul(Case *c, Rng *rng) {
    fill_normal(c->in[0], c->n_in[0], 1, rng);
    fill_normal(c->in[1], c->n_in[1], 0.5f, rng);
}

// V, d, n: emb [V, d], tokens [n] -> out [n, d]
static void shape_embedding(Case *c) {
    size_t V = c->p[0], d = c->p[1], n = c->p[2];
    c->n_in[0] = V * d, c->n_out[0] = n * d, c->n_ids = n;
}
static void init_embedding(Case *c, Rng *rng) { // 2 tokens in 3 among the first 7 ids: many repeats
    fill_normal(c->in[0], c->n_in[0], 1, rng);
    for (size_t i = 0; i < c->n_ids; i++)
        c->ids[i] = (int)rng_below(rng, i % 3 ? (c->p[0] < 7 ? c->p[0] : 7) : c->p[0]);
}

// rows, d: x [rows, d], w [d] -> y [rows, d], rstd [rows]
static void shape_rmsnorm(Case *c) {
    size_t rows = c->p[0], d = c->p[1];
    c->n_in[0] = rows * d, c->n_in[1] = d, c->n_out[0] = rows * d, c->n_out[1] = rows;
    c->step_row[0] = c->err_row[0] = d; // rows of very different scale: dx is compared per row
    c->err_row_out[1] = 1;              // rstd spans orders of magnitude: per element
}
static void init_rmsnorm(Case *c, Rng *rng) { // every 7th row 100× larger
    int d = c->p[1];
    fill_normal(c->in[0], c->n_in[0], 2, rng);
    for (int r = 0; r < c->p[0]; r += 7)
        for (int j = 0; j < d; j++) c->in[0][(size_t)r * d + j] *= 100.0f;
    fill_normal(c->in[1], c->n_in[1], 1, rng);
}

// max_pos, hd, scaled -> cos, sin [max_pos, hd/2]
static void shape_rope_table(Case *c) { c->n_out[0] = c->n_out[1] = (size_t)c->p[0] * (c->p[1] / 2); }

// B, T, nh, hd, pos0: x [B, T, nh, hd] -> y
static void shape_rope(Case *c) { c->n_in[0] = c->n_out[0] = (size_t)c->p[0] * c->p[1] * c->p[2] * c->p[3]; }

// B, T, nh, nkv, hd: q [B, T, nh, hd], k, v [B, T, nkv, hd] -> y [B, T, nh, hd], lse [B, nh, T]
static void shape_attention(Case *c) {
    size_t B = c->p[0], T = c->p[1], nh = c->p[2], nkv = c->p[3], hd = c->p[4];
    c->n_in[0] = c->n_out[0] = B * T * nh * hd;
    c->n_in[1] = c->n_in[2] = B * T * nkv * hd;
    c->n_out[1] = B * nh * T;
}
static void init_attention(Case *c, Rng *rng) { // logits up to ~±20: far from uniform
    fill_normal(c->in[0], c->n_in[0], 2, rng);
    fill_normal(c->in[1], c->n_in[1], 2, rng);
    fill_normal(c->in[2], c->n_in[2], 1, rng);
}

// rows, f: gate_up [rows, 2f] (a row's gate, then its up) -> h [rows, f]
static void shape_swiglu(Case *c) {
    c->n_in[0] = (size_t)c->p[0] * 2 * c->p[1], c->n_out[0] = (size_t)c->p[0] * c->p[1];
}
static void init_swiglu(Case *c, Rng *rng) { // gates N(0, 4²) and a saturated sigmoid's extremes, ups N(0, 1)
    static const float extreme[] = {-1000, -100, -88, -30, 0, 30, 88, 100, 1000};
    const size_t rows = c->p[0], f = c->p[1], n = rows * f;
    for (size_t r = 0; r < rows; r++) {
        fill_normal(c->in[0] + r * 2 * f, f, 4, rng);
        fill_normal(c->in[0] + r * 2 * f + f, f, 1, rng);
    }
    for (size_t i = 0; i < 9 && i < n; i++) {
        const size_t k = i * (n / 9); // the k-th gate
        c->in[0][k / f * 2 * f + k % f] = extreme[i];
    }
}

// n, V: logits [n, V], targets [n] -> losses [n], their sum [1]
static void shape_xent(Case *c) {
    size_t n = c->p[0], V = c->p[1];
    c->n_in[0] = n * V, c->n_out[0] = n, c->n_out[1] = 1, c->n_ids = n;
}
enum { XENT_NORMAL, XENT_LARGE };
static void init_xent(Case *c, Rng *rng) { // N(0, 3²), or uniform in [-80, 80]
    int n = c->p[0], V = c->p[1];
    for (int i = 0; i < n; i++) c->ids[i] = (int)rng_below(rng, V);
    if (c->kind == XENT_NORMAL) {
        fill_normal(c->in[0], c->n_in[0], 3, rng);
        return;
    }
    for (size_t i = 0; i < c->n_in[0]; i++) c->in[0][i] = 160 * rng_uniform(rng) - 80;
    c->in[0][c->ids[0]] = -80; // a hopeless row
    if (n > 1) c->in[0][(size_t)V + c->ids[1]] = 80; // and a confident one
}

// n, V: logits [n, V], targets [n] -> logp [n] (double)
static void shape_token_logprobs(Case *c) {
    size_t n = c->p[0], V = c->p[1];
    c->n_in[0] = n * V, c->n_out[0] = n, c->f64[0] = 1, c->n_ids = n;
}

// n, V: logits [n, V], targets [n] -> losses, lse, XENT_Z·lse² [n]
static void shape_xent_z(Case *c) {
    shape_xent(c);
    c->n_out[1] = c->n_out[2] = (size_t)c->p[0];
}

// n: a, b [n] -> out [n]
static void shape_vec(Case *c) { c->n_in[0] = c->n_in[1] = c->n_out[0] = (size_t)c->p[0]; }

// n_src, n_tok, d, H: sources [n_src, n_tok, d], q, g [d] -> x [n_tok, d], w [n_src, n_tok, H]
static void shape_route(Case *c) {
    size_t N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3];
    c->n_in[0] = N * T * d, c->n_in[1] = c->n_in[2] = d;
    c->n_out[0] = T * d, c->n_out[1] = N * T * H;
    c->step_row[0] = d;     // token rows of one source: spread in scale over 1e-3 .. 1e3
    c->err_row[0] = T * d;  // dsrc compared per source
}
// random q and g; token rows of scale 10^U(-3, 3); a saturated softmax
// (logits ~N(0, 100²)); q = 0; "rising": later sources align with q ⊙ g, so
// the running max grows at most sources (the forward's rescaling chain).
enum { ROUTE_RANDOM, ROUTE_SPREAD, ROUTE_SATURATED, ROUTE_ZERO_Q, ROUTE_RISING };
static void init_route(Case *c, Rng *rng) {
    int N = c->p[0], T = c->p[1], d = c->p[2], H = c->p[3], kind = c->kind;
    float *q = c->in[1], *g = c->in[2];
    // Keys have unit RMS, so a logit is ~N(0, hw·σ_q²): σ_q = c/sqrt(hw) gives logits of spread ~c.
    const float qs = kind == ROUTE_SATURATED ? 100 : kind == ROUTE_ZERO_Q ? 0 : kind == ROUTE_RISING ? 10 : 2;
    for (int k = 0; k < d; k++) q[k] = qs / sqrtf((float)(d / H)) * rng_normal(rng), g[k] = 1 + 0.3f * rng_normal(rng);
    float *v = malloc(sizeof(float) * (size_t)d);
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < d; k++) v[k] = rng_normal(rng);
        for (int n = 0; n < N; n++) {
            float *row = c->in[0] + ((size_t)n * T + t) * d;
            if (kind == ROUTE_RISING) { // from v (f = 0) to v turned along q ⊙ g (f = 1)
                const float f = N > 1 ? (float)n / (N - 1) : 0.0f;
                for (int k = 0; k < d; k++) {
                    const float along = q[k] * g[k] >= 0 ? fabsf(v[k]) : -fabsf(v[k]);
                    row[k] = (1 - f) * v[k] + f * along + 0.05f * rng_normal(rng);
                }
                continue;
            }
            const float sc = kind == ROUTE_SPREAD ? powf(10.0f, 6.0f * rng_uniform(rng) - 3.0f) : 1.0f;
            for (int k = 0; k < d; k++) row[k] = sc * rng_normal(rng);
        }
    }
    free(v);
}

// n: a [n] -> out [n]; out [n]; a, b, c [n] -> out [n]
static void shape_vec1(Case *c) { c->n_in[0] = c->n_out[0] = (size_t)c->p[0]; }
static void shape_vec0(Case *c) { c->n_out[0] = (size_t)c->p[0]; }
static void shape_vec3(Case *c) { c->n_in[0] = c->n_in[1] = c->n_in[2] = c->n_out[0] = (size_t)c->p[0]; }

// rows, d: row [d] -> out [rows, d]; start [d], in [rows, d] -> out [d]
static void shape_rows_broadcast(Case *c) {
    c->n_in[0] = (size_t)c->p[1], c->n_out[0] = (size_t)c->p[0] * c->p[1];
}
static void shape_rows_sum(Case *c) {
    c->n_in[0] = c->n_out[0] = (size_t)c->p[1], c->n_in[1] = (size_t)c->p[0] * c->p[1];
}

// n block: a [n] -> Σ a² per block [ceil(n/block)] (double)
static void shape_sum_squares(Case *c) {
    c->n_in[0] = (size_t)c->p[0], c->n_out[0] = ((size_t)c->p[0] + c->p[1] - 1) / c->p[1], c->f64[0] = 1;
}

// n: a [n] -> Σ a (double)
static void shape_stream_sum(Case *c) { c->n_in[0] = (size_t)c->p[0], c->n_out[0] = 1, c->f64[0] = 1; }

// n: p, m, v, g [n] -> p, m, v [n]
static void shape_adamw(Case *c) {
    for (int i = 0; i < 4; i++) c->n_in[i] = (size_t)c->p[0];
    for (int j = 0; j < 3; j++) c->n_out[j] = (size_t)c->p[0];
}
// p N(0, 1), m N(0, 0.1²), v (N(0, 0.1²))², g N(0, 1); every 5th element a
// first step at a tiny gradient (m = v = 0, g ~1e-8: eps matters), every
// 7th a zero gradient.
static void init_adamw(Case *c, Rng *rng) {
    size_t n = c->n_in[0];
    fill_normal(c->in[0], n, 1, rng);
    fill_normal(c->in[1], n, 0.1f, rng);
    fill_normal(c->in[2], n, 0.1f, rng);
    fill_normal(c->in[3], n, 1, rng);
    for (size_t i = 0; i < n; i++) {
        c->in[2][i] *= c->in[2][i];
        if (i % 5 == 0) c->in[1][i] = c->in[2][i] = 0, c->in[3][i] *= 1e-8f;
        if (i % 7 == 0) c->in[3][i] = 0;
    }
}

// n_pos, nh, nkv, hd: q [nh, hd], k, v [n_pos, nkv, hd] -> y [nh, hd]
static void shape_attention_decode(Case *c) {
    size_t n_pos = c->p[0], nh = c->p[1], nkv = c->p[2], hd = c->p[3];
    c->n_in[0] = c->n_out[0] = nh * hd;
    c->n_in[1] = c->n_in[2] = n_pos * nkv * hd;
}

// n_src, n_tok, H: w [n_src, n_tok, H] -> entropy, first, last [H] (double)
static void shape_route_stats(Case *c) {
    c->n_in[0] = (size_t)c->p[0] * c->p[1] * c->p[2];
    for (int j = 0; j < 3; j++) c->n_out[j] = (size_t)c->p[2], c->f64[j] = 1;
}
// softmax weights over the sources per (token, head) of logits N(0, 3²); every
// 5th token N(0, 100²), where most weights are exactly 0 in fp32
static void init_route_stats(Case *c, Rng *rng) {
    int N = c->p[0], T = c->p[1], H = c->p[2];
    double *l = malloc(sizeof(double) * (size_t)N);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            double m = -INFINITY, z = 0;
            for (int n = 0; n < N; n++) m = fmax(m, l[n] = (t % 5 ? 3 : 100) * rng_normal(rng));
            for (int n = 0; n < N; n++) z += exp(l[n] - m);
            for (int n = 0; n < N; n++) c->in[0][((size_t)n * T + t) * H + h] = (float)(exp(l[n] - m) / z);
        }
    free(l);
}

// n_src, n_tok, d, S (slices or heads), tail: sources [n_src, n_tok, d], q, g
// [d] -> width [n_tok] or heads [n_tok, S] (double); the weight error also
// takes w [n_src, n_tok, S] -> [1] (double). KL values near 0 (one source,
// equal logits: both sides leave ~1e-16) are compared against PROBE_FLOOR.
#define PROBE_FLOOR 1e-6
static void shape_probe(Case *c, size_t n_out) {
    size_t N = c->p[0], T = c->p[1], d = c->p[2];
    c->n_in[0] = N * T * d, c->n_in[1] = c->n_in[2] = d;
    c->n_out[0] = n_out, c->f64[0] = 1, c->err_floor[0] = PROBE_FLOOR;
}
static void shape_probe_width(Case *c) { shape_probe(c, (size_t)c->p[1]); }
static void shape_probe_heads(Case *c) { shape_probe(c, (size_t)c->p[1] * c->p[3]); }
static void shape_probe_weight_error(Case *c) {
    shape_probe(c, 1);
    c->n_in[3] = (size_t)c->p[0] * c->p[1] * c->p[3];
}
// w: the head distributions a_h recomputed in double, rounded to fp32, and
// five of them off by ±1e-3 .. 5e-3 (the largest error is then one of those)
static void init_probe_weight_error(Case *c, Rng *rng) {
    int N = c->p[0], T = c->p[1], H = c->p[3];
    init_route(c, rng);
    double *in[3], *lp = malloc(sizeof(double) * (size_t)H * N);
    for (int i = 0; i < 3; i++) {
        in[i] = malloc(sizeof(double) * c->n_in[i]);
        for (size_t e = 0; e < c->n_in[i]; e++) in[i][e] = c->in[i][e];
    }
    for (int t = 0; t < T; t++) {
        ref_slice_logp(c, in, t, H, lp);
        for (int h = 0; h < H; h++)
            for (int n = 0; n < N; n++) c->in[3][((size_t)n * T + t) * H + h] = (float)exp(lp[(size_t)h * N + n]);
    }
    for (int i = 0; i < 5; i++) c->in[3][rng_below(rng, c->n_in[3])] += (i % 2 ? -1e-3f : 1e-3f) * (i + 1);
    for (int i = 0; i < 3; i++) free(in[i]);
    free(lp);
}

// n_tok, d, pad (streams at stride n_tok·d + pad): H [4, n], p [4] -> x [n]
static void shape_hc_read(Case *c) {
    c->n_in[0] = 4 * hc_n(c), c->n_in[1] = 4, c->n_out[0] = hc_n(c);
}
// emb [n], p [4] -> x [n], streams [4, n]
static void shape_hc_first_read(Case *c) {
    c->n_in[0] = hc_n(c), c->n_in[1] = 4, c->n_out[0] = hc_n(c), c->n_out[1] = 4 * hc_n(c);
}
// H [4, n], o [n], A, β, p [24] -> new streams [4, n], x [n]
static void shape_hc_write(Case *c) {
    c->n_in[0] = 4 * hc_n(c), c->n_in[1] = hc_n(c), c->n_in[2] = 24;
    c->n_out[0] = 4 * hc_n(c), c->n_out[1] = hc_n(c);
}
// n_tok, d, pad, fresh: H_0..H_3, o [5, n]; G_0..G_3, dx, dout [6, n]; A, β, p
// [24] -> S [25] (double), G [4, n], dout [n]
static void shape_hc_backward(Case *c) {
    c->n_in[0] = 5 * hc_n(c), c->n_in[1] = 6 * hc_n(c), c->n_in[2] = 24;
    c->n_out[0] = 25, c->f64[0] = 1, c->n_out[1] = 4 * hc_n(c), c->n_out[2] = hc_n(c);
}

// count, n_tok, d, pad: X [count, n] (at stride n + pad), alpha [count] -> y
// [n]; the _next variant also y again (for dnext)
static void shape_dwa(Case *c) {
    size_t count = c->p[0], n = (size_t)c->p[1] * c->p[2];
    c->n_in[0] = count * n, c->n_in[1] = count, c->n_out[0] = n;
    c->step_row[0] = c->err_row[0] = n;  // dX_j scales with alpha_j: per source
}
static void shape_dwa_next(Case *c) {
    shape_dwa(c);
    c->n_out[1] = c->n_out[0];
}

// n_tok, d: r, y [n], a [1] -> x [n]
static void shape_gated_read(Case *c) {
    c->n_in[0] = c->n_in[1] = c->n_out[0] = (size_t)c->p[0] * c->p[1], c->n_in[2] = 1;
}

// ---- the ops --------------------------------------------------------------------------

enum { GRAD_NONE, GRAD_SET, GRAD_ACC };     // an input's gradient: none, overwritten, accumulated
enum { DOUT_NONE, DOUT_RANDOM, DOUT_SCALE }; // gradient into an output: none (saved for
                                             // backward), random r, one scale for all
struct Op {
    const char *name;
    const char *pnames;  // names of p[], space-separated
    const char *kinds[6];  // names of the input kinds (kinds[0] may be NULL: default)
    void (*shape)(Case *c);
    void (*init)(Case *c, Rng *rng);
    void (*forward)(Backend *be, Case *c);
    void (*backward)(Backend *be, Case *c);  // NULL: the op has no backward
    void (*reference)(const Case *c, double *const *in, double *const *out);
    int grad[MAX_IN];
    int dout[MAX_OUT];
    double (*tol_data)(const Case *c);       // tolerance for the data's conditioning (or NULL)
};

static const Op MATMUL = {"matmul", "M K N", {0}, shape_matmul, init_matmul, matmul_fwd, matmul_bwd,
                          ref_matmul, {GRAD_SET, GRAD_ACC}, {DOUT_RANDOM}, NULL};
// The same forward; the backward adds into din as well as dw.
static const Op MATMUL_ADD = {"matmul_add", "M K N", {0}, shape_matmul, init_matmul, matmul_fwd, matmul_add_bwd,
                              ref_matmul, {GRAD_ACC, GRAD_ACC}, {DOUT_RANDOM}, NULL};
static const Op EMBEDDING = {"embedding", "V d n", {0}, shape_embedding, init_embedding, embedding_fwd,
                             embedding_bwd, ref_embedding, {GRAD_ACC}, {DOUT_RANDOM}, NULL};
static const Op RMSNORM = {"rmsnorm", "rows d", {0}, shape_rmsnorm, init_rmsnorm, rmsnorm_fwd, rmsnorm_bwd,
                           ref_rmsnorm, {GRAD_SET, GRAD_ACC}, {DOUT_RANDOM, DOUT_NONE}, NULL};
static const Op ROPE_TABLE = {"rope_table", "max_pos hd scaled", {0}, shape_rope_table, NULL, rope_table_fwd, NULL,
                              ref_rope_table, {0}, {0}, NULL};
static const Op ROPE = {"rope", "B T nh hd pos0", {0}, shape_rope, init_normal, rope_fwd, rope_bwd, ref_rope,
                        {GRAD_SET}, {DOUT_RANDOM}, NULL};
static const Op ATTENTION = {"attention", "B T nh nkv hd", {0}, shape_attention, init_attention, attention_fwd,
                             attention_bwd, ref_attention, {GRAD_SET, GRAD_SET, GRAD_SET},
                             {DOUT_RANDOM, DOUT_NONE}, NULL};
static const Op SWIGLU = {"swiglu", "rows f", {0}, shape_swiglu, init_swiglu, swiglu_fwd, swiglu_bwd, ref_swiglu,
                          {GRAD_SET}, {DOUT_RANDOM}, NULL};
static const Op XENT = {"xent", "n V", {0, "large_logits"}, shape_xent, init_xent, xent_fwd, xent_bwd,
                        ref_xent, {GRAD_SET}, {DOUT_SCALE, DOUT_NONE}, NULL};
static const Op TOKEN_LOGPROBS = {"token_logprobs", "n V", {0, "large_logits"}, shape_token_logprobs, init_xent,
                                  token_logprobs_fwd, NULL, ref_token_logprobs, {0}, {0}, NULL};
static const Op XENT_ZLOSS = {"xent_z_loss", "n V", {0, "large_logits"}, shape_xent_z, init_xent, xent_z_fwd,
                              xent_z_bwd, ref_xent_z, {GRAD_SET}, {DOUT_SCALE, DOUT_NONE, DOUT_SCALE}, NULL};
static const Op VEC_ADD = {"vec_add", "n", {0}, shape_vec, init_normal, vec_add_fwd, NULL, ref_vec_add,
                           {0}, {0}, NULL};
static const Op VEC_ACC = {"vec_acc", "n", {0}, shape_vec, init_normal, vec_acc_fwd, NULL, ref_vec_add,
                           {0}, {0}, NULL};
static const Op VEC_SCALE_ACC = {"vec_scale_acc", "n", {0}, shape_vec, init_normal, vec_scale_acc_fwd, NULL,
                                 ref_vec_scale_acc, {0}, {0}, NULL};
#define ROUTE_KINDS {"random", "spread", "saturated", "zero_q", "rising"}
static const Op ROUTE = {"route", "n_src n_tok d H", ROUTE_KINDS, shape_route, init_route, route_fwd, route_bwd,
                         ref_route, {GRAD_ACC, GRAD_ACC, GRAD_ACC}, {DOUT_RANDOM, DOUT_NONE}, route_tol_data};
// full routing source by source: the same op; the gather writes dsrc
static const Op ROUTE_SRC = {"route_by_source", "n_src n_tok d H", ROUTE_KINDS, shape_route, init_route,
                             route_src_fwd, route_src_bwd, ref_route, {GRAD_SET, GRAD_ACC, GRAD_ACC},
                             {DOUT_RANDOM, DOUT_NONE}, route_tol_data};
// route_backward_set: the same op, but its backward writes dsrc
static const Op ROUTE_SET = {"route_set", "n_src n_tok d H", ROUTE_KINDS, shape_route, init_route, route_fwd,
                             route_set_bwd, ref_route, {GRAD_SET, GRAD_ACC, GRAD_ACC},
                             {DOUT_RANDOM, DOUT_NONE}, route_tol_data};

static const Op ROUTE_TAIL = {"route_tail", "n_src n_tok d H", ROUTE_KINDS, shape_route, init_route, route_tail_fwd,
                              route_tail_bwd, ref_route, {GRAD_ACC, GRAD_ACC, GRAD_ACC}, {DOUT_RANDOM, DOUT_NONE},
                              route_tol_data};
static const Op ROUTE_SET_TAIL = {"route_set_tail", "n_src n_tok d H", ROUTE_KINDS, shape_route, init_route,
                                  route_tail_fwd, route_set_tail_bwd, ref_route, {GRAD_SET, GRAD_ACC, GRAD_ACC},
                                  {DOUT_RANDOM, DOUT_NONE}, route_tol_data};
static const Op VEC_COPY = {"vec_copy", "n", {0}, shape_vec1, init_normal, vec_copy_fwd, NULL, ref_copy, {0}, {0},
                            NULL};
static const Op VEC_ZERO = {"vec_zero", "n", {0}, shape_vec0, NULL, vec_zero_fwd, NULL, ref_zero, {0}, {0}, NULL};
static const Op VEC_ACC2 = {"vec_acc2", "n", {0}, shape_vec3, init_normal, vec_acc2_fwd, NULL, ref_vec_acc2, {0},
                            {0}, NULL};
static const Op VEC_AXPY = {"vec_axpy", "n", {0}, shape_vec, init_normal, vec_axpy_fwd, NULL, ref_vec_scale_acc,
                            {0}, {0}, NULL};
static const Op ROWS_BROADCAST = {"rows_broadcast", "rows d", {0}, shape_rows_broadcast, init_normal,
                                  rows_broadcast_fwd, rows_broadcast_bwd, ref_rows_broadcast, {GRAD_ACC},
                                  {DOUT_RANDOM}, NULL};
static const Op ROWS_SUM = {"rows_sum", "rows d", {0}, shape_rows_sum, init_normal, rows_sum_fwd, NULL, ref_rows_sum,
                            {0}, {0}, NULL};
static const Op SUM_SQUARES = {"sum_squares", "n block", {0}, shape_sum_squares, init_normal, sum_squares_fwd, NULL,
                               ref_sum_squares, {0}, {0}, NULL};
static const Op STREAM_SUM = {"stream_sum", "n", {0}, shape_stream_sum, init_normal, stream_sum_fwd, NULL,
                              ref_stream_sum, {0}, {0}, NULL};
static const Op ADAMW = {"adamw_update", "n", {0, "mask"}, shape_adamw, init_adamw, adamw_fwd, NULL, ref_adamw, {0},
                         {0}, NULL};
static const Op EMA = {"ema_update", "n", {0}, shape_vec, init_normal, ema_fwd, NULL, ref_ema, {0}, {0}, NULL};
static const Op ATTENTION_DECODE = {"attention_decode", "n_pos nh nkv hd", {0}, shape_attention_decode,
                                    init_attention, attention_decode_fwd, NULL, ref_attention_decode, {0}, {0},
                                    NULL};
static const Op ROUTE_STATS = {"route_weight_stats", "n_src n_tok H", {0}, shape_route_stats, init_route_stats,
                               route_stats_fwd, NULL, ref_route_stats, {0}, {0}, NULL};
static const Op PROBE_WIDTH = {"route_probe_width", "n_src n_tok d slices tail", ROUTE_KINDS, shape_probe_width,
                               init_route, probe_width_fwd, NULL, ref_probe_width, {0}, {0}, NULL};
static const Op PROBE_HEADS = {"route_probe_heads", "n_src n_tok d H tail", ROUTE_KINDS, shape_probe_heads,
                               init_route, probe_heads_fwd, NULL, ref_probe_heads, {0}, {0}, NULL};
static const Op PROBE_WEIGHT_ERROR = {"route_probe_weight_error", "n_src n_tok d H tail", ROUTE_KINDS,
                                      shape_probe_weight_error, init_probe_weight_error, probe_weight_error_fwd,
                                      NULL, ref_probe_weight_error, {0}, {0}, NULL};
static const Op HC_READ = {"hc_read", "n_tok d pad", {0}, shape_hc_read, init_normal, hc_read_fwd, NULL,
                           ref_hc_read, {0}, {0}, NULL};
// hc_read from the embedding, its backward hc_first_read_backward (demb accumulates; p's gradient is hc_backward's)
static const Op HC_FIRST_READ = {"hc_first_read", "n_tok d pad", {0}, shape_hc_first_read, init_normal,
                                 hc_first_read_fwd, hc_first_read_bwd, ref_hc_first_read, {GRAD_ACC, GRAD_NONE},
                                 {DOUT_RANDOM, DOUT_RANDOM}, NULL};
// hc_write, its backward hc_backward: dH written (G in place), do and the coefficients accumulate
static const Op HC_WRITE = {"hc_write", "n_tok d pad", {0}, shape_hc_write, init_normal, hc_write_fwd, hc_write_bwd,
                            ref_hc_write, {GRAD_SET, GRAD_ACC, GRAD_ACC}, {DOUT_RANDOM, DOUT_RANDOM}, NULL};
// the same with no gradient into the new streams: hc_backward's fresh
static const Op HC_WRITE_FRESH = {"hc_write_fresh", "n_tok d pad", {0}, shape_hc_write, init_normal, hc_write_fwd,
                                  hc_write_bwd, ref_hc_write, {GRAD_SET, GRAD_ACC, GRAD_ACC},
                                  {DOUT_NONE, DOUT_RANDOM}, NULL};
static const Op HC_BACKWARD = {"hc_backward", "n_tok d pad fresh", {0}, shape_hc_backward, init_normal,
                               hc_backward_fwd, NULL, ref_hc_backward, {0}, {0}, NULL};
// dwa_average, its backward dwa_backward (dX and dalpha accumulate); _next: with dnext
static const Op DWA = {"dwa", "count n_tok d pad", {0}, shape_dwa, init_normal, dwa_fwd, dwa_bwd, ref_dwa,
                       {GRAD_ACC, GRAD_ACC}, {DOUT_RANDOM}, NULL};
static const Op DWA_NEXT = {"dwa_next", "count n_tok d pad", {0}, shape_dwa_next, init_normal, dwa_fwd, dwa_bwd,
                            ref_dwa, {GRAD_ACC, GRAD_ACC}, {DOUT_RANDOM, DOUT_RANDOM}, NULL};
// vec_axpy as the gated read, its backward gated_read_backward (dr, da accumulate; dy written)
static const Op GATED_READ = {"gated_read", "n_tok d", {0}, shape_gated_read, init_normal, gated_read_fwd,
                              gated_read_bwd, ref_gated_read, {GRAD_ACC, GRAD_SET, GRAD_ACC}, {DOUT_RANDOM}, NULL};

// ---- the cases ----------------------------------------------------------------------

// Reasons for the tolerances (relative to the largest value of the tensor,
// or of the row where Case says so).
#define WHY_SUMS "fp32 sums of <= a few hundred terms round to ~1e-6 of the largest term; a wrong index or term is off by O(1)"
#define WHY_COPY "a copy (and for the gradient, sums of a few copies): exact forward"
#define WHY_ROUND "one fp32 rounding per element: <= 2^-24 relative, plus a rounding of the table angle"
#define WHY_ROUTE "fp32 sums of <= 256 products and <= 17 sources: 1e-5 (sums of more sources in proportion), plus 4·FLT_EPSILON·Σ|q K| for the softmax"

#define WHY_EXACT "a copy or a constant: exact"
#define WHY_ROUND2 "two fp32 roundings per element: <= 2^-23 of the largest value"
#define WHY_ROWS "a copy; the backward's column sums are in double, rounded once to fp32"
#define WHY_F64 "computed in double from the same fp32 inputs: only the order of double sums and libm's exp/log differ (<= n·2^-53 of the terms)"
#define WHY_PROBE "computed in double from the same fp32 inputs: only the order of sums and libm differ (~1e-15 of the logits); KL values near 0 against 1e-6 nats"
#define WHY_ADAMW "a dozen fp32 operations per element (a sqrt, a division): ~1e-6; lr 0.05 makes the step a sizable part of p, so a wrong term is off by 1e-3 or more"
#define WHY_LOGPROBS "fp32 exponentials (~1e-7 relative each) summed in double: the log-sum-exp within ~1e-7 of the largest |log p|"
#define WHY_HC "fp32 sums of 5 terms per element; parameter dots of d fp32 products per token, in double over tokens"
#define WHY_EMA "two fp32 products and a sum per element: <= 1.5·2^-23 of the largest value; a wrong weight is off by 1e-2 or more"

typedef struct {
    const Op *op;
    int p[MAX_P];
    int kind;
    double tol;
    const char *why;
} TestCase;

static const TestCase CASES[] = {
    // matmul (BLAS): odd sizes, a 1×1 output, and one small enough for every coordinate
    {&MATMUL, {37, 53, 29}, 0, 1e-5, WHY_SUMS},
    {&MATMUL, {257, 130, 67}, 0, 1e-5, WHY_SUMS},
    {&MATMUL, {1, 7, 1}, 0, 1e-5, WHY_SUMS},
    {&MATMUL, {3, 4, 5}, 0, 1e-5, WHY_SUMS},
    // out, then din, of 2²¹ floats: zeroed by matmul.c and summed with beta 1 (over NaN-filled outputs)
    {&MATMUL, {8192, 8, 256}, 0, 1e-5, WHY_SUMS},
    {&MATMUL, {8192, 256, 8}, 0, 1e-5, WHY_SUMS},
    {&MATMUL_ADD, {37, 53, 29}, 0, 1e-5, WHY_SUMS},
    {&MATMUL_ADD, {3, 4, 5}, 0, 1e-5, WHY_SUMS},
    {&MATMUL_ADD, {257, 130, 67}, 0, 1e-5, WHY_SUMS},
    // embedding: repeated tokens, odd d, n·d large enough for the parallel path
    {&EMBEDDING, {50, 131, 301}, 0, 1e-5, WHY_COPY},
    {&EMBEDDING, {5, 3, 7}, 0, 1e-5, WHY_COPY},
    // rmsnorm: rows of very different scale; d = hd for the q/k norm
    {&RMSNORM, {37, 67}, 0, 1e-5, WHY_SUMS},
    {&RMSNORM, {1023, 256}, 0, 1e-5, WHY_SUMS},
    {&RMSNORM, {501, 64}, 0, 1e-5, WHY_SUMS},
    {&RMSNORM, {3, 5}, 0, 1e-5, WHY_SUMS},
    // rope_table: plain frequencies, per-frequency scaled ones, and positions far out
    {&ROPE_TABLE, {300, 32, 0}, 0, 1e-7, WHY_ROUND},
    {&ROPE_TABLE, {300, 64, 0}, 0, 1e-7, WHY_ROUND},
    {&ROPE_TABLE, {300, 64, 1}, 0, 1e-7, WHY_ROUND},
    {&ROPE_TABLE, {20000, 8, 1}, 0, 1e-7, WHY_ROUND},
    {&ROPE, {2, 13, 3, 32, 0}, 0, 1e-5, WHY_SUMS},
    {&ROPE, {3, 29, 2, 64, 17}, 0, 1e-5, WHY_SUMS},
    {&ROPE, {1, 3, 2, 6, 5}, 0, 1e-5, WHY_SUMS},
    // attention: GQA nh = 2·nkv, nh == nkv, nh = 4·nkv; T not a multiple of any block
    {&ATTENTION, {2, 37, 4, 2, 32}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {2, 130, 2, 2, 64}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {1, 71, 4, 1, 32}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {3, 67, 4, 4, 64}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {2, 5, 4, 2, 4}, 0, 1e-5, WHY_SUMS},
    // T = 1; hd 16 and 128; T at and one past the tiles' edges (64 query
    // rows, 128 keys); one or three (batch, kv head) groups, so that on two
    // threads the backward splits its query tiles and adds dk/dv partials
    {&ATTENTION, {3, 1, 2, 1, 16}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {1, 130, 4, 1, 16}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {1, 200, 2, 2, 128}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {2, 64, 2, 1, 64}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {1, 129, 2, 1, 64}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {1, 256, 2, 1, 32}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {1, 257, 2, 1, 16}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION, {3, 130, 2, 1, 32}, 0, 1e-5, WHY_SUMS},
    {&SWIGLU, {331, 301}, 0, 1e-5, WHY_SUMS},  // odd widths: rows start off the vector lanes
    {&SWIGLU, {1, 13}, 0, 1e-5, WHY_SUMS},
    {&SWIGLU, {13, 1}, 0, 1e-5, WHY_SUMS},
    {&SWIGLU, {7, 2100}, 0, 1e-5, WHY_SUMS},  // rows wider than L1
    {&XENT, {37, 1001}, XENT_NORMAL, 1e-5, WHY_SUMS},
    {&XENT, {13, 1001}, XENT_LARGE, 1e-5, WHY_SUMS},
    {&XENT, {3, 7}, XENT_NORMAL, 1e-5, WHY_SUMS},
    // token_logprobs: xent's rows without the sign and in double; exp in fp32 over a row
    {&TOKEN_LOGPROBS, {37, 1001}, XENT_NORMAL, 1e-6, WHY_LOGPROBS},
    {&TOKEN_LOGPROBS, {13, 1001}, XENT_LARGE, 1e-6, WHY_LOGPROBS},
    {&TOKEN_LOGPROBS, {3, 7}, XENT_NORMAL, 1e-6, WHY_LOGPROBS},
    {&XENT_ZLOSS, {37, 1001}, XENT_NORMAL, 1e-5, WHY_SUMS},
    {&XENT_ZLOSS, {13, 1001}, XENT_LARGE, 1e-5, WHY_SUMS},
    {&XENT_ZLOSS, {3, 7}, XENT_NORMAL, 1e-5, WHY_SUMS},
    {&VEC_ADD, {100003}, 0, 1e-7, WHY_ROUND},
    {&VEC_ADD, {5}, 0, 1e-7, WHY_ROUND},
    {&VEC_ACC, {100003}, 0, 1e-7, WHY_ROUND},
    {&VEC_ACC, {5}, 0, 1e-7, WHY_ROUND},
    {&VEC_SCALE_ACC, {100003}, 0, 1e-7, WHY_ROUND},
    {&VEC_SCALE_ACC, {5}, 0, 1e-7, WHY_ROUND},
    // route: n_src 1, 2, 5, 17 × H 1, 2, 8 on random data
    {&ROUTE, {1, 37, 64, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {5, 37, 64, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {1, 37, 64, 2}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 2}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {5, 37, 64, 2}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 2}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {1, 37, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {5, 37, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {5, 37, 256, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 256, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    // every other kind of data on n_src 2, 17 × H 1, 8 (d 64), and at d 256
    {&ROUTE, {2, 37, 64, 1}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 1}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 8}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 8}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 256, 4}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 1}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 1}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 8}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 8}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 256, 1}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 1}, ROUTE_ZERO_Q, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 1}, ROUTE_ZERO_Q, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 8}, ROUTE_ZERO_Q, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 8}, ROUTE_ZERO_Q, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 1}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 1}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    {&ROUTE, {2, 37, 64, 8}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 64, 8}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 37, 256, 2}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    // H > 64 (the forward's head chunks); head widths 15 and 9 (d not a
    // multiple of the vector lanes); one token (fewer than threads)
    {&ROUTE, {5, 37, 256, 128}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {5, 37, 256, 128}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE, {3, 37, 60, 4}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE, {5, 11, 18, 2}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {17, 1, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    // the backward reduces eight heads at once: two groups (H 16), and a
    // group with four heads left over (H 12, width 8)
    {&ROUTE, {17, 37, 256, 16}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {5, 37, 96, 12}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE_SET, {5, 37, 96, 12}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    // many sources: the kernels' tiles of tokens shrink with n_src · d (here
    // to one tile, to the minimum of 4 tokens with a short last tile; 15
    // tokens for micro's 17 × 256 above, three tiles of 37)
    {&ROUTE, {70, 9, 64, 4}, ROUTE_RISING, 5e-5, WHY_ROUTE},
    {&ROUTE, {70, 9, 64, 4}, ROUTE_SATURATED, 5e-5, WHY_ROUTE},
    {&ROUTE, {33, 9, 64, 2}, ROUTE_SPREAD, 2e-5, WHY_ROUTE},
    {&ROUTE, {49, 5, 256, 128}, ROUTE_RANDOM, 3e-5, WHY_ROUTE},
    {&ROUTE, {40, 7, 36, 1}, ROUTE_RANDOM, 3e-5, WHY_ROUTE},
    {&ROUTE, {2, 3, 8, 2}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE, {70, 9, 512, 8}, ROUTE_RISING, 5e-5, WHY_ROUTE},
    // full routing source by source: every kind of data, head widths 32,
    // 8, 15 and 9, H > 64, many sources, one token
    {&ROUTE_SRC, {1, 37, 64, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {5, 37, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {17, 37, 256, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {17, 37, 256, 1}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {17, 37, 64, 8}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {17, 37, 256, 1}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {17, 37, 64, 8}, ROUTE_ZERO_Q, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {17, 37, 256, 2}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {3, 37, 60, 4}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {5, 11, 18, 2}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {5, 37, 256, 128}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {70, 9, 64, 4}, ROUTE_SATURATED, 5e-5, WHY_ROUTE},
    {&ROUTE_SRC, {17, 1, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {17, 100, 256, 8}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    // route_keys' forms: heads in lanes over two and three head groups and
    // at width 64; products over k past one 256-row panel copy.
    {&ROUTE_SRC, {17, 37, 256, 16}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {5, 37, 192, 24}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {5, 37, 512, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {5, 37, 512, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    // route_gather's second pass spread over the next tile's first (two or
    // more tiles a thread): at H 1 and 8, and at width 40 (a head's dot with
    // an odd vector, column blocks across heads, a last block of 8 columns).
    {&ROUTE_SRC, {9, 200, 256, 1}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {9, 200, 256, 8}, ROUTE_SATURATED, 1e-5, WHY_ROUTE},
    {&ROUTE_SRC, {5, 100, 200, 5}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    // route_backward_set: written dsrc
    {&ROUTE_SET, {1, 37, 64, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SET, {5, 37, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SET, {17, 37, 256, 8}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE_SET, {70, 9, 64, 4}, ROUTE_SATURATED, 5e-5, WHY_ROUTE},
    {&ROUTE_SET, {5, 11, 18, 2}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    // route with the last source as a tail row (block routing's partial sum)
    {&ROUTE_TAIL, {1, 37, 64, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_TAIL, {2, 37, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_TAIL, {5, 37, 64, 8}, ROUTE_RISING, 1e-5, WHY_ROUTE},
    {&ROUTE_TAIL, {17, 37, 256, 8}, ROUTE_SPREAD, 1e-5, WHY_ROUTE},
    {&ROUTE_TAIL, {70, 9, 64, 4}, ROUTE_SATURATED, 5e-5, WHY_ROUTE},
    {&ROUTE_TAIL, {5, 11, 18, 2}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SET_TAIL, {1, 37, 64, 1}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SET_TAIL, {5, 37, 64, 8}, ROUTE_RANDOM, 1e-5, WHY_ROUTE},
    {&ROUTE_SET_TAIL, {33, 9, 64, 2}, ROUTE_SPREAD, 2e-5, WHY_ROUTE},
    // the remaining elementwise and row helpers
    {&VEC_COPY, {100003}, 0, 0, WHY_EXACT},
    {&VEC_COPY, {5}, 0, 0, WHY_EXACT},
    {&VEC_ZERO, {100003}, 0, 0, WHY_EXACT},
    {&VEC_ZERO, {5}, 0, 0, WHY_EXACT},
    {&VEC_ACC2, {100003}, 0, 2e-7, WHY_ROUND2},
    {&VEC_ACC2, {5}, 0, 2e-7, WHY_ROUND2},
    {&VEC_AXPY, {100003}, 0, 1e-7, WHY_ROUND},
    {&VEC_AXPY, {5}, 0, 1e-7, WHY_ROUND},
    {&ROWS_BROADCAST, {37, 67}, 0, 1e-6, WHY_ROWS},
    {&ROWS_BROADCAST, {1000, 64}, 0, 1e-6, WHY_ROWS},
    {&ROWS_BROADCAST, {3, 5}, 0, 1e-6, WHY_ROWS},
    {&ROWS_SUM, {37, 67}, 0, 1e-6, WHY_ROWS},
    {&ROWS_SUM, {1000, 64}, 0, 1e-6, WHY_ROWS},
    {&ROWS_SUM, {3, 5}, 0, 1e-6, WHY_ROWS},
    {&SUM_SQUARES, {100003, 100003}, 0, 1e-11, WHY_F64},
    {&SUM_SQUARES, {100003, 4096}, 0, 1e-12, WHY_F64},
    {&SUM_SQUARES, {5, 2}, 0, 1e-15, WHY_F64},
    {&SUM_SQUARES, {1, 1}, 0, 1e-15, WHY_F64},
    // 4096 chunks: 100 floats each through the fp32 lanes, 24 each in the double tail only
    {&STREAM_SUM, {409637}, 0, 1e-6, WHY_STREAM},
    {&STREAM_SUM, {100003}, 0, 1e-12, WHY_F64},
    {&STREAM_SUM, {5}, 0, 1e-15, WHY_F64},
    {&ADAMW, {100003}, 0, 1e-6, WHY_ADAMW},
    {&ADAMW, {7}, 0, 1e-6, WHY_ADAMW},
    {&ADAMW, {100003}, ADAMW_MASK, 1e-6, WHY_ADAMW},
    {&ADAMW, {7}, ADAMW_MASK, 1e-6, WHY_ADAMW},
    {&EMA, {100003}, 0, 2e-7, WHY_EMA},
    {&EMA, {5}, 0, 2e-7, WHY_EMA},
    // decoding: one position, GQA nh = 2·nkv, 4·nkv, nh == nkv, a long cache
    {&ATTENTION_DECODE, {1, 4, 2, 32}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION_DECODE, {37, 4, 2, 32}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION_DECODE, {71, 4, 1, 32}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION_DECODE, {130, 2, 2, 64}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION_DECODE, {300, 8, 2, 64}, 0, 1e-5, WHY_SUMS},
    {&ATTENTION_DECODE, {5, 4, 4, 4}, 0, 1e-5, WHY_SUMS},
    // routing statistics and probes (double): one source, H 1 .. 128, every
    // kind of data, a tail row
    {&ROUTE_STATS, {1, 37, 1}, 0, 1e-13, WHY_F64},
    {&ROUTE_STATS, {5, 37, 8}, 0, 1e-13, WHY_F64},
    {&ROUTE_STATS, {17, 301, 4}, 0, 1e-13, WHY_F64},
    {&ROUTE_STATS, {70, 9, 128}, 0, 1e-13, WHY_F64},
    {&PROBE_WIDTH, {1, 37, 64, 4, 0}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_WIDTH, {5, 37, 64, 1, 0}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_WIDTH, {5, 37, 64, 4, 0}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_WIDTH, {17, 37, 256, 8, 0}, ROUTE_SPREAD, 1e-12, WHY_PROBE},
    {&PROBE_WIDTH, {17, 37, 64, 8, 0}, ROUTE_SATURATED, 1e-12, WHY_PROBE},
    {&PROBE_WIDTH, {5, 37, 64, 4, 0}, ROUTE_ZERO_Q, 1e-12, WHY_PROBE},
    {&PROBE_WIDTH, {17, 37, 64, 2, 0}, ROUTE_RISING, 1e-12, WHY_PROBE},
    {&PROBE_WIDTH, {5, 37, 60, 6, 1}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_WIDTH, {17, 37, 64, 8, 1}, ROUTE_RISING, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {1, 37, 64, 4, 0}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {5, 37, 64, 1, 0}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {5, 37, 64, 8, 0}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {17, 37, 256, 128, 0}, ROUTE_SPREAD, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {17, 37, 64, 8, 0}, ROUTE_SATURATED, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {5, 37, 64, 4, 0}, ROUTE_ZERO_Q, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {17, 37, 64, 2, 0}, ROUTE_RISING, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {5, 37, 60, 6, 1}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_HEADS, {17, 37, 64, 8, 1}, ROUTE_SATURATED, 1e-12, WHY_PROBE},
    {&PROBE_WEIGHT_ERROR, {5, 37, 64, 8, 0}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_WEIGHT_ERROR, {17, 37, 256, 4, 0}, ROUTE_SATURATED, 1e-12, WHY_PROBE},
    {&PROBE_WEIGHT_ERROR, {1, 11, 64, 2, 0}, ROUTE_RANDOM, 1e-12, WHY_PROBE},
    {&PROBE_WEIGHT_ERROR, {17, 37, 64, 8, 1}, ROUTE_RISING, 1e-12, WHY_PROBE},
    {&PROBE_WEIGHT_ERROR, {5, 11, 18, 2, 1}, ROUTE_SPREAD, 1e-12, WHY_PROBE},
    // hyper-connections: streams at a padded stride and packed; n_tok·d
    // large enough for the parallel path; tokens fewer than the 64 chunks
    {&HC_READ, {37, 64, 16}, 0, 1e-6, WHY_HC},
    {&HC_READ, {600, 64, 0}, 0, 1e-6, WHY_HC},
    {&HC_READ, {3, 5, 3}, 0, 1e-6, WHY_HC},
    {&HC_FIRST_READ, {37, 64, 16}, 0, 1e-6, WHY_HC},
    {&HC_FIRST_READ, {600, 64, 0}, 0, 1e-6, WHY_HC},
    {&HC_FIRST_READ, {3, 5, 1}, 0, 1e-6, WHY_HC},
    {&HC_WRITE, {37, 64, 16}, 0, 1e-5, WHY_HC},
    {&HC_WRITE, {600, 64, 0}, 0, 1e-5, WHY_HC},
    {&HC_WRITE, {3, 5, 3}, 0, 1e-5, WHY_HC},
    {&HC_WRITE, {1, 7, 0}, 0, 1e-5, WHY_HC},
    {&HC_WRITE_FRESH, {37, 64, 16}, 0, 1e-5, WHY_HC},
    {&HC_WRITE_FRESH, {600, 64, 0}, 0, 1e-5, WHY_HC},
    {&HC_WRITE_FRESH, {3, 5, 3}, 0, 1e-5, WHY_HC},
    {&HC_BACKWARD, {37, 64, 16, 0}, 0, 1e-5, WHY_HC},
    {&HC_BACKWARD, {37, 64, 16, 1}, 0, 1e-5, WHY_HC},
    {&HC_BACKWARD, {600, 64, 0, 0}, 0, 1e-5, WHY_HC},
    {&HC_BACKWARD, {3, 13, 3, 1}, 0, 1e-5, WHY_HC},
    {&HC_BACKWARD, {1, 7, 0, 0}, 0, 1e-5, WHY_HC},
    // DenseFormer: one to 13 sources, padded strides, d not a multiple of 8
    {&DWA, {1, 37, 64, 0}, 0, 1e-5, WHY_SUMS},
    {&DWA, {2, 37, 64, 16}, 0, 1e-5, WHY_SUMS},
    {&DWA, {5, 37, 18, 3}, 0, 1e-5, WHY_SUMS},
    {&DWA, {13, 300, 128, 0}, 0, 1e-5, WHY_SUMS},
    {&DWA, {3, 3, 5, 1}, 0, 1e-5, WHY_SUMS},
    {&DWA_NEXT, {2, 37, 64, 16}, 0, 1e-5, WHY_SUMS},
    {&DWA_NEXT, {5, 300, 128, 0}, 0, 1e-5, WHY_SUMS},
    {&DWA_NEXT, {3, 3, 5, 1}, 0, 1e-5, WHY_SUMS},
    {&GATED_READ, {37, 64}, 0, 1e-5, WHY_SUMS},
    {&GATED_READ, {300, 128}, 0, 1e-5, WHY_SUMS},
    {&GATED_READ, {3, 5}, 0, 1e-5, WHY_SUMS},
    {&GATED_READ, {1, 1}, 0, 1e-5, WHY_SUMS},
};

// ---- the harness ------------------------------------------------------------------------

// Central differences: a coordinate moves by FD_REL · the RMS of its row
// (relative steps: truncation ~FD_REL², rounding ~1e-16 / FD_REL, both far
// below the fp32 tolerances). Every coordinate of a tensor of up to FD_ALL
// elements is checked, else FD_SAMPLES of them (the first, the last, random).
#define FD_REL 1e-5
#define FD_ALL 96
#define FD_SAMPLES 40
// Differences resolve a gradient to ~1e-16 / FD_REL of the loss's terms: a
// row whose gradients are far below the tensor's largest (a routing source
// of weight 1e-30) is measured against 1e-3 of the largest instead of its own.
#define FD_ROW_FLOOR 1e-3

static double *dnew(size_t n) { return calloc(n ? n : 1, sizeof(double)); }
static float *fnew(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

// max over rows of `row` elements (0: the whole tensor) of the row's rel_err.
static double row_err(const float *a, const double *ref, size_t n, size_t row) {
    if (row == 0 || row > n) row = n;
    double worst = 0;
    for (size_t r0 = 0; r0 < n; r0 += row) {
        double e = rel_err(a + r0, ref + r0, n - r0 < row ? n - r0 : row);
        if (e > worst || isnan(e)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

// The same for a double output, each row's error relative to at least `floor`.
static double row_err_f64(const double *a, const double *ref, size_t n, size_t row, double floor) {
    if (row == 0 || row > n) row = n;
    double worst = 0;
    for (size_t r0 = 0; r0 < n; r0 += row) {
        size_t r1 = r0 + row < n ? r0 + row : n;
        double num = 0, den = fmax(floor, 1e-30);
        for (size_t i = r0; i < r1; i++) {
            double e = fabs(a[i] - ref[i]);
            num = isnan(e) || e > num ? (isnan(e) ? INFINITY : e) : num;
            den = fmax(den, fabs(ref[i]));
        }
        worst = fmax(worst, num / den);
    }
    return worst;
}

// Every output NaN (the op must write each), float and double ones.
static void outputs_nan(Case *c) {
    for (int j = 0; j < MAX_OUT; j++) {
        if (c->out[j]) fill_value(c->out[j], c->n_out[j], NAN);
        for (size_t e = 0; c->outd[j] && e < c->n_out[j]; e++) c->outd[j][e] = NAN;
    }
}

// Per element k: the RMS (rms = 1) or the max |a| (rms = 0) of k's row of
// `row` elements (0: the whole tensor).
static double *row_stats(const float *a, size_t n, size_t row, int rms) {
    if (row == 0 || row > n) row = n;
    double *out = dnew(n);
    for (size_t r0 = 0; r0 < n; r0 += row) {
        size_t r1 = r0 + row < n ? r0 + row : n;
        double s = 0;
        for (size_t i = r0; i < r1; i++) s = rms ? s + (double)a[i] * a[i] : fmax(s, fabs(a[i]));
        if (rms) s = sqrt(s / (double)(r1 - r0));
        for (size_t i = r0; i < r1; i++) out[i] = s;
    }
    return out;
}

// The double inputs of the reference and two output sets for differences.
typedef struct { double *in[MAX_IN], *plus[MAX_OUT], *minus[MAX_OUT]; } Ref;

// (L(x + v) − L(x − v)) / 2 for input i moved along v: its element k by h
// (v = NULL), or every element by v[]. ≈ h · ∂L/∂x_k, or Σ v ⊙ ∇L. The
// outputs that do not depend on x come out bit-identical and cancel
// exactly; *noise bounds the double rounding of those that do (16 ulps of
// each term), below which a difference resolves nothing.
static double central_diff(const Case *c, Ref *R, int i, size_t k, double h, const double *v, double *noise) {
    double *x = R->in[i], *keep = dnew(c->n_in[i]);
    memcpy(keep, x, c->n_in[i] * sizeof(double));
    for (int sign = 1; sign >= -1; sign -= 2) {
        if (v) for (size_t e = 0; e < c->n_in[i]; e++) x[e] = keep[e] + sign * v[e];
        else x[k] = keep[k] + sign * h;
        c->op->reference(c, R->in, sign > 0 ? R->plus : R->minus);
    }
    memcpy(x, keep, c->n_in[i] * sizeof(double));
    free(keep);
    double s = 0, mag = 0;
    for (int j = 0; j < MAX_OUT; j++)
        if (c->dout[j])
            for (size_t e = 0; e < c->n_out[j]; e++) {
                const double p = R->plus[j][e], m = R->minus[j][e];
                if (p == m) continue;
                s += c->dout[j][e] * (p - m);
                mag += fabs(c->dout[j][e]) * (fabs(p) + fabs(m));
            }
    *noise = 16 * DBL_EPSILON * mag / 2;
    return s / 2;
}

// Input i's gradient c->din[i] against central differences of the
// reference: the worst coordinate (relative to the largest gradient of its
// row, or FD_ROW_FLOOR of the tensor's if that is larger) and the random
// direction (relative to Σ |g ⊙ v|).
static double fd_check(const Case *c, Ref *R, int i, Rng *rng, double *dir_err) {
    size_t n = c->n_in[i];
    const float *g = c->din[i];
    double *rms = row_stats(c->in[i], n, c->step_row[i], 1), *gmax = row_stats(g, n, c->err_row[i], 0);
    double worst = 0, noise, all = 0;
    for (size_t k = 0; k < n; k++) all = fmax(all, gmax[k]);
    for (size_t k = 0; k < n; k++) gmax[k] = fmax(gmax[k], FD_ROW_FLOOR * all);
    size_t samples = n <= FD_ALL ? n : FD_SAMPLES;
    for (size_t s = 0; s < samples; s++) {
        size_t k = samples == n ? s : s == 0 ? 0 : s == 1 ? n - 1 : (size_t)rng_below(rng, n);
        double h = FD_REL * (rms[k] > 0 ? rms[k] : 1);
        double fd = central_diff(c, R, i, k, h, NULL, &noise) / h;
        double den = fmax(fmax(gmax[k], fabs(fd)), 1e-300);
        double e = fabs(g[k] - fd) - noise / h;  // NaN (a gradient left unwritten) must not
        e = isnan(e) ? INFINITY : fmax(e, 0) / den;  // reach fmax, which drops NaN
        worst = fmax(worst, e);
    }
    double *v = dnew(n), dot = 0, mag = 0;
    for (size_t k = 0; k < n; k++) {
        v[k] = FD_REL * (rms[k] > 0 ? rms[k] : 1) * rng_normal(rng);
        dot += g[k] * v[k], mag += fabs(g[k] * v[k]);
    }
    double fd = central_diff(c, R, i, 0, 0, v, &noise);
    double e = fabs(dot - fd) - noise;
    *dir_err = isnan(e) ? INFINITY : fmax(e, 0) / fmax(mag, 1e-300);
    free(v), free(rms), free(gmax);
    return worst;
}

static void prefill_grads(Case *c) { // overwritten gradients NaN (must be written), accumulated ones 0
    for (int i = 0; i < MAX_IN; i++)
        if (c->din[i]) fill_value(c->din[i], c->n_in[i], c->op->grad[i] == GRAD_SET ? NAN : 0.0f);
}

static uint64_t case_seed(const TestCase *tc) { // from the case itself: adding a case changes no other
    uint64_t h = 1469598103934665603ull;
    for (const char *s = tc->op->name; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    for (int j = 0; j < MAX_P; j++) h = (h ^ (uint64_t)tc->p[j]) * 1099511628211ull;
    return (h ^ (uint64_t)tc->kind) * 1099511628211ull;
}

static void case_name(char *buf, size_t cap, const Backend *be, const TestCase *tc) {
    int used = snprintf(buf, cap, "%s %s", be->name, tc->op->name);
    const char *pn = tc->op->pnames;
    for (int j = 0; j < MAX_P && *pn && used < (int)cap; j++) {
        size_t len = strcspn(pn, " ");
        used += snprintf(buf + used, cap - used, " %.*s%d", (int)len, pn, tc->p[j]);
        pn += len + (pn[len] == ' ');
    }
    if (tc->op->kinds[tc->kind] && used < (int)cap) snprintf(buf + used, cap - used, " %s", tc->op->kinds[tc->kind]);
}

static void run_case(Backend *be, const TestCase *tc, const char *name) {
    const Op *op = tc->op;
    Case c = {.op = op, .kind = tc->kind};
    memcpy(c.p, tc->p, sizeof c.p);
    op->shape(&c);
    Ref R;
    memset(&R, 0, sizeof R);
    float *out1[MAX_OUT] = {0}, *din1[MAX_IN] = {0};
    double *outd1[MAX_OUT] = {0};
    for (int i = 0; i < MAX_IN; i++) {
        if (!c.n_in[i]) continue;
        c.in[i] = fnew(c.n_in[i]);
        if (op->backward && op->grad[i]) c.din[i] = fnew(c.n_in[i]), din1[i] = fnew(c.n_in[i]);
    }
    for (int j = 0; j < MAX_OUT; j++) {
        if (!c.n_out[j]) continue;
        if (c.f64[j]) c.outd[j] = dnew(c.n_out[j]), outd1[j] = dnew(c.n_out[j]);
        else c.out[j] = fnew(c.n_out[j]), out1[j] = fnew(c.n_out[j]);
        R.plus[j] = dnew(c.n_out[j]), R.minus[j] = dnew(c.n_out[j]);
        if (op->backward && op->dout[j] && !c.f64[j]) c.dout[j] = fnew(c.n_out[j]);
    }
    c.ids = calloc(c.n_ids ? c.n_ids : 1, sizeof(int));
    Rng rng;
    rng_seed(&rng, case_seed(tc));
    if (op->init) op->init(&c, &rng);
    for (int i = 0; i < MAX_IN; i++)
        if (c.in[i]) {
            R.in[i] = dnew(c.n_in[i]);
            for (size_t e = 0; e < c.n_in[i]; e++) R.in[i][e] = c.in[i][e];
        }
    const double tol = tc->tol + (op->tol_data ? op->tol_data(&c) : 0);
    char line[400];

    // forward: every output written (NaN before), against the reference
    outputs_nan(&c);
    op->forward(be, &c);
    op->reference(&c, R.in, R.plus);
    double ef = 0;
    for (int j = 0; j < MAX_OUT; j++)
        if (c.out[j]) {
            ef = fmax(ef, row_err(c.out[j], R.plus[j], c.n_out[j], c.err_row_out[j]));
            memcpy(out1[j], c.out[j], c.n_out[j] * sizeof(float));
        } else if (c.outd[j]) {
            ef = fmax(ef, row_err_f64(c.outd[j], R.plus[j], c.n_out[j], c.err_row_out[j], c.err_floor[j]));
            memcpy(outd1[j], c.outd[j], c.n_out[j] * sizeof(double));
        }
    snprintf(line, sizeof line, "%s forward (err %.2e, tol %.1e)", name, ef, tol);
    CHECK(ef <= tol, line, "above the tolerance: %s", tc->why);

    // backward: from the projection loss's r, against central differences
    if (op->backward) {
        for (int j = 0; j < MAX_OUT; j++)
            if (c.dout[j]) {
                if (op->dout[j] == DOUT_SCALE) fill_value(c.dout[j], c.n_out[j], 1.0f / (float)c.n_out[j]);
                else fill_normal(c.dout[j], c.n_out[j], 1, &rng);
            }
        prefill_grads(&c);
        op->backward(be, &c);
        double eb = 0, worst_coord[MAX_IN] = {0}, worst_dir[MAX_IN] = {0};
        for (int i = 0; i < MAX_IN; i++)
            if (c.din[i]) {
                memcpy(din1[i], c.din[i], c.n_in[i] * sizeof(float));
                worst_coord[i] = fd_check(&c, &R, i, &rng, &worst_dir[i]);
                eb = fmax(eb, fmax(worst_coord[i], worst_dir[i]));
            }
        snprintf(line, sizeof line, "%s backward vs finite differences (err %.2e, tol %.1e)", name, eb, tol);
        CHECK(eb <= tol, line, "per input (coordinates, direction): %.2e %.2e | %.2e %.2e | %.2e %.2e | %.2e %.2e; %s",
              worst_coord[0], worst_dir[0], worst_coord[1], worst_dir[1], worst_coord[2], worst_dir[2],
              worst_coord[3], worst_dir[3], tc->why);
    }

    // deterministic: the same inputs give the same bits
    int same = 1;
    outputs_nan(&c);
    op->forward(be, &c);
    for (int j = 0; j < MAX_OUT; j++) {
        same &= !c.out[j] || same_bits(c.out[j], out1[j], c.n_out[j]);
        same &= !c.outd[j] || memcmp(c.outd[j], outd1[j], c.n_out[j] * sizeof(double)) == 0;
    }
    if (op->backward) {
        prefill_grads(&c);
        op->backward(be, &c);
        for (int i = 0; i < MAX_IN; i++) same &= !c.din[i] || same_bits(c.din[i], din1[i], c.n_in[i]);
    }
    snprintf(line, sizeof line, "%s deterministic", name);
    CHECK(same, line, "a second run gives different bits");

    // accumulates: run again over the first result; an accumulated gradient
    // doubles (to rounding), an overwritten one is the same bits
    int any_acc = 0;
    for (int i = 0; i < MAX_IN; i++) any_acc |= c.din[i] && op->grad[i] == GRAD_ACC;
    if (any_acc) {
        double ea = 0;
        int set_same = 1;
        for (int i = 0; i < MAX_IN; i++)
            if (c.din[i] && op->grad[i] == GRAD_SET) fill_value(c.din[i], c.n_in[i], NAN);
        op->backward(be, &c);
        for (int i = 0; i < MAX_IN; i++) {
            if (!c.din[i]) continue;
            if (op->grad[i] == GRAD_SET) {
                set_same &= same_bits(c.din[i], din1[i], c.n_in[i]);
                continue;
            }
            double *twice = dnew(c.n_in[i]);
            for (size_t e = 0; e < c.n_in[i]; e++) twice[e] = 2.0 * din1[i][e];
            ea = fmax(ea, row_err(c.din[i], twice, c.n_in[i], c.err_row[i]));
            free(twice);
        }
        snprintf(line, sizeof line, "%s backward accumulates (err vs 2x %.2e, tol %.1e)", name, ea, tol);
        CHECK(ea <= tol && set_same, line, "accumulated gradients off, or overwritten ones differ: %d",
              !set_same);
    }

    for (int i = 0; i < MAX_IN; i++) free(c.in[i]), free(c.din[i]), free(din1[i]), free(R.in[i]);
    for (int j = 0; j < MAX_OUT; j++)
        free(c.out[j]), free(c.outd[j]), free(c.dout[j]), free(out1[j]), free(outd1[j]), free(R.plus[j]),
            free(R.minus[j]);
    free(c.ids);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    for (size_t b = 0; b < sizeof BACKENDS / sizeof BACKENDS[0]; b++) {
        Backend be = {.name = BACKENDS[b].name};
        if (BACKENDS[b].open(&be)) {
            CHECK(0, be.name, "backend failed to open: %s", mhar_error());
            continue;
        }
        for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
            char name[160];
            case_name(name, sizeof name, &be, &CASES[i]);
            if (!only || strstr(name, only)) run_case(&be, &CASES[i], name);
        }
        BACKENDS[b].close(&be);
    }
    CHECK_EXIT();
}
