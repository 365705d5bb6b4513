// Source "python-stdlib": every *.py of a Python standard library (corpus.h
// says where it is looked for), walked in byte order, symbolic links and
// third-party package directories left out.
#include "sources.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "corpus.h"
#include "../util/dir.h"
#include "../util/file.h"

_Static_assert(MHAR_PATH_MAX >= PATH_MAX, "realpath() writes up to PATH_MAX bytes");

static int walk_py(Corpus *c, const char *root, const char *rel) {
    char dir[MHAR_PATH_MAX];
    if (rel[0]) { if (path_join(dir, sizeof dir, root, rel)) return MHAR_ERR; }
    else if (copy_str(dir, sizeof dir, root)) return MHAR_ERR;
    struct dirent **names;
    // Byte-order listing: the same walk (and first error) whatever order the
    // filesystem returns entries in and whatever the locale.
    int n = scandir(dir, &names, NULL, dirent_byte_order);
    if (n < 0) return mhar_fail("%s: cannot open directory: %s", dir, strerror(errno));
    int rc = MHAR_OK;
    for (int i = 0; i < n && !rc; i++) {
        const char *name = names[i]->d_name;
        if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
        char sub[MHAR_PATH_MAX], full[MHAR_PATH_MAX];
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
        } else if (S_ISREG(st.st_mode) && has_suffix(name, ".py")) {
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
        char cand[MHAR_PATH_MAX];
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
        char exe[MHAR_PATH_MAX], real[MHAR_PATH_MAX];
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
    char root[MHAR_PATH_MAX];
    const char *pr = getenv("PYENV_ROOT"), *home = getenv("HOME");
    int len = pr && *pr ? snprintf(root, sizeof root, "%s/versions/*/lib", pr)
                        : snprintf(root, sizeof root, "%s/.pyenv/versions/*/lib", home ? home : "/root");
    glob_t g;
    int found = 0, best = -1;
    if (len > 0 && (size_t)len < sizeof root && glob(root, 0, NULL, &g) == 0) { // a cut pattern: no pyenv
        for (size_t i = 0; i < g.gl_pathc; i++) { // sorted: ties go to the later version name
            char cand[MHAR_PATH_MAX];
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
    char real[MHAR_PATH_MAX];
    if (!realpath(s->root, real)) return;
    const char *base = strrchr(real, '/');
    base = base ? base + 1 : real;
    int minor, end = 0;
    if (sscanf(base, "python3.%d%n", &minor, &end) != 1 || base[end]) return;
    char pkg[64];
    snprintf(pkg, sizeof pkg, "libpython3.%d-stdlib", minor);
    if (!strncmp(real, "/usr/lib/", 9)) source_add_package(s, pkg);
    if (s->n_pkg) return;
    char ph[MHAR_PATH_MAX], *text;
    size_t n;
    int len = snprintf(ph, sizeof ph, "%.*s/include/python3.%d/patchlevel.h",
                       (int)(base - real > 5 ? base - real - 5 : 0), real, minor); // strip "/lib/"
    if (len < 0 || (size_t)len >= sizeof ph || read_file(ph, &text, &n)) return; // the version is optional
    const char *v = strstr(text, "#define PY_VERSION");
    if (v && (v = strchr(v, '"'))) {
        size_t k = strcspn(v + 1, "\"");
        if (k < sizeof s->upstream) { memcpy(s->upstream, v + 1, k); s->upstream[k] = '\0'; }
    }
    free(text);
}

int load_python(Corpus *c, const char *stdlib_dir) {
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
    source_progress(c, SRC_PYTHON);
    return MHAR_OK;
}
