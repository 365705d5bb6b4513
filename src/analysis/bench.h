// Measurements of `mhar bench` (analysis/bench.c).
#pragma once
#include "../dist/comm.h"

typedef struct { const char *name, *mode; int heads, blocks; } BenchScheme;
typedef struct { double tok_s, peak_mb; } BenchSample;

// The sgemm rate of this machine through matmul_forward: median of 5 square
// 2048³ products, GFLOP/s (0 if the memory cannot be had).
double bench_sgemm_gflops(void);
// `steps` timed training steps (forward, backward, AdamW; one untimed
// warm-up) of scheme s on random tokens, in a forked child: median tokens/s
// and the child's peak RSS into *out, model FLOPs per token into *flops.
// Fork before this process starts OpenMP or OpenBLAS threads.
int bench_scheme(const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps, BenchSample *out,
                 double *flops);
// tools/bench_torch.py (HF Qwen3, PyTorch eager, fp32) on the same shape:
// tokens/s, or -1 if it failed.
double bench_torch_tok_s(const char *preset, int vocab, int B, int T, int steps);

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
