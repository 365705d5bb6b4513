// Depth routing, forward (SPEC §5), over tiles of tokens (route_impl.h).
// Per tile, the first pass walks the sources one at a time over the tile's
// tokens, writes the logits into the w slots and fetches the next tile's
// rows; then, token by token, the softmax over all sources in place and the
// weighted sum, reading the tile's rows again from L2. Only w [N, n_tok, H]
// is saved for the backward.
// Compiled with -ffp-contract=fast (Makefile): the dot products and the
// weighted sum become FMAs (measured: forward ~10% faster), as in the backward.
#include "kernels/cpu/route_impl.h"

// Source row S [d] -> lg [H]: Σ_{k∈h} qg_k S_k (the logits before ρ);
// returns Σ S² over the full width, which rides along the head dots.
INLINE float source_dots(float *restrict lg, const float *restrict S, const Args *A, int hw) {
    v8 ss[4] = {{0}, {0}, {0}, {0}};
    float ts = 0;
    for (int h = 0; h < A->H; h++) {
        const int o = h * hw;
        lg[h] = slice_stats(S + o, A->qg + o, hw, ss, &ts);
    }
    return hsum4(ss) + ts;
}

// Token t's w slots [N] (stride ws) of heads [h0, h0 + hc): logits in,
// softmax weights out.
INLINE void softmax_slots(float *restrict wt, size_t ws, int n_src, int hc) {
    float m[HEAD_CHUNK], inv[HEAD_CHUNK];
    for (int i = 0; i < hc; i++) m[i] = -INFINITY, inv[i] = 0;
    for (int n = 0; n < n_src; n++)
        for (int i = 0; i < hc; i++) m[i] = wt[n * ws + i] > m[i] ? wt[n * ws + i] : m[i];
    for (int n = 0; n < n_src; n++)
        for (int i = 0; i < hc; i++) {
            const float e = vexp(wt[n * ws + i] - m[i]); // argument <= 0
            wt[n * ws + i] = e;
            inv[i] += e;
        }
    for (int i = 0; i < hc; i++) inv[i] = 1.0f / inv[i];
    for (int n = 0; n < n_src; n++)
        for (int i = 0; i < hc; i++) wt[n * ws + i] *= inv[i];
}

// The softmaxes of a tile's n_slot (token, head) slots, contiguous in each
// source's block, HEAD_CHUNK at a time across tokens rather than one token's
// H at a time (H 1: one lane; mix in cache 0.78-0.86x the time at micro and
// 100m, H 1 and 8; the same bits).
INLINE void softmax_tile(float *restrict w, size_t ws, int n_src, int n_slot) {
    for (int i0 = 0; i0 < n_slot; i0 += HEAD_CHUNK)
        softmax_slots(w + i0, ws, n_src, n_slot - i0 < HEAD_CHUNK ? n_slot - i0 : HEAD_CHUNK);
}

// x_t += Σ_{i<4} w_i S_i over a token's row: sources n..n+3 (rows S0..S3,
// weight slots w0 + i·ws), the partial sums in registers across the four.
INLINE void add_four_rows(float *restrict xt, const float *restrict S0, const float *restrict S1,
                          const float *restrict S2, const float *restrict S3, const float *w0, size_t ws,
                          int H, int hw) {
    for (int h = 0; h < H; h++) {
        const int o = h * hw;
        const float e0 = w0[h], e1 = w0[ws + h], e2 = w0[2 * ws + h], e3 = w0[3 * ws + h];
        for (int k = 0; k < hw; k++) {
            float v = xt[o + k];
            v += e0 * S0[o + k];
            v += e1 * S1[o + k];
            v += e2 * S2[o + k];
            v += e3 * S3[o + k];
            xt[o + k] = v;
        }
    }
}

// x_t += w S for one source.
INLINE void add_row(float *restrict xt, const float *restrict S, const float *wn, int H, int hw) {
    for (int h = 0; h < H; h++) {
        const int o = h * hw;
        const float e = wn[h];
        for (int k = 0; k < hw; k++) xt[o + k] += e * S[o + k];
    }
}

// Token t: x_t = Σ_n w_n S_n (its weights already taken), row by row
// (the sources sit a stride apart that walking one head across rows would
// map to few L1 sets). Four sources at a time, so that x_t's partial sums
// stay in registers across them (the same sums in the same order as one at
// a time; with ρ below, 0.92-0.94 of the time over the model's 17 reads).
INLINE void token_sum(float *restrict xt, float *restrict w, const Args *A, int t, int hw) {
    const int H = A->H;
    const size_t ws = (size_t)A->n_tok * H; // w stride between sources
    const float *wt = w + (size_t)t * H;     // w slot (source 0, head 0)
    memset(xt, 0, (size_t)A->d * sizeof(float));
    int n = 0;
    for (; n + 4 <= A->n_src; n += 4) {
        const float *restrict S0 = src_row(A, n, t), *restrict S1 = src_row(A, n + 1, t);
        const float *restrict S2 = src_row(A, n + 2, t), *restrict S3 = src_row(A, n + 3, t);
        add_four_rows(xt, S0, S1, S2, S3, wt + n * ws, ws, H, hw);
    }
    for (; n < A->n_src; n++) add_row(xt, src_row(A, n, t), wt + n * ws, H, hw);
}

// Tokens [t0, t1): logits source by source, then weights and sums token by
// token. The logits pass fetches the next tile's rows into L2 as it goes
// (source n's row of token t1 + i beside its row of t0 + i), so that memory
// works while this tile's logits and sums are computed; fetched during the
// sums instead, nothing was in flight through the logits pass: 0.84-0.93x
// the time from memory (N 2-25 sources, micro's and 100m's d and n_tok,
// alternated in one process after a 600 MB read, 21 pairs; Intel Xeon).
INLINE void forward_tile(float *restrict x, float *restrict w, const Args *A, int t0, int t1, int hw) {
    const int H = A->H, nt = t1 - t0;
    const size_t ws = (size_t)A->n_tok * H;
    for (int n = 0; n < A->n_src; n++) {
        float *wn = w + n * ws + (size_t)t0 * H, rho[TILE_MAX]; // Σ S², then ρ
        for (int i = 0; i < nt; i++) {
            if (t1 + i < A->n_tok) prefetch_row_l2(src_row(A, n, t1 + i), A->d, 0);
            rho[i] = source_dots(wn + (size_t)i * H, src_row(A, n, t0 + i), A, hw);
        }
        // ρ for the whole tile in one vector pass (perf: one row at a time,
        // its scalar sqrt and divide took ~12% of the forward's samples).
        for (int i = 0; i < nt; i++) rho[i] = rms_inv(rho[i], A->d, A->eps);
        for (int i = 0; i < nt; i++)
            for (int h = 0; h < H; h++) wn[(size_t)i * H + h] *= rho[i];
    }
    softmax_tile(w + (size_t)t0 * H, ws, A->n_src, nt * H);
    for (int t = t0; t < t1; t++) token_sum(x + (size_t)t * A->d, w, A, t, hw);
}

// route_mix: the logits come in (route_keys wrote them for every reader of a
// source), so a read is one pass over its sources, and it goes source by
// source: per tile of tokens, the logits are copied into the w slots and
// each token's softmax taken, then the tile's x rows (MIX_TILE_BYTES, held
// in cache) gather the sources four at a time, each source's rows one
// contiguous run for the tile. Token by token instead (as token_sum), a
// token's rows of all the sources are that many streams at once: micro's 17
// reads took 1.23-1.29x this time at H 8 (1.29 at H 4, 1.20 at H 1, 1.06 at
// H 16; both builds in one process, caches flushed between calls). Each x
// element sums the sources in the same order either way (the same bits).
// 16 KiB tiles were 1.04-1.05x the time of 32, 64 KiB the same.
enum { MIX_TILE_BYTES = 32 << 10 };

INLINE void mix_tile(float *restrict x, float *restrict w, const float *restrict lg, const Args *A, int t0,
                     int t1, int hw) {
    const int H = A->H, d = A->d, nt = t1 - t0;
    const size_t ws = (size_t)A->n_tok * H, off = (size_t)t0 * H;
    for (int n = 0; n < A->n_src; n++)
        memcpy(w + n * ws + off, lg + n * ws + off, (size_t)nt * H * sizeof(float));
    softmax_tile(w + off, ws, A->n_src, nt * H);
    memset(x + (size_t)t0 * d, 0, (size_t)nt * d * sizeof(float));
    int n = 0;
    for (; n + 4 <= A->n_src; n += 4)
        for (int t = t0; t < t1; t++) {
            const float *restrict S0 = src_row(A, n, t), *restrict S1 = src_row(A, n + 1, t);
            const float *restrict S2 = src_row(A, n + 2, t), *restrict S3 = src_row(A, n + 3, t);
            add_four_rows(x + (size_t)t * d, S0, S1, S2, S3, w + n * ws + (size_t)t * H, ws, H, hw);
        }
    for (; n < A->n_src; n++)
        for (int t = t0; t < t1; t++) add_row(x + (size_t)t * d, src_row(A, n, t), w + n * ws + (size_t)t * H, H, hw);
}

void route_mix(OpsContext *ctx, float *x, float *w, const float *lg, RouteSources S, int n_tok, int d,
               int H) {
    OPS_TIMED(ctx);
    (void)ctx;
    const int n_src = S.n;
    if (n_src <= 0) {
        memset(x, 0, (size_t)n_tok * d * sizeof(float));
        return;
    }
    const Args A = {.S = S, .n_src = n_src, .n_tok = n_tok, .d = d, .H = H};
    const size_t fit = MIX_TILE_BYTES / ((size_t)d * sizeof(float));
    const int hw = d / H, tile = fit < TILE_MIN ? TILE_MIN : fit > TILE_MAX ? TILE_MAX : (int)fit;
    const int n_tiles = (n_tok + tile - 1) / tile;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n_tiles; i++) {
        const int t0 = i * tile, t1 = t0 + tile < n_tok ? t0 + tile : n_tok;
#define MIX(HW) mix_tile(x, w, lg, &A, t0, t1, HW)
        DISPATCH_HW(hw, MIX)
#undef MIX
    }
}

void route_forward(OpsContext *ctx, float *x, float *w, float *scratch, RouteSources S,
                   const float *q, const float *g, int n_tok, int d, int H, float eps) {
    OPS_TIMED(ctx);
    (void)ctx;
    const int n_src = S.n;
    if (n_src <= 0) { // nothing to read: the empty sum
        memset(x, 0, (size_t)n_tok * d * sizeof(float));
        return;
    }
    const Args A = {.S = S, .qg = key_weight(scratch, q, g, d), .n_src = n_src,
                    .n_tok = n_tok, .d = d, .H = H, .eps = eps};
    const int hw = d / H;
    const int tile = route_tile_tokens(n_src, d);
    const int n_tiles = (n_tok + tile - 1) / tile;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n_tiles; i++) {
        const int t0 = i * tile, t1 = t0 + tile < n_tok ? t0 + tile : n_tok;
#define FWD(HW) forward_tile(x, w, &A, t0, t1, HW)
        DISPATCH_HW(hw, FWD)
#undef FWD
    }
}
