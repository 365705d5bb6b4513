#include "median.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y); // NaNs sort last, a consistent order
    return (x > y) - (x < y);
}

double median(double *v, size_t n) {
    if (n == 0) return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Spread spread(const double *v, size_t n) {
    Spread s = {NAN, NAN, NAN};
    double *c = n ? malloc(n * sizeof *c) : NULL;
    if (!c) return s;
    memcpy(c, v, n * sizeof *c);
    s.median = median(c, n);
    size_t last = n;
    while (last > 0 && isnan(c[last - 1])) last--;  // NaNs sorted last
    if (last) s.min = c[0], s.max = c[last - 1];
    free(c);
    return s;
}
