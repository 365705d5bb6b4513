// mhar bench: training throughput and memory of residual schemes, model
// FLOP/s, this machine's own sgemm rate and memory bandwidth, each routed
// scheme's cost over baseline against its memory-traffic floor, the PyTorch
// peers, and the scaling grid; all measured by analysis/bench.h.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "analysis/bench.h"
#include "dist/comm.h"

static const char *usage =
    "usage: mhar bench [--preset P] [--residual R|R1,R2,...|all] [--batch B --seq T --steps N --repeat K] [--torch]\n"
    "       mhar bench --scaling --out DIR [--preset P] [--max-preset P] [--max-seq T] [--max-memory GB] [--steps N]\n"
    "       mhar bench --kernel route [--preset P] [--route-heads H] [--batch B --seq T --steps N]\n\n"
    "Times full training steps (forward, backward, AdamW) on random tokens and\n"
    "reports the median step. model FLOPs = 6·params + 12·L·nh·hd·T per token;\n"
    "mfu = model FLOP/s / the sgemm rate measured between the same timed\n"
    "steps (2048³ products, one before the first and one after each; with\n"
    "--repeat, each round's against its own probes, then the median).\n"
    "The memory bandwidth is measured in the same run (all threads, arrays 4x\n"
    "the last-level cache): read (a sum) and read-modify-write (a[i] += s·b[i]).\n"
    "--residual takes one scheme, a comma list, or all (baseline, hc,\n"
    "denseformer, attnres, mhar, block); throughput and peak memory are given as\n"
    "ratios to baseline, and for each routed scheme its extra step time over\n"
    "baseline against the floor of its extra memory traffic at the measured\n"
    "bandwidths (extra/floor: 1 would be a kernel at the memory's pace).\n"
    "--repeat K interleaves K rounds of the schemes and takes medians; ratios\n"
    "to baseline and extra step times are paired within each round first.\n"
    "An op profile says where each step goes, and the matrix products' rate\n"
    "against the same steps' sgemm probe, with the mfu the step would have if\n"
    "nothing but the products took time (mfu, products alone).\n"
    "--torch also times PyTorch peers on the same shape (tools/bench_torch.py):\n"
    "HF Qwen3 eager (sdpa) and under torch.compile for baseline, mhar's own HF\n"
    "class in eager PyTorch for the other schemes; with --repeat, after every\n"
    "round, the ratios paired by round. The last line is a JSON object.\n\n"
    "--scaling: baseline and mhar over the presets nano .. --max-preset (1b) at\n"
    "B 8 x T 256, and on --preset over T 256 .. --max-seq (2048) at 4096 tokens a\n"
    "step; --steps caps the timed steps of a shape (big ones take fewer);\n"
    "shapes estimated above --max-memory GB (default 90% of RAM) are skipped.\n"
    "Writes DIR/scaling.md, DIR/scaling.json and gnuplot PNGs of tokens/s, mfu,\n"
    "peak memory and the mhar/baseline ratio.\n\n"
    "--kernel route: route_forward and route_backward alone on the preset's\n"
    "final read (2L+1 sources, B·T tokens, H heads), median of --steps calls:\n"
    "from memory (one call over all tokens, as the model calls them, after a\n"
    "read over twice the last-level cache) and from cache (as many tokens, as\n"
    "calls over one tile that fits in L2), each\n"
    "against the floor of its traffic at the bandwidths measured in the run.\n\n"
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

static int run_scaling(const BenchShapesPlan *sp) {
    char *md = NULL;
    if (bench_shapes(sp, &md)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        free(md);
        return 1;
    }
    fputs(md, stdout);
    printf("wrote %s/scaling.md, %s/scaling.json and %s/scaling_*.png\n", sp->dir, sp->dir, sp->dir);
    free(md);
    return 0;
}

static int run_kernel(const BenchKernelPlan *kp) {
    static BenchKernelRun k;
    if (bench_kernel_route(kp, &k)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    bench_kernel_print(kp, &k);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *preset = "micro", *residual = "baseline", *out = NULL, *max_preset = "1b";
    int batch = 16, seq = 256, steps = 5, vocab = 8192, heads = 8, blocks = 4, repeat = 1, torch = 0, scaling = 0;
    int max_seq = 2048;
    const char *kernel = NULL;
    double max_gb = 0;
    Flag flags[] = {
        {"preset", FLAG_STR, &preset, "model preset (default micro; with --scaling, the model of the T sweep)", 0, 0, 0},
        {"residual", FLAG_STR, &residual, "scheme, comma list of schemes, or all (default baseline)", 0, 0, 0},
        {"route-heads", FLAG_INT, &heads, "routing heads for mhar and block (default 8)", 1, 4096, 0},
        {"route-blocks", FLAG_INT, &blocks, "blocks for block routing (default 4)", 1, 1024, 0},
        {"batch", FLAG_INT, &batch, "sequences per step (default 16)", 1, 1 << 20, 0},
        {"seq", FLAG_INT, &seq, "tokens per sequence (default 256)", 1, 1 << 20, 0},
        {"steps", FLAG_INT, &steps, "timed steps per run, after one warm-up (default 5)", 1, 1e6, 0},
        {"repeat", FLAG_INT, &repeat, "interleaved rounds over the schemes (default 1)", 1, BENCH_MAX_ROUNDS, 0},
        {"vocab", FLAG_INT, &vocab, "vocabulary size (default 8192)", 2, 1 << 24, 0},
        {"torch", FLAG_BOOL, &torch, "also time the PyTorch peers on the same shape", 0, 0, 0},
        {"kernel", FLAG_STR, &kernel, "time one kernel alone: route (forward and backward)", 0, 0, 0},
        {"scaling", FLAG_BOOL, &scaling, "run the scaling grid (presets and sequence lengths) into --out", 0, 0, 0},
        {"out", FLAG_STR, &out, "directory of the --scaling table and plots", 0, 0, 0},
        {"max-preset", FLAG_STR, &max_preset, "largest preset of the --scaling grid (default 1b)", 0, 0, 0},
        {"max-seq", FLAG_INT, &max_seq, "longest sequence of the --scaling grid (default 2048)", 256, 1 << 20, 0},
        {"max-memory", FLAG_DOUBLE, &max_gb, "--scaling skips shapes estimated above this many GB (default 90% of RAM)",
         0.001, 1e6, 0},
    };
    const int nf = sizeof flags / sizeof flags[0];
    int r = args_parse(argc, argv, flags, nf, usage);
    if (r) return r > 0 ? 0 : 2;
    if (kernel) {
        const char *not_here[] = {"residual", "repeat", "torch", "route-blocks", "vocab", "scaling", "out",
                                  "max-preset", "max-seq", "max-memory"};
        for (size_t i = 0; i < sizeof not_here / sizeof not_here[0]; i++)
            if (args_flag(flags, nf, not_here[i])->given) {
                fprintf(stderr, "error: --%s does not apply to --kernel\n", not_here[i]);
                return 2;
            }
        if (strcmp(kernel, "route") != 0) {
            fprintf(stderr, "error: --kernel '%s': unknown kernel (route)\n", kernel);
            return 2;
        }
        return run_kernel(&(BenchKernelPlan){preset, batch, seq, steps, heads});
    }
    if (scaling) {
        const char *only[] = {"residual", "batch", "seq", "repeat", "torch", "route-blocks"};
        for (size_t i = 0; i < sizeof only / sizeof only[0]; i++)
            if (args_flag(flags, nf, only[i])->given) {
                fprintf(stderr, "error: --%s does not apply to --scaling (its grid fixes it)\n", only[i]);
                return 2;
            }
        if (!out) { fprintf(stderr, "error: --scaling needs --out DIR for its table and plots\n"); return 2; }
        BenchShapesPlan sp = {out, preset, max_preset, max_seq, steps, vocab, heads, max_gb};
        return run_scaling(&sp);
    }
    const char *grid[] = {"out", "max-preset", "max-seq", "max-memory"};
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++)
        if (args_flag(flags, nf, grid[i])->given) {
            fprintf(stderr, "error: --%s applies only with --scaling\n", grid[i]);
            return 2;
        }
    BenchPlan plan = {preset, vocab, batch, seq, steps, repeat, torch, {{0}}, 0};
    if (bench_parse_schemes(residual, preset, vocab, heads, blocks, plan.scheme, &plan.n)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    Comm *comm = comm_world();
    if (comm->size > 1) {
        if (plan.n != 1 || torch) {
            if (comm->rank == 0) fprintf(stderr, "error: under mpirun, bench times one scheme (no list, no --torch)\n");
            return 2;
        }
        return bench_mpi(comm, preset, &plan.scheme[0], vocab, batch, seq, steps, repeat);
    }
    static BenchRun run;
    if (bench_run(&plan, &run)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    bench_print(&plan, &run);
    return 0;
}
