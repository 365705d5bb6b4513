// A run's routing.jsonl (written by mhar train at every evaluation for the
// schemes that save routing weights): per evaluation and routing site, the
// read's entropy per head, and for delta_mh the site's gate res_alpha. Read
// here as series over training: per site, the mean over heads of the
// entropy divided by ln n (1: a uniform read over the n sources; 0: one
// source), and res_alpha.
#pragma once

#define ROUTING_LOG_MAX_SITES 256

typedef struct {
    int n_records, n_sites;
    double *step;                   // [n_records]
    char (*site)[32];               // [n_sites] names ("layers.0.attn")
    int *n_sources;                 // [n_sites]
    double *entropy_norm;           // [n_records · n_sites]: NAN where n_sources < 2
    double *res_alpha;              // [n_records · n_sites], or NULL when the scheme has no gate
} RoutingLog;

// Load path into log. An error names the file, the line and the reason;
// every record must list the same sites as the first.
int routing_log_load(const char *path, RoutingLog *log);
void routing_log_free(RoutingLog *log);
