// Corpus builder: gather documents from the sources (sources_*.c), then
// deduplicate, split, and write shards, document indexes and a manifest.
// Sections: package check; output; build.
#include "corpus.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sources.h"
#include "../io/atomic.h"
#include "../util/common.h"
#include "../util/dir.h"
#include "../util/sha256.h"
#include "../util/subprocess.h"

static const char *kind_names[] = {"code", "docs", "prose"};

// --------------------------------------------------------- package check
// What the full corpus needs, and the Debian package that provides it.
static int missing_packages(char *out, size_t cap) {
    char kernel[MHAR_PATH_MAX];
    out[0] = '\0';
    struct { int ok; const char *pkg; } need[] = {
        {linux_find_tarball(kernel, sizeof kernel), "linux-source"},
        {on_path("xz"), "xz-utils"},
        {on_path("gzip"), "gzip"},
        {on_path("bible") && path_is_file("/usr/lib/bible.data"), "bible-kjv"},
        {on_path("Rscript") && (path_is_file("/usr/lib/R/site-library/janeaustenr/DESCRIPTION") ||
                                path_is_file("/usr/local/lib/R/site-library/janeaustenr/DESCRIPTION")),
         "r-cran-janeaustenr"},
        {path_is_file(GCIDE_DICT) && path_is_file(GCIDE_INDEX), "dict-gcide"},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (need[i].ok) continue;
        size_t k = strlen(out);
        snprintf(out + k, cap - k, "%s%s", n ? " " : "", need[i].pkg);
        n++;
    }
    return n;
}

// Library code installs nothing: a missing package is an error that names it
// and the command that installs it (the same form as ./setup.sh's).
static int check_packages(void) {
    char missing[512];
    if (!missing_packages(missing, sizeof missing)) return MHAR_OK;
    return mhar_fail("the full corpus needs these Debian packages, not installed here: %s "
                     "(run as root: apt-get update && apt-get install -y --no-install-recommends %s)",
                     missing, missing);
}

// ----------------------------------------------------------------- output
static Corpus *sort_ctx; // qsort has no context argument

static int doc_order(const void *a, const void *b) { // canonical: source, then origin
    const Doc *x = a, *y = b;
    if (x->src != y->src) return x->src - y->src;
    return strcmp(x->origin, y->origin);
}

static int hash_order(const void *a, const void *b) { // by content hash, then canonical position
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int r = memcmp(sort_ctx->v[i].hash, sort_ctx->v[j].hash, 32);
    return r ? r : (i > j) - (i < j);
}

static int dedup(Corpus *c) {
    for (size_t i = 0; i < c->n; i++) sha256(c->v[i].data, c->v[i].len, c->v[i].hash);
    size_t *idx = malloc((c->n ? c->n : 1) * sizeof *idx);
    char *drop = calloc(c->n ? c->n : 1, 1);
    if (!idx || !drop) { free(idx); free(drop); return mhar_fail("out of memory"); }
    for (size_t i = 0; i < c->n; i++) idx[i] = i;
    sort_ctx = c;
    qsort(idx, c->n, sizeof *idx, hash_order);
    for (size_t k = 1; k < c->n; k++) // the first of a run of equal hashes stays
        if (!memcmp(c->v[idx[k]].hash, c->v[idx[k - 1]].hash, 32)) drop[idx[k]] = 1;
    size_t m = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (drop[i]) { c->src[c->v[i].src].duplicates++; doc_free(&c->v[i]); }
        else c->v[m++] = c->v[i];
    }
    c->n = m;
    free(idx);
    free(drop);
    return MHAR_OK;
}

// One output file's record for the manifest.
typedef struct { char path[64]; size_t bytes, docs; char sha[65]; } OutFile;
typedef struct { OutFile *v; size_t n; size_t docs, bytes; } SplitOut;

static int write_split(Corpus *c, const char *out_dir, int split, const size_t *perm, SplitOut *so,
                       char **index, size_t *index_len) {
    const char *name = split ? "val" : "train";
    size_t cap_index = 1 << 16, ilen = 0;
    char *idx = malloc(cap_index);
    if (!idx) return mhar_fail("out of memory");
    memset(so, 0, sizeof *so);
    AtomicFile af;
    Sha256 sh;
    int open = 0, rc = MHAR_OK;
    size_t shard_bytes = 0, shard_docs = 0;
    for (size_t k = 0; k <= c->n && !rc; k++) {
        const Doc *d = k < c->n ? &c->v[perm[k]] : NULL;
        if (d && d->split != split) continue;
        size_t need = d ? d->len + sizeof CORPUS_SEPARATOR - 1 : 0;
        if (open && (!d || shard_bytes + need > CORPUS_SHARD_BYTES)) { // close the shard
            OutFile *f = &so->v[so->n - 1];
            uint8_t dg[32];
            sha256_final(&sh, dg);
            sha256_hex(dg, f->sha);
            f->bytes = shard_bytes;
            f->docs = shard_docs;
            open = 0;
            if ((rc = atomic_commit(&af))) break;
        }
        if (!d) break;
        if (!open) {
            OutFile *v = realloc(so->v, (so->n + 1) * sizeof *v);
            if (!v) { rc = mhar_fail("out of memory"); break; }
            so->v = v;
            OutFile *f = &so->v[so->n++];
            memset(f, 0, sizeof *f);
            snprintf(f->path, sizeof f->path, "%s/shard-%04zu.txt", name, so->n - 1);
            char full[MHAR_PATH_MAX];
            if ((rc = path_join(full, sizeof full, out_dir, f->path)) || (rc = atomic_open(&af, full))) break;
            sha256_init(&sh);
            open = 1;
            shard_bytes = shard_docs = 0;
        }
        char line[MHAR_PATH_MAX + 512], hex[65]; // origins are at most a path
        sha256_hex(d->hash, hex);
        // Index line; tabs or newlines in an origin would break the columns.
        int n = snprintf(line, sizeof line, "%s\t%zu\t%zu\t%s\t%s\t", so->v[so->n - 1].path, shard_bytes,
                         d->len, hex, c->src[d->src].name);
        size_t o = (size_t)n;
        for (const char *p = d->origin; *p && o + 2 < sizeof line; p++)
            line[o++] = (*p == '\t' || *p == '\n' || *p == '\r') ? ' ' : *p;
        line[o++] = '\n';
        if (ilen + o > cap_index) {
            while (ilen + o > cap_index) cap_index *= 2;
            char *b = realloc(idx, cap_index);
            if (!b) { rc = mhar_fail("out of memory"); break; }
            idx = b;
        }
        memcpy(idx + ilen, line, o);
        ilen += o;
        if ((rc = atomic_write(&af, d->data, d->len)) ||
            (rc = atomic_write(&af, CORPUS_SEPARATOR, sizeof CORPUS_SEPARATOR - 1)))
            break;
        sha256_update(&sh, d->data, d->len);
        sha256_update(&sh, CORPUS_SEPARATOR, sizeof CORPUS_SEPARATOR - 1);
        shard_bytes += need;
        shard_docs++;
        so->docs++;
        so->bytes += d->len;
    }
    if (rc && open) atomic_abort(&af);
    if (rc) { free(idx); return MHAR_ERR; }
    *index = idx;
    *index_len = ilen;
    return MHAR_OK;
}

// Make out_dir/{train,val}: new, or emptied of a previous corpus's files.
// Anything else in the way is refused rather than deleted.
static int clean_dir(const char *dir, int top) {
    DIR *d = opendir(dir);
    if (!d) {
        if (errno != ENOENT) return mhar_fail("%s: cannot open directory: %s", dir, strerror(errno));
        if (mkdir(dir, 0755) != 0) return mhar_fail("%s: cannot create directory: %s", dir, strerror(errno));
        return MHAR_OK;
    }
    int rc = MHAR_OK;
    struct dirent *e;
    while ((e = readdir(d)) && !rc) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
        if (top && (!strcmp(n, "train") || !strcmp(n, "val"))) continue;
        int ours = top ? (!strcmp(n, "manifest.json") || !strncmp(n, "docs-", 5) || strstr(n, ".tmp."))
                       : (!strncmp(n, "shard-", 6));
        char path[MHAR_PATH_MAX];
        if (path_join(path, sizeof path, dir, n)) rc = MHAR_ERR;
        else if (!ours) rc = mhar_fail("%s: not written by 'mhar data corpus'; refusing to build a corpus over it", path);
        else if (unlink(path) != 0) rc = mhar_fail("%s: cannot remove: %s", path, strerror(errno));
    }
    closedir(d);
    return rc;
}

// Refuse an output path that prepare_out would refuse, before the long part.
static int check_out(const char *out) {
    struct stat st;
    if (stat(out, &st) != 0) return MHAR_OK;
    if (!S_ISDIR(st.st_mode)) return mhar_fail("%s: exists and is not a directory", out);
    DIR *d = opendir(out);
    if (!d) return mhar_fail("%s: cannot open directory: %s", out, strerror(errno));
    int entries = 0;
    struct dirent *e;
    while ((e = readdir(d))) entries += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    char m[MHAR_PATH_MAX];
    if (path_join(m, sizeof m, out, "manifest.json")) return MHAR_ERR;
    if (entries && !path_is_file(m))
        return mhar_fail("%s: not empty and holds no manifest.json; refusing to write a corpus into it", out);
    return MHAR_OK;
}

static int prepare_out(const char *out) {
    if (check_out(out)) return MHAR_ERR;
    struct stat st;
    if (stat(out, &st) != 0 && mkdir(out, 0755) != 0) {
        return mhar_fail("%s: cannot create directory: %s", out, strerror(errno));
    }
    char sub[MHAR_PATH_MAX];
    if (clean_dir(out, 1)) return MHAR_ERR;
    if (path_join(sub, sizeof sub, out, "train") || clean_dir(sub, 0)) return MHAR_ERR;
    if (path_join(sub, sizeof sub, out, "val")) return MHAR_ERR;
    return clean_dir(sub, 0);
}

static cJSON *count_json(size_t docs, size_t bytes) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "documents", (double)docs);
    cJSON_AddNumberToObject(o, "bytes", (double)bytes);
    return o;
}

static cJSON *file_json(const OutFile *f) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", f->path);
    cJSON_AddNumberToObject(o, "bytes", (double)f->bytes);
    if (f->docs) cJSON_AddNumberToObject(o, "documents", (double)f->docs);
    cJSON_AddStringToObject(o, "sha256", f->sha);
    return o;
}

static int write_manifest(const Corpus *c, const CorpusOptions *o, const SplitOut so[2], const OutFile idx[2],
                          size_t kernel_budget) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "format", "mhar-corpus-1");
    cJSON_AddStringToObject(m, "source", o->source);
    cJSON_AddNumberToObject(m, "seed", (double)o->seed); // exact below 2^53
    cJSON_AddNumberToObject(m, "val_fraction", o->val_fraction);
    cJSON_AddStringToObject(m, "separator", CORPUS_SEPARATOR);
    cJSON_AddNumberToObject(m, "shard_bytes_max", (double)CORPUS_SHARD_BYTES);
    if (kernel_budget) {
        cJSON_AddNumberToObject(m, "prose_share_target", CORPUS_PROSE_SHARE);
        cJSON_AddNumberToObject(m, "kernel_budget_bytes", (double)kernel_budget);
        cJSON_AddNumberToObject(m, "kernel_file_bytes_max", (double)CORPUS_MAX_KERNEL_FILE);
    }
    cJSON *srcs = cJSON_AddArrayToObject(m, "sources");
    size_t kind_bytes[3] = {0}, total = 0;
    for (int i = 0; i < N_SRC; i++) {
        const Source *s = &c->src[i];
        if (!s->used) continue;
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", s->name);
        cJSON_AddStringToObject(j, "kind", kind_names[s->kind]);
        cJSON_AddStringToObject(j, "root", s->root);
        cJSON *pk = cJSON_AddArrayToObject(j, "packages");
        for (int k = 0; k < s->n_pkg; k++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "name", s->pkg[k].name);
            cJSON_AddStringToObject(p, "version", s->pkg[k].version);
            cJSON_AddItemToArray(pk, p);
        }
        if (s->upstream[0]) cJSON_AddStringToObject(j, "version", s->upstream);
        cJSON_AddNumberToObject(j, "files_seen", (double)s->seen);
        cJSON_AddNumberToObject(j, "bytes_seen", (double)s->seen_bytes);
        cJSON_AddNumberToObject(j, "skipped_binary", (double)s->binary);
        cJSON_AddNumberToObject(j, "skipped_empty", (double)s->empty);
        cJSON_AddNumberToObject(j, "skipped_separator", (double)s->separator);
        if (i == SRC_LINUX_CODE || i == SRC_LINUX_DOCS) {
            cJSON_AddNumberToObject(j, "skipped_large", (double)s->large);
            cJSON_AddNumberToObject(j, "sampled_out", (double)s->sampled_out);
        }
        cJSON_AddNumberToObject(j, "duplicates", (double)s->duplicates);
        cJSON_AddItemToObject(j, "train", count_json(s->docs[0], s->bytes[0]));
        cJSON_AddItemToObject(j, "val", count_json(s->docs[1], s->bytes[1]));
        cJSON_AddItemToArray(srcs, j);
        kind_bytes[s->kind] += s->bytes[0] + s->bytes[1];
        total += s->bytes[0] + s->bytes[1];
    }
    cJSON *kinds = cJSON_AddObjectToObject(m, "bytes_by_kind");
    for (int k = 0; k < 3; k++) cJSON_AddNumberToObject(kinds, kind_names[k], (double)kind_bytes[k]);
    // Rounded to 4 digits so the JSON text does not hinge on printf's last digit.
    double share = total ? (double)kind_bytes[KIND_PROSE] / (double)total : 0;
    cJSON_AddNumberToObject(m, "prose_share", (double)(long)(share * 10000 + 0.5) / 10000);
    cJSON_AddNumberToObject(m, "documents", (double)(so[0].docs + so[1].docs));
    cJSON_AddNumberToObject(m, "bytes", (double)total);
    for (int sp = 0; sp < 2; sp++) {
        cJSON *j = cJSON_AddObjectToObject(m, sp ? "val" : "train");
        cJSON_AddNumberToObject(j, "documents", (double)so[sp].docs);
        cJSON_AddNumberToObject(j, "bytes", (double)so[sp].bytes);
        cJSON *files = cJSON_AddArrayToObject(j, "files");
        for (size_t k = 0; k < so[sp].n; k++) cJSON_AddItemToArray(files, file_json(&so[sp].v[k]));
        cJSON_AddItemToObject(j, "index", file_json(&idx[sp]));
    }
    char *text = cJSON_Print(m);
    cJSON_Delete(m);
    if (!text) return mhar_fail("out of memory writing the manifest");
    size_t n = strlen(text);
    char *buf = malloc(n + 2);
    int rc;
    if (!buf) {
        rc = mhar_fail("out of memory");
    } else {
        memcpy(buf, text, n);
        buf[n] = '\n';
        char path[MHAR_PATH_MAX];
        rc = path_join(path, sizeof path, o->out_dir, "manifest.json");
        if (!rc) rc = atomic_write_file(path, buf, n + 1);
    }
    free(buf);
    cJSON_free(text);
    return rc;
}

static int split_and_write(Corpus *c, const CorpusOptions *o, size_t kernel_budget) {
    qsort(c->v, c->n, sizeof *c->v, doc_order);
    for (size_t i = 1; i < c->n; i++)
        if (c->v[i].src == c->v[i - 1].src && !strcmp(c->v[i].origin, c->v[i - 1].origin))
            return mhar_fail("%s: two documents named '%s'", c->src[c->v[i].src].name, c->v[i].origin);
    if (dedup(c)) return MHAR_ERR;
    if (c->n == 0) return mhar_fail("no documents left to write");
    // One seeded permutation of the canonical order: it picks the validation
    // documents and is the order documents are written in (sources mixed, so
    // any prefix of the shards is a fair sample).
    size_t *perm = malloc(c->n * sizeof *perm);
    if (!perm) return mhar_fail("out of memory");
    for (size_t i = 0; i < c->n; i++) perm[i] = i;
    Rng rng;
    rng_seed(&rng, o->seed);
    for (size_t i = c->n - 1; i > 0; i--) {
        size_t j = (size_t)rng_below(&rng, i + 1);
        size_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    size_t quota[N_SRC];
    for (int s = 0; s < N_SRC; s++) {
        size_t n = source_docs(c, s), q = (size_t)(o->val_fraction * (double)n + 0.5);
        if (q == 0 && n >= 2) q = 1;
        if (n && q >= n) q = n - 1;
        quota[s] = q;
    }
    for (size_t k = 0; k < c->n; k++) {
        Doc *d = &c->v[perm[k]];
        d->split = quota[d->src] > 0;
        if (d->split) quota[d->src]--;
        c->src[d->src].docs[d->split]++;
        c->src[d->src].bytes[d->split] += d->len;
    }
    if (prepare_out(o->out_dir)) { free(perm); return MHAR_ERR; }
    SplitOut so[2] = {{0}, {0}};
    OutFile idx[2];
    int rc = MHAR_OK;
    for (int sp = 0; sp < 2 && !rc; sp++) {
        char *text = NULL;
        size_t len = 0;
        rc = write_split(c, o->out_dir, sp, perm, &so[sp], &text, &len);
        if (rc) break;
        OutFile *f = &idx[sp];
        memset(f, 0, sizeof *f);
        snprintf(f->path, sizeof f->path, "docs-%s.tsv", sp ? "val" : "train");
        uint8_t dg[32];
        sha256(text, len, dg);
        sha256_hex(dg, f->sha);
        f->bytes = len;
        char path[MHAR_PATH_MAX];
        rc = path_join(path, sizeof path, o->out_dir, f->path);
        if (!rc) rc = atomic_write_file(path, text, len);
        free(text);
    }
    if (!rc) rc = write_manifest(c, o, so, idx, kernel_budget);
    if (!rc && c->verbose) {
        size_t prose = 0;
        for (int s = 0; s < N_SRC; s++)
            if (c->src[s].kind == KIND_PROSE) prose += c->src[s].bytes[0] + c->src[s].bytes[1];
        double total = (double)(so[0].bytes + so[1].bytes);
        fprintf(stderr, "  train %zu documents %.1f MB in %zu shards, val %zu documents %.1f MB; "
                "prose %.1f%%\n", so[0].docs, so[0].bytes / 1e6, so[0].n, so[1].docs, so[1].bytes / 1e6,
                total > 0 ? 100.0 * (double)prose / total : 0.0);
    }
    free(so[0].v);
    free(so[1].v);
    free(perm);
    return rc;
}

// ------------------------------------------------------------------ build
int corpus_build(const CorpusOptions *o) {
    if (!o->out_dir || !o->out_dir[0]) return mhar_fail("no output directory");
    if (!(o->val_fraction > 0 && o->val_fraction <= 0.5))
        return mhar_fail("validation fraction %g is outside (0, 0.5]", o->val_fraction);
    int full = !strcmp(o->source, "full");
    if (!full && strcmp(o->source, "default"))
        return mhar_fail("unknown corpus source '%s' (default or full)", o->source);
    Corpus *c = calloc(1, sizeof *c);
    if (!c) return mhar_fail("out of memory");
    c->verbose = o->verbose;
    static const struct { const char *name; int kind; } info[N_SRC] = {
        {"python-stdlib", KIND_CODE}, {"linux-code", KIND_CODE}, {"linux-docs", KIND_DOCS},
        {"bible-kjv", KIND_PROSE},    {"janeaustenr", KIND_PROSE}, {"gcide", KIND_PROSE},
    };
    for (int i = 0; i < N_SRC; i++) {
        c->src[i].name = info[i].name;
        c->src[i].kind = info[i].kind;
    }
    size_t kernel_budget = 0;
    int rc = check_out(o->out_dir);
    if (rc) {
        // the output directory is refused
    } else if (full) {
        rc = check_packages();
        // Prose first: its size sets the kernel's byte budget.
        if (!rc) rc = load_bible(c);
        if (!rc) rc = load_austen(c);
        if (!rc) rc = load_gcide(c);
        if (!rc) rc = load_python(c, o->stdlib_dir);
        if (!rc) {
            size_t prose = source_bytes(c, SRC_BIBLE) + source_bytes(c, SRC_AUSTEN) + source_bytes(c, SRC_GCIDE);
            size_t other = source_bytes(c, SRC_PYTHON);
            double want = (double)prose / CORPUS_PROSE_SHARE - (double)(prose + other);
            double room = (double)CORPUS_MAX_TOTAL - (double)(prose + other);
            if (want > room) want = room;
            kernel_budget = want > 0 ? (size_t)want : 1; // 1: nothing fits, the record still says so
            rc = load_linux(c, kernel_budget);
        }
    } else {
        rc = load_python(c, o->stdlib_dir);
    }
    if (!rc) rc = split_and_write(c, o, kernel_budget);
    for (size_t i = 0; i < c->n; i++) doc_free(&c->v[i]);
    free(c->v);
    free(c);
    return rc;
}
