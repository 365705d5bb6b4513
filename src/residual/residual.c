// The registry of residual schemes: attnres_mode -> implementation.
#include "residual.h"

#include <string.h>

static const ResidualScheme *const schemes[] = {
    &residual_baseline,
};

const ResidualScheme *residual_find(const char *mode) {
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strcmp(schemes[i]->name, mode) == 0) return schemes[i];
    return NULL;
}

int residual_param(const Residual *r, const char *name, size_t *offset) {
    int i = ptable_find(r->table, name);
    if (i < 0) return mhar_fail("residual scheme %s: parameter '%s' missing", r->scheme->name, name);
    *offset = r->table->p[i].offset;
    return MHAR_OK;
}
