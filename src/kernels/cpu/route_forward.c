// Depth routing, forward (SPEC §5): per token, one pass over the sources
// with an online softmax per head, ρ_n computed on the fly; only the weights
// w [N, n_tok, H] are saved. The sources are read from memory once; each
// chunk of rows is read again from cache for the weighted sum.
// Compiled with -ffp-contract=fast (Makefile): the dot products and the
// weighted sum become FMAs (measured: forward ~10% faster), as in the backward.
#include "kernels/cpu/route_impl.h"

// ---- forward -----------------------------------------------------------------------

// Source row S [d]: logits lg [hc] of heads [h0, h0 + hc). One pass over
// the row: Σ S² (for ρ, over the full width) rides along the head dots.
INLINE void source_logits(float *restrict lg, const float *restrict S, const Args *A,
                          int h0, int hc, int hw) {
    v8 ss[4] = {{0}, {0}, {0}, {0}};
    float ts = 0;
    for (int i = 0; i < hc; i++) {
        const int o = (h0 + i) * hw;
        lg[i] = slice_stats(S + o, A->qg + o, hw, ss, &ts);
    }
    // Chunked heads (H > HEAD_CHUNK): ρ still needs the full width.
    const float sq = hc < A->H ? row_sumsq(S, A->d) : hsum4(ss) + ts;
    const float rho = rms_inv(sq, A->d, A->eps);
    for (int i = 0; i < hc; i++) lg[i] *= rho;
}

// The online softmax runs over chunks of SRC_CHUNK sources, as flash
// attention's does over blocks of keys: a chunk's logits come from
// independent dot products, then one max/rescale step, then the chunk's rows
// (still in cache) are added to the accumulator. Per source, every row waited
// for the previous row's exp (measured: forward 1.5x slower). With at most
// SRC_CHUNK sources, the usual case, there is one chunk and each w slot is
// written once, already final.

// Chunk with logits lg[j][i] (j < nc, heads i < hc): update the running max
// m, normaliser l and the factor c that rescales the older terms; lg becomes
// e = exp(ℓ − m).
INLINE void softmax_chunk(float (*restrict lg)[HEAD_CHUNK], int nc, float *restrict m,
                          float *restrict l, float *restrict c, int hc) {
    float mc[HEAD_CHUNK], sum[HEAD_CHUNK];
    for (int i = 0; i < hc; i++) mc[i] = m[i], sum[i] = 0;
    for (int j = 0; j < nc; j++)
        for (int i = 0; i < hc; i++) mc[i] = lg[j][i] > mc[i] ? lg[j][i] : mc[i];
    for (int i = 0; i < hc; i++) {
        c[i] = mc[i] > m[i] ? vexp(m[i] - mc[i]) : 1.0f; // argument < 0
        m[i] = mc[i];
    }
    for (int j = 0; j < nc; j++)
        for (int i = 0; i < hc; i++) {
            const float e = vexp(lg[j][i] - m[i]);
            lg[j][i] = e;
            sum[i] += e;
        }
    for (int i = 0; i < hc; i++) l[i] = l[i] * c[i] + sum[i];
}

// Chunks before the last leave in their w slots e_n = exp(ℓ_n − m_k), m_k
// the running max after n's chunk k, except that where chunk k rescaled the
// older chunks by c_k ≠ 1, its first source with e = 1 (the one that set the
// max has exactly 1) holds −c_k instead. Walking back from the last chunk
// (already final) turns them into w_n = e_n · Π_{later chunks} c / l without
// a single exp. wt: the slots of source 0, heads [h0, h0 + hc); ws: the
// stride between sources.
INLINE void finish_weights(float *restrict wt, size_t ws, int n_last,
                           const float *restrict l, const float *restrict c_last, int hc) {
    float scale[HEAD_CHUNK], ck[HEAD_CHUNK];
    for (int i = 0; i < hc; i++) scale[i] = c_last[i] / l[i];
    for (int n0 = n_last - SRC_CHUNK; n0 >= 0; n0 -= SRC_CHUNK) {
        for (int i = 0; i < hc; i++) ck[i] = 1.0f;
        for (int j = 0; j < SRC_CHUNK; j++) {
            float *slot = wt + (size_t)(n0 + j) * ws;
            for (int i = 0; i < hc; i++) {
                const float v = slot[i];
                const int grew = signbit(v) != 0;
                slot[i] = (grew ? 1.0f : v) * scale[i];
                ck[i] = grew ? -v : ck[i];
            }
        }
        for (int i = 0; i < hc; i++) scale[i] *= ck[i];
    }
}

// Token t, heads [h0, h0 + hc): one pass over the sources, chunk by chunk,
// with an online softmax per head; the accumulator is the token's row of x.
INLINE void forward_token(float *restrict xt, float *restrict w, const Args *A, int t,
                          int h0, int hc, int hw) {
    const size_t ws = (size_t)A->n_tok * A->H; // w stride between sources
    float *wt = w + (size_t)t * A->H + h0;     // w slot (source 0, head h0)
    float m[HEAD_CHUNK], l[HEAD_CHUNK], c[HEAD_CHUNK], lg[SRC_CHUNK][HEAD_CHUNK];
    for (int i = 0; i < hc; i++) m[i] = -INFINITY, l[i] = 0;
    memset(xt + h0 * hw, 0, (size_t)hc * hw * sizeof(float));
    int n0 = 0;
    for (;; n0 += SRC_CHUNK) {
        const int nc = A->n_src - n0 < SRC_CHUNK ? A->n_src - n0 : SRC_CHUNK;
        const int last = n0 + nc == A->n_src;
        for (int j = 0; j < nc; j++) {
            const float *S = src_row(A, n0 + j, t);
            if (t + 1 < A->n_tok) prefetch_row(S + A->d, A->d, 0);
            if (h0 == 0) prefetch_w(w, n0 + j, t, A, 1);
            source_logits(lg[j], S, A, h0, hc, hw);
        }
        softmax_chunk(lg, nc, m, l, c, hc);
        if (last) // weights are final: w = e / l, each slot written once
            for (int i = 0; i < hc; i++) {
                const float inv = 1.0f / l[i];
                for (int j = 0; j < nc; j++) lg[j][i] *= inv;
            }
        int marked[HEAD_CHUNK]; // no marker needed where nothing was rescaled
        for (int i = 0; i < hc; i++) marked[i] = c[i] == 1.0f;
        // acc = acc·c + Σ_j e_j S_j, row by row: the sources sit a multiple
        // of 4 KiB apart, so walking one head across rows would hit one L1
        // set N times.
        if (n0 > 0)
            for (int i = 0; i < hc; i++) {
                float *restrict xo = xt + (h0 + i) * hw;
                const float ci = last ? c[i] / l[i] : c[i];
                for (int k = 0; k < hw; k++) xo[k] *= ci;
            }
        for (int j = 0; j < nc; j++) {
            const float *restrict S = src_row(A, n0 + j, t);
            float *slot = wt + (size_t)(n0 + j) * ws;
            for (int i = 0; i < hc; i++) {
                const int o = (h0 + i) * hw;
                const float e = lg[j][i];
                const int mark = !last && !marked[i] && e == 1.0f;
                marked[i] |= mark;
                slot[i] = mark ? -c[i] : e;
                for (int k = 0; k < hw; k++) xt[o + k] += e * S[o + k];
            }
        }
        if (last) break;
    }
    if (n0 > 0) finish_weights(wt, ws, n0, l, c, hc);
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
#pragma omp parallel for schedule(static)
    for (int t = 0; t < n_tok; t++)
        for (int h0 = 0; h0 < H; h0 += HEAD_CHUNK) {
            const int hc = H - h0 < HEAD_CHUNK ? H - h0 : HEAD_CHUNK;
#define FWD(HW) forward_token(x + (size_t)t * d, w, &A, t, h0, hc, HW)
            DISPATCH_HW(hw, FWD)
#undef FWD
        }
}
