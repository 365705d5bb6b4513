// mhar bench: training throughput and memory of one or all residual schemes,
// model FLOP/s, and this machine's own sgemm rate, all measured in one run.
// Each scheme runs in a child process, so its peak memory is its own.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "analysis/bench.h"
#include "dist/comm.h"
#include "model/config.h"
#include "residual/residual.h"
#include "util/median.h"

static const char *usage =
    "usage: mhar bench [--preset P] [--residual R|all] [--batch B --seq T --steps N --repeat K]\n\n"
    "Times full training steps (forward, backward, AdamW) on random tokens and\n"
    "reports the median step. model FLOPs = 6·params + 12·L·nh·hd·T per token;\n"
    "mfu = model FLOP/s / the sgemm rate measured here (2048³, median of 5).\n"
    "--residual all runs baseline, hc, denseformer, attnres, mhar and block and\n"
    "reports each one's throughput and peak memory as ratios to baseline;\n"
    "--repeat K interleaves K rounds of all schemes and takes medians.\n"
    "--torch also times HF transformers' Qwen3 (PyTorch eager, fp32) on the\n"
    "same shape via tools/bench_torch.py. The last line is a JSON object.\n\n"
    "Under mpirun -np N (one scheme): the scaling of data-parallel training:\n"
    "tokens/s of N ranks x T threads (OMP_NUM_THREADS) against 1 rank x N·T\n"
    "threads on the same global batch (N x --batch), the communication time\n"
    "per step and the optimizer state per rank. Run it with --bind-to none, so\n"
    "that the one rank can use every core.";

// The scaling report of bench under mpirun (rank 0 prints).
static int bench_mpi(Comm *comm, const char *preset, const BenchScheme *s, int vocab, int batch, int seq, int steps,
                     int repeat) {
    BenchScaling b;
    if (bench_data_parallel(comm, preset, s, vocab, batch, seq, steps, repeat, &b)) {
        if (comm->rank == 0) fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    if (comm->rank) return 0;
    printf("%d ranks x %d threads   %9.0f tok/s   communication %.1f ms of a %.1f ms step (%.1f%%)\n", b.ranks,
           b.threads, b.ranks_tok_s, b.comm_ms, b.step_ms, 100 * b.comm_ms / b.step_ms);
    printf("without overlap         %9.0f tok/s   communication %.1f ms (overlap buys %.3fx)\n", b.serial_tok_s,
           b.serial_comm_ms, b.ranks_tok_s / b.serial_tok_s);
    printf("1 rank x %d threads     %9.0f tok/s\n", b.ranks * b.threads, b.single_tok_s);
    printf("ranks / one rank        %9.3f\n", b.ranks_tok_s / b.single_tok_s);
    printf("optimizer state         %9.1f MB per rank (%.1f MB unsharded, %.2fx less)\n", b.opt_mb_rank, b.opt_mb_full,
           b.opt_mb_full / b.opt_mb_rank);
    printf("{\"preset\": \"%s\", \"residual\": \"%s\", \"batch\": %d, \"seq\": %d, \"ranks\": %d, \"threads\": %d, "
           "\"ranks_tok_per_s\": %.1f, \"single_tok_per_s\": %.1f, \"ratio\": %.4f, \"comm_ms\": %.2f, "
           "\"step_ms\": %.2f, \"serial_tok_per_s\": %.1f, \"serial_comm_ms\": %.2f, \"optimizer_mb_per_rank\": %.2f, "
           "\"optimizer_mb_full\": %.2f}\n",
           preset, s->name, batch, seq, b.ranks, b.threads, b.ranks_tok_s, b.single_tok_s,
           b.ranks_tok_s / b.single_tok_s, b.comm_ms, b.step_ms, b.serial_tok_s, b.serial_comm_ms, b.opt_mb_rank,
           b.opt_mb_full);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *preset = "micro", *residual = "baseline";
    int batch = 16, seq = 256, steps = 5, vocab = 8192, heads = 8, blocks = 4, repeat = 1, torch = 0;
    Flag flags[] = {
        {"preset", FLAG_STR, &preset, "model preset (default micro)", 0, 0, 0},
        {"residual", FLAG_STR, &residual, "scheme, or all (default baseline)", 0, 0, 0},
        {"route-heads", FLAG_INT, &heads, "routing heads for mhar and block (default 8)", 1, 4096, 0},
        {"route-blocks", FLAG_INT, &blocks, "blocks for block routing (default 4)", 1, 1024, 0},
        {"batch", FLAG_INT, &batch, "sequences per step (default 16)", 1, 1 << 20, 0},
        {"seq", FLAG_INT, &seq, "tokens per sequence (default 256)", 1, 1 << 20, 0},
        {"steps", FLAG_INT, &steps, "timed steps per run, after one warm-up (default 5)", 1, 1e6, 0},
        {"repeat", FLAG_INT, &repeat, "interleaved rounds over the schemes (default 1)", 1, 1000, 0},
        {"vocab", FLAG_INT, &vocab, "vocabulary size (default 8192)", 2, 1 << 24, 0},
        {"torch", FLAG_BOOL, &torch, "also time PyTorch eager (HF Qwen3) on the same shape", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    // all: every scheme that trains from a fresh init, in registry order; H
    // and N only where the scheme takes them.
    BenchScheme list[32];
    int n = 0;
    for (int i = 0; i < residual_count() && n < 32; i++) {
        const ResidualScheme *s = residual_at(i);
        if (strcmp(residual, "all") ? strcmp(residual, s->name) != 0 : !s->from_scratch) continue;
        list[n++] = (BenchScheme){s->name, s->name, s->heads == HEADS_ANY ? heads : 1, s->needs_blocks ? blocks : 0};
    }
    if (!n) {
        char names[256];
        fprintf(stderr, "error: unknown residual scheme '%s' (%s, or all)\n", residual,
                residual_names(names, sizeof names, ", ", NULL));
        return 1;
    }
    Config probe;  // refuse a bad scheme before timing anything
    config_preset(preset, &probe);
    for (int i = 0; i < n; i++) {
        probe.vocab_size = vocab;
        snprintf(probe.attnres_mode, sizeof probe.attnres_mode, "%s", list[i].mode);
        probe.attnres_num_heads = list[i].heads;
        probe.attnres_num_blocks = list[i].blocks;
        if (config_validate(&probe, "bench options")) {
            fprintf(stderr, "error: %s\n", mhar_error());
            return 1;
        }
    }
    Comm *comm = comm_world();
    if (comm->size > 1) {
        if (n != 1 || torch) {
            if (comm->rank == 0) fprintf(stderr, "error: under mpirun, bench times one scheme (no all, no --torch)\n");
            return 2;
        }
        return bench_mpi(comm, preset, &list[0], vocab, batch, seq, steps, repeat);
    }
    // The children are forked before this process starts any OpenMP or
    // OpenBLAS threads: libgomp does not survive a fork after its first use.
    double fpt[32] = {0};  // model FLOPs per token of each scheme
    double *tok = calloc((size_t)n * repeat, sizeof(double)), *mem = calloc((size_t)n * repeat, sizeof(double));
    for (int k = 0; k < repeat; k++)
        for (int i = 0; i < n; i++) {
            BenchSample s = {0, 0};
            if (bench_scheme(preset, &list[i], vocab, batch, seq, steps, &s, &fpt[i])) {
                fprintf(stderr, "error: %s\n", mhar_error());
                return 1;
            }
            tok[i * repeat + k] = s.tok_s;
            mem[i * repeat + k] = s.peak_mb;
            fprintf(stderr, "  round %d  %-12s %8.0f tok/s  %7.0f MB\n", k + 1, list[i].name, s.tok_s, s.peak_mb);
        }
    double sgemm = bench_sgemm_gflops();
    double torch_tok = torch ? bench_torch_tok_s(preset, vocab, batch, seq, steps) : -1;
    if (torch && torch_tok <= 0) fprintf(stderr, "warning: the PyTorch comparison failed (tools/bench_torch.py)\n");
    printf("%-12s %10s %12s %8s %9s %9s %9s\n", "scheme", "tok/s", "model GF/s", "mfu", "peak MB", "tok/base", "mem/base");
    double base_tok = median(tok, repeat), base_mem = median(mem, repeat);
    char json[8192];
    int off = 0;
    for (int i = 0; i < n; i++) {
        double t = median(tok + i * repeat, repeat), mb = median(mem + i * repeat, repeat);
        double gflops = fpt[i] * t / 1e9;
        printf("%-12s %10.0f %12.1f %7.1f%% %9.0f %9.3f %9.3f\n", list[i].name, t, gflops, 100 * gflops / sgemm, mb,
               t / base_tok, mb / base_mem);
        off += snprintf(json + off, sizeof json - off,
                        "%s\"%s\": {\"tok_per_s\": %.1f, \"model_gflops\": %.2f, \"mfu\": %.4f, \"peak_rss_mb\": %.1f, "
                        "\"tok_ratio\": %.4f, \"mem_ratio\": %.4f}",
                        i ? ", " : "", list[i].name, t, gflops, gflops / sgemm, mb, t / base_tok, mb / base_mem);
        if (n == 1)
            snprintf(json, sizeof json, "\"residual\": \"%s\", \"tok_per_s\": %.1f, \"model_gflops\": %.2f, "
                     "\"mfu\": %.4f, \"peak_rss_mb\": %.1f", list[0].name, t, gflops, gflops / sgemm, mb);
    }
    if (torch_tok > 0)
        printf("%-12s %10.0f %12.1f %7.1f%%   (PyTorch eager, HF Qwen3, fp32; mhar baseline is %.2fx)\n", "torch",
               torch_tok, fpt[0] * torch_tok / 1e9, 100 * fpt[0] * torch_tok / 1e9 / sgemm, base_tok / torch_tok);
    printf("{\"preset\": \"%s\", \"batch\": %d, \"seq\": %d, \"vocab\": %d, \"sgemm_gflops\": %.2f, %s%s%s",
           preset, batch, seq, vocab, sgemm, n == 1 ? "" : "\"schemes\": {", json, n == 1 ? "" : "}");
    if (torch_tok > 0) printf(", \"torch_tok_per_s\": %.1f", torch_tok);
    printf("}\n");
    free(tok); free(mem);
    return 0;
}
