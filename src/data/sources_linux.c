// Sources "linux-code" and "linux-docs": the kernel tarball of Debian's
// linux-source, read as a stream (xz -dc | the tar reader): nothing is
// unpacked to disk, and only the sampled files are kept in memory.
#include "sources.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus.h"
#include "tar.h"
#include "../util/sha256.h"
#include "../util/subprocess.h"

// Bottom-k-by-bytes sample: keeps the files with the smallest (key, origin)
// whose sizes add up to at most budget. Files at or past the cutoff (the
// smallest evicted one) are refused, so the result is exactly the longest
// key-ordered prefix that fits, whatever order the archive lists files in.
typedef struct { uint64_t key; Doc d; } Sample;
typedef struct {
    Sample *v;
    size_t n, cap, bytes, budget;
    int cut;              // a cutoff exists
    uint64_t cut_key;
    char cut_origin[MHAR_PATH_MAX];
} Sampler;

static int sample_less(uint64_t ka, const char *oa, uint64_t kb, const char *ob) {
    return ka != kb ? ka < kb : strcmp(oa, ob) < 0;
}

static int sampler_wants(const Sampler *s, uint64_t key, const char *origin) {
    return !s->cut || sample_less(key, origin, s->cut_key, s->cut_origin);
}

static void heap_down(Sampler *s, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n && sample_less(s->v[m].key, s->v[m].d.origin, s->v[l].key, s->v[l].d.origin)) m = l;
        if (r < s->n && sample_less(s->v[m].key, s->v[m].d.origin, s->v[r].key, s->v[r].d.origin)) m = r;
        if (m == i) return;
        Sample t = s->v[i]; s->v[i] = s->v[m]; s->v[m] = t;
        i = m;
    }
}

static int sampler_add(Sampler *s, uint64_t key, Doc d) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        Sample *v = realloc(s->v, cap * sizeof *v);
        if (!v) return mhar_fail("out of memory sampling the kernel");
        s->v = v;
        s->cap = cap;
    }
    size_t i = s->n++;
    s->v[i] = (Sample){key, d};
    while (i && sample_less(s->v[(i - 1) / 2].key, s->v[(i - 1) / 2].d.origin, key, d.origin)) {
        Sample t = s->v[i]; s->v[i] = s->v[(i - 1) / 2]; s->v[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    s->bytes += d.len;
    while (s->bytes > s->budget && s->n) { // evict the largest keys; each becomes the cutoff
        Sample top = s->v[0];
        s->v[0] = s->v[--s->n];
        heap_down(s, 0);
        s->bytes -= top.d.len;
        s->cut = 1;
        s->cut_key = top.key;
        snprintf(s->cut_origin, sizeof s->cut_origin, "%s", top.d.origin);
        doc_free(&top.d);
    }
    return MHAR_OK;
}

static int kernel_candidate(const char *path, int *src) {
    if (!strncmp(path, "Documentation/", 14)) {
        *src = SRC_LINUX_DOCS;
        return has_suffix(path, ".rst") || has_suffix(path, ".txt");
    }
    *src = SRC_LINUX_CODE;
    return has_suffix(path, ".c") || has_suffix(path, ".h");
}

int linux_find_tarball(char *out, size_t cap) {
    glob_t g;
    if (glob("/usr/src/linux-source-*.tar.xz", 0, NULL, &g) != 0) return 0;
    const char *best = NULL;
    for (size_t i = 0; i < g.gl_pathc; i++) // the newest kernel version
        if (!best || strverscmp(g.gl_pathv[i], best) > 0) best = g.gl_pathv[i];
    int ok = best && !copy_str(out, cap, best);
    globfree(&g);
    return ok;
}

int load_linux(Corpus *c, size_t budget) {
    Source *code = &c->src[SRC_LINUX_CODE], *docs = &c->src[SRC_LINUX_DOCS];
    char tarball[MHAR_PATH_MAX];
    if (!linux_find_tarball(tarball, sizeof tarball))
        return mhar_fail("no /usr/src/linux-source-*.tar.xz (package linux-source)");
    code->used = docs->used = 1;
    copy_str(code->root, sizeof code->root, tarball);
    copy_str(docs->root, sizeof docs->root, tarball);
    char pkg[256];
    const char *base = strrchr(tarball, '/') + 1;
    snprintf(pkg, sizeof pkg, "%.*s", (int)(strlen(base) - 7), base); // drop ".tar.xz"
    source_add_package(code, pkg);
    source_add_package(docs, pkg);
    if (c->verbose) fprintf(stderr, "  reading %s (budget %.1f MB)\n", tarball, budget / 1e6);

    char *argv[] = {"xz", "-dc", "--", tarball, NULL};
    Proc p;
    if (proc_start(&p, argv, 0)) return MHAR_ERR;
    Tar t = {.f = p.f, .what = tarball};
    Sampler s = {.budget = budget};
    int rc;
    while ((rc = tar_next(&t)) == 1) {
        // Regular files only ('0', or '\0' from old writers, '7' contiguous).
        int regular = t.type == '0' || t.type == '\0' || t.type == '7';
        const char *rel = strchr(t.name, '/'); // below the top directory
        int src;
        if (!regular || !rel || !kernel_candidate(rel + 1, &src)) {
            if ((rc = tar_skip(&t, t.size))) break;
            continue;
        }
        rel++;
        Source *so = &c->src[src];
        so->seen++;
        so->seen_bytes += t.size;
        if (t.size > CORPUS_MAX_KERNEL_FILE) { // generated tables, mostly register headers
            so->large++;
            if ((rc = tar_skip(&t, t.size))) break;
            continue;
        }
        uint8_t h[32];
        sha256(rel, strlen(rel), h);
        uint64_t key = 0;
        for (int i = 0; i < 8; i++) key = key << 8 | h[i];
        if (!sampler_wants(&s, key, rel)) {
            if ((rc = tar_skip(&t, t.size))) break;
            continue;
        }
        char *data;
        if ((rc = tar_data(&t, &data))) break;
        int why = doc_reject(data, t.size);
        if (why != REJECT_NONE) {
            count_reject(so, why);
            free(data);
            continue;
        }
        Doc d = {.data = data, .len = t.size, .origin = strdup(rel), .src = src};
        if (!d.origin) { free(data); rc = mhar_fail("out of memory"); break; }
        if ((rc = sampler_add(&s, key, d))) { doc_free(&d); break; }
    }
    if (rc > 0) rc = MHAR_OK;
    if (rc) {
        proc_abort(&p);
    } else { // drain: xz must see its output read to the end to exit cleanly
        char buf[65536];
        while (fread(buf, 1, sizeof buf, p.f) > 0) {}
        rc = proc_finish(&p);
    }
    for (size_t i = 0; i < s.n; i++) {
        if (!rc) rc = docs_push(c, s.v[i].d);
        else doc_free(&s.v[i].d);
    }
    free(s.v);
    if (rc) return MHAR_ERR;
    for (int k = SRC_LINUX_CODE; k <= SRC_LINUX_DOCS; k++) {
        Source *so = &c->src[k];
        size_t kept = source_docs(c, k);
        so->sampled_out = so->seen - so->large - so->binary - so->empty - so->separator - kept;
        source_progress(c, k);
    }
    if (code->seen == 0) return mhar_fail("%s: no *.c or *.h files in the archive", tarball);
    return MHAR_OK;
}
