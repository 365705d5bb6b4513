// SPEC §2.1: the standard pre-norm residual. The stream after sublayer s-1
// is inputs[s] = inputs[s-1] + o_{s-1}; nothing else is stored.
#include "residual.h"
#include "../kernels/ops.h"

#include <string.h>

static int no_params(ParamTable *t, const Config *c) { (void)t; (void)c; return MHAR_OK; }
static size_t no_acts(const Config *c, int n_tok) { (void)c; (void)n_tok; return 0; }
static int no_bind(Residual *r) { (void)r; return MHAR_OK; }
static void no_write(Residual *r, int s) { (void)r; (void)s; }

static void baseline_read(Residual *r, int s) {
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
    if (s == 0) { vec_copy(r->ctx, residual_input(r, 0), residual_source(r, 0), n); return; }
    vec_add(r->ctx, residual_input(r, s), residual_input(r, s - 1), residual_source(r, s), n);
}

// x_s = x_{s-1} + o_{s-1}: the total gradient of x_{s-1}'s stream value,
// d o_{s-1} = dsources[s], equals dx_s(total) = dsources[s+1] + dx_s (for
// s = 2L the final h has no successor). Each row is written here before the
// sublayer backward that reads it, so the model need not zero them.
static void baseline_read_backward(Residual *r, int s, const float *dx) {
    size_t n = (size_t)r->n_tok * r->cfg->hidden_size;
    int last = 2 * r->cfg->num_hidden_layers;
    if (s == last) vec_copy(r->ctx, residual_dsource(r, s), dx, n);
    else vec_add(r->ctx, residual_dsource(r, s), residual_dsource(r, s + 1), dx, n);
}

// Traffic per step, in rows of n·d floats: read(0) copies one row, reads
// 1..2L add two rows into a third; backward, read_backward(2L) copies dx into
// its row and the others add two rows into a third:
//   read = 4·2·(1 + 4L)·n·d,   write = 8·2·(2L + 1)·n·d
static RouteBytes baseline_route_bytes(const Config *c, int n_tok) {
    const double row = (double)n_tok * c->hidden_size, L = c->num_hidden_layers;
    RouteBytes b = {0, 0};
    route_bytes_add(&b, (1 + 4 * L) * row, (2 * L + 1) * row);  // forward
    route_bytes_add(&b, (1 + 4 * L) * row, (2 * L + 1) * row);  // backward
    return b;
}

const ResidualScheme residual_baseline = {
    .name = "baseline",
    .summary = "the standard pre-norm residual stream",
    .heads = HEADS_NONE,
    .default_heads = 1,
    .needs_blocks = 0,
    .from_scratch = 1,
    .add_params = no_params,
    .init_params = NULL,
    .act_floats = no_acts,
    .bind = no_bind,
    .read = baseline_read,
    .write = no_write,
    .read_backward = baseline_read_backward,
    .write_backward = no_write,
    .sets_source_grads = 1,
    .route_bytes = baseline_route_bytes,
};
