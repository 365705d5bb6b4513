// mhar score: lm-evaluation-harness's log-likelihood multiple choice and
// rolling perplexity for a run directory (src/analysis/score.h).
#include <math.h>
#include <stdio.h>

#include "analysis/score.h"
#include "args.h"
#include "commands.h"

static const char *usage =
    "usage: mhar score --run DIR --tasks FILE.jsonl [--json OUT --max-length M --limit N]\n\n"
    "Scores the model in DIR with its tokenizer as lm-evaluation-harness does. Each line of\n"
    "FILE is {\"context\": \"...\", \"choices\": [\"...\", ...], \"answer\": i} (multiple choice:\n"
    "acc and acc_norm, the latter normalised by the choice's length in characters, each with\n"
    "its standard error) or {\"text\": \"...\"} (token, byte and word perplexity and bits per\n"
    "byte, scored in windows of M tokens, the first token conditioned on the bos or\n"
    "end-of-text token). --json writes every item's log-likelihoods. M defaults to\n"
    "max_position_embeddings; longer contexts are cut on the left.";

int cmd_score(int argc, char **argv) {
    const char *run = NULL, *path = NULL, *json = NULL;
    int limit = 0;
    ScoreOptions o = {0};
    Flag flags[] = {
        {"run", FLAG_STR, &run, "run directory (config.json, model.safetensors, tokenizer.json)", 0, 0, 0},
        {"tasks", FLAG_STR, &path, "JSONL file of tasks", 0, 0, 0},
        {"json", FLAG_STR, &json, "write the results, item by item, to this file", 0, 0, 0},
        {"max-length", FLAG_INT, &o.max_length, "window in tokens (default max_position_embeddings)", 1, 1 << 24, 0},
        {"limit", FLAG_INT, &limit, "score only the first N items", 1, 1 << 30, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!run || !path) { fprintf(stderr, "error: --run and --tasks are required (see --help)\n"); return 2; }
    Model m = {0};
    RunTokenizer tok = {0};
    ScoreTasks tasks = {0};
    ScoreResult res = {0};
    int rc = score_tasks_load(path, &tasks), have_tok = 0;
    size_t n_all = tasks.n;  // --limit scores a prefix; all are freed
    if (limit && (size_t)limit < tasks.n) tasks.n = (size_t)limit;
    if (!rc) rc = model_load(&m, run);
    if (!rc) rc = run_tokenizer_load(run, &tok), have_tok = !rc;
    double t0 = now_seconds();
    if (!rc) rc = score_run(&m, &tok, &tasks, &o, &res);
    if (!rc && json) rc = score_write_json(&res, run, path, json);
    if (!rc) {
        printf("%s on %s: %zu items, window %d tokens, %.1f s\n", run, path, res.n, res.max_length,
               now_seconds() - t0);
        if (res.n_choice)
            printf("multiple choice: %zu items\n  acc      %.4f ± %.4f\n  acc_norm %.4f ± %.4f\n", res.n_choice,
                   res.acc, res.acc_stderr, res.acc_norm, res.acc_norm_stderr);
        if (res.n_text)
            printf("perplexity: %zu documents, %ld tokens, %ld bytes, %ld words\n  token_perplexity %.4f\n"
                   "  byte_perplexity  %.4f\n  word_perplexity  %.4f\n  bits_per_byte    %.4f\n",
                   res.n_text, res.tokens, res.bytes, res.words, res.token_perplexity, res.byte_perplexity,
                   res.word_perplexity, res.bits_per_byte);
    } else {
        fprintf(stderr, "error: %s\n", mhar_error());
    }
    score_result_free(&res);
    tasks.n = n_all;
    score_tasks_free(&tasks);
    if (have_tok) run_tokenizer_free(&tok);
    if (m.params) model_free(&m);
    return rc ? 1 : 0;
}
