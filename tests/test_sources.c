// The pieces the corpus sources share (src/data/documents.c, dpkg.c): which
// documents are admitted and how refusals are counted, and reading package
// versions from a dpkg status text.
#include <string.h>

#include "check.h"
#include "data/corpus.h"
#include "data/dpkg.h"
#include "data/sources.h"

static void test_documents(void) {
    Corpus c = {0};
    c.src[SRC_BIBLE].name = "bible-kjv";
    const char sep[] = "a " CORPUS_SEPARATOR " b";
    int rc = add_copy(&c, SRC_BIBLE, "one", "text one", 8) || add_copy(&c, SRC_BIBLE, "two", "second", 6) ||
             add_copy(&c, SRC_BIBLE, "empty", "", 0) || add_copy(&c, SRC_BIBLE, "bin", "a\0b", 3) ||
             add_copy(&c, SRC_BIBLE, "sep", sep, sizeof sep - 1) || add_copy(&c, SRC_GCIDE, "g", "gloss", 5);
    const Source *s = &c.src[SRC_BIBLE];
    CHECK(rc == MHAR_OK && c.n == 3 && source_docs(&c, SRC_BIBLE) == 2 && source_bytes(&c, SRC_BIBLE) == 14 &&
              source_docs(&c, SRC_GCIDE) == 1,
          "docs_kept", "rc %d n %zu docs %zu bytes %zu", rc, c.n, source_docs(&c, SRC_BIBLE),
          source_bytes(&c, SRC_BIBLE));
    CHECK(s->seen == 5 && s->seen_bytes == 8 + 6 + 0 + 3 + sizeof sep - 1 && s->empty == 1 && s->binary == 1 &&
              s->separator == 1,
          "docs_refusals_counted", "seen %zu bytes %zu empty %zu binary %zu separator %zu", s->seen, s->seen_bytes,
          s->empty, s->binary, s->separator);
    CHECK(!strcmp(c.v[0].origin, "one") && c.v[0].len == 8 && !memcmp(c.v[0].data, "text one", 8) &&
              c.v[0].src == SRC_BIBLE,
          "docs_copy_and_origin", "origin '%s'", c.v[0].origin);
    CHECK(doc_reject("x", 1) == REJECT_NONE && doc_reject("", 0) == REJECT_EMPTY &&
              doc_reject("\0", 1) == REJECT_BINARY && doc_reject(sep, sizeof sep - 1) == REJECT_SEPARATOR,
          "doc_reject", "wrong reason");
    for (size_t i = 0; i < c.n; i++) doc_free(&c.v[i]);
    free(c.v);
    CHECK(has_suffix("a.py", ".py") && !has_suffix("py", ".py") && has_suffix(".py", ".py") &&
              !has_suffix("a.pyc", ".py"),
          "has_suffix", "wrong answer");
}

static void test_dpkg(void) {
    const char *status =
        "Package: foo-bar\nStatus: install ok installed\nVersion: 9.9\n\n"
        "Package: foo\nStatus: deinstall ok config-files\nVersion: 0.1\n\n"
        "Package: bar\nArchitecture: all\nStatus: install ok installed\nVersion: 1:2.3-4\n\n"
        "Package: foo\nStatus: install ok installed\nVersion: 1.0\n";  // the last record, no blank line after
    char v[16] = "";
    CHECK(dpkg_status_version(status, "bar", v, sizeof v) && !strcmp(v, "1:2.3-4"), "dpkg_installed", "'%s'", v);
    CHECK(dpkg_status_version(status, "foo", v, sizeof v) && !strcmp(v, "1.0"), "dpkg_skips_deinstalled",
          "'%s'", v);
    CHECK(!dpkg_status_version(status, "fo", v, sizeof v) && !dpkg_status_version(status, "oo", v, sizeof v) &&
              !dpkg_status_version(status, "baz", v, sizeof v),
          "dpkg_whole_names_only", "found '%s'", v);
    char small[4];
    CHECK(dpkg_status_version(status, "bar", small, sizeof small) && !strcmp(small, "1:2"), "dpkg_version_cut",
          "'%s'", small);
    const char *only_removed = "Package: gone\nStatus: deinstall ok config-files\nVersion: 2\n";
    CHECK(!dpkg_status_version(only_removed, "gone", v, sizeof v), "dpkg_removed", "found '%s'", v);
}

int main(void) {
    test_documents();
    test_dpkg();
    CHECK_EXIT();
}
