// Source "gcide": the GNU Collaborative International Dictionary of English
// of Debian's dict-gcide, whole entries packed into ~64 KiB documents.
#include "sources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/file.h"
#include "../util/subprocess.h"

// dictd format: gcide.dict.dz is gzip-compatible (dictzip) text; gcide.index
// lines are "headword \t offset \t length", numbers in base 64 (A-Z a-z 0-9 + /).
#define GCIDE_DOC_BYTES (64 << 10)

typedef struct { size_t off, len; } Span;

static int span_cmp(const void *a, const void *b) {
    const Span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off ? 1 : x->len < y->len ? -1 : x->len > y->len;
}

static int b64num(const char *p, size_t n, size_t *out) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t v = 0;
    if (n == 0 || n > 10) return MHAR_ERR;
    for (size_t i = 0; i < n; i++) {
        const char *d = memchr(alphabet, p[i], 64);
        if (!d) return MHAR_ERR;
        v = v * 64 + (size_t)(d - alphabet);
    }
    *out = v;
    return MHAR_OK;
}

int load_gcide(Corpus *c) {
    Source *s = &c->src[SRC_GCIDE];
    s->used = 1;
    copy_str(s->root, sizeof s->root, GCIDE_DICT);
    source_add_package(s, "dict-gcide");
    char *argv[] = {"gzip", "-dc", "--", GCIDE_DICT, NULL};
    char *dict = NULL, *index = NULL;
    size_t dlen, ilen, n = 0, cap = 0;
    Span *sp = NULL;
    int rc = proc_output(argv, &dict, &dlen);
    if (!rc) rc = read_file(GCIDE_INDEX, &index, &ilen);
    for (char *line = index; !rc && line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        Span x;
        if (!t2 || b64num(t1 + 1, (size_t)(t2 - t1 - 1), &x.off) || b64num(t2 + 1, strlen(t2 + 1), &x.len) ||
            x.off > dlen || x.len > dlen - x.off) {
            rc = mhar_fail("%s: malformed line '%.60s'", GCIDE_INDEX, line);
            break;
        }
        // The 00-database-* entries describe the database, they are not dictionary text.
        if (strncmp(line, "00-database", 11) && strncmp(line, "00database", 10) && x.len) {
            if (n == cap) {
                cap = cap ? 2 * cap : 65536;
                Span *v = realloc(sp, cap * sizeof *v);
                if (!v) { rc = mhar_fail("out of memory"); break; }
                sp = v;
            }
            sp[n++] = x;
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!rc && n == 0) rc = mhar_fail("%s: no entries", GCIDE_INDEX);
    if (!rc) {
        // Entries in file order, each once (several headwords share an entry);
        // consecutive entries packed into documents of about 64 KiB.
        qsort(sp, n, sizeof *sp, span_cmp);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (!m || sp[i].off != sp[m - 1].off) sp[m++] = sp[i];
        // In the file a blank line separates entries (outside their lengths):
        // documents keep it, so an entry always starts after an empty line.
        char *buf = malloc(GCIDE_DOC_BYTES + 2);
        size_t fill = 0, first = 0;
        if (!buf) rc = mhar_fail("out of memory");
        for (size_t i = 0; i <= m && !rc; i++) {
            const char *e = i < m ? dict + sp[i].off : NULL;
            size_t len = i < m ? sp[i].len : 0;
            size_t need = (fill ? 1 : 0) + len + (len && e[len - 1] != '\n');
            if (fill && (i == m || fill + need > GCIDE_DOC_BYTES)) {
                char origin[64];
                snprintf(origin, sizeof origin, "gcide.dict@%09zu", first);
                rc = add_copy(c, SRC_GCIDE, origin, buf, fill);
                fill = 0;
                need = len + (len && e[len - 1] != '\n');
            }
            if (i == m || rc) break;
            if (need > GCIDE_DOC_BYTES) { // an entry bigger than a document: on its own
                char origin[64];
                snprintf(origin, sizeof origin, "gcide.dict@%09zu", sp[i].off);
                rc = add_copy(c, SRC_GCIDE, origin, e, len);
                continue;
            }
            if (fill == 0) first = sp[i].off;
            else buf[fill++] = '\n';
            memcpy(buf + fill, e, len);
            fill += len;
            if (e[len - 1] != '\n') buf[fill++] = '\n';
        }
        free(buf);
    }
    free(sp);
    free(dict);
    free(index);
    if (!rc) source_progress(c, SRC_GCIDE);
    return rc;
}
