// Source "janeaustenr": Jane Austen's novels from r-cran-janeaustenr.
#include "sources.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../util/file.h"
#include "../util/subprocess.h"

// r-cran-janeaustenr ships the novels in R's lazy-load database (serialized,
// compressed R objects); R itself, installed as the package's dependency, is
// the robust reader. Rscript writes each character vector (one element per
// line) to a file in a temporary directory.
static const char *austen_r =
    "d <- commandArgs(trailingOnly = TRUE)[1]\n"
    "items <- data(package = 'janeaustenr')$results[, 'Item']\n"
    "e <- new.env()\n"
    "for (b in items) {\n"
    "  data(list = b, package = 'janeaustenr', envir = e)\n"
    "  x <- get(b, envir = e)\n"
    "  if (is.character(x)) writeLines(x, file.path(d, paste0(b, '.txt')), useBytes = TRUE)\n"
    "}\n";

// A chapter heading: "CHAPTER I", "Chapter 12" (roman or arabic), alone on its line.
static int chapter_line(const char *p, size_t n) {
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\r')) n--;
    size_t i = 0;
    while (i < n && p[i] == ' ') i++;
    if (n - i < 9 || strncasecmp(p + i, "chapter ", 8)) return 0;
    i += 8;
    if (i == n) return 0;
    for (; i < n; i++)
        if (!strchr("0123456789IVXLCivxlc", p[i])) return 0;
    return 1;
}

static int austen_book(Corpus *c, const char *book, const char *text, size_t len) {
    // One document per chapter; the title page goes with the first chapter.
    const char *p = text, *end = text + len, *start = text;
    int chapter = 0;
    char origin[320];
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *next = nl ? nl + 1 : end;
        if (chapter_line(p, (size_t)((nl ? nl : end) - p))) {
            if (chapter > 0) {
                snprintf(origin, sizeof origin, "%s/chapter-%03d", book, chapter);
                if (add_copy(c, SRC_AUSTEN, origin, start, (size_t)(p - start))) return MHAR_ERR;
                start = p;
            }
            chapter++;
        }
        p = next;
    }
    snprintf(origin, sizeof origin, "%s/chapter-%03d", book, chapter ? chapter : 1);
    return add_copy(c, SRC_AUSTEN, origin, start, (size_t)(end - start));
}

int load_austen(Corpus *c) {
    Source *s = &c->src[SRC_AUSTEN];
    s->used = 1;
    copy_str(s->root, sizeof s->root, "Rscript: data(package = 'janeaustenr')");
    source_add_package(s, "r-cran-janeaustenr");
    const char *tmp = getenv("TMPDIR");
    char dir[MHAR_PATH_MAX];
    if (path_format(dir, sizeof dir, "%s/mhar-austen-XXXXXX", tmp && *tmp ? tmp : "/tmp")) return MHAR_ERR;
    if (!mkdtemp(dir)) return mhar_fail("%s: cannot create a temporary directory: %s", dir, strerror(errno));
    char *argv[] = {"Rscript", "--vanilla", "-e", (char *)austen_r, dir, NULL};
    Proc p;
    int rc = proc_start(&p, argv, 1);
    if (!rc) rc = proc_finish(&p);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, dirent_byte_order);
    int books = 0;
    for (int i = 0; i < n; i++) {
        char path[MHAR_PATH_MAX];
        if (path_join(path, sizeof path, dir, names[i]->d_name)) { // cannot happen: R's names are short
            if (!rc) rc = MHAR_ERR;
            free(names[i]);
            continue;
        }
        if (!rc && has_suffix(names[i]->d_name, ".txt")) {
            char *text;
            size_t len;
            char book[256];
            snprintf(book, sizeof book, "%.*s", (int)(strlen(names[i]->d_name) - 4), names[i]->d_name);
            rc = read_file_max(path, SIZE_MAX, &text, &len);
            if (!rc) { rc = austen_book(c, book, text, len); free(text); books++; }
        }
        if (names[i]->d_name[0] != '.') unlink(path);
        free(names[i]);
    }
    free(names);
    rmdir(dir);
    if (!rc && books == 0) rc = mhar_fail("Rscript wrote no novels from janeaustenr");
    if (!rc) source_progress(c, SRC_AUSTEN);
    return rc;
}
