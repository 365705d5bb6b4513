// Corpus builder: gather documents from the sources (see corpus.h), filter,
// deduplicate, split, and write shards, document indexes and a manifest.
// Sections: SHA-256; documents; helpers (files, processes, dpkg); the
// sources (Python stdlib, Linux tarball, Bible, Austen, GCIDE); package
// checks; output.
#include "corpus.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/atomic.h"
#include "util/common.h"
#include "util/dir.h"
#include "util/file.h"
#include "util/sha256.h"
#include "util/subprocess.h"

// -------------------------------------------------------------- documents
enum { KIND_CODE, KIND_DOCS, KIND_PROSE };
static const char *kind_names[] = {"code", "docs", "prose"};

enum { SRC_PYTHON, SRC_LINUX_CODE, SRC_LINUX_DOCS, SRC_BIBLE, SRC_AUSTEN, SRC_GCIDE, N_SRC };

typedef struct { char name[96]; char version[96]; } Package;

typedef struct {
    const char *name;
    int kind;
    int used;
    char root[4096];
    Package pkg[3];
    int n_pkg;
    char upstream[64];       // version when no Debian package owns it
    size_t seen, seen_bytes; // candidate files / items and their bytes
    size_t binary, empty, separator, large, sampled_out, duplicates;
    size_t docs[2], bytes[2];  // kept documents per split (0 train, 1 val)
} Source;

typedef struct {
    char *data;
    size_t len;
    char *origin;       // path or label inside the source; unique within it
    int src;
    int split;          // 0 train, 1 val
    uint8_t hash[32];
} Doc;

typedef struct {
    Doc *v;
    size_t n, cap;
    Source src[N_SRC];
    int verbose;
} Corpus;

static void doc_free(Doc *d) {
    free(d->data);
    free(d->origin);
    d->data = d->origin = NULL;
}

static int docs_push(Corpus *c, Doc d) {
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

// Why a document is refused, or REJECT_NONE.
enum { REJECT_NONE, REJECT_BINARY, REJECT_EMPTY, REJECT_SEPARATOR };

static int doc_reject(const char *data, size_t len) {
    if (len == 0) return REJECT_EMPTY;
    if (memchr(data, '\0', len)) return REJECT_BINARY; // text never holds NUL
    // The separator terminates documents in the shards: a document holding it
    // would split in two when read back.
    if (memmem(data, len, CORPUS_SEPARATOR, sizeof CORPUS_SEPARATOR - 1)) return REJECT_SEPARATOR;
    return REJECT_NONE;
}

static void count_reject(Source *s, int why) {
    if (why == REJECT_BINARY) s->binary++;
    else if (why == REJECT_EMPTY) s->empty++;
    else if (why == REJECT_SEPARATOR) s->separator++;
}

// Take ownership of data (malloc'd); keep it as a document of source src, or
// count why not. origin is copied.
static int add_doc(Corpus *c, int src, const char *origin, char *data, size_t len) {
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

// A copy of data[0..len) as a new document.
static int add_copy(Corpus *c, int src, const char *origin, const char *data, size_t len) {
    char *p = malloc(len ? len : 1);
    if (!p) return mhar_fail("out of memory (%zu bytes)", len);
    memcpy(p, data, len);
    return add_doc(c, src, origin, p, len);
}

static size_t source_bytes(const Corpus *c, int src) {
    size_t b = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].src == src) b += c->v[i].len;
    return b;
}

static size_t source_docs(const Corpus *c, int src) {
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) n += c->v[i].src == src;
    return n;
}

static void progress(const Corpus *c, int src) {
    if (!c->verbose) return;
    const Source *s = &c->src[src];
    fprintf(stderr, "  %-14s %7zu documents %9.1f MB  (%s)\n", s->name, source_docs(c, src),
            source_bytes(c, src) / 1e6, s->root);
}

// ---------------------------------------------------------------- helpers
static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !memcmp(s + a - b, suffix, b);
}

// Version of an installed Debian package, read from dpkg's status database
// (no dpkg process). Returns 1 and fills out if installed, 0 otherwise.
static int dpkg_version(const char *pkg, char *out, size_t cap) {
    char *status;
    size_t len;
    if (read_file("/var/lib/dpkg/status", &status, &len)) return 0;
    int found = 0;
    char key[160];
    snprintf(key, sizeof key, "Package: %s\n", pkg);
    size_t klen = strlen(key);
    for (const char *p = status; (p = strstr(p, key)); p += klen) {
        if (p != status && p[-1] != '\n') continue;
        const char *end = strstr(p, "\n\n");
        if (!end) end = p + strlen(p);
        const char *st = strstr(p, "\nStatus: ");
        if (!st || st > end || strncmp(st + 9, "install ok installed", 20)) continue;
        const char *v = strstr(p, "\nVersion: ");
        if (!v || v > end) continue;
        v += 10;
        size_t n = strcspn(v, "\n");
        if (n >= cap) n = cap - 1;
        memcpy(out, v, n);
        out[n] = '\0';
        found = 1;
        break;
    }
    free(status);
    return found;
}

static void add_package(Source *s, const char *name) {
    if (s->n_pkg >= 3) return;
    Package *p = &s->pkg[s->n_pkg];
    size_t n = strlen(name);
    if (n >= sizeof p->name) return;
    memcpy(p->name, name, n + 1);
    if (dpkg_version(name, p->version, sizeof p->version)) s->n_pkg++;
}

// ---------------------------------------------------- Python standard library
static int name_order(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int walk_py(Corpus *c, const char *root, const char *rel) {
    char dir[4096];
    if (rel[0]) { if (path_join(dir, sizeof dir, root, rel)) return MHAR_ERR; }
    else if (copy_str(dir, sizeof dir, root)) return MHAR_ERR;
    struct dirent **names;
    // Byte-order listing: the same walk (and first error) whatever order the
    // filesystem returns entries in and whatever the locale.
    int n = scandir(dir, &names, NULL, name_order);
    if (n < 0) return mhar_fail("%s: cannot open directory: %s", dir, strerror(errno));
    int rc = MHAR_OK;
    for (int i = 0; i < n && !rc; i++) {
        const char *name = names[i]->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        char sub[4096], full[4096];
        if (rel[0]) rc = path_join(sub, sizeof sub, rel, name);
        else rc = copy_str(sub, sizeof sub, name);
        if (!rc) rc = path_join(full, sizeof full, root, sub);
        if (rc) break;
        struct stat st;
        if (lstat(full, &st) != 0) { rc = mhar_fail("%s: cannot stat: %s", full, strerror(errno)); break; }
        if (S_ISLNK(st.st_mode)) continue; // links point outside (Debian's sitecustomize.py) or loop
        if (S_ISDIR(st.st_mode)) {
            // Third-party packages are not the standard library; bytecode caches are binary.
            if (!strcmp(name, "site-packages") || !strcmp(name, "dist-packages") ||
                !strcmp(name, "__pycache__"))
                continue;
            rc = walk_py(c, root, sub);
        } else if (S_ISREG(st.st_mode) && ends_with(name, ".py")) {
            char *data;
            size_t len;
            rc = read_file_max(full, SIZE_MAX, &data, &len);
            if (!rc) rc = add_doc(c, SRC_PYTHON, sub, data, len);
        }
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

// Highest python3.N directory under libdir holding os.py (a real standard
// library, not Debian's /usr/lib/python3 or an empty /usr/local one).
static int best_python_in(const char *libdir, char *out, size_t cap, int *minor) {
    DIR *d = opendir(libdir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int n, end = 0;
        if (sscanf(e->d_name, "python3.%d%n", &n, &end) != 1 || e->d_name[end] || n < 0) continue;
        char cand[4096];
        if (snprintf(cand, sizeof cand, "%s/%s/os.py", libdir, e->d_name) >= (int)sizeof cand) continue;
        if (!path_is_file(cand) || (found && n <= *minor)) continue;
        if (snprintf(out, cap, "%s/%s", libdir, e->d_name) >= (int)cap) continue;
        *minor = n;
        found = 1;
    }
    closedir(d);
    return found;
}

int corpus_find_stdlib(char *out, size_t cap) {
    int minor;
    if (best_python_in("/usr/lib", out, cap, &minor)) return MHAR_OK;
    if (best_python_in("/usr/local/lib", out, cap, &minor)) return MHAR_OK;
    // The prefix of each python3 on PATH: <prefix>/bin/python3 -> <prefix>/lib.
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t n = strcspn(path, ":");
        char exe[4096], real[4096];
        if (n && n + 10 < sizeof exe) {
            memcpy(exe, path, n);
            strcpy(exe + n, "/python3");
            if (realpath(exe, real)) {
                char *slash = strrchr(real, '/');
                if (slash) *slash = '\0';                      // <prefix>/bin
                slash = strrchr(real, '/');
                if (slash && strlen(real) + 5 < sizeof real) { // <prefix>
                    strcpy(slash, "/lib");
                    if (best_python_in(real, out, cap, &minor)) return MHAR_OK;
                }
            }
        }
        path += n + (path[n] == ':');
    }
    // pyenv puts a shim script on PATH, not the interpreter: look at its versions.
    char root[4096];
    const char *pr = getenv("PYENV_ROOT"), *home = getenv("HOME");
    if (pr && *pr) snprintf(root, sizeof root, "%s/versions/*/lib", pr);
    else snprintf(root, sizeof root, "%s/.pyenv/versions/*/lib", home ? home : "/root");
    glob_t g;
    int found = 0, best = -1;
    if (glob(root, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) { // sorted: ties go to the later version name
            char cand[4096];
            int m;
            if (best_python_in(g.gl_pathv[i], cand, sizeof cand, &m) && m >= best) {
                best = m;
                found = !copy_str(out, cap, cand);
            }
        }
        globfree(&g);
    }
    if (found) return MHAR_OK;
    return mhar_fail("no Python standard library found (looked for python3.N/os.py under /usr/lib, "
                     "/usr/local/lib, the prefix of python3 on PATH and ~/.pyenv/versions); "
                     "give one with --stdlib-dir DIR");
}

// Package and version of a standard library: Debian's libpython3.N-stdlib
// for /usr/lib/python3.N, else PY_VERSION from <prefix>/include/python3.N/patchlevel.h.
static void python_version(Source *s) {
    char real[4096];
    if (!realpath(s->root, real)) return;
    const char *base = strrchr(real, '/');
    base = base ? base + 1 : real;
    int minor, end = 0;
    if (sscanf(base, "python3.%d%n", &minor, &end) != 1 || base[end]) return;
    char pkg[64];
    snprintf(pkg, sizeof pkg, "libpython3.%d-stdlib", minor);
    if (!strncmp(real, "/usr/lib/", 9)) add_package(s, pkg);
    if (s->n_pkg) return;
    char ph[4200], *text;
    size_t n;
    snprintf(ph, sizeof ph, "%.*s/include/python3.%d/patchlevel.h",
             (int)(base - real > 5 ? base - real - 5 : 0), real, minor); // strip "/lib/"
    if (read_file(ph, &text, &n)) return;
    const char *v = strstr(text, "#define PY_VERSION");
    if (v && (v = strchr(v, '"'))) {
        size_t k = strcspn(v + 1, "\"");
        if (k < sizeof s->upstream) { memcpy(s->upstream, v + 1, k); s->upstream[k] = '\0'; }
    }
    free(text);
}

static int load_python(Corpus *c, const char *stdlib_dir) {
    Source *s = &c->src[SRC_PYTHON];
    s->used = 1;
    if (stdlib_dir) {
        if (copy_str(s->root, sizeof s->root, stdlib_dir)) return MHAR_ERR;
        size_t n = strlen(s->root);
        while (n > 1 && s->root[n - 1] == '/') s->root[--n] = '\0';
    } else if (corpus_find_stdlib(s->root, sizeof s->root)) {
        return MHAR_ERR;
    }
    struct stat st;
    if (stat(s->root, &st) != 0) return mhar_fail("%s: cannot open directory: %s", s->root, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return mhar_fail("%s: not a directory", s->root);
    if (walk_py(c, s->root, "")) return MHAR_ERR;
    if (s->seen == 0) return mhar_fail("%s: no *.py files found under it (expected a Python standard library)", s->root);
    if (source_docs(c, SRC_PYTHON) == 0)
        return mhar_fail("%s: %zu *.py files, none usable (%zu binary, %zu empty)", s->root, s->seen,
                         s->binary, s->empty);
    python_version(s);
    progress(c, SRC_PYTHON);
    return MHAR_OK;
}

// ------------------------------------------------------------ Linux kernel
// The tarball is read as a stream (xz -dc | our tar reader): nothing is
// unpacked to disk, and only the sampled files are kept in memory.
typedef struct {
    FILE *f;
    const char *what;
    char name[4096];
    size_t size;
    char type;
} Tar;

static int tar_octal(const uint8_t *p, size_t n, size_t *out) {
    size_t v = 0;
    if (p[0] & 0x80) { // GNU base-256 for big sizes
        for (size_t i = 1; i < n; i++) v = v << 8 | p[i];
        *out = v;
        return MHAR_OK;
    }
    size_t i = 0;
    while (i < n && p[i] == ' ') i++;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) v = v * 8 + (p[i] - '0');
    if (i < n && p[i] != ' ' && p[i] != '\0') return MHAR_ERR;
    *out = v;
    return MHAR_OK;
}

static int tar_read(Tar *t, void *buf, size_t n) {
    if (fread(buf, 1, n, t->f) != n) return mhar_fail("%s: archive ends early", t->what);
    return MHAR_OK;
}

// Skip n data bytes plus the padding to the next 512-byte block.
static int tar_skip(Tar *t, size_t n) {
    char buf[65536];
    size_t left = (n + 511) / 512 * 512;
    while (left) {
        size_t k = left < sizeof buf ? left : sizeof buf;
        if (tar_read(t, buf, k)) return MHAR_ERR;
        left -= k;
    }
    return MHAR_OK;
}

// Read an entry's data (and its padding) into a malloc'd buffer, with a NUL
// after it so header records can be parsed as strings.
static int tar_data(Tar *t, char **data) {
    char *buf = malloc(t->size + 1);
    if (!buf) return mhar_fail("%s: out of memory (%zu bytes)", t->what, t->size);
    if (tar_read(t, buf, t->size)) { free(buf); return MHAR_ERR; }
    buf[t->size] = '\0';
    size_t pad = (512 - t->size % 512) % 512;
    char junk[512];
    if (pad && tar_read(t, junk, pad)) { free(buf); return MHAR_ERR; }
    *data = buf;
    return MHAR_OK;
}

// Next entry's header: 1 = entry (name, size, type set; its data must be read
// or skipped next), 0 = end of archive, MHAR_ERR = damaged archive. GNU long
// names ('L') and pax path/size records ('x') are applied to the entry after them.
static int tar_next(Tar *t) {
    char long_name[4096] = "";
    size_t pax_size = (size_t)-1;
    for (;;) {
        uint8_t h[512];
        size_t got = fread(h, 1, 512, t->f);
        if (got == 0) return 0; // some writers omit the two zero blocks
        if (got != 512) return mhar_fail("%s: archive ends inside a header", t->what);
        int zero = 1;
        for (int i = 0; i < 512 && zero; i++) zero = h[i] == 0;
        if (zero) return 0;
        // The checksum field counts as spaces; old writers summed signed bytes.
        size_t sum = 0, want;
        long ssum = 0;
        for (int i = 0; i < 512; i++) {
            int in_field = i >= 148 && i < 156;
            sum += in_field ? ' ' : h[i];
            ssum += in_field ? ' ' : (signed char)h[i];
        }
        if (tar_octal(h + 148, 8, &want) || (want != sum && (long)want != ssum) ||
            tar_octal(h + 124, 12, &t->size))
            return mhar_fail("%s: not a tar archive, or damaged (bad header checksum)", t->what);
        t->type = (char)h[156];
        if (t->type == 'L' || t->type == 'x') {
            char *data;
            if (t->size > (1 << 20)) return mhar_fail("%s: oversized extended header", t->what);
            if (tar_data(t, &data)) return MHAR_ERR;
            if (t->type == 'L') {
                size_t n = strnlen(data, t->size);
                if (n >= sizeof long_name) n = sizeof long_name - 1;
                memcpy(long_name, data, n);
                long_name[n] = '\0';
            } else { // records "LEN key=value\n"
                for (size_t off = 0; off < t->size;) {
                    size_t len = strtoul(data + off, NULL, 10);
                    if (len == 0 || off + len > t->size) break;
                    const char *kv = memchr(data + off, ' ', len), *rec_end = data + off + len - 1; // at '\n'
                    if (kv && kv + 1 < rec_end) {
                        kv++;
                        size_t kvlen = (size_t)(rec_end - kv);
                        if (kvlen > 5 && !strncmp(kv, "path=", 5) && kvlen - 5 < sizeof long_name) {
                            memcpy(long_name, kv + 5, kvlen - 5);
                            long_name[kvlen - 5] = '\0';
                        } else if (!strncmp(kv, "size=", 5)) {
                            pax_size = strtoull(kv + 5, NULL, 10);
                        }
                    }
                    off += len;
                }
            }
            free(data);
            continue;
        }
        if (long_name[0]) {
            memcpy(t->name, long_name, strlen(long_name) + 1);
        } else { // ustar: prefix "/" name
            char name[101], prefix[156];
            memcpy(name, h, 100); name[100] = '\0';
            memcpy(prefix, h + 345, 155); prefix[155] = '\0';
            if (memcmp(h + 257, "ustar\0", 6) == 0 && prefix[0])
                snprintf(t->name, sizeof t->name, "%s/%s", prefix, name);
            else
                snprintf(t->name, sizeof t->name, "%s", name);
        }
        if (pax_size != (size_t)-1) t->size = pax_size;
        return 1;
    }
}

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
    char cut_origin[4096];
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
        return ends_with(path, ".rst") || ends_with(path, ".txt");
    }
    *src = SRC_LINUX_CODE;
    return ends_with(path, ".c") || ends_with(path, ".h");
}

static int find_kernel_tarball(char *out, size_t cap) {
    glob_t g;
    if (glob("/usr/src/linux-source-*.tar.xz", 0, NULL, &g) != 0) return 0;
    const char *best = NULL;
    for (size_t i = 0; i < g.gl_pathc; i++) // the newest kernel version
        if (!best || strverscmp(g.gl_pathv[i], best) > 0) best = g.gl_pathv[i];
    int ok = best && !copy_str(out, cap, best);
    globfree(&g);
    return ok;
}

static int load_linux(Corpus *c, size_t budget) {
    Source *code = &c->src[SRC_LINUX_CODE], *docs = &c->src[SRC_LINUX_DOCS];
    char tarball[4096];
    if (!find_kernel_tarball(tarball, sizeof tarball))
        return mhar_fail("no /usr/src/linux-source-*.tar.xz (package linux-source)");
    code->used = docs->used = 1;
    copy_str(code->root, sizeof code->root, tarball);
    copy_str(docs->root, sizeof docs->root, tarball);
    char pkg[256];
    const char *base = strrchr(tarball, '/') + 1;
    snprintf(pkg, sizeof pkg, "%.*s", (int)(strlen(base) - 7), base); // drop ".tar.xz"
    add_package(code, pkg);
    add_package(docs, pkg);
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
        progress(c, k);
    }
    if (code->seen == 0) return mhar_fail("%s: no *.c or *.h files in the archive", tarball);
    return MHAR_OK;
}

// ------------------------------------------------------------- Bible (KJV)
// `bible` decodes the package's compressed text; pretty-printed, a book and
// chapter line ("1 Samuel 3") precedes each chapter's verses, which are
// indented. One document per book.
static int load_bible(Corpus *c) {
    Source *s = &c->src[SRC_BIBLE];
    s->used = 1;
    copy_str(s->root, sizeof s->root, "bible -l 1000000 Gen1:1-Rev22:21");
    add_package(s, "bible-kjv");
    add_package(s, "bible-kjv-text");
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
    if (!rc) progress(c, SRC_BIBLE);
    return rc;
}

// ---------------------------------------------------------- Jane Austen
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

static int load_austen(Corpus *c) {
    Source *s = &c->src[SRC_AUSTEN];
    s->used = 1;
    copy_str(s->root, sizeof s->root, "Rscript: data(package = 'janeaustenr')");
    add_package(s, "r-cran-janeaustenr");
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/mhar-austen-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return mhar_fail("%s: cannot create a temporary directory: %s", dir, strerror(errno));
    char *argv[] = {"Rscript", "--vanilla", "-e", (char *)austen_r, dir, NULL};
    Proc p;
    int rc = proc_start(&p, argv, 1);
    if (!rc) rc = proc_finish(&p);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, name_order);
    int books = 0;
    for (int i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (!rc && ends_with(names[i]->d_name, ".txt")) {
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
    if (!rc) progress(c, SRC_AUSTEN);
    return rc;
}

// ------------------------------------------------------------------ GCIDE
// dictd format: gcide.dict.dz is gzip-compatible (dictzip) text; gcide.index
// lines are "headword \t offset \t length", numbers in base 64 (A-Z a-z 0-9 + /).
#define GCIDE_DICT "/usr/share/dictd/gcide.dict.dz"
#define GCIDE_INDEX "/usr/share/dictd/gcide.index"
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

static int load_gcide(Corpus *c) {
    Source *s = &c->src[SRC_GCIDE];
    s->used = 1;
    copy_str(s->root, sizeof s->root, GCIDE_DICT);
    add_package(s, "dict-gcide");
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
    if (!rc) progress(c, SRC_GCIDE);
    return rc;
}

// --------------------------------------------------------- package check
// What the full corpus needs, and the Debian package that provides it.
static int missing_packages(char *out, size_t cap) {
    char kernel[4096];
    out[0] = '\0';
    struct { int ok; const char *pkg; } need[] = {
        {find_kernel_tarball(kernel, sizeof kernel), "linux-source"},
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

// Library code installs nothing (./setup.sh and the administrator do): a
// missing package is an error that names it and the command that installs it.
static int check_packages(void) {
    char missing[512];
    if (!missing_packages(missing, sizeof missing)) return MHAR_OK;
    return mhar_fail("the full corpus needs these Debian packages, not installed here: %s "
                     "(as root: apt-get install --no-install-recommends %s)", missing, missing);
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
            char full[4200];
            if ((rc = path_join(full, sizeof full, out_dir, f->path)) || (rc = atomic_open(&af, full))) break;
            sha256_init(&sh);
            open = 1;
            shard_bytes = shard_docs = 0;
        }
        char line[4096 + 512], hex[65];
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
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (!ours) rc = mhar_fail("%s: not written by 'mhar data corpus'; refusing to build a corpus over it", path);
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
    char m[8192];
    snprintf(m, sizeof m, "%s/manifest.json", out);
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
    char sub[8192];
    if (clean_dir(out, 1)) return MHAR_ERR;
    snprintf(sub, sizeof sub, "%s/train", out);
    if (clean_dir(sub, 0)) return MHAR_ERR;
    snprintf(sub, sizeof sub, "%s/val", out);
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
        char path[8192];
        snprintf(path, sizeof path, "%s/manifest.json", o->out_dir);
        rc = atomic_write_file(path, buf, n + 1);
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
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", o->out_dir, f->path);
        rc = atomic_write_file(path, text, len);
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
