// args_parse (every command's flags) on an argument vector cut from the input
// at NUL bytes. The flag table has every type, with and without a range.
// Properties: it returns -1, 0 or 1; on success every number given is in its
// range (or its type's) and finite, every numeric value was written strictly
// (an optional '-', not for unsigned flags, then digits for integers; no
// leading space or '+' for any number), and an integer is stored exactly.
#include <ctype.h>
#include <math.h>

#include "../src/cli/args.h"
#include "fuzz.h"

#define MAX_ARGS 32

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    // args_parse prints help to stdout and errors to stderr: silence both
    // (sanitizer reports are written to file descriptor 2 directly and stay
    // visible), report properties on a copy of the real stderr.
    fuzz_report_to = fdopen(dup(2), "w");
    FILE *null = fopen("/dev/null", "w");
    if (!fuzz_report_to || !null) abort();
    stdout = null;
    stderr = null;
    return 0;
}

// The value string args_parse used for flag k, found by the same grammar
// ("--name=value" or "--name value", a value-taking flag consumes the next
// argument whatever it is); the last occurrence wins.
static const char *value_of(int argc, char **argv, const Flag *flags, int n, int k) {
    const char *v = NULL;
    for (int i = 0; i < argc; i++) {
        const char *name = argv[i] + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int f = -1;
        for (int j = 0; j < n; j++)
            if (strlen(flags[j].name) == len && !strncmp(flags[j].name, name, len)) f = j;
        if (f < 0 || flags[f].type == FLAG_BOOL) continue;
        const char *val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (f == k) v = val;
    }
    return v;
}

static int strict_integer(const char *v, int sign_ok) {
    if (sign_ok && *v == '-') v++;
    if (!*v) return 0;
    for (; *v; v++)
        if (!isdigit((unsigned char)*v)) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // argv: the input split at NUL bytes, each piece its own allocation.
    char *argv[MAX_ARGS];
    int argc = 0;
    for (size_t at = 0; at <= size && argc < MAX_ARGS;) {
        const uint8_t *end = memchr(data + at, 0, size - at);
        size_t len = end ? (size_t)(end - (data + at)) : size - at;
        argv[argc] = malloc(len + 1);
        if (!argv[argc]) abort();
        memcpy(argv[argc], data + at, len);
        argv[argc++][len] = '\0';
        at += len + 1;
        if (!end) break;
    }
    int i_r = 0, i_u = 0, bool_v = 0;
    long l_r = 0, l_u = 0;
    uint64_t u = 0;
    float f_r = 0, f_u = 0;
    const char *s = NULL;
    Flag flags[] = {
        {"steps", FLAG_LONG, &l_r, "ranged long", 1, 1e12, 0},
        {"batch", FLAG_INT, &i_r, "ranged int", 1, 1 << 20, 0},
        {"n", FLAG_INT, &i_u, "int, no range", 0, 0, 0},
        {"count", FLAG_LONG, &l_u, "long, no range", 0, 0, 0},
        {"seed", FLAG_U64, &u, "u64", 0, 0, 0},
        {"lr", FLAG_FLOAT, &f_r, "ranged float", 1e-12, 10, 0},
        {"x", FLAG_FLOAT, &f_u, "float, no range", 0, 0, 0},
        {"out", FLAG_STR, &s, "string", 0, 0, 0},
        {"resume", FLAG_BOOL, &bool_v, "bool", 0, 0, 0},
    };
    int n = sizeof flags / sizeof flags[0];
    int rc = args_parse(argc, argv, flags, n, "usage: fuzz");
    FUZZ_ASSERT(rc == -1 || rc == 0 || rc == 1, "rc %d", rc);
    if (rc == 0) {
        FUZZ_ASSERT((l_r >= 1 && l_r <= 1000000000000L) || !flags[0].given, "--steps %ld", l_r);
        FUZZ_ASSERT((i_r >= 1 && i_r <= (1 << 20)) || !flags[1].given, "--batch %d", i_r);
        FUZZ_ASSERT((f_r >= 1e-12f && f_r <= 10) || !flags[5].given, "--lr %g", (double)f_r);
        FUZZ_ASSERT(isfinite(f_u), "--x %g", (double)f_u);
        FUZZ_ASSERT(bool_v == 0 || bool_v == 1, "--resume %d", bool_v);
        for (int k = 0; k < n; k++) {
            if (!flags[k].given || flags[k].type == FLAG_STR || flags[k].type == FLAG_BOOL) continue;
            const char *v = value_of(argc, argv, flags, n, k);
            FUZZ_ASSERT(v != NULL, "--%s given without a value", flags[k].name);
            if (flags[k].type == FLAG_FLOAT)
                FUZZ_ASSERT(*v && !isspace((unsigned char)*v) && *v != '+', "--%s '%s' accepted", flags[k].name, v);
            else
                FUZZ_ASSERT(strict_integer(v, flags[k].type != FLAG_U64), "--%s '%s' accepted", flags[k].name, v);
            // An integer is stored exactly as written (no wrap, no rounding).
            if (flags[k].type == FLAG_INT || flags[k].type == FLAG_LONG) {
                long long want = strtoll(v, NULL, 10);
                long long got = flags[k].type == FLAG_INT ? *(int *)flags[k].dst : *(long *)flags[k].dst;
                FUZZ_ASSERT(got == want, "--%s '%s' stored as %lld", flags[k].name, v, got);
            }
        }
    }
    for (int k = 0; k < argc; k++) free(argv[k]);
    return 0;
}
