// The compute kernels the model is written against. One declaration per op;
// each backend (kernels/cpu now, kernels/cuda later) implements the same
// signatures. All tensors are flat, row-major fp32; shapes are in comments.
//
// Conventions
// - "out" buffers are overwritten; gradient buffers whose name starts with
//   "d" and that belong to *parameters* (dw, dq, dg ...) are ACCUMULATED into
//   (+=), because gradients add up over micro-batches. Gradients of
//   activations are overwritten unless the comment says "accumulates".
// - Every reduction is deterministic: the same inputs and thread count give
//   bit-identical results (no atomics, fixed reduction order).
// - No kernel allocates memory; scratch space, when needed, is passed in.
#pragma once
#include <stddef.h>

// ---- matmul (PyTorch Linear layout: W is [N, K], "out = in · Wᵀ") ----------
// in [M, K], w [N, K] -> out [M, N]
void matmul_forward(float *out, const float *in, const float *w, int M, int K, int N);
// dout [M, N] -> din [M, K] (overwritten, skipped if NULL), dw [N, K] (accumulates)
void matmul_backward(float *din, float *dw, const float *dout, const float *in,
                     const float *w, int M, int K, int N);

// ---- embedding --------------------------------------------------------------
// tokens [n], emb [V, d] -> out [n, d]
void embedding_forward(float *out, const int *tokens, const float *emb, int n, int d);
// dout [n, d] -> demb [V, d] (accumulates; deterministic regardless of
// repeated tokens)
void embedding_backward(float *demb, const float *dout, const int *tokens, int n, int d, int V);

// ---- RMSNorm: y = x · rsqrt(mean(x²) + eps) ⊙ w --------------------------
// in [rows, d], w [d] -> out [rows, d], rstd [rows] (saved for backward).
// Also used for the per-head q/k norm with rows = tokens·heads, d = head_dim.
void rmsnorm_forward(float *out, float *rstd, const float *in, const float *w,
                     int rows, int d, float eps);
// dout [rows, d] -> din [rows, d] (overwritten), dw [d] (accumulates)
void rmsnorm_backward(float *din, float *dw, const float *dout, const float *in,
                      const float *w, const float *rstd, int rows, int d);

// ---- RoPE, "rotate half": coordinate j pairs with j + hd/2 ----------------
// cos, sin [max_pos, hd/2]: angle = pos · theta^(-2j/hd)
void rope_table(float *cos_t, float *sin_t, int max_pos, int hd, float theta);
// x [B, T, n_heads, hd], in place; token t of the block has position pos0 + t
void rope_forward(float *x, int B, int T, int n_heads, int hd, int pos0,
                  const float *cos_t, const float *sin_t);
// dx [B, T, n_heads, hd], in place (the transpose rotation)
void rope_backward(float *dx, int B, int T, int n_heads, int hd, int pos0,
                   const float *cos_t, const float *sin_t);

// ---- grouped-query causal attention ----------------------------------------
// q [B, T, nh, hd], k, v [B, T, nkv, hd]; query head h reads kv head h/(nh/nkv).
// -> y [B, T, nh, hd], att [B, nh, T, T] softmax probabilities (saved; the
// upper triangle is written as 0). Scale 1/sqrt(hd).
void attention_forward(float *y, float *att, const float *q, const float *k,
                       const float *v, int B, int T, int nh, int nkv, int hd);
// dy [B, T, nh, hd] -> dq [B, T, nh, hd], dk, dv [B, T, nkv, hd] (overwritten).
// scratch: attention_scratch_floats(B, T, nkv) floats, one T×T block per
// (batch, kv head): the query heads sharing a kv head reuse it in turn.
size_t attention_scratch_floats(int B, int T, int nkv);
void attention_backward(float *dq, float *dk, float *dv, float *scratch,
                        const float *dy, const float *att, const float *q,
                        const float *k, const float *v, int B, int T, int nh,
                        int nkv, int hd);

// ---- SwiGLU: h = silu(gate) ⊙ up --------------------------------------------
void swiglu_forward(float *h, const float *gate, const float *up, size_t n);
// dh -> dgate, dup (overwritten)
void swiglu_backward(float *dgate, float *dup, const float *dh, const float *gate,
                     const float *up, size_t n);

// ---- softmax cross-entropy ---------------------------------------------------
// logits [n, V], targets [n] -> losses [n] (natural log). Returns the sum.
double xent_forward(float *losses, const float *logits, const int *targets, int n, int V);
// dlogits = (softmax(logits) - onehot(target)) · scale; may alias logits.
void xent_backward(float *dlogits, const float *logits, const int *targets, int n,
                   int V, float scale);

// ---- elementwise helpers -----------------------------------------------------
void vec_add(float *out, const float *a, const float *b, size_t n); // out = a + b
void vec_acc(float *out, const float *a, size_t n);                // out += a
void vec_scale_acc(float *out, const float *a, float s, size_t n); // out += s·a

// ---- depth routing (SPEC §2.2 and §5) -----------------------------------------
// Route(S, q, g, H) over n_src sources given as pointers, each [n_tok, d].
// x [n_tok, d] (overwritten), w [n_src, n_tok, H] softmax weights (saved).
// q, g [d]. H divides d. eps is the key RMS epsilon. scratch: see below.
void route_forward(float *x, float *w, float *scratch, const float *const *src, int n_src,
                   const float *q, const float *g, int n_tok, int d, int H, float eps);
// dx [n_tok, d] -> dsrc[n] (each ACCUMULATES, may be NULL for a source that
// needs no gradient), dq [d], dg [d] (accumulate). scratch (both passes):
// route_scratch_floats(n_src, d, H) floats for the current OpenMP thread
// count (q ⊙ g and the per-thread partials of the deterministic dq/dg
// reduction); a size computed for (n_src, d, H) also serves any call with
// fewer sources or heads.
size_t route_scratch_floats(int n_src, int d, int H);
void route_backward(float *const *dsrc, float *dq, float *dg, float *scratch,
                    const float *dx, const float *w, const float *const *src,
                    int n_src, const float *q, const float *g, int n_tok, int d,
                    int H, float eps);
// The same, but WRITES the dsrc rows instead of adding to them: for the
// first backward to touch them (full routing's final read reads every
// source), so they need no zeroing beforehand.
void route_backward_set(float *const *dsrc, float *dq, float *dg, float *scratch,
                        const float *dx, const float *w, const float *const *src,
                        int n_src, const float *q, const float *g, int n_tok, int d,
                        int H, float eps);
