// Measurements of `mhar bench` (analysis/bench.c).
#pragma once

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
