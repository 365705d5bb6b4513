// mhar probe: SPEC §4's width disagreement of a trained AttnRes model (why
// heads help), against a random query of matched norm, and for an MHAR model
// each head's deviation from the head consensus; on held-out tokens
// (analysis/probe_run.h measures).
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "analysis/probe_run.h"
#include "args.h"
#include "commands.h"
#include "util/common.h"

static const char *usage =
    "usage: mhar probe --run DIR [--data FILE] [--slices 4] [--draws 8] [--batches 8]\n"
    "                  [--batch B --seq T] [--seed S] [--json FILE|none]\n\n"
    "On held-out tokens (default: the run's validation file), per routing site:\n"
    "attnres run: the width disagreement of SPEC §4 -- cut the trained query q into\n"
    "  S contiguous slices, a_s = softmax_n <q_[s], K_n,[s]>, alpha = the full-width\n"
    "  routing; mean over slices and tokens of KL(a_s || alpha) -- beside the same\n"
    "  figure for random queries of matched norm (Gaussian direction scaled to |q|\n"
    "  of the site; mean over --draws draws) and the excess, trained - null.\n"
    "mhar run (H heads): each head's deviation from the head consensus, the mean\n"
    "  over tokens of KL(w_h || mean_h' w_h'), against random queries whose every\n"
    "  head slice has the trained head's norm.\n"
    "The first sublayer (one source) makes no routing decision and is left out;\n"
    "'overall' is the mean over the other sites. Writes DIR/probe.json (which\n"
    "mhar report shows) unless --json says otherwise; the last line is JSON.";

int cmd_probe(int argc, char **argv) {
    ProbeOptions o = {.slices = 4, .draws = 8, .batches = 8, .seed = 1};
    const char *json = NULL;
    char names[128], run_help[160];
    snprintf(run_help, sizeof run_help, "run directory (%s)", probe_scheme_names(names, sizeof names, " or "));
    Flag flags[] = {
        {"run", FLAG_STR, &o.run, run_help, 0, 0, 0},
        {"data", FLAG_STR, &o.data, "held-out token file (default: the run's validation file)", 0, 0, 0},
        {"slices", FLAG_INT, &o.slices, "slices S of the attnres query (default 4)", 1, 65536, 0},
        {"draws", FLAG_INT, &o.draws, "random queries per site for the null (default 8)", 1, 100000, 0},
        {"batches", FLAG_INT, &o.batches, "batches of the data, read in order (default 8)", 1, 1e9, 0},
        {"batch", FLAG_INT, &o.batch, "sequences per batch (default: the run's)", 1, 1 << 20, 0},
        {"seq", FLAG_INT, &o.seq, "tokens per sequence (default: the run's)", 1, 1 << 20, 0},
        {"seed", FLAG_U64, &o.seed, "seed of the random queries (default 1)", 0, 0, 0},
        {"json", FLAG_STR, &json, "where to write the result (default DIR/probe.json; none: nowhere)", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!o.run) { fprintf(stderr, "error: --run DIR is required (see --help)\n"); return 2; }
    o.progress = isatty(2) ? stderr : NULL;
    ProbeResult res;
    if (probe_run(&o, &res)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    probe_result_print(stdout, &res);
    char *line, path[MHAR_PATH_MAX];
    int rc = probe_result_save(&res, json, &line, path, sizeof path);
    if (!rc && path[0]) fprintf(stderr, "wrote %s\n", path);
    if (line) printf("%s\n", line);
    if (rc) fprintf(stderr, "error: %s\n", mhar_error());
    free(line);
    probe_result_free(&res);
    return rc ? 1 : 0;
}
