// The libraries behind text in and text out (tests/test_text.py runs the
// commands end to end): the UTF-8 stream that holds back split characters,
// a run directory's tokenizer files (save, load, copy, the special tokens of
// tokenizer_config.json, the tokenizer beside a token file), and mhar
// score's task parser (each refusal names the file and line).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/score.h"
#include "check.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/run_tokenizer.h"
#include "tokenizer/train.h"
#include "tokenizer/utf8_stream.h"
#include "util/common.h"
#include "util/file.h"

static char tmpdir[256];

static const char *tpath(const char *name) {  // tmpdir/name; the last 4 stay valid
    static char buf[4][512];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0) { perror(path); exit(2); }
    fclose(f);
}

static int same_file(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int same = !read_file(a, &x, &nx) && !read_file(b, &y, &ny) && nx == ny && !memcmp(x, y, nx);
    free(x);
    free(y);
    return same;
}

// ---- UTF-8 streaming ----------------------------------------------------------------------

// Push text in pieces of the given sizes; the output must be the input, and
// at every moment what was shown must end on a character boundary (or hold
// an invalid byte that no continuation can fix).
static int stream_pieces(const char *text, const int *sizes, int n, char *shown, size_t *shown_len, int *held_max) {
    Utf8Stream s = {{0}, 0};
    unsigned char out[64];
    size_t pos = 0, len = strlen(text);
    *shown_len = 0;
    *held_max = 0;
    for (int i = 0; i < n && pos < len; i++) {
        size_t k = (size_t)sizes[i] < len - pos ? (size_t)sizes[i] : len - pos;
        size_t m = utf8_stream_push(&s, (const unsigned char *)text + pos, k, out);
        memcpy(shown + *shown_len, out, m);
        *shown_len += m;
        pos += k;
        if (s.n_held > *held_max) *held_max = s.n_held;
    }
    size_t m = utf8_stream_flush(&s, out);
    memcpy(shown + *shown_len, out, m);
    *shown_len += m;
    return pos == len;
}

static void test_utf8_stream(void) {
    // é (2 bytes), 中 (3), 😀 (4), each split after every byte
    const char *text = "a\xc3\xa9" "b\xe4\xb8\xad" "c\xf0\x9f\x98\x80" "d";
    int ones[16];
    for (int i = 0; i < 16; i++) ones[i] = 1;
    char shown[64];
    size_t n;
    int held;
    stream_pieces(text, ones, 16, shown, &n, &held);
    CHECK(n == strlen(text) && !memcmp(shown, text, n) && held == 3, "utf8_stream.byte_by_byte",
          "%zu bytes shown, at most %d held", n, held);
    // a character is shown only once complete
    Utf8Stream s = {{0}, 0};
    unsigned char out[16];
    size_t a = utf8_stream_push(&s, (const unsigned char *)"x\xf0\x9f", 3, out);
    size_t b = utf8_stream_push(&s, (const unsigned char *)"\x98", 1, out + a);
    size_t c = utf8_stream_push(&s, (const unsigned char *)"\x80y", 2, out + a + b);
    CHECK(a == 1 && b == 0 && c == 5 && !memcmp(out, "x\xf0\x9f\x98\x80y", 6), "utf8_stream.held_until_complete",
          "shown %zu, %zu, %zu", a, b, c);
    // invalid bytes are shown at once: a lone continuation, a lead followed
    // by a non-continuation, an overlong lead, a surrogate's second byte
    struct { const char *bytes; size_t shown; } bad[] = {
        {"\x80", 1}, {"\xc3" "A", 2}, {"\xc0", 1}, {"\xed\xa0", 2}, {"\xf5", 1}, {"\xe0\x80", 2},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Utf8Stream t = {{0}, 0};
        size_t m = utf8_stream_push(&t, (const unsigned char *)bad[i].bytes, strlen(bad[i].bytes), out);
        if (m != bad[i].shown || t.n_held) { ok = 0; printf("  case %zu: shown %zu, held %d\n", i, m, t.n_held); }
    }
    CHECK(ok, "utf8_stream.invalid_shown_at_once", "see above");
    // the end flushes an incomplete sequence as it is
    Utf8Stream u = {{0}, 0};
    size_t m = utf8_stream_push(&u, (const unsigned char *)"z\xe4\xb8", 3, out);
    m += utf8_stream_flush(&u, out + m);
    CHECK(m == 3 && !memcmp(out, "z\xe4\xb8", 3), "utf8_stream.flush_at_end", "%zu bytes", m);
}

// ---- run directory tokenizer files -------------------------------------------------------

static int small_bpe(Bpe *b) {
    const char *text = "the cat sat on the mat; the cat ate the rat. naïve café 中文 ";
    const unsigned char *docs[] = {(const unsigned char *)text};
    size_t lens[] = {strlen(text)};
    const char *special[] = {"<|endoftext|>"};
    BpeTrainOptions o = {300, PAT_MHAR, special, 1, 0};
    BpeTrainStats st;
    return bpe_train_texts(docs, lens, 1, &o, b, &st);
}

static int same_ids(const Bpe *a, const Bpe *b, const char *text) {
    IntVec x = {0}, y = {0};
    int rc = bpe_encode(a, (const unsigned char *)text, strlen(text), 1, &x) ||
             bpe_encode(b, (const unsigned char *)text, strlen(text), 1, &y);
    int same = !rc && x.n == y.n && !memcmp(x.v, y.v, sizeof(int) * x.n);
    intvec_free(&x);
    intvec_free(&y);
    return same;
}

static void test_run_tokenizer(void) {
    Bpe b;
    if (small_bpe(&b)) { CHECK(0, "run_tokenizer.train", "%s", mhar_error()); return; }
    char run[512], copy[512];  // kept: tpath's buffers are reused
    snprintf(run, sizeof run, "%s", tpath("run"));
    snprintf(copy, sizeof copy, "%s", tpath("copy"));
    mkdir(run, 0777);
    mkdir(copy, 0777);
    CHECK(!run_tokenizer_present(run), "run_tokenizer.absent", "present before saving");
    RunTokenizer t;
    int rc = run_tokenizer_load(run, &t);
    CHECK(rc == MHAR_ERR && strstr(mhar_error(), "has no tokenizer") && strstr(mhar_error(), run),
          "run_tokenizer.load_absent_refused", "%s", mhar_error());
    rc = run_tokenizer_save(run, &b, 512);
    if (!rc) rc = run_tokenizer_load(run, &t);
    const char *text = "the naïve cat<|endoftext|>sat 中文";
    CHECK(rc == MHAR_OK && t.bpe.vocab_size == b.vocab_size && t.eos_id == bpe_eot_id(&b) && t.bos_id == -1 &&
              run_tokenizer_prefix(&t) == bpe_eot_id(&b) && same_ids(&b, &t.bpe, text),
          "run_tokenizer.save_load", "rc %d, eos %d bos %d: %s", rc, t.eos_id, t.bos_id, mhar_error());
    if (!rc) run_tokenizer_free(&t);
    // copied byte for byte; a missing config is written
    rc = run_tokenizer_copy(run, copy, 512);
    int same = !rc && same_file(tpath("run/tokenizer.json"), tpath("copy/tokenizer.json")) &&
               same_file(tpath("run/tokenizer_config.json"), tpath("copy/tokenizer_config.json"));
    CHECK(same, "run_tokenizer.copy_identical", "rc %d: %s", rc, mhar_error());
    unlink(tpath("copy/tokenizer_config.json"));
    unlink(tpath("run/tokenizer_config.json"));
    rc = run_tokenizer_copy(run, copy, 512);
    CHECK(rc == MHAR_OK && access(tpath("copy/tokenizer_config.json"), F_OK) == 0, "run_tokenizer.copy_writes_config",
          "rc %d: %s", rc, mhar_error());
    // without a config: no bos or eos, the end of text still known
    rc = run_tokenizer_load(run, &t);
    CHECK(rc == MHAR_OK && t.eos_id == -1 && run_tokenizer_eot(&t) == bpe_eot_id(&b), "run_tokenizer.no_config",
          "rc %d eos %d", rc, t.eos_id);
    if (!rc) run_tokenizer_free(&t);
    // an imported model's config: AddedToken objects, a bos token; and a name that is no token
    put(tpath("run/tokenizer_config.json"),
        "{\"bos_token\": {\"content\": \"<|endoftext|>\", \"lstrip\": false}, \"eos_token\": \"the\"}");
    rc = run_tokenizer_load(run, &t);
    int the = bpe_token_id(&b, (const unsigned char *)"the", 3);
    CHECK(rc == MHAR_OK && t.bos_id == bpe_eot_id(&b) && t.eos_id == the && the >= 0 &&
              run_tokenizer_prefix(&t) == t.bos_id,
          "run_tokenizer.config_tokens", "rc %d bos %d eos %d (the %d): %s", rc, t.bos_id, t.eos_id, the, mhar_error());
    if (!rc) run_tokenizer_free(&t);
    put(tpath("run/tokenizer_config.json"), "{\"eos_token\": \"<|im_end|>\"}");
    rc = run_tokenizer_load(run, &t);
    CHECK(rc == MHAR_ERR && strstr(mhar_error(), "tokenizer_config.json") && strstr(mhar_error(), "<|im_end|>"),
          "run_tokenizer.unknown_token_refused", "%s", mhar_error());
    if (!rc) run_tokenizer_free(&t);
    // the tokenizer beside a token file, in either format
    char found[600];
    const char *data = tpath("data");
    mkdir(data, 0777);
    int r0 = tokenizer_beside(tpath("data/train.bin"), found, sizeof found);
    bpe_save(tpath("data/tokenizer.bpe"), &b);
    int r1 = tokenizer_beside(tpath("data/train.bin"), found, sizeof found);
    Bpe c;
    rc = r1 == 1 ? tokenizer_load_file(found, &c) : MHAR_ERR;
    CHECK(r0 == 0 && r1 == 1 && strstr(found, "data/tokenizer.bpe") && rc == MHAR_OK && same_ids(&b, &c, text),
          "tokenizer_beside.bpe", "%d %d %s: %s", r0, r1, found, mhar_error());
    if (!rc) bpe_free(&c);
    rc = tokenizer_load_file(tpath("run/tokenizer.json"), &c);
    CHECK(rc == MHAR_OK && same_ids(&b, &c, text), "tokenizer_load_file.json", "%s", mhar_error());
    if (!rc) bpe_free(&c);
    bpe_free(&b);
}

// ---- mhar score's tasks -------------------------------------------------------------------

static void test_score_tasks(void) {
    const char *good = "{\"context\": \"Q: 2+2? A:\", \"choices\": [\" 4\", \" 5\"], \"answer\": 0, \"id\": 7}\n"
                       "\n   \r\n"
                       "{\"text\": \"a document\"}\r\n"
                       "{\"context\": \"\", \"choices\": [\"x\"], \"answer\": 0}";
    ScoreTasks t;
    int rc = score_tasks_parse(good, strlen(good), "good.jsonl", &t);
    CHECK(rc == MHAR_OK && t.n == 3 && t.v[0].kind == TASK_CHOICE && t.v[0].n_choices == 2 && t.v[0].line == 1 &&
              !strcmp(t.v[0].choices[1], " 5") && t.v[1].kind == TASK_TEXT && t.v[1].line == 4 &&
              !strcmp(t.v[1].text, "a document") && t.v[2].line == 5 && t.v[2].context[0] == '\0',
          "score_tasks.parse", "rc %d, %zu tasks: %s", rc, t.n, mhar_error());
    if (!rc) score_tasks_free(&t);
    struct { const char *text, *want; } bad[] = {
        {"{\"text\": \"a\"}\n{\"text\": 3}", "bad.jsonl:2: \"text\" is not a string"},
        {"{\"context\": \"a\", \"choices\": [\"b\"], \"answer\": 1}", "bad.jsonl:1: key 'answer' is 1, out of range 0..0"},
        {"{\"context\": \"a\", \"choices\": [\"b\"], \"answer\": 0.5}", "bad.jsonl:1: key 'answer'"},
        {"{\"context\": \"a\", \"choices\": \"b\", \"answer\": 0}", "bad.jsonl:1: \"choices\" is not a list"},
        {"{\"context\": \"a\", \"choices\": [\"b\", 3], \"answer\": 0}", "bad.jsonl:1: choice 1 is not a string"},
        {"{\"context\": 1, \"choices\": [\"b\"], \"answer\": 0}", "bad.jsonl:1: \"context\" is not a string"},
        {"{\"text\": \"a\", \"context\": \"b\"}", "bad.jsonl:1: give either"},
        {"\n\n{\"context\": \"a\", \"choices\": [\"b\"], \"answer\": 0} x", "bad.jsonl:3: invalid JSON"},
        {"\n \n", "bad.jsonl: no tasks"},
        {"{}", "bad.jsonl:1: expected {"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "score_tasks.refused_%zu", i);
        rc = score_tasks_parse(bad[i].text, strlen(bad[i].text), "bad.jsonl", &t);
        CHECK(rc == MHAR_ERR && strstr(mhar_error(), bad[i].want), name, "rc %d: %s (want %s)", rc, mhar_error(),
              bad[i].want);
        if (!rc) score_tasks_free(&t);
    }
    rc = score_tasks_load(tpath("missing.jsonl"), &t);
    CHECK(rc == MHAR_ERR && strstr(mhar_error(), "missing.jsonl"), "score_tasks.missing_file", "%s", mhar_error());
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_text_lib.%d", (int)getpid());
    mkdir(tmpdir, 0777);
    test_utf8_stream();
    test_run_tokenizer();
    test_score_tasks();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmpdir);
    CHECK_EXIT();
}
