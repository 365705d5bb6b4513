// The statistics a sweep report states (SPEC §4): the published metric, the
// mean of the last 11 validation evaluations of a run, and its mean, sample
// standard deviation and paired differences over seeds. Plain functions of
// arrays, so the tests can check them on hand-computed data.
#pragma once
#include <stdint.h>

#define STATS_TAIL_EVALS 11   // SPEC §4: the reported figure averages the last 11 evaluations

// Mean of x[0..n); NAN when n == 0.
double stats_mean(const double *x, int n);
// Sample standard deviation (divisor n - 1); NAN when n < 2.
double stats_sd(const double *x, int n);
// Mean of the last k of the n values, or of all n when n < k (the caller
// says so: *used receives how many were averaged). NAN when n == 0.
double stats_tail_mean(const double *x, int n, int k, int *used);
// Least-squares slope of y against x over the last k of the n points (all n
// when n < k): how fast a validation curve still falls inside the window the
// metric averages, i.e. whether it has flattened. NAN when fewer than 2
// points or all x equal.
double stats_tail_slope(const double *x, const double *y, int n, int k);
// Paired differences a - b by key (the seed: same seed, same init and data
// order). diff receives, in the order of a, one value for every key of a
// that b also has; returns their count. A key repeated on one side pairs
// only its first occurrence.
int stats_paired_diff(const double *a, const uint64_t *key_a, int na, const double *b,
                      const uint64_t *key_b, int nb, double *diff);
// The keys (seeds) that every one of the m key lists holds, in the order of
// the first list, each once; returns their count (at most n[0]). Comparing
// means over different seed sets mixes the seeds' own spread into the
// comparison, so "loss against H" is also stated on these common seeds.
int stats_common_keys(const uint64_t *const *keys, const int *n, int m, uint64_t *common);
// Mean of the x[i] whose key is one of keep[0..nkeep) (a key repeated in x
// counts once, its first occurrence); NAN when none is.
double stats_mean_on_keys(const double *x, const uint64_t *key, int n, const uint64_t *keep, int nkeep);
