// Source "bible-kjv": the King James Bible of Debian's bible-kjv.
#include "sources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/subprocess.h"

// `bible` decodes the package's compressed text; pretty-printed, a book and
// chapter line ("1 Samuel 3") precedes each chapter's verses, which are
// indented. One document per book.
int load_bible(Corpus *c) {
    Source *s = &c->src[SRC_BIBLE];
    s->used = 1;
    copy_str(s->root, sizeof s->root, "bible -l 1000000 Gen1:1-Rev22:21");
    source_add_package(s, "bible-kjv");
    source_add_package(s, "bible-kjv-text");
    char *argv[] = {"bible", "-l", "1000000", "Gen1:1-Rev22:21", NULL};
    char *text;
    size_t len;
    if (proc_output(argv, &text, &len)) return MHAR_ERR;
    const char *p = text, *end = text + len, *doc = NULL;
    char book[128] = "", origin[160];
    int books = 0, rc = MHAR_OK;
    while (p < end && !rc) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *next = nl ? nl + 1 : end;
        size_t n = (size_t)((nl ? nl : end) - p);
        if (n && p[0] != ' ') { // "Book chapter"
            size_t k = n;
            while (k && p[k - 1] >= '0' && p[k - 1] <= '9') k--;
            while (k && p[k - 1] == ' ') k--;
            if (k == 0 || k >= sizeof book) { rc = mhar_fail("bible: unexpected line '%.*s'", (int)(n < 80 ? n : 80), p); break; }
            if (strlen(book) != k || memcmp(book, p, k)) {
                if (doc) {
                    snprintf(origin, sizeof origin, "%02d %s", books, book);
                    rc = add_copy(c, SRC_BIBLE, origin, doc, (size_t)(p - doc));
                }
                memcpy(book, p, k);
                book[k] = '\0';
                books++;
                doc = p;
            }
        }
        p = next;
    }
    if (!rc && doc) {
        snprintf(origin, sizeof origin, "%02d %s", books, book);
        rc = add_copy(c, SRC_BIBLE, origin, doc, (size_t)(end - doc));
    }
    free(text);
    if (!rc && books != 66) rc = mhar_fail("bible: expected the 66 books of the KJV, the output has %d", books);
    if (!rc) source_progress(c, SRC_BIBLE);
    return rc;
}
