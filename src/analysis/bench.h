// Measurements of `mhar bench` (analysis/bench.c; the scaling grid of
// --scaling in analysis/bench_shapes.c, the PyTorch peers in
// analysis/bench_torch.c).
#pragma once
#include "../dist/comm.h"
#include "../kernels/ops.h"
#include "../residual/residual.h"

#define BENCH_MAX_SCHEMES 16
#define BENCH_MAX_ROUNDS 64  // --repeat

typedef struct { const char *name, *mode; int heads, blocks; } BenchScheme;

// What one timed child reports (bench_scheme).
typedef struct {
    double tok_s, peak_mb;     // median tokens/s of the timed steps; the child's peak RSS
    double flops;              // model FLOPs per training token
    double params;             // parameters of the model
    int steps;                 // timed steps it ran
    double step_mean_s;        // mean seconds of its timed steps
    double sgemm_gflops;       // the sgemm probe between its timed steps (median of steps + 1 products)
    double probe_mib;          // the probe's resident memory, left out of peak_mb
    // the op profile of the timed steps (ops.h), seconds per step
    OpsProfileEntry prof[OPS_PROFILE_MAX];
    int n_prof;
} BenchSample;

// The schemes of --residual SPEC: one registered name, a comma list of them
// ("baseline,mhar,attnres", each once) or "all" (every scheme that trains
// from a fresh init, in registry order), each with H = heads where the
// scheme takes a head count and N = blocks where it needs blocks; each is
// then checked as a config of `preset` with `vocab`. *n = how many.
int bench_parse_schemes(const char *spec, const char *preset, int vocab, int heads, int blocks, BenchScheme *out,
                        int *n);
// The index of the scheme called name in list[0..n), or -1.
int bench_find(const BenchScheme *list, int n, const char *name);

// The sgemm rate of this machine through matmul_forward: median of 5 square
// 2048³ products, GFLOP/s (0 if the memory cannot be had).
double bench_sgemm_gflops(void);

// Memory bandwidth, all threads, over arrays much larger than the
// last-level cache (4x its size, at least 256 MiB): stream_sum (read) and
// vec_scale_acc, a[i] += s·b[i] (read-modify-write), each the median of 7
// passes after one warm-up. Bytes are counted as RouteBytes counts them:
// read 4 per float; read-modify-write 12 (b read, a updated: 8).
typedef struct {
    double read_gbs, rmw_gbs;  // GB/s (1e9 bytes)
    double array_mib;          // size of each array
    double llc_mb;             // the last-level cache, MB (0 if unknown)
} BenchBandwidth;
int bench_bandwidth(BenchBandwidth *out);

// Both probes (bench_sgemm_gflops, bench_bandwidth) in a forked child, so
// that the caller can go on forking: fork-safe where the two are not.
typedef struct { double sgemm_gflops; BenchBandwidth bw; } BenchLimits;
int bench_limits(BenchLimits *out);
// bench_bandwidth alone, in a forked child.
int bench_memory(BenchBandwidth *out);

// The traffic of scheme s per training step of n_tok tokens on `preset`
// (residual_route_bytes): 1, or 0 when the scheme does not model it.
int bench_route_bytes(const char *preset, const BenchScheme *s, int vocab, int n_tok, RouteBytes *out);
// The time floor (seconds) of the traffic a scheme moves beyond baseline's:
// extra reads at the read bandwidth plus extra writes at the
// read-modify-write bandwidth.
double bench_floor_s(RouteBytes scheme, RouteBytes base, const BenchBandwidth *bw);

// `steps` timed training steps (forward, backward, AdamW; one untimed
// warm-up) of scheme s on random tokens, in a forked child, into *out. With
// budget_s > 0 the child times at most as many steps as fit budget_s at the
// warm-up step's pace (at least 1). Fork before this process starts OpenMP
// or OpenBLAS threads.
int bench_scheme(const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps, double budget_s,
                 BenchSample *out);

// ---- the PyTorch peers (analysis/bench_torch.c) ----------------------------------
// tools/bench_torch.py times each scheme's PyTorch peer on the same shape:
// HF Qwen3 (eager, sdpa) for baseline, and when baseline is in the list also
// the same under torch.compile; modeling_mhar's eager form for the others.
typedef struct {
    char name[32];             // qwen3, qwen3_compile, or the scheme's name
    char what[96];             // what it is, as the helper says
    double tok_s;              // 0 when it failed; the median over the rounds
    char error[256];           // why it failed ("" when it ran)
    double round_tok_s[BENCH_MAX_ROUNDS];  // each round's (bench_run: one helper call after each round)
    // bench_run: the mhar scheme it is compared with (-1: none), and that
    // scheme's tokens/s over the peer's, paired by round, median and range
    int vs;
    double ratio, ratio_min, ratio_max;
} BenchPeer;
typedef struct {
    char version[48];          // torch.__version__ ("" when the helper failed)
    int threads;
    BenchPeer peer[BENCH_MAX_SCHEMES + 1];
    int n;
    int rounds;                // helper calls (bench_run: one a round)
    char error[256];           // the helper itself failed ("" otherwise)
} BenchTorch;
// Runs $MHAR_BENCH_TORCH (default tools/bench_torch.py, from the repository
// root) with .venv/bin/python3 when present, else python3. Fills *out and
// returns MHAR_OK even when peers fail (each says why); MHAR_ERR only for a
// bad shape.
int bench_torch(const char *preset, int vocab, int B, int T, int steps, const BenchScheme *list, int n,
                BenchTorch *out);
// The index in t of scheme s's eager peer, of qwen3_compile (s NULL), or -1.
int bench_torch_peer(const BenchTorch *t, const BenchScheme *s);

// ---- one bench run ---------------------------------------------------------------
typedef struct {
    const char *preset;
    int vocab, batch, seq, steps, repeat, torch;
    BenchScheme scheme[BENCH_MAX_SCHEMES];
    int n;
} BenchPlan;

typedef struct {
    double tok_s, peak_mb;     // medians over the rounds
    double round_tok_s[BENCH_MAX_ROUNDS];  // each round's
    // Against the reference scheme (baseline, else the first listed), paired
    // within each round and then the median (and range) over the rounds: a
    // machine whose speed drifts moves both sides of a pair together.
    double tok_ratio, ratio_min, ratio_max;
    // Model FLOP/s over the sgemm rate probed between the same steps, median
    // (and range) over the rounds: the probe and the steps drift together
    // on a shared machine, and two separate medians would not pair them.
    double mfu, mfu_min, mfu_max;
    double round_sgemm[BENCH_MAX_ROUNDS];  // each round's sgemm probe between its timed steps
    double flops;              // model FLOPs per token
    double step_ms;            // B·T / tok_s
    int modelled;              // bytes below are known
    RouteBytes bytes;          // the scheme's traffic per step
    // Against baseline (routed schemes, when baseline is in the plan and
    // both are modelled; NAN otherwise): step time over baseline's (the
    // median over the rounds of each round's difference), and the floor of
    // it from the extra traffic (bench_floor_s).
    double extra_ms, floor_ms;
    // Where its step goes: the op profile, ms per step (the mean over the
    // timed steps of the round whose mean step is the median; regions
    // flagged) and that round's mean step, and the "residual" region (all
    // of the scheme's work inside the step; median over the rounds) against
    // the floor of its whole traffic (bench_floor_s against nothing): a
    // direct measure that the noise of two whole steps does not blur.
    OpsProfileEntry prof[OPS_PROFILE_MAX];
    int n_prof;
    double prof_step_ms, residual_ms, residual_floor_ms;
    double prof_sgemm;         // the sgemm probe between that round's steps (GFLOP/s)
} BenchResult;

typedef struct {
    // The machine's limits: the sgemm probes between the schemes' steps
    // (median and range over every scheme and round), the memory probes run
    // before each round (medians over the rounds).
    double sgemm_gflops, sgemm_min, sgemm_max;
    BenchBandwidth bw;
    int rounds;
    double sources_mb;         // full routing's source buffer at this shape ((2L+1)·B·T·d floats)
    int base;                  // index of baseline in the plan, -1
    BenchResult r[BENCH_MAX_SCHEMES];
    BenchTorch torch;          // when plan.torch: the helper runs after every round's schemes
} BenchRun;

// The rounds of every scheme (each round runs the machine's memory probe,
// then every scheme once, in order, each in its own child, and with
// plan->torch the PyTorch peers; progress on stderr), then the traffic
// figures.
int bench_run(const BenchPlan *plan, BenchRun *out);
// Prints a run to stdout: the table of schemes, the routing floors, the
// PyTorch peers (with --torch) and, last, one JSON line (a failed peer run
// is a warning on stderr).
void bench_print(const BenchPlan *plan, const BenchRun *run);

// ---- the scaling grid (analysis/bench_shapes.c) ------------------------------------
// baseline and mhar (H = heads) over the presets nano .. max_preset at
// B 8 x T 256, and on `preset` over T = 256 .. max_seq (powers of 2) at
// 4096 tokens a step. Each shape: one warm-up and up to `steps` timed steps
// (fewer where a step is slow: 20 s of timed steps at most); a shape whose
// estimated memory (model_train_bytes) exceeds max_gb, or 90% of the
// machine's RAM when max_gb is 0, is skipped with a line saying so. Writes DIR/scaling.md, DIR/scaling.json and gnuplot PNGs
// (DIR/scaling_{preset,seq}_{tok_s,mfu,peak_mb,ratio}.png, each beside its
// .dat and .gp); *md (malloc'd) gets the Markdown table.
typedef struct {
    const char *dir, *preset, *max_preset;
    int max_seq, steps, vocab, heads;
    double max_gb;             // 0: 90% of RAM
} BenchShapesPlan;
int bench_shapes(const BenchShapesPlan *plan, char **md);

// Data-parallel scaling (mhar bench under mpirun): the job's ranks train
// batches of B × T each (one micro-batch per rank a step), with and without
// overlapping the gradients' reduction with the backward, then rank 0 alone,
// with the threads of all ranks, trains the same global batch. Medians over
// `repeat` rounds. Every rank calls it; the figures are rank 0's.
typedef struct {
    int ranks, threads;              // ranks in the job, threads per rank
    double ranks_tok_s, single_tok_s; // tokens/s: the N ranks; 1 rank × N·threads
    double comm_ms, step_ms;         // communication time per step, step time (N ranks)
    double serial_tok_s, serial_comm_ms;  // the same without overlapping communication and backward
    double opt_mb_rank, opt_mb_full; // optimizer state per rank, unsharded
} BenchScaling;
int bench_data_parallel(Comm *comm, const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps,
                        int repeat, BenchScaling *out);

// ---- the route kernels alone (analysis/bench_kernel.c, --kernel route) -------------
// On the preset's final read (P = 2L+1 sources) over B·T tokens, H heads:
// route_forward and route_backward (block routing's kernels), and full
// routing's source-by-source kernels at their largest calls: route_keys of
// one source for P readers, route_mix over P sources, route_gather of one
// source from P readers. `steps` timed calls of each after one warm-up,
// from memory (one call over all tokens) and from cache (calls over an
// L2-sized tile covering as many tokens), each against the floor of its
// traffic at the bandwidths measured in the run.
typedef struct { const char *preset; int batch, seq, steps, heads; } BenchKernelPlan;
enum { BENCH_KERNEL_PASSES = 5 };
typedef struct {
    const char *pass, *where;  // forward | backward | keys | mix | gather; memory | cache
    double ms, ms_min, ms_max; // per B·T tokens: median and range over the steps
    RouteBytes bytes;          // the pass's traffic for B·T tokens
    double floor_ms;           // those bytes at the measured bandwidths
} BenchKernelRow;
typedef struct {
    int n_tok, d, n_src, heads, threads, tile;
    BenchLimits lim;
    BenchKernelRow row[2 * BENCH_KERNEL_PASSES]; // every pass from memory, then from cache
} BenchKernelRun;
int bench_kernel_route(const BenchKernelPlan *p, BenchKernelRun *out);
// The table, then one JSON line.
void bench_kernel_print(const BenchKernelPlan *p, const BenchKernelRun *k);
