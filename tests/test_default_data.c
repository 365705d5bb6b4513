// default_data_build (data/default_data.h) on a small stand-in for the Python
// standard library: it builds DIR/data/{corpus/, tokenizer.bpe, train.bin,
// val.bin}, the token files load with the tokenizer's vocabulary, the
// tokenizer is found beside them (what `mhar train` stores in its run), and a
// second call reuses them (nothing rebuilt).
#include "check.h"
#include "testfiles.h"
#include "data/default_data.h"
#include "data/tokens.h"
#include "tokenizer/run_tokenizer.h"
#include "util/common.h"

#include <sys/stat.h>
#include <unistd.h>

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_default_data.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    char lib[600];
    snprintf(lib, sizeof lib, "%s", tpath("python3.99"));
    if (mkdir(lib, 0755) || mkdir(tpath("run"), 0755)) { perror(lib); return 2; }
    for (int i = 0; i < 24; i++) {
        char name[64], text[2048];
        snprintf(name, sizeof name, "python3.99/mod%02d.py", i);
        int n = 0;
        for (int k = 0; k < 12; k++)
            n += snprintf(text + n, sizeof text - n, "def f%d_%d(x):\n    return x * %d + %d  # module %d\n\n", i, k,
                          k + 1, i, i);
        write_bytes(tpath(name), text, (size_t)n);
    }
    char train[4300], val[4300];
    int rc = default_data_build(tpath("run"), lib, 300, train, sizeof train, val, sizeof val);
    TokenFile t = {0}, v = {0};
    int rt = rc ? rc : tokens_load(train, &t), rv = rc ? rc : tokens_load(val, &v);
    struct stat sb;
    CHECK(rc == MHAR_OK && rt == MHAR_OK && rv == MHAR_OK && t.count > 1000 && v.count > 0 && t.vocab_size <= 300 &&
          has(train, "/run/data/train.bin") && stat(tpath("run/data/tokenizer.bpe"), &sb) == 0 &&
          stat(tpath("run/data/corpus/manifest.json"), &sb) == 0,
          "builds_corpus_tokenizer_shards", "rc %d %d %d: %s; %zu train tokens", rc, rt, rv, mhar_error(), t.count);
    // the tokenizer beside the training tokens, made for them: what `mhar train` stores in the run
    char tok[4400];
    Bpe b;
    int found = rc ? 0 : tokenizer_beside(train, tok, sizeof tok);
    int rb = found == 1 ? tokenizer_load_file(tok, &b) : MHAR_ERR;
    CHECK(found == 1 && has(tok, "/run/data/tokenizer.bpe") && rb == MHAR_OK && b.vocab_size == t.vocab_size,
          "tokenizer_beside_train_tokens", "found %d at %s, vocab %d vs %d: %s", found, found == 1 ? tok : "-",
          rb ? -1 : b.vocab_size, t.vocab_size, mhar_error());
    if (rb == MHAR_OK) bpe_free(&b);
    tokens_free(&t);
    tokens_free(&v);
    // reused: the tokenizer is not rebuilt (a rebuild would fail: its corpus is gone)
    struct stat before;
    stat(train, &before);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tpath("run/data/corpus"));
    if (system(cmd) != 0) return 2;
    rc = default_data_build(tpath("run"), lib, 300, train, sizeof train, val, sizeof val);
    stat(train, &sb);
    CHECK(rc == MHAR_OK && sb.st_mtim.tv_sec == before.st_mtim.tv_sec && sb.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
          "reuses_existing_data", "rc %d: %s", rc, mhar_error());
    // a missing standard library: an error naming it
    rc = default_data_build(tpath("run2"), tpath("nowhere"), 300, train, sizeof train, val, sizeof val);
    CHECK(rc == MHAR_ERR, "missing_stdlib_fails", "rc %d", rc);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
    CHECK_EXIT();
}
