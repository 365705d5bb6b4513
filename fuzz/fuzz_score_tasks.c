// score_tasks_parse (mhar score's JSONL input) on arbitrary bytes.
// Properties: an error names the file; an accepted file holds at least one
// task, in increasing line order, each valid: a choice item has choices, all
// non-empty, and an answer among them; a text item has a non-empty text.
#include "../src/analysis/score.h"
#include "../src/util/common.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size ? size : 1);  // exact size, no NUL: the parser must stay inside
    if (!text) abort();
    memcpy(text, data, size);
    ScoreTasks t;
    int rc = score_tasks_parse(text, size, "fuzz.jsonl", &t);
    free(text);
    FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
    if (rc == MHAR_ERR) {
        FUZZ_ASSERT(strstr(mhar_error(), "fuzz.jsonl") != NULL, "error does not name the file: %s", mhar_error());
        return 0;
    }
    FUZZ_ASSERT(t.n >= 1, "accepted with no tasks");
    for (size_t i = 0; i < t.n; i++) {
        const ScoreTask *k = &t.v[i];
        FUZZ_ASSERT(k->line >= 1 && (i == 0 || k->line > t.v[i - 1].line), "line %d after %d", k->line,
                    i ? t.v[i - 1].line : 0);
        if (k->kind == TASK_TEXT) {
            FUZZ_ASSERT(k->text && k->text[0], "empty text accepted");
            continue;
        }
        FUZZ_ASSERT(k->context && k->n_choices >= 1 && k->answer >= 0 && k->answer < k->n_choices,
                    "answer %d of %d choices", k->answer, k->n_choices);
        for (int c = 0; c < k->n_choices; c++) FUZZ_ASSERT(k->choices[c][0], "empty choice accepted");
    }
    score_tasks_free(&t);
    return 0;
}
