// mhar probe on a trained run: load the model, forward held-out batches and,
// at every routing site after the first (one source: no decision), measure
// the trained query against random queries of matched norm (probe.h):
//   single-head routing (H = 1): the width disagreement of SPEC §4 over S
//     slices, the null with queries of the site's |q|;
//   full-depth routing with H heads: each head's deviation from the head
//     consensus, the null with each head slice at the trained head's norm.
// The schemes it reads are those of the registry that route over full
// depth (residual_is_routed, no blocks).
#pragma once
#include "../util/common.h"
#include <stdint.h>
#include <stdio.h>
#include <cjson/cJSON.h>

typedef struct {
    const char *run;           // the run directory (config.json, model.safetensors)
    const char *data;          // held-out tokens; NULL: the run's validation file (checkpoint/state.json)
    int slices;                // S of the width disagreement (divides d)
    int draws;                 // random queries per site
    int batches;               // at most this many batches, read in order
    int batch, seq;            // 0: the run's (checkpoint/state.json), else 8 x 256
    uint64_t seed;             // of the random queries
    FILE *progress;            // "\rbatch b/n" after each batch; NULL: quiet
} ProbeOptions;

typedef struct {
    char site[48];             // layers.{i}.{attn,mlp} or final
    int n_sources;
    double trained, null, excess;   // nats, mean over tokens (and slices / heads)
    double *per_head;          // [heads], head deviation only (else NULL)
} ProbeSite;

typedef struct {
    int width;                 // 1: width disagreement, 0: head deviation
    char run[MHAR_PATH_MAX], mode[16], data[MHAR_PATH_MAX];
    int heads, slices, draws, d;
    double tokens;             // held-out tokens read
    ProbeSite *sites;          // the 2L sites after the first
    int n_sites;
    double trained, null, null_sd, excess;   // overall: mean over sites (null_sd over draws, NAN for one)
    double route_check;        // largest |probe weight - model weight|
} ProbeResult;

// The names of the schemes the probe reads (registry order), joined by sep
// into buf: "attnres or mhar".
const char *probe_scheme_names(char *buf, size_t cap, const char *sep);
// Run the probe; errors name the run, the file or the option.
int probe_run(const ProbeOptions *o, ProbeResult *r);
void probe_result_free(ProbeResult *r);
// The table mhar probe prints (sites, overall, null spread).
void probe_result_print(FILE *f, const ProbeResult *r);
// The result as probe.json's object.
cJSON *probe_result_json(const ProbeResult *r);
// The JSON on one line into *line (malloc'd; NULL when out of memory),
// written with a final newline to `json`, or to RUN/probe.json when json is
// NULL, or nowhere when it is "none"; path[cap] receives where ("": nowhere).
int probe_result_save(const ProbeResult *r, const char *json, char **line, char *path, size_t cap);
// Site s of a model with L layers: layers.{s/2}.attn|mlp, final for s = 2L.
void probe_site_name(int s, int L, char *out, size_t cap);
