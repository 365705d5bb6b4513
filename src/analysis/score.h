// mhar score: lm-evaluation-harness's log-likelihood evaluations, in C, for
// every residual scheme (the model is only asked for logits: model_forward).
//
// Input: a JSONL file, one item per line (blank lines skipped; other keys
// ignored):
//   {"context": "...", "choices": ["...", ...], "answer": i}   multiple choice
//   {"text": "..."}                                             perplexity
//
// Multiple choice (lm-eval's loglikelihood requests, its _encode_pair, and
// the multiple_choice metrics):
//   - the context's trailing whitespace moves to the front of the choice;
//     ctx = encode(context without it), whole = encode(context + choice), and
//     the choice's tokens are cont = whole[len(ctx):] (encoding the whole
//     keeps the tokens a real text would have at the boundary). The model
//     reads ctx + cont and loglik = Σ log p(cont_i | everything before it).
//     An empty (or all-whitespace) context is [prefix token] and the choice's
//     tokens are encode(context + choice) (lm-eval's empty-context rule).
//     Encoding matches special token text, adds no BOS (HF add_special_tokens
//     False, what lm-eval does for causal models).
//   - longer than the window (max_length tokens of input): the sequence keeps
//     its last max_length + 1 tokens (the context is cut on the left, as
//     lm-eval does); a choice of more than max_length tokens is an error.
//   - acc: 1 when the largest loglik (the first, on ties) is the answer's;
//     acc_norm: the same for loglik / len(choice), len the number of Unicode
//     characters of the choice as written (lm-eval's completion_len, Python's
//     len of the string; for ASCII its bytes). Write the context with its
//     trailing separator (e.g. "Answer: ") and the choices without it to
//     reproduce lm-eval's target_delimiter exactly.
//   - each mean with lm-eval's mean_stderr: sample sd (n - 1) / sqrt(n);
//     NaN (JSON null) for fewer than 2 items.
// Perplexity (lm-eval's loglikelihood_rolling, disjoint windows with
// context_len 1):
//   - tokens = encode(text); the first window is [prefix] + tokens[0, M-1)
//     scoring tokens[0, M) (M = max_length); each next window scores the next
//     up to M tokens, reading the M tokens before its last one; the
//     document's loglik is the sum. The prefix token conditions the first
//     token: the tokenizer's bos_token, else its end-of-text token (lm-eval's
//     prefix_token_id).
//   - per document: loglik, tokens, bytes (UTF-8), words (lm-eval's
//     len(re.split(r"\s+", text)): 1 + the number of whitespace runs), and
//     token perplexity exp(-loglik / tokens). Over the documents, as lm-eval's
//     weighted_perplexity: token, byte and word perplexity exp(-Σ loglik /
//     Σ units), and bits_per_byte -Σ loglik / Σ bytes / ln 2.
// "Whitespace" is Unicode White_Space plus U+001C..U+001F: Python's
// str.isspace, which rstrip and \s use.
#pragma once
#include <stddef.h>

#include "../model/model.h"
#include "../tokenizer/run_tokenizer.h"

typedef enum { TASK_CHOICE, TASK_TEXT } TaskKind;

typedef struct {
    TaskKind kind;
    int line;             // 1-based line of the file
    char *context;        // TASK_CHOICE
    char **choices;
    int n_choices, answer;
    char *text;           // TASK_TEXT
} ScoreTask;

typedef struct {
    ScoreTask *v;
    size_t n;
    char name[MHAR_PATH_MAX];  // the file, for messages ("FILE:LINE: reason")
} ScoreTasks;

// Read and validate every line: a JSON object of one of the two forms, a
// non-empty choices list of non-empty strings, an integer answer in range, a
// non-empty text. Errors name the file and line.
int score_tasks_load(const char *path, ScoreTasks *t);
// The same on data[0..n) in memory; name stands for the file in messages.
int score_tasks_parse(const char *data, size_t n, const char *name, ScoreTasks *t);
void score_tasks_free(ScoreTasks *t);

typedef struct {
    double loglik;   // Σ log p of the choice's tokens (natural log)
    int tokens;      // the choice's tokens
    int chars;       // Unicode characters of the choice (acc_norm's length)
    int truncated;   // context tokens cut on the left to fit the window
} ChoiceScore;

typedef struct {
    TaskKind kind;
    int line;
    ChoiceScore *choice;        // TASK_CHOICE: [n_choices]
    int n_choices, answer, pred, pred_norm;
    double loglik;              // TASK_TEXT
    long tokens, bytes, words;
    int windows;
} ItemScore;

typedef struct {
    ItemScore *items;  // [n], in file order
    size_t n;
    int max_length, prefix_id;
    size_t n_choice;  // multiple-choice items
    double acc, acc_stderr, acc_norm, acc_norm_stderr;
    size_t n_text;    // documents
    double loglik;
    long tokens, bytes, words;
    double token_perplexity, byte_perplexity, word_perplexity, bits_per_byte;
} ScoreResult;

typedef struct {
    int max_length;  // the window M; 0: the model's max_position_embeddings
} ScoreOptions;

// Score every task with the model and the run's tokenizer. Errors (a choice
// longer than the window, a tokenizer larger than the model's vocabulary, no
// prefix token for a text) name the file and line.
int score_run(Model *m, const RunTokenizer *t, const ScoreTasks *tasks, const ScoreOptions *o, ScoreResult *r);
void score_result_free(ScoreResult *r);
// The result as JSON (atomically): the settings, the aggregates and every
// item's logliks; doubles printed exactly.
int score_write_json(const ScoreResult *r, const char *run, const char *tasks, const char *path);
