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

static int has_key(const uint64_t *keys, int n, uint64_t k) {
    for (int i = 0; i < n; i++)
        if (keys[i] == k) return 1;
    return 0;
}

int stats_common_keys(const uint64_t *const *keys, const int *n, int m, uint64_t *common) {
    int nc = 0;
    for (int i = 0; m > 0 && i < n[0]; i++) {
        int in_all = !has_key(common, nc, keys[0][i]);
        for (int j = 1; j < m && in_all; j++) in_all = has_key(keys[j], n[j], keys[0][i]);
        if (in_all) common[nc++] = keys[0][i];
    }
    return nc;
}

double stats_mean_on_keys(const double *x, const uint64_t *key, int n, const uint64_t *keep, int nkeep) {
    double s = 0;
    int used = 0;
    for (int i = 0; i < n; i++)
        if (has_key(keep, nkeep, key[i]) && !has_key(key, i, key[i])) s += x[i], used++;
    return used ? s / used : NAN;
}
