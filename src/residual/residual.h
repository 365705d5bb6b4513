// The depth-residual interface (SPEC §2). The layer code calls read before a
// sublayer, writes the sublayer output o_s into sources[s+1], calls write,
// and at the end calls read with s = 2L for the final hidden state. Backward
// mirrors it in reverse. Each scheme lives in its own file and the layer
// code never knows which one runs.
#pragma once
#include <stddef.h>
#include "../model/config.h"
#include "../kernels/ops.h"
#include "../model/params.h"
#include "../util/common.h"

typedef struct Residual Residual;

// What a scheme takes from the config: routing heads H and blocks N.
typedef enum {
    HEADS_NONE,   // no routing: attnres_num_heads must be 1
    HEADS_ONE,    // single-head routing (attnres): exactly 1
    HEADS_ANY,    // H >= 1 dividing the width
} HeadsRule;

// The memory traffic of a scheme's depth kernels in one training step (the
// forward and backward of one micro-batch of n_tok tokens, fp32): what its
// read, write and their backwards must move, derived from how those kernels
// access memory. Compulsory traffic only: each pass streams its rows once
// and nothing is assumed to stay in cache from one pass to the next (true
// where a [n_tok, d] row is much larger than the last-level cache).
//   read   bytes of the rows a pass only reads: 4 per float;
//   write  bytes of the rows a pass writes or updates: 8 per float, since a
//          line is read before it is written (by the update itself, or by
//          the write-allocate of a plain store) and then written back.
// mhar bench divides them by the measured bandwidths (read by stream_sum's,
// write by vec_scale_acc's, counted the same way) for a time floor.
typedef struct { double read, write; } RouteBytes;

typedef struct {
    const char *name;   // attnres_mode value
    const char *summary;  // one line for --help and error messages
    HeadsRule heads;
    int default_heads;    // H when none is given (1 unless HEADS_ANY)
    int needs_blocks;     // attnres_num_blocks N >= 1 required (else it must be 0)
    int from_scratch;     // trains from a fresh init (delta_mh is made by convert)
    // Declare the scheme's parameters (SPEC §3 names) in the table, each of
    // class PARAM_ROUTE (what --wd-exclude route leaves undecayed).
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
    // dsources[0..s] and the scheme's parameter grads (full routing instead
    // keeps dx and gathers each source's gradient in write_backward: mhar.c).
    void (*read_backward)(Residual *r, int s, const float *dx);
    // Where the model writes that dx (NULL: a buffer of the model's own).
    // Full routing keeps every site's dx until its sources have gathered:
    // written there in the first place, it needs no copy (~5 ms of micro's
    // step). The row may be the sublayer's dout, which the sublayer reads
    // only before it writes dx.
    float *(*read_grad)(Residual *r, int s);
    // write_backward: before the sublayer backward consumes dsources[s+1];
    // the rows it does not hand to a sublayer are the scheme's until then.
    void (*write_backward)(Residual *r, int s);
    // Where the gradient of source s is when the model reads it (after
    // write_backward(s-1); source 0 after the last read_backward), NULL:
    // dsources row s. A scheme that names rows of its own (block routing:
    // every partial sum of a block shares its gradient row with o_s) copies
    // nothing, and the model carves no dsources (NULL).
    float *(*source_grad)(Residual *r, int s);
    // Set when the scheme writes every dsources row before anything adds to
    // it (baseline in read_backward; full routing in write_backward, row 0
    // in the last read_backward): the model then skips zeroing them.
    int sets_source_grads;
    // Routing schemes only (NULL otherwise): the softmax weights the last
    // forward pass used at site s, [n_src, n_tok, H], and their count; for
    // s = 2L the final read, NULL where the scheme has none.
    const float *(*route_weights)(const Residual *r, int s, int *n_src);
    // What source 0 of a routed read is, named in the statistics (w_<name>):
    // NULL means "emb", the embedding.
    const char *source0;
    // Gated routing only (NULL otherwise): site s's scalar gate.
    float (*route_gate)(const Residual *r, int s);
    // Free what bind allocated (r->priv); NULL when bind allocates nothing.
    void (*release)(Residual *r);
    // Its kernels' memory traffic per training step (RouteBytes above; the
    // model's zeroing of dsources is added by residual_route_bytes). NULL:
    // not modelled.
    RouteBytes (*route_bytes)(const Config *c, int n_tok);
} ResidualScheme;

struct Residual {
    const ResidualScheme *scheme;
    const Config *cfg;
    OpsContext *ctx;         // the backend every op runs on
    int n_tok;               // tokens in the batch (B·T)
    // Three buffers of 2L+1 rows of [n_tok, d], row s at s·row_floats:
    float *sources;          // row 0 = embedding, row s+1 = o_s
    float *dsources;         // their gradients, zeroed before backward (see sets_source_grads; NULL: source_grad)
    float *inputs;           // x_s, and row 2L = h (final read)
    size_t row_floats;
    const ParamTable *table;
    float *params, *grads;
    float *acts;             // the scheme's slice of the activation arena
    float *scratch;          // routing scratch, forward and backward (route_scratch_floats)
    size_t scratch_floats;
    void *priv;              // the scheme's bound state (param offsets ...)
};

static inline float *residual_source(const Residual *r, int s) { return r->sources + (size_t)s * r->row_floats; }
static inline float *residual_dsource(const Residual *r, int s) { return r->dsources + (size_t)s * r->row_floats; }
static inline float *residual_input(const Residual *r, int s) { return r->inputs + (size_t)s * r->row_floats; }

// The registry: every scheme, in a fixed order (baseline first). Every list
// of schemes, default and check elsewhere derives from it.
int residual_count(void);
const ResidualScheme *residual_at(int i);
// Look up a scheme by attnres_mode; NULL if unknown.
const ResidualScheme *residual_find(const char *mode);
// "baseline, hc, ..." into buf: the names of the schemes for which keep(s)
// is nonzero (every scheme when keep is NULL), joined by sep.
const char *residual_names(char *buf, size_t cap, const char *sep, int (*keep)(const ResidualScheme *));
// True for a scheme with routing sites (route_weights).
int residual_is_routed(const ResidualScheme *s);
// Check H and N against the scheme's rules for a model of width d and L
// layers; on failure mhar_fail names `origin` and the field.
int residual_check_shape(const ResidualScheme *s, int heads, int blocks, int d, int L, const char *origin);
// The traffic of scheme s per training step of n_tok tokens into *out,
// including the model's zeroing of the 2L+1 dsources rows when the scheme
// does not set them itself: 1, or 0 (*out zeroed) when s does not model it.
int residual_route_bytes(const ResidualScheme *s, const Config *c, int n_tok, RouteBytes *out);
// Add a pass that reads `read` floats and writes (or updates) `write` floats.
void route_bytes_add(RouteBytes *b, double read, double write);
// Add one routing site over n_src sources, forward and backward
// (route_forward, then route_backward or route_backward_set).
void route_bytes_site(RouteBytes *b, int n_src, int n_tok, int d, int H);
// Its two halves: route_forward's traffic, and route_backward's.
void route_bytes_forward(RouteBytes *b, int n_src, int n_tok, int d, int H);
void route_bytes_backward(RouteBytes *b, int n_src, int n_tok, int d, int H);

// Release the scheme's bound state (scheme->release, if any).
void residual_release(Residual *r);
// The release of a scheme whose bind made r->priv with one mhar_alloc.
void residual_free_priv(Residual *r);
// Offset of a parameter in the table, or MHAR_ERR via mhar_fail if missing.
int residual_param(const Residual *r, const char *name, size_t *offset);

// Routing sites (attnres, mhar, block): site s < 2L is sublayer s, s = 2L the
// final read. Declares model.layers.{i}.{attn,mlp}_res_{proj,norm}.weight
// (q [1, d] init 0, g [d] init 1; class PARAM_ROUTE) and, with_final,
// model.final_res_*. With route_query_init normal, q is INIT_CUSTOM instead.
int residual_add_route_sites(ParamTable *t, const Config *c, int with_final);
// The INIT_* of a routing query under c's route_query_init.
int residual_route_query_init(const Config *c);
// init_params of the routing schemes: N(0, 0.02) into every INIT_CUSTOM
// routing tensor (the queries) when route_query_init is normal.
void residual_init_route_queries(const ParamTable *t, const Config *c, float *params, Rng *rng);
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
