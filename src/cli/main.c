// mhar: one binary, one subcommand per job.
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "dist/comm.h"
#include "kernels/ops.h"
#include "util/common.h"

static const struct { const char *name; int (*run)(int, char **); const char *help; } commands[] = {
    {"train", cmd_train, "train a model (any residual scheme) on a token file"},
    {"eval", cmd_eval, "validation loss of a run directory on a token file"},
    {"sample", cmd_sample, "generate text or token ids from a run directory (KV cache)"},
    {"score", cmd_score, "lm-eval-harness log-likelihood scoring: multiple choice, perplexity"},
    {"convert", cmd_convert, "baseline run -> delta_mh model with bit-identical logits (SPEC 2.7)"},
    {"import", cmd_import, "Hugging Face checkpoint (safetensors, sharded, f32/bf16/f16) -> run directory"},
    {"export", cmd_export, "run directory -> Hugging Face directory (bf16/f16/f32, sharded) for sharing"},
    {"bench", cmd_bench, "training throughput, model FLOP/s and the machine's sgemm rate"},
    {"data", cmd_data, "token files: synth (random or patterned tokens), tokenize (text to shards)"},
    {"tokenizer", cmd_tokenizer, "byte-level BPE: train, encode, decode, export, import"},
    {"inspect", cmd_inspect, "what a routed model reads: entropy and weights per site and head"},
    {"sweep", cmd_sweep, "run a grid of training runs (schemes x H x seeds x presets), resumable"},
    {"report", cmd_report, "a sweep's results: report.md with statistics over seeds, gnuplot plots"},
    {"probe", cmd_probe, "width disagreement of an attnres model, head deviation of an mhar model"},
};

static void usage(FILE *f) {
    fprintf(f, "mhar: Multi-Head Attention Residuals, trained in C\n\nusage: mhar COMMAND [options]\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nmhar COMMAND --help shows the options of a command.\n");
}

int main(int argc, char **argv) {
    ops_process_start(argv);   // may start this program again, with the math library set up
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name)) continue;
        // Under mpirun or srun this process is one rank of a job.
        Comm comm;
        if (comm_init(&comm, &argc, &argv)) {
            fprintf(stderr, "error: %s\n", mhar_error());
            return 1;
        }
        int rc;
        if (comm.size > 1 && commands[i].run != cmd_train && commands[i].run != cmd_bench) {
            if (comm.rank == 0) fprintf(stderr, "error: mhar %s runs as one process; mpirun is for train and bench\n", argv[1]);
            rc = 2;
        } else {
            rc = commands[i].run(argc - 2, argv + 2);
        }
        comm_finalize(&comm);
        return rc;
    }
    fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
