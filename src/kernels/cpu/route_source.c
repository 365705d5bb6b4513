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

// route_gather's: the readers' qg rows, then per thread z [n_rd] rows, the
// readers' dq/dg partials.
size_t route_source_scratch_floats(int n_rd, int d) {
    const size_t gather = readers_floats(n_rd, d) * (1 + (size_t)omp_get_max_threads());
    return gather > keys_floats(n_rd, d) ? gather : keys_floats(n_rd, d);
}

static const float *readers_key_weights(float *qg, const RouteReader *rd, int n_rd, int d) {
    for (int j = 0; j < n_rd; j++) key_weight(qg + (size_t)j * qg_floats(d), rd[j].q, rd[j].g, d);
    return qg;
}

// Tokens per tile of the gather: 32 KiB of source rows (32 tokens at d
// 256), its S and dS rows held in cache while each reader's dx rows pass
// in one run. With the next tile's dx rows fetched into L2 meanwhile, micro's
// 17 readers × 4096 tokens (2 threads) took 3.4-3.6 ms a call at 32 or 64
// tokens (3.7-4.2 at 15), 4.8-5.8 ms without the fetch. route_keys walks
// the same tiles.
enum { GATHER_TILE_BYTES = 32 << 10 };

static int gather_tile_tokens(int d) {
    const size_t fit = GATHER_TILE_BYTES / ((size_t)d * sizeof(float));
    return fit < TILE_MIN ? TILE_MIN : fit > TILE_MAX ? TILE_MAX : (int)fit;
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

// The tile's dS rows −= β S, β = (ρ²/d) κ from κ_t = Σ_j,h dℓ ℓ (kappa[t − t0]).
INLINE void subtract_beta(const Gather *G, const float *kappa, int t0, int t1) {
    for (int t = t0; t < t1; t++) {
        const float rho = G->rho[t], beta = (rho * kappa[t - t0]) * rho / (float)G->d; // ρ·κ first: bounded
        const float *restrict s = G->S + (size_t)t * G->d;
        float *restrict ds = G->dS + (size_t)t * G->d;
        for (int k = 0; k < G->d; k++) ds[k] -= beta * s[k];
    }
}

// The gather reads dx as one stream: the tile's rows of reader 0, of reader
// 1, ..., then the next tile's. While at reader j's row t it fetches into L2
// the row l2_ahead readers on in that stream (reader j + l2_ahead's row t,
// or past the last reader the row of a later tile), and into L1 the row
// `ahead` tokens on, or past the tile's end the first rows of reader
// next_j, which runs over the tile next (0.92x the time at H 1, 0.97-0.99
// at H 8). gather_tile fetches GATHER_L2_AHEAD readers on (~128 KiB of
// stream); it used to fetch the same reader's row in the next tile, a
// whole pass over the readers ahead (up to 800 KiB at 100m's 25 readers),
// and the rows were evicted from L2 before their turn: over the final
// read's gather (bench --kernel route, four alternated rounds) four
// readers on took 0.81x the time at 100m H 1, 0.67x at H 8, 0.72-0.73x at
// micro H 1 and 4, 0.87-0.93x at nano H 1 and 4 (two or eight readers on:
// the same as four). gather_pair keeps a whole pass ahead (l2_ahead =
// n_rd): four readers on took 1.04x at micro H 16, 1.02x at nano H 8.
enum { GATHER_L2_AHEAD = 4 };

// Where reader j's L2 fetch reads (once per reader, not per token): the dx
// of the reader l2_ahead on in the stream, *rows tokens later (whole tiles,
// past the last reader).
INLINE const float *l2_stream_dx(const Gather *G, int j, int l2_ahead, int nt, int *rows) {
    const int q = j + l2_ahead;
    *rows = q / G->n_rd * nt;
    return G->rd[q % G->n_rd].dx;
}

INLINE void fetch_dx_ahead(const Gather *G, const float *dxt, const float *l2_dx, int l2_rows, int next_j, int t,
                           int t1, int nt, int ahead) {
    const int d = G->d;
    if (t + l2_rows < G->n_tok) prefetch_row_l2(l2_dx + (size_t)(t + l2_rows) * d, d, 0);
    if (t + ahead < t1) prefetch_row_l1(dxt + (size_t)ahead * d, d);
    else if (next_j < G->n_rd && t + ahead - nt < t1)
        prefetch_row_l1(G->rd[next_j].dx + (size_t)(t + ahead - nt) * d, d);
}

// Tokens [t0, t1) = a tile, reader by reader, each over the tile's tokens;
// z [n_rd] rows of qg_floats(d), this thread's dq/dg partials. Each head's
// updates follow its own dot, so that its slices of S and dx are used again
// from registers: micro's 17 gathers took 0.84-0.88 of the time of eight
// dots first and then the updates at H 8, 0.80 at H 4, 0.74-0.76 at H 16,
// 0.88-0.95 at H 1 (both builds in one process, caches flushed between
// calls); the same bits at H 1, 4 and 8. Tried: all the tile's dots first,
// then z summed over the tile's tokens and dS over the readers in
// registers: no faster (5.5 ms against 4.8-5.8 for this, both without the
// fetch ahead). Again with the dS sum Σ_j w dx taken in the dot's pass and
// the u terms (Σ_j u qg, Σ_t u S) as small register-blocked products after
// it: 1.11-1.17x the time at H 4 and 8, and its first pass alone took as
// long as all of this: the gather waits on its dx rows, not on its
// arithmetic (perf: the time sat on each dx line's first load, until
// prefetch_row_l1).
INLINE void gather_tile(float *restrict z, const Gather *G, int t0, int t1, int hw) {
    const int d = G->d, H = G->H, nt = t1 - t0, ahead = l1_ahead_rows(d);
    const size_t ld = qg_floats(d);
    float kappa[TILE_MAX] = {0}; // Σ_j,h dℓ ℓ per token
    for (int j = 0; j < G->n_rd; j++) {
        const RouteReader *r = &G->rd[j];
        const float *restrict qg = G->qg + (size_t)j * ld;
        float *restrict zj = z + (size_t)j * ld;
        int l2_rows;
        const float *l2_dx = l2_stream_dx(G, j, GATHER_L2_AHEAD, nt, &l2_rows);
        for (int t = t0; t < t1; t++) {
            const float *restrict s = G->S + (size_t)t * d, *restrict dxt = r->dx + (size_t)t * d;
            const float *wt = r->w + (size_t)t * H, *ct = r->c + (size_t)t * H, *lt = r->lg + (size_t)t * H;
            float *restrict ds = G->dS + (size_t)t * d;
            const float rho = G->rho[t];
            fetch_dx_ahead(G, dxt, l2_dx, l2_rows, j + 1, t, t1, nt, ahead);
            float kt = 0;
            for (int h = 0; h < H; h++) {
                const int o = h * hw;
                const float wh = wt[h], dl = wh * (head_dot(dxt + o, s + o, h, H, hw) - ct[h]), u = rho * dl;
                kt += dl * lt[h];
                for (int k = 0; k < hw; k++) zj[o + k] += u * s[o + k];
                if (j == 0) // the first reader writes the row
                    for (int k = 0; k < hw; k++) ds[o + k] = wh * dxt[o + k] + u * qg[o + k];
                else
                    for (int k = 0; k < hw; k++) ds[o + k] += wh * dxt[o + k] + u * qg[o + k];
            }
            kappa[t - t0] += kt;
        }
    }
    subtract_beta(G, kappa, t0, t1);
}

// The same for head widths 8 and 16, readers two at a time: a head's
// slices of S and of dS are loaded (and dS stored) once for both, where at
// these widths they cost as much as a reader's own dx, qg and z slices and
// the per-head scalars. Micro's 17 gathers at H 16 (width 16): 0.45 of the
// time of gather_tile (both builds in one process, caches flushed between
// calls); at width 32 the same time, at 64 1.07x (gather_tile there). Each
// dS and z element sums in the same order as in gather_tile.
INLINE void gather_pair(float *restrict z, float *restrict kappa, const Gather *G, int j0, int nr, int t0,
                        int t1, int hw) {
    const int d = G->d, H = G->H, nt = t1 - t0, V = hw / 8, ahead = l1_ahead_rows(d);
    const size_t ld = qg_floats(d);
    const float *l2_dx[2];
    int l2_rows[2];
    for (int i = 0; i < nr; i++) l2_dx[i] = l2_stream_dx(G, j0 + i, G->n_rd, nt, &l2_rows[i]);
    for (int t = t0; t < t1; t++) {
        const float *restrict s = G->S + (size_t)t * d;
        float *restrict ds = G->dS + (size_t)t * d;
        const float rho = G->rho[t];
        const float *dxt[2], *qg[2];
        float *zj[2];
        for (int i = 0; i < nr; i++) {
            dxt[i] = G->rd[j0 + i].dx + (size_t)t * d;
            qg[i] = G->qg + (size_t)(j0 + i) * ld;
            zj[i] = z + (size_t)(j0 + i) * ld;
            fetch_dx_ahead(G, dxt[i], l2_dx[i], l2_rows[i], j0 + nr + i, t, t1, nt, ahead); // the next pair's
        }
        float kt[2] = {0, 0};
        for (int h = 0; h < H; h++) {
            const int o = h * hw;
            const size_t th = (size_t)t * H + h;
            v8 sv[8], dsv[8];
            for (int v = 0; v < V; v++) sv[v] = LOAD8(s + o + 8 * v);
            for (int i = 0; i < nr; i++) {
                const RouteReader *r = &G->rd[j0 + i];
                v8 acc[4] = {{0}, {0}, {0}, {0}};
                for (int v = 0; v < V; v++) acc[v & 3] += LOAD8(dxt[i] + o + 8 * v) * sv[v];
                const float wh = r->w[th], dl = wh * (head_sum(acc, h, H) - r->c[th]), u = rho * dl;
                kt[i] += dl * r->lg[th];
                for (int v = 0; v < V; v++) STORE8(zj[i] + o + 8 * v, LOAD8(zj[i] + o + 8 * v) + u * sv[v]);
                for (int v = 0; v < V; v++) {
                    const v8 g = wh * LOAD8(dxt[i] + o + 8 * v) + u * LOAD8(qg[i] + o + 8 * v);
                    if (i) dsv[v] += g;
                    else if (j0) { // a row the earlier readers wrote
                        const v8 prev = LOAD8(ds + o + 8 * v);
                        dsv[v] = prev + g;
                    } else dsv[v] = g;
                }
            }
            for (int v = 0; v < V; v++) STORE8(ds + o + 8 * v, dsv[v]);
        }
        for (int i = 0; i < nr; i++) kappa[t - t0] += kt[i];
    }
}

INLINE void gather_tile_pairs(float *restrict z, const Gather *G, int t0, int t1, int hw) {
    float kappa[TILE_MAX] = {0}; // Σ_j,h dℓ ℓ per token
    int j = 0;
    for (; j + 2 <= G->n_rd; j += 2) gather_pair(z, kappa, G, j, 2, t0, t1, hw);
    if (j < G->n_rd) gather_pair(z, kappa, G, j, 1, t0, t1, hw);
    subtract_beta(G, kappa, t0, t1);
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
    const int hw = d / H, tile = gather_tile_tokens(d), n_tiles = (n_tok + tile - 1) / tile;
#pragma omp parallel
    {
        const int nthr = omp_get_num_threads();
        float *z = part + (size_t)omp_get_thread_num() * per;
        memset(z, 0, per * sizeof(float));
#pragma omp for schedule(static)
        for (int i = 0; i < n_tiles; i++) {
            const int t0 = i * tile, t1 = t0 + tile < n_tok ? t0 + tile : n_tok;
#define GATHER(HW) gather_tile(z, &G, t0, t1, HW)
#define GATHER_PAIRS(HW) gather_tile_pairs(z, &G, t0, t1, HW)
            if (hw == 8) GATHER_PAIRS(8);
            else if (hw == 16) GATHER_PAIRS(16);
            else
                DISPATCH_HW(hw, GATHER)
#undef GATHER_PAIRS
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
