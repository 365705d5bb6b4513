// What the routing learned to read, measured on evaluation batches: per
// routing site and head, the mean entropy of the weights over the sources and
// the mean weight on the embedding (source 0) and on the most recent source.
#pragma once
#include <stdio.h>
#include "residual.h"

typedef struct {
    int n_sites, H;
    int *n_src;        // [n_sites]
    double *entropy;   // [n_sites, H] sums over tokens (divide by tokens)
    double *w_first, *w_last;
    double *gate;      // [n_sites] each site's gate (scheme->route_gate), or NULL
    const char *source0;
    double tokens;
} RouteStats;

// NULL-free zeroed stats for the scheme of r (n_sites 0 if it does not route).
int route_stats_init(RouteStats *st, const Residual *r);
// Add the weights of the last forward pass.
void route_stats_add(RouteStats *st, const Residual *r);
// One JSON line: {"step": S, "sites": [{"site": "layers.0.attn", "n_sources":
// N, "entropy": [H], "w_emb": [H], "w_last": [H]}, ...]}: w_<scheme's
// source0> for the weight on source 0, and "res_alpha": a for a gated
// scheme (delta_mh, which also has no "final" site).
void route_stats_write(const RouteStats *st, FILE *f, long step, int n_layers);
void route_stats_free(RouteStats *st);
