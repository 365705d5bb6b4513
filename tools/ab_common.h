// Shared by the A/B programs (tools/route_ab.c, tools/source_ab.c): a
// monotonic clock, medians, and the inputs' uniform values.
#pragma once
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The median of v [n] (sorts it).
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static float uniform(void) { return rand() / (float)RAND_MAX - 0.5f; }
