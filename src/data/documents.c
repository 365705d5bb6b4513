// The document collection the corpus sources fill (sources.h): admission
// (binary, empty, separator-holding documents are counted, not kept), counts
// per source, and the provenance helpers the loaders share.
#include "sources.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "dpkg.h"

void doc_free(Doc *d) {
    free(d->data);
    free(d->origin);
    d->data = d->origin = NULL;
}

int docs_push(Corpus *c, Doc d) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 1024;
        Doc *v = realloc(c->v, cap * sizeof *v);
        if (!v) return mhar_fail("out of memory for %zu documents", cap);
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = d;
    return MHAR_OK;
}

int doc_reject(const char *data, size_t len) {
    if (len == 0) return REJECT_EMPTY;
    if (memchr(data, '\0', len)) return REJECT_BINARY; // text never holds NUL
    // The separator terminates documents in the shards: a document holding it
    // would split in two when read back.
    if (memmem(data, len, CORPUS_SEPARATOR, sizeof CORPUS_SEPARATOR - 1)) return REJECT_SEPARATOR;
    return REJECT_NONE;
}

void count_reject(Source *s, int why) {
    if (why == REJECT_BINARY) s->binary++;
    else if (why == REJECT_EMPTY) s->empty++;
    else if (why == REJECT_SEPARATOR) s->separator++;
}

int add_doc(Corpus *c, int src, const char *origin, char *data, size_t len) {
    Source *s = &c->src[src];
    s->seen++;
    s->seen_bytes += len;
    int why = doc_reject(data, len);
    if (why != REJECT_NONE) {
        count_reject(s, why);
        free(data);
        return MHAR_OK;
    }
    Doc d = {.data = data, .len = len, .origin = strdup(origin), .src = src};
    if (!d.origin) { free(data); return mhar_fail("out of memory"); }
    if (docs_push(c, d)) { doc_free(&d); return MHAR_ERR; }
    return MHAR_OK;
}

int add_copy(Corpus *c, int src, const char *origin, const char *data, size_t len) {
    char *p = malloc(len ? len : 1);
    if (!p) return mhar_fail("out of memory (%zu bytes)", len);
    memcpy(p, data, len);
    return add_doc(c, src, origin, p, len);
}

size_t source_bytes(const Corpus *c, int src) {
    size_t b = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].src == src) b += c->v[i].len;
    return b;
}

size_t source_docs(const Corpus *c, int src) {
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) n += c->v[i].src == src;
    return n;
}

void source_progress(const Corpus *c, int src) {
    if (!c->verbose) return;
    const Source *s = &c->src[src];
    fprintf(stderr, "  %-14s %7zu documents %9.1f MB  (%s)\n", s->name, source_docs(c, src),
            source_bytes(c, src) / 1e6, s->root);
}

void source_add_package(Source *s, const char *name) {
    if (s->n_pkg >= 3) return;
    Package *p = &s->pkg[s->n_pkg];
    size_t n = strlen(name);
    if (n >= sizeof p->name) return;
    memcpy(p->name, name, n + 1);
    if (dpkg_version(name, p->version, sizeof p->version)) s->n_pkg++;
}

int dirent_byte_order(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

int has_suffix(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !memcmp(s + a - b, suffix, b);
}
