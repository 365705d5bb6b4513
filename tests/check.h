// Minimal assertion harness for the C tests. Each check prints
// "PASS name" or "FAIL name: reason"; tests/run.sh counts them.
// The process exits non-zero if any check failed.
#pragma once
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures = 0;

#define CHECK(cond, name, ...)                                   \
    do {                                                         \
        if (cond) {                                              \
            printf("PASS %s\n", name);                           \
        } else {                                                 \
            printf("FAIL %s: ", name);                           \
            printf(__VA_ARGS__);                                 \
            printf("\n");                                        \
            check_failures++;                                    \
        }                                                        \
        fflush(stdout);                                          \
    } while (0)

// Relative error of a float array against a double reference, measured as
// max|a-ref| / max(max|ref|, tiny): one figure per tensor, scale-aware.
static inline double rel_err(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]);
        if (e > num || isnan(e)) num = isnan(e) ? INFINITY : e;
        if (fabs(ref[i]) > den) den = fabs(ref[i]);
    }
    return num / (den > 1e-30 ? den : 1e-30);
}

#define CHECK_EXIT() return check_failures ? 1 : 0
