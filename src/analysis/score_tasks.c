// mhar score's input: JSONL tasks, read and validated line by line.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../util/common.h"
#include "../util/file.h"
#include "../util/json.h"
#include "score.h"

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void task_free(ScoreTask *t) {
    free(t->context);
    free(t->text);
    for (int i = 0; i < t->n_choices; i++) free(t->choices[i]);
    free(t->choices);
}

// One line's object into t; where: "FILE:LINE" for messages.
static int task_from_json(const cJSON *j, const char *where, ScoreTask *t) {
    if (!cJSON_IsObject(j)) return mhar_fail("%s: expected a JSON object", where);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(j, "text");
    const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(j, "context");
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
    const cJSON *answer = cJSON_GetObjectItemCaseSensitive(j, "answer");
    if (text && !ctx && !choices && !answer) {
        if (!cJSON_IsString(text)) return mhar_fail("%s: \"text\" is not a string", where);
        if (!text->valuestring[0]) return mhar_fail("%s: \"text\" is empty", where);
        t->kind = TASK_TEXT;
        t->text = dup_str(text->valuestring);
        return t->text ? MHAR_OK : mhar_fail("out of memory");
    }
    if (text) return mhar_fail("%s: give either \"text\" or \"context\", \"choices\" and \"answer\", not both", where);
    if (!ctx || !choices || !answer)
        return mhar_fail("%s: expected {\"context\": ..., \"choices\": [...], \"answer\": i} or {\"text\": ...}; "
                         "\"%s\" is missing", where, !ctx ? "context" : !choices ? "choices" : "answer");
    if (!cJSON_IsString(ctx)) return mhar_fail("%s: \"context\" is not a string", where);
    if (!cJSON_IsArray(choices)) return mhar_fail("%s: \"choices\" is not a list", where);
    int n = cJSON_GetArraySize(choices);
    if (n == 0) return mhar_fail("%s: \"choices\" is empty", where);
    t->kind = TASK_CHOICE;
    int rc = json_get_int(j, where, "answer", 1, 0, n - 1, &t->answer);
    if (rc) return rc;
    t->context = dup_str(ctx->valuestring);
    t->choices = calloc((size_t)n, sizeof(char *));
    if (!t->context || !t->choices) return mhar_fail("out of memory");
    const cJSON *c;
    cJSON_ArrayForEach(c, choices) {
        if (!cJSON_IsString(c)) return mhar_fail("%s: choice %d is not a string", where, t->n_choices);
        if (!c->valuestring[0]) return mhar_fail("%s: choice %d is empty", where, t->n_choices);
        if (!(t->choices[t->n_choices++] = dup_str(c->valuestring))) return mhar_fail("out of memory");
    }
    return MHAR_OK;
}

int score_tasks_parse(const char *data, size_t n, const char *name, ScoreTasks *t) {
    memset(t, 0, sizeof *t);
    if (copy_str(t->name, sizeof t->name, name)) return mhar_fail("%s: name too long", name);
    size_t cap = 0;
    int line = 0, rc = MHAR_OK;
    for (size_t start = 0; start < n && !rc;) {
        const char *nl = memchr(data + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - data) : n;
        line++;
        size_t k = start;
        while (k < end && (data[k] == ' ' || data[k] == '\t' || data[k] == '\r')) k++;
        if (k < end) {
            char where[MHAR_PATH_MAX + 32];
            snprintf(where, sizeof where, "%s:%d", name, line);
            if (t->n == cap) {
                cap = cap ? 2 * cap : 64;
                ScoreTask *v = realloc(t->v, cap * sizeof *v);
                if (!v) { rc = mhar_fail("out of memory"); break; }
                t->v = v;
            }
            ScoreTask *task = &t->v[t->n++];
            memset(task, 0, sizeof *task);
            task->line = line;
            cJSON *j;
            rc = json_parse(data + start, end - start, where, &j);
            if (!rc) rc = task_from_json(j, where, task);
            cJSON_Delete(j);
        }
        start = end + 1;
    }
    if (!rc && t->n == 0) rc = mhar_fail("%s: no tasks (every line is blank)", name);
    if (rc) score_tasks_free(t);
    return rc;
}

int score_tasks_load(const char *path, ScoreTasks *t) {
    char *data;
    size_t n;
    memset(t, 0, sizeof *t);
    if (read_file_max(path, SIZE_MAX, &data, &n)) return MHAR_ERR;
    int rc = score_tasks_parse(data, n, path, t);
    free(data);
    return rc;
}

void score_tasks_free(ScoreTasks *t) {
    for (size_t i = 0; i < t->n; i++) task_free(&t->v[i]);
    free(t->v);
    t->v = NULL;
    t->n = 0;
}
