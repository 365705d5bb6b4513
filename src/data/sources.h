// The text sources of `mhar data corpus` (corpus.h says what each reads) and
// the document collection they fill. Internal to src/data: each sources_*.c
// loads one source into a Corpus; corpus.c filters, splits and writes it.
#pragma once
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>

#include "../util/common.h"

enum { KIND_CODE, KIND_DOCS, KIND_PROSE, N_KIND };
enum { SRC_PYTHON, SRC_LINUX_CODE, SRC_LINUX_DOCS, SRC_BIBLE, SRC_AUSTEN, SRC_GCIDE, N_SRC };

typedef struct { char name[96]; char version[96]; } Package;

// One source: where it came from and what happened to its candidates.
typedef struct {
    const char *name;
    int kind;
    int used;
    char root[MHAR_PATH_MAX];
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

// ---- the collection (documents.c)
void doc_free(Doc *d);
int docs_push(Corpus *c, Doc d);
// Why a document is refused, or REJECT_NONE.
enum { REJECT_NONE, REJECT_BINARY, REJECT_EMPTY, REJECT_SEPARATOR };
int doc_reject(const char *data, size_t len);
void count_reject(Source *s, int why);
// Take ownership of data (malloc'd); keep it as a document of source src, or
// count why not. origin is copied.
int add_doc(Corpus *c, int src, const char *origin, char *data, size_t len);
// A copy of data[0..len) as a new document.
int add_copy(Corpus *c, int src, const char *origin, const char *data, size_t len);
size_t source_bytes(const Corpus *c, int src);
size_t source_docs(const Corpus *c, int src);
// "name: N documents, MB (root)" on stderr when c->verbose.
void source_progress(const Corpus *c, int src);
// Record the installed Debian package name (with its version) as an origin
// of s; a package that is not installed is left out.
void source_add_package(Source *s, const char *name);
// scandir order by bytes: the same walk whatever the filesystem and locale.
int dirent_byte_order(const struct dirent **a, const struct dirent **b);
int has_suffix(const char *s, const char *suffix);

// ---- the loaders (sources_*.c): MHAR_OK / MHAR_ERR
int load_python(Corpus *c, const char *stdlib_dir);   // stdlib_dir NULL: search
int load_linux(Corpus *c, size_t budget);             // budget: bytes of kernel text kept
int load_bible(Corpus *c);
int load_austen(Corpus *c);
int load_gcide(Corpus *c);

// What the full corpus reads, for the package check.
int linux_find_tarball(char *out, size_t cap);        // 1 if found
#define GCIDE_DICT "/usr/share/dictd/gcide.dict.dz"
#define GCIDE_INDEX "/usr/share/dictd/gcide.index"
