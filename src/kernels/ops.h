// The compute boundary. Every loop that touches activations, parameters,
// gradients or optimizer state runs behind these declarations; the model,
// the residual schemes, the trainer and the analysis tools are written
// against them and never loop over tensors themselves. A backend is a folder
// that implements every function here with the same signature:
// kernels/cpu/ today; a kernels/cuda/ would be a second one, chosen at build
// time. All tensors are flat, row-major fp32; shapes are in comments.
//
// Conventions
// - Every op takes the backend context first: where the backend keeps its
//   execution state (threads on the CPU; a stream and a device on a GPU).
// - "out" buffers are overwritten; gradient buffers whose name starts with
//   "d" and that belong to *parameters* (dw, dq, dg ...) are ACCUMULATED into
//   (+=), because gradients add up over micro-batches. Gradients of
//   activations are overwritten unless the comment says "accumulates".
// - Every reduction is deterministic: the same inputs and thread count give
//   bit-identical results (no atomics, fixed reduction order).
// - No op allocates memory; scratch space, when needed, is passed in.
// - Tensors live in memory from ops_alloc: the backend's memory space, which
//   the host can also address (host memory on the CPU; managed memory on a
//   GPU), so loading, saving and inspecting weights need no copies. Call
//   ops_sync before the host reads what an op wrote.
#pragma once
#include <stddef.h>

// ---- the backend context ----------------------------------------------------------
typedef struct OpsContext OpsContext;
// Open the backend this binary was built with; NULL (with mhar_fail) if it
// cannot start (no device, ...).
OpsContext *ops_open(void);
void ops_close(OpsContext *ctx);
const char *ops_backend_name(const OpsContext *ctx);   // "cpu"
// Zeroed, 64-byte aligned memory in the backend's space; NULL (with
// mhar_fail) when it cannot be had. ops_free(ctx, NULL) does nothing.
void *ops_alloc(OpsContext *ctx, size_t bytes);
void ops_free(OpsContext *ctx, void *p);
// Wait until every op issued so far has finished.
void ops_sync(OpsContext *ctx);
// First thing in main, before any thread or MPI starts: lets the backend set
// up the process. The CPU backend starts the program again (execv, same
// arguments) with OPENBLAS_CORETYPE set when OpenBLAS did not recognise the
// processor and fell back to kernels below what it runs (0.3.21 takes an
// Emerald Rapids for a Prescott: SSE3 sgemm, 3.5x slower); a user's own
// OPENBLAS_CORETYPE is never overridden. Returns when nothing is to be done.
void ops_process_start(char **argv);
// The math library and the kernels it runs, for bench and run provenance,
// e.g. "OpenBLAS 0.3.21, SkylakeX kernels (OPENBLAS_CORETYPE set by mhar:
// OpenBLAS chose Prescott)".
const char *ops_library_name(void);
// Host threads the backend uses for contexts opened from now on (the CPU's
// OpenMP and OpenBLAS threads), and their number now.
void ops_set_threads(int n);
int ops_threads(void);

// ---- profile (mhar bench): where a step's time goes -------------------------------
// With profiling on, every op adds its wall time, entry to return with the
// backend synchronised, under its function's name ("matmul_backward"); an op
// called inside another counts once, in the outer one. Callers add regions
// of their own (the model's "residual": all of a scheme's work) with
// ops_profile_clock before and ops_profile_region after; a region's ops are
// also counted as ops. The ops whose arithmetic is a product of matrices
// also count its floating-point operations (matmuls: 2·M·N·K a product;
// attention: the causal pairs' products only, masked tile halves not
// counted), so that their rate can be set against the sgemm probe's. Off
// (the default) an op pays one branch.
#define OPS_PROFILE_MAX 64
typedef struct {
    char name[32];
    double seconds;     // summed since ops_profile(ctx, 1)
    long calls;
    int region;         // a caller's region, not an op
    double flops;       // floating-point operations summed (0: an op that does not count them)
} OpsProfileEntry;
void ops_profile(OpsContext *ctx, int on);   // on: clear the sums and start; off: stop, keep them
// The sums so far, in first-call order: how many were written (at most cap).
int ops_profile_read(const OpsContext *ctx, OpsProfileEntry *out, int cap);
// A region's start time (seconds; < 0 when not profiling), then its end.
double ops_profile_clock(OpsContext *ctx);
void ops_profile_region(OpsContext *ctx, const char *name, double start);

// ---- matmul (PyTorch Linear layout: W is [N, K], "out = in · Wᵀ") ----------
// in [M, K], w [N, K] -> out [M, N]
void matmul_forward(OpsContext *ctx, float *out, const float *in, const float *w, int M, int K, int N);
// dout [M, N] -> din [M, K] (overwritten, skipped if NULL), dw [N, K] (accumulates)
void matmul_backward(OpsContext *ctx, float *din, float *dw, const float *dout, const float *in,
                     const float *w, int M, int K, int N);
// The same with din += dout · W: an input read by several matmuls (q, k and v;
// gate and up) sums its gradient inside the GEMMs, with no pass of its own.
void matmul_backward_add(OpsContext *ctx, float *din, float *dw, const float *dout, const float *in,
                         const float *w, int M, int K, int N);

// ---- embedding --------------------------------------------------------------
// tokens [n], emb [V, d] -> out [n, d]
void embedding_forward(OpsContext *ctx, float *out, const int *tokens, const float *emb, int n, int d);
// dout [n, d] -> demb [V, d] (accumulates; deterministic regardless of
// repeated tokens)
void embedding_backward(OpsContext *ctx, float *demb, const float *dout, const int *tokens, int n, int d,
                        int V);

// ---- RMSNorm: y = x · rsqrt(mean(x²) + eps) ⊙ w --------------------------
// in [rows, d], w [d] -> out [rows, d], rstd [rows] (saved for backward).
// Also used for the per-head q/k norm with rows = tokens·heads, d = head_dim.
void rmsnorm_forward(OpsContext *ctx, float *out, float *rstd, const float *in, const float *w,
                     int rows, int d, float eps);
// dout [rows, d] -> din [rows, d] (overwritten), dw [d] (accumulates; NULL:
// not wanted). scratch: rmsnorm_scratch_floats(rows, d) floats (dw's
// partials, summed in a fixed order: the same bits at any thread count).
size_t rmsnorm_scratch_floats(int rows, int d);
void rmsnorm_backward(OpsContext *ctx, float *din, float *dw, float *scratch, const float *dout, const float *in,
                      const float *w, const float *rstd, int rows, int d);

// ---- RoPE, "rotate half": coordinate j pairs with j + hd/2 ----------------
// cos, sin [max_pos, hd/2]: angle = pos · inv_freq[j], computed in double.
// inv_freq [hd/2] (host memory) holds the frequencies: theta^(-2j/hd) for
// plain RoPE, scaled per frequency for linear/llama3 (config_rope_inv_freq).
void rope_table(OpsContext *ctx, float *cos_t, float *sin_t, int max_pos, int hd, const double *inv_freq);
// x [B, T, n_heads, hd], in place; token t of the block has position pos0 + t
void rope_forward(OpsContext *ctx, float *x, int B, int T, int n_heads, int hd, int pos0,
                  const float *cos_t, const float *sin_t);
// dx [B, T, n_heads, hd], in place (the transpose rotation)
void rope_backward(OpsContext *ctx, float *dx, int B, int T, int n_heads, int hd, int pos0,
                   const float *cos_t, const float *sin_t);

// ---- grouped-query causal attention ----------------------------------------
// q [B, T, nh, hd], k, v [B, T, nkv, hd]; query head h reads kv head h/(nh/nkv).
// -> y [B, T, nh, hd], lse [B, nh, T]: the log-sum-exp of each query row's
// scaled causal scores, saved with y for the backward (no T×T
// probabilities are stored). Scale 1/sqrt(hd).
// scratch (both passes): attention_scratch_floats(ctx, B, T, nkv, hd)
// floats, linear in T (per thread one kv head's kᵀ, vᵀ and tiles, and dk/dv
// partials when B·nkv is not a multiple of the thread count); sized for the
// threads of the call, as route_scratch_floats.
size_t attention_scratch_floats(OpsContext *ctx, int B, int T, int nkv, int hd);
void attention_forward(OpsContext *ctx, float *y, float *lse, float *scratch, const float *q, const float *k,
                       const float *v, int B, int T, int nh, int nkv, int hd);
// dy [B, T, nh, hd], with the forward's y and lse -> dq [B, T, nh, hd], dk,
// dv [B, T, nkv, hd] (overwritten). The probabilities are recomputed per tile.
void attention_backward(OpsContext *ctx, float *dq, float *dk, float *dv, float *scratch,
                        const float *dy, const float *y, const float *lse, const float *q,
                        const float *k, const float *v, int B, int T, int nh,
                        int nkv, int hd);
// One new token against a KV cache: q [nh, hd] (rotated), k_cache,
// v_cache [n_pos, nkv, hd] (positions 0..n_pos-1, the new one included)
// -> y [nh, hd]. scores: n_pos floats of scratch.
void attention_decode(OpsContext *ctx, float *y, float *scores, const float *q, const float *k_cache,
                      const float *v_cache, int n_pos, int nh, int nkv, int hd);

// ---- SwiGLU: h = silu(gate) ⊙ up --------------------------------------------
// gate_up [rows, 2f] (a row's gate [f], then its up [f]: the one product of
// [gate; up]) -> h [rows, f]
void swiglu_forward(OpsContext *ctx, float *h, const float *gate_up, int rows, int f);
// dh [rows, f] -> dgate_up [rows, 2f] (overwritten), laid out as gate_up
void swiglu_backward(OpsContext *ctx, float *dgate_up, const float *dh, const float *gate_up, int rows, int f);

// ---- softmax cross-entropy (and PaLM's z-loss) ----------------------------------
// logits [n, V], targets [n] -> losses [n] (natural log), and lse [n] the
// log-sum-exp of each row (skipped if NULL; the backward needs it). Returns
// the sum of the losses.
double xent_forward(OpsContext *ctx, float *losses, float *lse, const float *logits, const int *targets, int n,
                    int V);
// The gradient of scale · Σ_i losses_i + z_scale · Σ_i lse_i², with lse [n]
// from xent_forward on the same logits:
// dlogits = softmax(logits) · (scale + 2·z_scale·lse) − scale · onehot(target);
// may alias logits.
void xent_backward(OpsContext *ctx, float *dlogits, const float *logits, const float *lse, const int *targets,
                   int n, int V, float scale, float z_scale);

// ---- log-probabilities of given tokens (scoring) -------------------------------
// logits [n, V], targets [n] -> logp [n] = log softmax(logits row)[target]
// (natural log; the row's sum of exponentials accumulated in double).
void token_logprobs(OpsContext *ctx, double *logp, const float *logits, const int *targets, int n, int V);

// ---- elementwise and row helpers (all [n] unless stated) -----------------------
void vec_copy(OpsContext *ctx, float *out, const float *a, size_t n);             // out = a
void vec_zero(OpsContext *ctx, float *out, size_t n);                             // out = 0
void vec_add(OpsContext *ctx, float *out, const float *a, const float *b, size_t n); // out = a + b (may alias)
void vec_acc(OpsContext *ctx, float *out, const float *a, size_t n);              // out += a
void vec_acc2(OpsContext *ctx, float *out, const float *a, const float *b, size_t n); // out += a + b
void vec_scale_acc(OpsContext *ctx, float *out, const float *a, float s, size_t n); // out += s·a
void vec_axpy(OpsContext *ctx, float *out, const float *a, float s, const float *b, size_t n); // out = a + s·b
// out [rows, d] = row [d] at every row
void rows_broadcast(OpsContext *ctx, float *out, const float *row, int rows, int d);
// dsum [d] += Σ_r in[r, :] (in double over the rows, in order)
void rows_sum(OpsContext *ctx, float *dsum, const float *in, int rows, int d);
// out [ceil(n/block)]: Σ a[i]² over each block of `block` floats of a [n]
// (the last may be shorter), in double, each block in a fixed order (eight
// interleaved running sums, then the tail).
void sum_squares(OpsContext *ctx, double *out, const float *a, size_t n, size_t block);

// ---- AdamW (decoupled weight decay, torch.optim.AdamW) ---------------------------
// One update of p, m, v [n] from g [n] (scaled by grad_scale, the clipping
// factor): p ← p·(1 − lr·wd) − lr/bc1 · m / (sqrt(v)/bc2_sqrt + eps), with
// m, v the updated moments. decay [n]: element i is decayed where
// decay[i] != 0 and not at all (wd = 0) where it is 0; NULL: every element.
typedef struct { float lr, beta1, beta2, eps, weight_decay, bc1, bc2_sqrt, grad_scale; } AdamWStep;
void adamw_update(OpsContext *ctx, float *p, float *m, float *v, const float *g, const unsigned char *decay,
                  size_t n, AdamWStep s);
// Exponential moving average of weights: ema ← decay·ema + (1 − decay)·p, [n].
void ema_update(OpsContext *ctx, float *ema, const float *p, float decay, size_t n);

// ---- depth routing (SPEC §2.2 and §5) -----------------------------------------
// The sources of one read: n rows of [n_tok, d] in one buffer, row i at
// base + i·stride floats (stride 0 repeats one row). With `tail` set, the
// last row is `tail` instead (block routing's partial sum, which lives apart
// from the completed block summaries).
typedef struct { const float *base; size_t stride; int n; const float *tail; } RouteSources;
// Their gradient rows, laid out the same way.
typedef struct { float *base; size_t stride; float *tail; } RouteGrads;
// The row stride the model (and every bench of these kernels) gives such a
// buffer: one cache line more than whole lines, so that a token's rows in
// the N sources fall in different cache sets, where a stride of 4 MiB
// (micro) put all of them in the same L1 and L2 sets (route forward
// 0.89-0.91x the time, micro's final read from memory, tools/route_ab.sh
// pairs; no change over a tile held in cache).
static inline size_t route_row_floats(size_t n_tok, size_t d) {
    const size_t s = (n_tok * d + 15) / 16 * 16 + 16;
    return s % 1024 ? s : s + 16;  // a row of 1008 floats (mod 1024) would land on the multiple
}

// Route(S, q, g, H): x [n_tok, d] (overwritten), w [S.n, n_tok, H] softmax
// weights (saved). q, g [d]. H divides d. eps is the key RMS epsilon.
// scratch: route_scratch_floats (both passes).
void route_forward(OpsContext *ctx, float *x, float *w, float *scratch, RouteSources S,
                   const float *q, const float *g, int n_tok, int d, int H, float eps);
// dx [n_tok, d] -> dS rows (ACCUMULATE), dq [d], dg [d] (accumulate).
// scratch: route_scratch_floats(ctx, n_src, d, H) floats (q ⊙ g and the
// per-thread partials of the deterministic dq/dg reduction); a size computed
// for (n_src, d, H) also serves any call with fewer sources or heads.
size_t route_scratch_floats(OpsContext *ctx, int n_src, int d, int H);
void route_backward(OpsContext *ctx, RouteGrads dS, float *dq, float *dg, float *scratch,
                    const float *dx, const float *w, RouteSources S, const float *q,
                    const float *g, int n_tok, int d, int H, float eps);
// The same, but WRITES the dS rows instead of adding to them: for the first
// backward to touch them (full routing's final read reads every source), so
// they need no zeroing beforehand.
void route_backward_set(OpsContext *ctx, RouteGrads dS, float *dq, float *dg, float *scratch,
                        const float *dx, const float *w, RouteSources S, const float *q,
                        const float *g, int n_tok, int d, int H, float eps);

// ---- full routing, source by source (attnres, mhar) ----------------------------
// Every query of full routing is a parameter, so a source's logits at all
// the sites that will read it are known once the source is written: one
// pass over its rows computes them all (route_keys), and a read is then only
// the softmax and the weighted sum (route_mix). The backward works the same
// way round: a site keeps its dx (route_dx_keep), and a source's gradient is
// gathered from the dx of every site that read it when its producer's
// backward needs it (route_gather), written once, where route_backward
// updated every source's gradient row at every site. Per source and token
// the math is route_forward's and route_backward's.
//
// One site that reads a source, as these kernels see it: its parameters
// and its slots for that source (token stride H).
typedef struct {
    const float *q, *g;   // [d] query and key-norm weight
    float *lg;            // [n_tok, H] logits ℓ (route_keys writes them)
    const float *w;       // [n_tok, H] softmax weights (route_mix wrote them)
    const float *dx, *c;  // [n_tok, d], [n_tok, H] (route_dx_keep wrote them)
    float *dq, *dg;       // [d] accumulate
} RouteReader;
// Source S [n_tok, d] -> rho [n_tok] = rsqrt(mean S² + eps) and, for each
// of the n_rd readers, lg [n_tok, H] = ρ Σ_{k∈h} q_k g_k S_k.
// scratch: route_scratch_floats(ctx, n_rd, d, H) floats.
void route_keys(OpsContext *ctx, float *rho, const RouteReader *rd, int n_rd, float *scratch,
                const float *S, int n_tok, int d, int H, float eps);
// A read from its logits lg [S.n, n_tok, H] -> w [S.n, n_tok, H] = softmax
// over the sources, x [n_tok, d] = Σ_n w_n,h(k) S_n,k (both overwritten).
void route_mix(OpsContext *ctx, float *x, float *w, const float *lg, RouteSources S, int n_tok, int d,
               int H);
// A read's gradient dx and output x [n_tok, d] -> keep [n_tok, d] = dx, and
// c [n_tok, H] = ⟨dx_h, x_h⟩ (= Σ_n w_n ⟨dx_h, S_n,h⟩, the softmax
// gradient's mean). keep may be dx itself (dx written where it is kept):
// then only c.
void route_dx_keep(OpsContext *ctx, float *keep, float *c, const float *dx, const float *x, int n_tok,
                   int d, int H);
// Source S [n_tok, d] with its rho -> dS [n_tok, d] (overwritten): the sum
// over its n_rd readers of their routes' gradients; each reader's dq and dg
// accumulate. scratch: route_scratch_floats(ctx, n_rd, d, H) floats.
void route_gather(OpsContext *ctx, float *dS, const RouteReader *rd, int n_rd, float *scratch,
                  const float *S, const float *rho, int n_tok, int d, int H);

// Statistics of saved weights w [n_src, n_tok, H], per head h, summed over
// tokens into (accumulating) entropy, first, last [H]: entropy in nats, the
// weight on source 0 and on source n_src-1.
void route_weight_stats(OpsContext *ctx, double *entropy, double *first, double *last, const float *w,
                        int n_src, int n_tok, int H);
// The probes of SPEC §4 (analysis/probe.h says what they mean), in double.
// Width disagreement: out[t] = (1/slices) Σ_s KL(a_s ‖ α), slices divides d.
void route_probe_width(OpsContext *ctx, double *out, RouteSources S, const float *q, const float *g,
                       int n_tok, int d, int slices, float eps);
// Head deviation: out[t·H + h] = KL(w_h ‖ mean_h w_h), H divides d.
void route_probe_heads(OpsContext *ctx, double *out, RouteSources S, const float *q, const float *g,
                       int n_tok, int d, int H, float eps);
// The largest |w − a_h| between saved weights w [n_src, n_tok, H] and the
// slice distributions recomputed in double (NaN if any is NaN).
double route_probe_weight_error(OpsContext *ctx, const float *w, RouteSources S, const float *q,
                                const float *g, int n_tok, int d, int H, float eps);

// ---- static hyper-connections (SPEC §2.5), 4 streams ----------------------------
// Streams are 4 rows of [n_tok, d] at base + i·stride (stride 0: one row
// four times, the embedding before the first write).
typedef struct { const float *base; size_t stride; } HcStreams;
// x [n] = Σ_i p_i H_i
void hc_read(OpsContext *ctx, float *x, HcStreams H, const float p[4], size_t n);
// new_i = Σ_j A[i, j] H_j + β_i o (4 rows at out, stride out_stride), and the
// next read x_next = Σ_i p_next_i new_i from the same registers.
void hc_write(OpsContext *ctx, float *out, size_t out_stride, float *x_next, HcStreams H, const float *o,
              const float A[16], const float beta[4], const float p_next[4], size_t n);
// The backward of read s fused with that of write s-1 (see residual/hc.c):
// with g_j = G_j + p_j dx (G absent when fresh), dout += Σ_j β_j g_j and
// G_i ← Σ_j A[j, i] g_j in place (G: 4 rows at G, stride g_stride), and
// S[25] = per-chunk-summed dots ⟨a_l, b_i⟩ for a = G_0..G_3 (before the
// update; 0 when fresh), dx and b = H_0..H_3, o: the parameter gradients'
// ingredients.
void hc_backward(OpsContext *ctx, double S[25], float *G, size_t g_stride, float *dout, const float *dx,
                 HcStreams H, const float *o, const float A[16], const float beta[4], const float p[4],
                 int fresh, int n_tok, int d);
// The first read (all streams are the embedding): demb += Σ_r (G_r + p_r dx).
void hc_first_read_backward(OpsContext *ctx, float *demb, const float *G, size_t g_stride, const float *dx,
                            const float p[4], size_t n);

// ---- DenseFormer depth-weighted averaging (SPEC §2.6) ----------------------------
// y [n_tok, d] = Σ_{j<count} alpha[j] X_j, X_j at X + j·x_stride.
void dwa_average(OpsContext *ctx, float *y, const float *X, size_t x_stride, const float *alpha, int count,
                 int n_tok, int d);
// Its backward for gy = dnext + dx (dnext NULL: gy = dx): dX_j (at dX +
// j·dx_stride) += alpha[j] gy, dalpha[j] += ⟨gy, X_j⟩ (accumulates).
// scratch: dwa_scratch_floats(d, count) floats.
size_t dwa_scratch_floats(int d, int count);
void dwa_backward(OpsContext *ctx, float *dX, size_t dx_stride, float *dalpha, float *scratch, const float *dnext,
                  const float *dx, const float *X, size_t x_stride, const float *alpha, int count, int n_tok,
                  int d);

// ---- delta_mh's gated read (SPEC §2.7) -------------------------------------------
// Backward of x = r + a·y for one site: dr += dx, dy = a·dx, and
// *da += Σ dx·y (tokens in fixed chunks, in double).
void gated_read_backward(OpsContext *ctx, float *dr, float *dy, float *da, const float *dx, const float *y,
                         float a, int n_tok, int d);

// ---- memory-bandwidth probe (mhar bench) -------------------------------------------
// Σ a[i] over a [n], read once by every thread with independent partial
// sums, so that only memory limits it (sum_squares converts to double).
// Fixed chunks, each summed in fp32 lanes then added in double in index
// order: the same bits whatever the thread count.
// Its read-modify-write counterpart is vec_scale_acc itself.
double stream_sum(OpsContext *ctx, const float *a, size_t n);
