#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_help(const Flag *flags, int n, const char *usage) {
    printf("%s\n\nOptions:\n", usage);
    for (int i = 0; i < n; i++) {
        const char *arg = flags[i].type == FLAG_BOOL ? "" : flags[i].type == FLAG_STR ? " S" : " N";
        char left[64];
        snprintf(left, sizeof left, "--%s%s", flags[i].name, arg);
        printf("  %-22s %s\n", left, flags[i].help);
    }
    printf("  %-22s %s\n", "--help", "show this help");
}

// strtoll/strtod skip leading white space and take a '+', and strtoull
// negates "-1" into 2^64 - 1: a strict number starts with a digit (or '-'
// and a digit for a signed integer; a float may also start with '.').
static int strict_start(const Flag *f, const char *v) {
    const char *d = v[0] == '-' && f->type != FLAG_U64 ? v + 1 : v;
    return isdigit((unsigned char)d[0]) || ((f->type == FLAG_FLOAT || f->type == FLAG_DOUBLE) && d[0] == '.');
}

static int set_value(Flag *f, const char *v) {
    if (f->type == FLAG_STR) { *(const char **)f->dst = v; return 0; }
    char *end;
    errno = 0;
    if (!strict_start(f, v)) goto bad;
    if (f->type == FLAG_U64) {
        unsigned long long u = strtoull(v, &end, 10);
        if (errno || *end) goto bad;
        *(uint64_t *)f->dst = u;
        return 0;
    }
    // The flag's range (lo == hi: none) within its type's.
    int real = f->type == FLAG_FLOAT || f->type == FLAG_DOUBLE;
    double lo = f->type == FLAG_INT ? INT_MIN : f->type == FLAG_LONG ? (double)LONG_MIN : f->type == FLAG_FLOAT ? -FLT_MAX : -DBL_MAX;
    double hi = f->type == FLAG_INT ? INT_MAX : f->type == FLAG_LONG ? (double)LONG_MAX : f->type == FLAG_FLOAT ? FLT_MAX : DBL_MAX;
    if (f->lo != f->hi) {
        lo = f->lo > lo ? f->lo : lo;
        hi = f->hi < hi ? f->hi : hi;
    }
    double x;
    long long i = 0;
    if (real) x = strtod(v, &end);
    else x = (double)(i = strtoll(v, &end, 10));
    if (errno || *end || !isfinite(x)) goto bad;
    if (x < lo || x > hi) {
        fprintf(stderr, "error: --%s %s is out of range [%.15g, %.15g]\n", f->name, v, lo, hi);
        return -1;
    }
    if (f->type == FLAG_INT) *(int *)f->dst = (int)i;
    else if (f->type == FLAG_LONG) *(long *)f->dst = (long)i;
    else if (f->type == FLAG_DOUBLE) *(double *)f->dst = x;
    else *(float *)f->dst = (float)x;
    return 0;
bad:
    fprintf(stderr, "error: --%s expects %s, got '%s'\n", f->name,
            f->type == FLAG_FLOAT || f->type == FLAG_DOUBLE ? "a number" : f->type == FLAG_U64 ? "a non-negative integer" : "an integer", v);
    return -1;
}

int args_parse(int argc, char **argv, Flag *flags, int n, const char *usage) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { print_help(flags, n, usage); return 1; }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "error: unexpected argument '%s' (see --help)\n", a);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        Flag *f = NULL;
        for (int k = 0; k < n; k++)
            if (strlen(flags[k].name) == len && !strncmp(flags[k].name, name, len)) f = &flags[k];
        if (!f) {
            fprintf(stderr, "error: unknown flag '%.*s' (see --help)\n", (int)len + 2, a);
            return -1;
        }
        f->given = 1;
        if (f->type == FLAG_BOOL) {
            if (eq) { fprintf(stderr, "error: --%s takes no value\n", f->name); return -1; }
            *(int *)f->dst = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) { fprintf(stderr, "error: --%s needs a value\n", f->name); return -1; }
        if (set_value(f, v)) return -1;
    }
    return 0;
}

const Flag *args_flag(const Flag *flags, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(flags[i].name, name)) return &flags[i];
    return NULL;
}
