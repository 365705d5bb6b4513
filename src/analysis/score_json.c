// mhar score --json: the settings, the aggregates, every item.
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../io/atomic.h"
#include "score.h"

// A number, or null when it is not finite (a stderr of one item).
static void add_num(cJSON *o, const char *key, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

static cJSON *choice_item(const ItemScore *it) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "line", it->line);
    cJSON_AddNumberToObject(o, "answer", it->answer);
    cJSON_AddNumberToObject(o, "pred", it->pred);
    cJSON_AddNumberToObject(o, "pred_norm", it->pred_norm);
    cJSON_AddNumberToObject(o, "acc", it->pred == it->answer);
    cJSON_AddNumberToObject(o, "acc_norm", it->pred_norm == it->answer);
    cJSON *ll = cJSON_AddArrayToObject(o, "loglik"), *tok = cJSON_AddArrayToObject(o, "tokens");
    cJSON *ch = cJSON_AddArrayToObject(o, "chars"), *tr = cJSON_AddArrayToObject(o, "truncated");
    for (int c = 0; c < it->n_choices; c++) {
        cJSON_AddItemToArray(ll, cJSON_CreateNumber(it->choice[c].loglik));
        cJSON_AddItemToArray(tok, cJSON_CreateNumber(it->choice[c].tokens));
        cJSON_AddItemToArray(ch, cJSON_CreateNumber(it->choice[c].chars));
        cJSON_AddItemToArray(tr, cJSON_CreateNumber(it->choice[c].truncated));
    }
    return o;
}

static cJSON *text_item(const ItemScore *it) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "line", it->line);
    cJSON_AddNumberToObject(o, "loglik", it->loglik);
    cJSON_AddNumberToObject(o, "tokens", (double)it->tokens);
    cJSON_AddNumberToObject(o, "bytes", (double)it->bytes);
    cJSON_AddNumberToObject(o, "words", (double)it->words);
    cJSON_AddNumberToObject(o, "windows", it->windows);
    add_num(o, "token_perplexity", exp(-it->loglik / (double)it->tokens));
    return o;
}

int score_write_json(const ScoreResult *r, const char *run, const char *tasks, const char *path) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "run", run);
    cJSON_AddStringToObject(root, "tasks", tasks);
    cJSON_AddNumberToObject(root, "max_length", r->max_length);
    cJSON_AddNumberToObject(root, "prefix_token", r->prefix_id);
    cJSON *mc = cJSON_AddObjectToObject(root, "multiple_choice");
    cJSON_AddNumberToObject(mc, "items", (double)r->n_choice);
    add_num(mc, "acc", r->acc);
    add_num(mc, "acc_stderr", r->acc_stderr);
    add_num(mc, "acc_norm", r->acc_norm);
    add_num(mc, "acc_norm_stderr", r->acc_norm_stderr);
    cJSON *pp = cJSON_AddObjectToObject(root, "perplexity");
    cJSON_AddNumberToObject(pp, "documents", (double)r->n_text);
    cJSON_AddNumberToObject(pp, "loglik", r->loglik);
    cJSON_AddNumberToObject(pp, "tokens", (double)r->tokens);
    cJSON_AddNumberToObject(pp, "bytes", (double)r->bytes);
    cJSON_AddNumberToObject(pp, "words", (double)r->words);
    add_num(pp, "token_perplexity", r->token_perplexity);
    add_num(pp, "byte_perplexity", r->byte_perplexity);
    add_num(pp, "word_perplexity", r->word_perplexity);
    add_num(pp, "bits_per_byte", r->bits_per_byte);
    cJSON *items = cJSON_AddArrayToObject(root, "items");
    for (size_t i = 0; i < r->n; i++)
        cJSON_AddItemToArray(items, r->items[i].kind == TASK_CHOICE ? choice_item(&r->items[i]) : text_item(&r->items[i]));
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return mhar_fail("%s: out of memory printing JSON", path);
    size_t n = strlen(text);
    text[n] = '\n';  // over the NUL: the buffer is written by length
    int rc = atomic_write_file(path, text, n + 1);
    cJSON_free(text);
    return rc;
}
