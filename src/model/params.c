#include "params.h"

#include <stdlib.h>
#include <string.h>

#include "../util/common.h"

// 2^36 floats (256 GiB) is far beyond any model mhar trains; a larger total
// means a corrupt shape, and refusing it keeps size arithmetic overflow-free.
#define PTABLE_MAX_FLOATS ((size_t)1 << 36)
#define PTABLE_ALIGN 16 // floats: 64 bytes, one cache line / AVX-512 vector

// Names go verbatim into safetensors JSON headers, so refuse anything that
// would need escaping there.
static int name_ok(const char *name) {
    size_t len = strlen(name);
    if (len == 0) return mhar_fail("parameter table: empty tensor name");
    if (len >= sizeof(((ParamInfo *)0)->name))
        return mhar_fail("parameter table: tensor name '%.40s...' is %zu characters, limit %zu",
                         name, len, sizeof(((ParamInfo *)0)->name) - 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\')
            return mhar_fail("parameter table: tensor name '%s' contains a control, quote or "
                             "backslash character", name);
    }
    return MHAR_OK;
}

// numel of a shape, refusing non-positive dimensions and absurd products.
static int shape_numel(const char *name, int ndim, const int *shape, size_t *numel) {
    if (ndim < 0 || ndim > 4)
        return mhar_fail("parameter table: tensor '%s': ndim %d, expected 0..4", name, ndim);
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1)
            return mhar_fail("parameter table: tensor '%s': dimension %d is %d, expected >= 1",
                             name, i, shape[i]);
        if ((size_t)shape[i] > PTABLE_MAX_FLOATS / n)
            return mhar_fail("parameter table: tensor '%s': more than 2^36 elements", name);
        n *= (size_t)shape[i];
    }
    *numel = n;
    return MHAR_OK;
}

static int grow(ParamTable *t) {
    if (t->n < t->cap) return MHAR_OK;
    int cap = t->cap ? t->cap * 2 : 64;
    if (cap > (1 << 24)) return mhar_fail("parameter table: more than 2^24 tensors");
    ParamInfo *p = realloc(t->p, (size_t)cap * sizeof *p);
    if (!p) return mhar_fail("parameter table: out of memory growing to %d tensors", cap);
    t->p = p;
    t->cap = cap;
    return MHAR_OK;
}

static int add_aligned(ParamTable *t, const char *name, int ndim, const int *shape, int init, ParamClass cls,
                       size_t align) {
    size_t numel = 0;
    if (!name) return mhar_fail("parameter table: NULL tensor name");
    if (name_ok(name) || shape_numel(name, ndim, shape, &numel)) return MHAR_ERR;
    if (init < INIT_NORMAL || init > INIT_CUSTOM)
        return mhar_fail("parameter table: tensor '%s': unknown init kind %d", name, init);
    if ((unsigned)cls >= PARAM_CLASSES)
        return mhar_fail("parameter table: tensor '%s': unknown class %d", name, (int)cls);
    // A duplicate would silently alias two parameters in every checkpoint.
    if (ptable_find(t, name) >= 0)
        return mhar_fail("parameter table: tensor '%s' added twice", name);
    size_t offset = (t->total + align - 1) / align * align;
    if (numel > PTABLE_MAX_FLOATS - offset)
        return mhar_fail("parameter table: tensor '%s' brings the total past 2^36 floats", name);
    if (grow(t)) return MHAR_ERR;
    ParamInfo *pi = &t->p[t->n];
    memset(pi, 0, sizeof *pi);
    strcpy(pi->name, name); // length checked by name_ok
    pi->ndim = ndim;
    for (int i = 0; i < ndim; i++) pi->shape[i] = shape[i];
    pi->offset = offset;
    pi->numel = numel;
    pi->init = init;
    pi->cls = cls;
    t->total = offset + numel;
    return t->n++;
}

int ptable_add(ParamTable *t, const char *name, int ndim, const int *shape, int init, ParamClass cls) {
    return add_aligned(t, name, ndim, shape, init, cls, PTABLE_ALIGN);
}

int ptable_add_next(ParamTable *t, const char *name, int ndim, const int *shape, int init, ParamClass cls) {
    return add_aligned(t, name, ndim, shape, init, cls, 1);
}

int ptable_find(const ParamTable *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->p[i].name, name) == 0) return i;
    return -1;
}

void ptable_free(ParamTable *t) {
    free(t->p);
    t->p = NULL;
    t->n = t->cap = 0;
    t->total = 0;
}

static const char *const class_names[PARAM_CLASSES] = {"matrix", "embed", "norm", "route"};

const char *param_class_name(ParamClass cls) { return (unsigned)cls < PARAM_CLASSES ? class_names[cls] : "?"; }

int param_classes_parse(const char *list, const char *origin, unsigned *set) {
    *set = 0;
    if (!strcmp(list, "all")) {
        *set = 1u << PARAM_EMBED | 1u << PARAM_NORM | 1u << PARAM_ROUTE;
        return MHAR_OK;
    }
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int c = PARAM_EMBED; c < PARAM_CLASSES; c++)
            if (strlen(class_names[c]) == len && !strncmp(p, class_names[c], len)) found = c;
        if (found < 0)
            return mhar_fail("%s: '%.*s' is not a parameter class (embed, norm, route, or all)", origin, (int)len, p);
        *set |= 1u << found;
        p += len + (p[len] == ',');
    }
    return MHAR_OK;
}
