// The depth-residual interface (SPEC §2). The layer code calls read before a
// sublayer, writes the sublayer output o_s into sources[s+1], calls write,
// and at the end calls read with s = 2L for the final hidden state. Backward
// mirrors it in reverse. Each scheme lives in its own file and the layer
// code never knows which one runs.
#pragma once
#include <stddef.h>
#include "../model/config.h"
#include "../model/params.h"
#include "../util/common.h"

typedef struct Residual Residual;

typedef struct {
    const char *name;   // attnres_mode value
    // Declare the scheme's parameters (SPEC §3 names) in the table.
    int (*add_params)(ParamTable *t, const Config *c);
    // Initialise the scheme's INIT_CUSTOM parameters (hc, dwa_alpha, ...).
    void (*init_params)(const ParamTable *t, const Config *c, float *params, Rng *rng);
    // Floats of activation memory the scheme needs for n_tok tokens.
    size_t (*act_floats)(const Config *c, int n_tok);
    // Called once after the arena is carved: look up parameters, set views.
    int (*bind)(Residual *r);
    // Forward. read: x_s -> inputs[s] (s = 2L is the final read h).
    void (*read)(Residual *r, int s);
    // write: o_s has just been stored in sources[s+1].
    void (*write)(Residual *r, int s);
    // Backward. read_backward: gradient dx of inputs[s] -> accumulate into
    // dsources[0..s] and the scheme's parameter grads.
    void (*read_backward)(Residual *r, int s, const float *dx);
    // write_backward: before the sublayer backward consumes dsources[s+1].
    void (*write_backward)(Residual *r, int s);
    // Set when read_backward(2L), the first backward call, writes every
    // dsources row instead of adding to it: the model then skips zeroing them.
    int sets_source_grads;
    // Routing schemes only (NULL otherwise): the softmax weights the last
    // forward pass used at site s, [n_src, n_tok, H], and their count.
    const float *(*route_weights)(const Residual *r, int s, int *n_src);
} ResidualScheme;

struct Residual {
    const ResidualScheme *scheme;
    const Config *cfg;
    int n_tok;               // tokens in the batch (B·T)
    float **sources;         // [2L+1] rows of [n_tok, d]: row 0 = embedding, row s+1 = o_s
    float **dsources;        // their gradients, zeroed before backward (see sets_source_grads)
    float **inputs;          // [2L+1] rows: x_s, and row 2L = h (final read)
    const ParamTable *table;
    float *params, *grads;
    float *acts;             // the scheme's slice of the activation arena
    float *scratch;          // routing scratch, forward and backward (route_scratch_floats)
    size_t scratch_floats;
    void *priv;              // the scheme's bound state (param offsets ...)
};

// Look up a scheme by attnres_mode; NULL if unknown.
const ResidualScheme *residual_find(const char *mode);
// Offset of a parameter in the table, or MHAR_ERR via mhar_fail if missing.
int residual_param(const Residual *r, const char *name, size_t *offset);

// Routing sites (attnres, mhar, block): site s < 2L is sublayer s, s = 2L the
// final read. Declares model.layers.{i}.{attn,mlp}_res_{proj,norm}.weight
// (q [1, d] init 0, g [d] init 1) and, with_final, model.final_res_*.
int residual_add_route_sites(ParamTable *t, const Config *c, int with_final);
// Offsets of site s's query and key-norm weight.
int residual_route_site(const Residual *r, int s, size_t *q_off, size_t *g_off);

// Blocks of block routing and delta_mh (SPEC §2.4, §2.7): ceil(L/N) layers
// each, so there may be fewer than N (the last one shorter).
int residual_block_layers(const Config *c);
int residual_n_blocks(const Config *c);

extern const ResidualScheme residual_baseline;
extern const ResidualScheme residual_hc, residual_denseformer;
extern const ResidualScheme residual_attnres, residual_mhar, residual_block;
extern const ResidualScheme residual_delta_mh;
