// Full routing source by source (ops.h: route_keys, route_dx_keep,
// route_gather; route_mix is in route_forward.c). A source's logits at every
// site that reads it come from one pass over its rows; its gradient is
// gathered from those sites' kept dx in one pass that writes it once.
//
// Per token, for a source S [d] with ρ = rsqrt(mean S² + eps), read by sites
// j with key weight qg_j = q_j ⊙ g_j, logits ℓ_j,h, weights w_j,h, gradient
// dx_j and c_j,h = ⟨dx_j,h, x_j,h⟩ = Σ_n w_j,n,h ⟨dx_j,h, S_n,h⟩:
//   a_j,h  = ⟨dx_j,h, S_h⟩,   dℓ_j,h = w_j,h (a_j,h − c_j,h),   u_j,h = ρ dℓ_j,h
//   dS_k   = Σ_j (w_j,h(k) dx_j,k + u_j,h(k) qg_j,k) − β S_k,   β = (ρ²/d) Σ_j,h dℓ_j,h ℓ_j,h
//   z_j,k += u_j,h(k) S_k  (summed over tokens: dq_j += g_j ⊙ z_j, dg_j += q_j ⊙ z_j)
// which is route_backward's gradient summed over the sites, with its s_h
// (= Σ_n w a) taken as ⟨dx, x⟩ from the read's output. route_backward takes
// s relative to the heaviest source instead, because for a saturated head
// a_p − s is tiny and Σ w a loses it to cancellation; here x carries that
// rounding (~FLT_EPSILON·|a| in each dℓ). On test_ops' saturated case at
// N 17, d 256, H 1 that is an error of 1.0e-5 against route_backward's
// 7.3e-7, both within the stated 5.2e-4 (4·FLT_EPSILON times the logits'
// terms). The gather cannot take the pivot: the other sources' a come from
// other calls.
// Compiled with -ffp-contract=fast (Makefile), as the other route kernels.
#include "kernels/cpu/route_impl.h"
#include "kernels/cpu/tile_gemm.h"

// qg rows of the readers, d floats each padded to whole cache lines.
static size_t readers_floats(int n_rd, int d) { return (size_t)n_rd * qg_floats(d); }

// route_keys': QGᵀ [d, n_rd rounded up to whole vectors], then per thread a
// product buffer of TILE_MAX such rows.
static int keys_ld(int n_rd) { return (n_rd + TILE_GEMM_COLS - 1) / TILE_GEMM_COLS * TILE_GEMM_COLS; }

static size_t keys_floats(int n_rd, int d) {
    return (size_t)keys_ld(n_rd) * ((size_t)d + (size_t)omp_get_max_threads() * TILE_MAX);
}

// Tokens per tile of the gather: 32 KiB of source rows (32 tokens at d
// 256), its S and dS rows held in cache while the readers' dx rows pass.
// (Measured with one dx stream and its rows fetched ahead: micro's 17
// readers × 4096 tokens took 3.4-3.6 ms a call at 32 or 64 tokens, 3.7-4.2
// at 15.) route_keys walks the same tiles.
enum { GATHER_TILE_BYTES = 32 << 10 };

static int gather_tile_tokens(int d) {
    const size_t fit = GATHER_TILE_BYTES / ((size_t)d * sizeof(float));
    return fit < TILE_MIN ? TILE_MIN : fit > TILE_MAX ? TILE_MAX : (int)fit;
}

// route_gather's: the readers' qg rows, then per thread z [n_rd] rows (the
// readers' dq/dg partials), then per thread a tile's u [tile, n_rd, H].
static size_t gather_u_floats(int n_rd, int d, int H) {
    return ((size_t)n_rd * gather_tile_tokens(d) * H + PAD - 1) / PAD * PAD;
}

size_t route_source_scratch_floats(int n_rd, int d, int H) {
    const size_t gather = readers_floats(n_rd, d) * (1 + (size_t)omp_get_max_threads()) +
                          (size_t)omp_get_max_threads() * gather_u_floats(n_rd, d, H);
    return gather > keys_floats(n_rd, d) ? gather : keys_floats(n_rd, d);
}

static const float *readers_key_weights(float *qg, const RouteReader *rd, int n_rd, int d) {
    for (int j = 0; j < n_rd; j++) key_weight(qg + (size_t)j * qg_floats(d), rd[j].q, rd[j].g, d);
    return qg;
}

// ---- forward: the logits of one source at every reader ------------------------------

// Two forms, both summing each logit's terms in a fixed order that does
// not depend on which readers share a pass (readers with one query get the
// same bits). They replaced per-(token, reader, head) dot products summed
// across their lanes by a tree of shuffles, two readers sharing each source
// load (f823627 to 2026-12-07), which ran at about a fifth of the machine's
// multiply-add rate: its sums, not its loads, set the pace. Medians of
// 31-61 alternated pairs of calls, caches flushed between calls or not
// (a scratch program over libmhar.a, 2-core AMD EPYC Zen 3), time against
// that form: micro's final read (17 readers, d 256) 0.63-0.65 in cache and
// 0.74 from memory at H 8 (width 32), 0.73 at H 16; 100m's (25 readers,
// d 512) at H 8 (width 64) 0.81-0.88 of the product form's time, which
// matched the old one there; at d 1024, H 8, 0.71-0.78 of the product
// form's.
//
// Heads in lanes (H a multiple of 8, widths a multiple of 8): per token the
// source row is reordered so that row p of head group g holds element p of
// its eight heads' slices ([H/8][hw][8], 8 × 8 transposes), as is every
// reader's qg once per call; a group's eight logits are then hw vertical
// multiply-adds into four accumulators, with no sum across lanes. Readers
// two at a time, each reordered source vector loaded once for both.

// The 8 × 8 block at src (row stride `stride`) transposed into dst [8][8].
INLINE void transpose8x8(float *restrict dst, const float *restrict src, size_t stride) {
    v8 r[8];
    for (int i = 0; i < 8; i++) r[i] = LOAD8(src + i * stride);
#define LO(a, b) __builtin_shufflevector(a, b, 0, 8, 1, 9, 4, 12, 5, 13)
#define HI(a, b) __builtin_shufflevector(a, b, 2, 10, 3, 11, 6, 14, 7, 15)
#define EVEN2(a, b) __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13)
#define ODD2(a, b) __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15)
    // Lane pairs, then quads: u_c holds column c in its low half, c + 4 in its high.
    const v8 t0 = LO(r[0], r[1]), t1 = HI(r[0], r[1]), t2 = LO(r[2], r[3]), t3 = HI(r[2], r[3]);
    const v8 t4 = LO(r[4], r[5]), t5 = HI(r[4], r[5]), t6 = LO(r[6], r[7]), t7 = HI(r[6], r[7]);
    const v8 u[8] = {EVEN2(t0, t2), ODD2(t0, t2), EVEN2(t1, t3), ODD2(t1, t3),
                     EVEN2(t4, t6), ODD2(t4, t6), EVEN2(t5, t7), ODD2(t5, t7)};
#undef LO
#undef HI
#undef EVEN2
#undef ODD2
    for (int c = 0; c < 4; c++) {
        STORE8(dst + 8 * c, __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11));
        STORE8(dst + 8 * (c + 4), __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15));
    }
}

// out [H/8][hw][8] = row x [d] with eight heads in the lanes: lane i of row p
// of group g is x[(8g + i)·hw + p].
INLINE void heads_in_lanes(float *restrict out, const float *restrict x, int d, int hw) {
    for (int g = 0; g < d / (8 * hw); g++)
        for (int p0 = 0; p0 < hw; p0 += 8)
            transpose8x8(out + ((size_t)g * hw + p0) * 8, x + (size_t)g * 8 * hw + p0, (size_t)hw);
}

// Head group g's eight logits of one reordered row st at n readers (1 or 2;
// qg rows ld apart), ρ-scaled, into out[0], out[1].
INLINE void group_logits(float *const out[2], const float *restrict st, const float *restrict qg, size_t ld, int n,
                         int hw, float rho) {
    v8 a[2][4] = {{{0}, {0}, {0}, {0}}, {{0}, {0}, {0}, {0}}};
    for (int p = 0; p < hw; p += 4) // hw a multiple of 8: constant indices keep a[][] in registers
        for (int q = 0; q < 4; q++) {
            const v8 x = LOAD8(st + 8 * (p + q));
            for (int i = 0; i < n; i++) a[i][q] += x * LOAD8(qg + i * ld + 8 * (p + q));
        }
    const v8 r = {rho, rho, rho, rho, rho, rho, rho, rho};
    for (int i = 0; i < n; i++) STORE8(out[i], r * ((a[i][0] + a[i][1]) + (a[i][2] + a[i][3])));
}

// Tokens [t0, t1): ρ and every reader's logits, token by token; qgr the
// readers' reordered qg (rows qg_floats(d) apart), st [d] this thread's.
INLINE void keys_tile_lanes(float *rho, const RouteReader *rd, int n_rd, const float *qgr, float *st, const float *S,
                            int t0, int t1, int d, int H, int hw, float eps) {
    const size_t ld = qg_floats(d);
    for (int t = t0; t < t1; t++) {
        const float *s = S + (size_t)t * d;
        rho[t] = rms_inv(row_sumsq(s, d), d, eps);
        heads_in_lanes(st, s, d, hw);
        for (int g = 0; g < H / 8; g++) {
            const size_t og = (size_t)g * hw * 8, slot = (size_t)t * H + 8 * (size_t)g;
            int j = 0;
            for (; j + 2 <= n_rd; j += 2) {
                float *const out[2] = {rd[j].lg + slot, rd[j + 1].lg + slot};
                group_logits(out, st + og, qgr + (size_t)j * ld + og, ld, 2, hw, rho[t]);
            }
            if (j < n_rd) {
                float *const out[2] = {rd[j].lg + slot, NULL};
                group_logits(out, st + og, qgr + (size_t)j * ld + og, ld, 1, hw, rho[t]);
            }
        }
    }
}

// Otherwise (attnres' H 1, the head counts 2 and 4, widths off the vector)
// one product per head and tile:
// L_h [tile, n_rd] = S_h [tile, hw] · QGᵀ_h [hw, n_rd] (column j reader j's
// qg slice; tile_gemm), scaled by ρ and scattered into the readers' slots.
// Against the old form: micro's final read 0.70 at H 1 (width 256), 0.94 at
// H 2 and 4; 100m's 0.80 at H 1. At widths of 32 and below its per-head
// products are too short for their set-up and scatter (1.30 the old form's
// time at width 32), which only H 2 or 4 on a small model would meet.

// QGᵀ [d, ldr] from the readers' q and g, its padding columns zero.
static const float *readers_keys_transposed(float *qgt, const RouteReader *rd, int n_rd, int d) {
    const int ld = keys_ld(n_rd);
    for (int k = 0; k < d; k++) {
        float *row = qgt + (size_t)k * ld;
        for (int j = 0; j < n_rd; j++) row[j] = rd[j].q[k] * rd[j].g[k];
        for (int j = n_rd; j < ld; j++) row[j] = 0.0f;
    }
    return qgt;
}

// Tokens [t0, t1): their ρ, then head by head the tile's logits at every
// reader (prod [tile, ldr], this thread's).
static void keys_tile_gemm(float *rho, const RouteReader *rd, int n_rd, const float *qgt, float *prod,
                           const float *S, int t0, int t1, int d, int H, float eps) {
    const int nt = t1 - t0, hw = d / H, ld = keys_ld(n_rd);
    for (int t = t0; t < t1; t++) rho[t] = rms_inv(row_sumsq(S + (size_t)t * d, d), d, eps);
    for (int h = 0; h < H; h++) {
        tile_gemm(nt, ld, hw, 1.0f, S + (size_t)t0 * d + (size_t)h * hw, (size_t)d, 1, qgt + (size_t)h * hw * ld,
                  (size_t)ld, 0, prod, (size_t)ld);
        for (int j = 0; j < n_rd; j++) {
            float *lg = rd[j].lg + (size_t)t0 * H + h;
            for (int i = 0; i < nt; i++) lg[(size_t)i * H] = rho[t0 + i] * prod[(size_t)i * ld + j];
        }
    }
}

void route_keys(OpsContext *ctx, float *rho, const RouteReader *rd, int n_rd, float *scratch,
                const float *S, int n_tok, int d, int H, float eps) {
    OPS_TIMED(ctx);
    (void)ctx;
    if (n_rd <= 0) return;
    const int hw = d / H, tile = gather_tile_tokens(d), n_tiles = (n_tok + tile - 1) / tile;
    if (H % 8 || hw % 8) { // products (keys_tile_gemm)
        const float *qgt = readers_keys_transposed(scratch, rd, n_rd, d);
        float *prod = scratch + (size_t)keys_ld(n_rd) * d;
#pragma omp parallel
        {
            float *mine = prod + (size_t)omp_get_thread_num() * TILE_MAX * keys_ld(n_rd);
#pragma omp for schedule(static)
            for (int i = 0; i < n_tiles; i++) {
                const int t0 = i * tile, t1 = t0 + tile < n_tok ? t0 + tile : n_tok;
                keys_tile_gemm(rho, rd, n_rd, qgt, mine, S, t0, t1, d, H, eps);
            }
        }
        return;
    }
    // Eight heads in the lanes of a vector.
    float *qgr = scratch, *st = scratch + readers_floats(n_rd, d);
    for (int j = 0; j < n_rd; j++) {
        float *row = st; // q ⊙ g, then reordered into its slot
        key_weight(row, rd[j].q, rd[j].g, d);
        heads_in_lanes(qgr + (size_t)j * qg_floats(d), row, d, hw);
    }
#pragma omp parallel
    {
        float *mine = st + (size_t)omp_get_thread_num() * qg_floats(d);
#pragma omp for schedule(static)
        for (int i = 0; i < n_tiles; i++) {
            const int t0 = i * tile, t1 = t0 + tile < n_tok ? t0 + tile : n_tok;
#define KEYS(HW) keys_tile_lanes(rho, rd, n_rd, qgr, mine, S, t0, t1, d, H, HW, eps)
            DISPATCH_HW(hw, KEYS)
#undef KEYS
        }
    }
}

// ---- backward: a site keeps its dx; a source gathers its gradient ---------------------

void route_dx_keep(OpsContext *ctx, float *keep, float *c, const float *dx, const float *x, int n_tok,
                   int d, int H) {
    OPS_TIMED(ctx);
    (void)ctx;
    const int hw = d / H;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n_tok; t++) {
        const float *dxt = dx + (size_t)t * d;
        if (keep != dx) memcpy(keep + (size_t)t * d, dxt, (size_t)d * sizeof(float));
#define DOTS(HW) head_dots(c + (size_t)t * H, dxt, x + (size_t)t * d, H, HW)
        DISPATCH_HW(hw, DOTS)
#undef DOTS
    }
}

typedef struct {
    const RouteReader *rd;
    const float *qg;  // [n_rd] rows of qg_floats(d)
    const float *S, *rho;
    float *dS;
    int n_rd, n_tok, d, H;
} Gather;

// The gather, per tile of tokens, in two passes.
//
// The first streams the readers' dx, GATHER_GROUP readers at a time over
// the tile's tokens: every (token, reader, head)'s dot a = ⟨dx, S⟩, summed
// exactly as head_dots sums it (route_dx_keep's c must cancel it where one
// source has all the weight), becomes u = ρ w (a − c) in ub, its dℓ ℓ
// goes into κ, and dS = Σ_j w dx, the dS row loaded and stored once for
// the group. Rows read two or four at once keep more lines in flight than
// one reader after another: a bare read of 16-18 dx arrays of micro's
// size in this order took 0.74-0.77x (two) and 0.59-0.62x (four) the time
// of one at a time (2-core AMD EPYC Zen 3, tiles of 32 tokens). In the gather two at a time
// was as fast as four or faster (micro H 8 0.93-0.98 of four's time, 100m
// H 8 0.90, H 1 the same) and keeps fewer registers live. The hardware
// fetches these streams ahead by itself; fetching each dx row into L2 and
// L1 in software, as the one-stream form did, cost more in instructions
// than it saved (the first pass in L2: 0.78-0.93 ns a reader and vector
// without, 1.20-1.32 with). Each reader's w, c and ℓ rows ([n_tok, H], a
// short run per token) are fetched into L1 a few tokens ahead: without it
// their loads took about a sixth of the pass's samples from memory (perf,
// micro H 8).
//
// The second adds the terms that need u: z_j += Σ_t u S_t (two readers' z
// columns in registers over the tile's tokens) and dS_t += Σ_j u qg_j − β S_t
// (two tokens' dS columns in registers over the readers), column block by
// column block. Spread over the next tile's first pass instead (a share of
// its blocks after each group of readers, so that memory works meanwhile)
// it measured within the harness's noise (four readers a group, micro H 8:
// 1.02-1.04x the old form's time, against 1.04-1.08x after the first pass;
// H 1 0.82x both), so the simpler order stayed.
//
// Against the one-pass gather it replaced (c281b6c: per (token, reader,
// head) the dot, its sum across lanes, then the z and dS updates, z and dS
// loaded and stored for every reader and token, one dx stream with its rows
// fetched ahead), tools/source_ab.sh -a c281b6c (41 alternated pairs of
// calls after a 256 MiB read; an A/A run reads 0.98-1.01): micro's final
// read (17 readers, 4096 tokens, d 256) 0.83-0.89x the time at H 8,
// 0.71-0.74x at H 1, 0.82-0.85x at H 16, 0.91-0.92x at H 2 and 4; 100m's
// (25 readers, 2048 tokens, d 512) 0.73-0.79x at H 8, 0.69-0.76x at H 1;
// nano's (13, d 128) 0.88-0.93x; micro's with 512 tokens in cache 0.73x.
enum {
    GATHER_GROUP = 2, // readers a first-pass step streams at once
    HEAD_AHEAD = 4,   // tokens ahead for the w, c, ℓ rows
};

// The first pass, readers j0 .. j0 + NR − 1 (NR ≤ GATHER_GROUP, a literal)
// over tokens [t0, t1): ub gets u at [t − t0][j][h], kappa[t − t0] the dℓ ℓ.
INLINE void gather_dx_pass(float *restrict ub, float *restrict kappa, const Gather *G, int j0, int NR, int t0,
                           int t1, int hw) {
    const int d = G->d, H = G->H, n_rd = G->n_rd;
    const RouteReader *r[GATHER_GROUP];
    for (int n = 0; n < NR; n++) r[n] = &G->rd[j0 + n];
    for (int t = t0; t < t1; t++) {
        const float *restrict s = G->S + (size_t)t * d;
        float *restrict ds = G->dS + (size_t)t * d;
        const float *restrict dx[GATHER_GROUP];
        for (int n = 0; n < NR; n++) dx[n] = r[n]->dx + (size_t)t * d;
        const size_t th = (size_t)t * H;
        if (t + HEAD_AHEAD < G->n_tok)
            for (int n = 0; n < NR; n++) {
                __builtin_prefetch(r[n]->w + th + HEAD_AHEAD * H, 0, 3);
                __builtin_prefetch(r[n]->c + th + HEAD_AHEAD * H, 0, 3);
                __builtin_prefetch(r[n]->lg + th + HEAD_AHEAD * H, 0, 3);
            }
        float kt = 0;
        v8 ktv = {0};
        for (int h0 = 0; h0 < H; h0 += 8) {
            const int hc = H - h0 < 8 ? H - h0 : 8;
            float dot[GATHER_GROUP][8];
            v8 hv[GATHER_GROUP][8];
            for (int i = 0; i < hc; i++) {
                const int o = (h0 + i) * hw;
                float w[GATHER_GROUP];
                for (int n = 0; n < NR; n++) w[n] = r[n]->w[th + h0 + i];
                if (hw % 8) { // scalar, as head_dots' scalar sum
                    for (int n = 0; n < NR; n++) {
                        float a = 0;
                        for (int k = o; k < o + hw; k++) a += dx[n][k] * s[k];
                        dot[n][i] = a;
                    }
                    for (int k = o; k < o + hw; k++) {
                        float g = j0 ? ds[k] : 0.0f;
                        for (int n = 0; n < NR; n++) g += w[n] * dx[n][k];
                        ds[k] = g;
                    }
                    continue;
                }
                // The dots, each S load shared by the group (head_dots' two
                // accumulators: even and odd vectors); then dS += Σ w dx over
                // the slice, its dx again from L1 (both in one loop was no
                // faster, measured with four readers a group).
                v8 a[GATHER_GROUP][2] = {{{0}, {0}}};
                int k = 0;
                for (; k + 16 <= hw; k += 16) {
                    const v8 x0 = LOAD8(s + o + k), x1 = LOAD8(s + o + k + 8);
                    for (int n = 0; n < NR; n++) a[n][0] += LOAD8(dx[n] + o + k) * x0;
                    for (int n = 0; n < NR; n++) a[n][1] += LOAD8(dx[n] + o + k + 8) * x1;
                }
                if (k < hw) {
                    const v8 x0 = LOAD8(s + o + k);
                    for (int n = 0; n < NR; n++) a[n][0] += LOAD8(dx[n] + o + k) * x0;
                }
                for (int n = 0; n < NR; n++) hv[n][i] = a[n][0] + a[n][1];
                for (k = o; k < o + hw; k += 8) {
                    v8 g = w[0] * LOAD8(dx[0] + k);
                    for (int n = 1; n < NR; n++) g += w[n] * LOAD8(dx[n] + k);
                    if (j0) g += LOAD8(ds + k);
                    STORE8(ds + k, g);
                }
            }
            if (hw % 8 == 0)
                for (int n = 0; n < NR; n++) {
                    if (hc == 8) hsum8x8(dot[n], hv[n]);
                    else
                        for (int i = 0; i < hc; i++) dot[n][i] = hsum8(&hv[n][i]);
                }
            for (int n = 0; n < NR; n++) {
                float *u = ub + ((size_t)(t - t0) * n_rd + j0 + n) * H + h0;
                const float *wr = r[n]->w + th + h0, *cr = r[n]->c + th + h0, *lr = r[n]->lg + th + h0;
                if (hc == 8) { // eight heads' dℓ and u as one vector
                    const v8 dl = LOAD8(wr) * (LOAD8(dot[n]) - LOAD8(cr));
                    STORE8(u, G->rho[t] * dl);
                    ktv += dl * LOAD8(lr);
                    continue;
                }
                for (int i = 0; i < hc; i++) {
                    const float dl = wr[i] * (dot[n][i] - cr[i]);
                    u[i] = G->rho[t] * dl;
                    kt += dl * lr[i];
                }
            }
        }
        kappa[t - t0] += kt + hsum8(&ktv);
    }
}

// The second pass over columns [k0, k0 + 8·V) (V vectors, within whole
// heads' lanes: hw a multiple of 8): z of readers j, j + 1 over the tile's
// tokens; then dS of tokens t, t + 1 over the readers, less β S. ONE: the
// columns lie in one head (hw a multiple of 32), one u per reader and token.
INLINE void gather_u_cols(float *restrict z, const float *restrict ub, const float *kappa, const Gather *G,
                          int t0, int t1, int k0, int V, int ONE) {
    const int d = G->d, H = G->H, hw = d / H, n_rd = G->n_rd;
    const size_t ld = qg_floats(d);
    int hq[4];
    for (int q = 0; q < V; q++) hq[q] = ONE ? k0 / hw : (k0 + 8 * q) / hw;
    // The tile's S columns, contiguous: a column block of rows d floats
    // apart sits in few L1 sets, and each pair of readers reads it again.
    v8 sb[TILE_MAX][4];
    for (int t = t0; t < t1; t++)
        for (int q = 0; q < V; q++) sb[t - t0][q] = LOAD8(G->S + (size_t)t * d + k0 + 8 * q);
    for (int j = 0; j < n_rd; j += 2) {
        const int nr = n_rd - j < 2 ? 1 : 2;
        float *z0 = z + (size_t)j * ld + k0, *z1 = z + (size_t)(j + nr - 1) * ld + k0;
        v8 a0[4], a1[4];
        for (int q = 0; q < V; q++) a0[q] = LOAD8(z0 + 8 * q), a1[q] = LOAD8(z1 + 8 * q);
        for (int t = t0; t < t1; t++) {
            const v8 *s = sb[t - t0];
            const float *u0 = ub + ((size_t)(t - t0) * n_rd + j) * H, *u1 = u0 + (size_t)(nr - 1) * H;
            if (ONE) {
                const float b0 = u0[hq[0]], b1 = u1[hq[0]];
                for (int q = 0; q < V; q++) {
                    const v8 x = s[q];
                    a0[q] += b0 * x;
                    a1[q] += b1 * x;
                }
            } else
                for (int q = 0; q < V; q++) {
                    const v8 x = s[q];
                    a0[q] += u0[hq[q]] * x;
                    a1[q] += u1[hq[q]] * x;
                }
        }
        for (int q = 0; q < V; q++) STORE8(z0 + 8 * q, a0[q]);
        if (nr == 2)
            for (int q = 0; q < V; q++) STORE8(z1 + 8 * q, a1[q]);
    }
    for (int t = t0; t < t1; t += 2) {
        const int nt = t1 - t < 2 ? 1 : 2;
        const float *u0 = ub + (size_t)(t - t0) * n_rd * H, *u1 = ub + (size_t)(t + nt - 1 - t0) * n_rd * H;
        v8 a0[4] = {{0}, {0}, {0}, {0}}, a1[4] = {{0}, {0}, {0}, {0}};
        for (int j = 0; j < n_rd; j++) {
            const float *qg = G->qg + (size_t)j * ld + k0, *uj0 = u0 + (size_t)j * H, *uj1 = u1 + (size_t)j * H;
            if (ONE) {
                const float b0 = uj0[hq[0]], b1 = uj1[hq[0]];
                for (int q = 0; q < V; q++) {
                    const v8 x = LOAD8(qg + 8 * q);
                    a0[q] += b0 * x;
                    a1[q] += b1 * x;
                }
            } else
                for (int q = 0; q < V; q++) {
                    const v8 x = LOAD8(qg + 8 * q);
                    a0[q] += uj0[hq[q]] * x;
                    a1[q] += uj1[hq[q]] * x;
                }
        }
        for (int n = 0; n < nt; n++) {
            const int tn = t + n;
            const float rho = G->rho[tn], beta = (rho * kappa[tn - t0]) * rho / (float)d; // ρ·κ first: bounded
            const float *s = G->S + (size_t)tn * d + k0;
            float *ds = G->dS + (size_t)tn * d + k0;
            for (int q = 0; q < V; q++)
                STORE8(ds + 8 * q, LOAD8(ds + 8 * q) + (n ? a1[q] : a0[q]) - beta * LOAD8(s + 8 * q));
        }
    }
}

// The second pass for any width, element by element.
static void gather_u_scalar(float *restrict z, const float *restrict ub, const float *kappa, const Gather *G,
                            int t0, int t1) {
    const int d = G->d, H = G->H, hw = d / H, n_rd = G->n_rd;
    const size_t ld = qg_floats(d);
    for (int t = t0; t < t1; t++) {
        const float *s = G->S + (size_t)t * d, *u = ub + (size_t)(t - t0) * H * n_rd;
        const float rho = G->rho[t], beta = (rho * kappa[t - t0]) * rho / (float)d;
        float *ds = G->dS + (size_t)t * d;
        for (int k = 0; k < d; k++) {
            float acc = 0;
            for (int j = 0; j < n_rd; j++) {
                const float uk = u[(size_t)j * H + k / hw];
                z[(size_t)j * ld + k] += uk * s[k];
                acc += uk * G->qg[(size_t)j * ld + k];
            }
            ds[k] = ds[k] + acc - beta * s[k];
        }
    }
}

// Tokens [t0, t1) = a tile: the first pass GATHER_GROUP readers at a time,
// then the second, column block by column block (blocks of 32 columns, then
// of 8).
INLINE void gather_tile(float *restrict z, float *restrict ub, const Gather *G, int t0, int t1, int hw) {
    const int n_rd = G->n_rd, d = G->d;
    float kappa[TILE_MAX] = {0}; // Σ_j,h dℓ ℓ per token
    int j = 0;
    for (; j + GATHER_GROUP <= n_rd; j += GATHER_GROUP) gather_dx_pass(ub, kappa, G, j, GATHER_GROUP, t0, t1, hw);
    _Static_assert(GATHER_GROUP == 2, "at most one reader left over");
    if (j < n_rd) gather_dx_pass(ub, kappa, G, j, 1, t0, t1, hw);
    if (hw % 8) {
        gather_u_scalar(z, ub, kappa, G, t0, t1);
        return;
    }
    int k = 0;
    for (; k + 32 <= d; k += 32) gather_u_cols(z, ub, kappa, G, t0, t1, k, 4, hw % 32 == 0);
    for (; k < d; k += 8) gather_u_cols(z, ub, kappa, G, t0, t1, k, 1, 0);
}

void route_gather(OpsContext *ctx, float *dS, const RouteReader *rd, int n_rd, float *scratch,
                  const float *S, const float *rho, int n_tok, int d, int H) {
    OPS_TIMED(ctx);
    (void)ctx;
    if (n_rd <= 0) { // read by no site: no gradient
        memset(dS, 0, (size_t)n_tok * d * sizeof(float));
        return;
    }
    const Gather G = {.rd = rd, .qg = readers_key_weights(scratch, rd, n_rd, d), .S = S, .rho = rho,
                      .dS = dS, .n_rd = n_rd, .n_tok = n_tok, .d = d, .H = H};
    float *part = scratch + readers_floats(n_rd, d);
    const size_t per = readers_floats(n_rd, d), ld = qg_floats(d);
    float *u_all = part + (size_t)omp_get_max_threads() * per;
    const int hw = d / H, tile = gather_tile_tokens(d), n_tiles = (n_tok + tile - 1) / tile;
#pragma omp parallel
    {
        const int nthr = omp_get_num_threads();
        float *z = part + (size_t)omp_get_thread_num() * per;
        float *ub = u_all + (size_t)omp_get_thread_num() * gather_u_floats(n_rd, d, H);
        memset(z, 0, per * sizeof(float));
#pragma omp for schedule(static)
        for (int i = 0; i < n_tiles; i++) {
            const int t0 = i * tile, t1 = t0 + tile < n_tok ? t0 + tile : n_tok;
#define GATHER(HW) gather_tile(z, ub, &G, t0, t1, HW)
            DISPATCH_HW(hw, GATHER)
#undef GATHER
        }
        // Implicit barrier above; reduce the partials in fixed thread order.
        // Split by coordinate, so that readers may share dq and dg.
#pragma omp for schedule(static)
        for (int k = 0; k < d; k++)
            for (int j = 0; j < n_rd; j++)
                add_key_grads(rd[j].dq, rd[j].dg, rd[j].q, rd[j].g, part + (size_t)j * ld, per, nthr, k);
    }
}
