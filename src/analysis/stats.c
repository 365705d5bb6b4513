#include "stats.h"

#include <math.h>

double stats_mean(const double *x, int n) {
    if (n <= 0) return NAN;
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s / n;
}

// Two passes (mean first, then squared deviations): the seeds' losses agree
// to several digits, and the one-pass formula would cancel them away.
double stats_sd(const double *x, int n) {
    if (n < 2) return NAN;
    double m = stats_mean(x, n), ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (n - 1));
}

double stats_tail_mean(const double *x, int n, int k, int *used) {
    int u = n < k ? n : k;
    if (used) *used = u;
    return stats_mean(x + (n - u), u);
}

double stats_tail_slope(const double *x, const double *y, int n, int k) {
    int u = n < k ? n : k;
    if (u < 2) return NAN;
    x += n - u, y += n - u;
    double mx = stats_mean(x, u), my = stats_mean(y, u), sxy = 0, sxx = 0;
    for (int i = 0; i < u; i++) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
    return sxx > 0 ? sxy / sxx : NAN;
}

int stats_paired_diff(const double *a, const uint64_t *key_a, int na, const double *b,
                      const uint64_t *key_b, int nb, double *diff) {
    int n = 0;
    for (int i = 0; i < na; i++) {
        int dup = 0;
        for (int k = 0; k < i && !dup; k++) dup = key_a[k] == key_a[i];
        if (dup) continue;
        for (int j = 0; j < nb; j++)
            if (key_b[j] == key_a[i]) { diff[n++] = a[i] - b[j]; break; }
    }
    return n;
}
