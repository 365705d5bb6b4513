// mhar probe on a trained run (probe_run.h): the model, the held-out data,
// every site's sums over the batches, and the result as a table and JSON.
// The per-token measures are probe.c's.
#include "probe_run.h"

#include "../kernels/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/loader.h"
#include "data/tokens.h"
#include "io/atomic.h"
#include "model/model.h"
#include "probe.h"
#include "residual/residual.h"
#include "stats.h"
#include "util/common.h"
#include "../util/json.h"

typedef struct {
    int n_src;
    double *trained_head;      // [per] sums over tokens
    double *null_draw;         // [draws] sums over tokens
    float *rq;                 // [draws, d] the random queries of this site
} Site;

// What the probe takes from the run's checkpoint/state.json: the validation
// file and the batch shape. Read field by field (not through the trainer's
// full state loader), so the probe keeps working as that format grows.
typedef struct { char val[2048]; int batch, seq; } RunState;

typedef struct {
    Model m;
    TokenFile tf;
    Loader ld;
    RunState st;
    int have_state;
    const char *data;          // the held-out token file
    int width, per;            // width disagreement? measures per token (1 or H)
    int B, T, n_sites;
    long windows;              // batches to read
    Site *sites;               // [2L + 1]; site 0 (one source) is left out
    double *buf;               // [B·T, per] one measure per token (and head)
    double route_err;
} Probe;

void probe_site_name(int s, int L, char *out, size_t cap) {
    if (s == 2 * L) snprintf(out, cap, "final");
    else snprintf(out, cap, "layers.%d.%s", s / 2, s % 2 ? "mlp" : "attn");
}

// Lenient: a field that is missing or out of range is left unset (the
// caller then asks for --data or uses its defaults).
static int read_run_state(const char *run, RunState *st) {
    char path[MHAR_PATH_MAX];
    memset(st, 0, sizeof *st);
    if (path_join(path, sizeof path, run, "checkpoint/state.json") || access(path, F_OK) != 0) return 0;
    cJSON *j = json_load_or_null(path);
    if (!j) return 0;
    snprintf(st->val, sizeof st->val, "%s", json_string_or(j, "val", ""));
    double b = json_number_or(j, "batch", 0), t = json_number_or(j, "seq", 0);
    if (b >= 1 && b <= (1 << 20)) st->batch = (int)b;
    if (t >= 1 && t <= (1 << 20)) st->seq = (int)t;
    cJSON_Delete(j);
    return 1;
}

// The schemes the probe reads: routing over full depth, with weights to check.
static int probe_reads(const ResidualScheme *s) {
    return residual_is_routed(s) && !s->needs_blocks && s->route_weights != NULL;
}

const char *probe_scheme_names(char *buf, size_t cap, const char *sep) {
    return residual_names(buf, cap, sep, probe_reads);
}

static int load_model(Probe *p, const ProbeOptions *o) {
    if (model_load(&p->m, o->run)) {
        char why[512];
        snprintf(why, sizeof why, "%s", mhar_error());
        if (p->m.params) model_free(&p->m);
        memset(&p->m, 0, sizeof p->m);
        return mhar_fail("%s: cannot load the model: %s", o->run, why);
    }
    const ResidualScheme *s = p->m.scheme;
    if (!probe_reads(s)) {
        char names[256];
        return mhar_fail("%s: attnres_mode is '%s'; the probe reads full depth routing (%s) %s", o->run, s->name,
                         probe_scheme_names(names, sizeof names, " or "),
                         !s->route_weights ? "and this scheme does not route"
                         : s->from_scratch ? "and not yet block routing's summaries"
                                           : "and not yet a converted model's gated reads");
    }
    int H = p->m.cfg.attnres_num_heads;
    p->width = H == 1;
    p->per = p->width ? 1 : H;
    return MHAR_OK;
}

// The held-out tokens, the batch shape and how many batches to read.
static int open_data(Probe *p, const ProbeOptions *o) {
    const Config *c = &p->m.cfg;
    p->data = o->data;
    if (!p->data) {
        if (!p->have_state || !p->st.val[0])
            return mhar_fail("%s: no readable checkpoint/state.json naming the validation file; give --data", o->run);
        p->data = p->st.val;
    }
    if (tokens_load(p->data, &p->tf)) return MHAR_ERR;
    if (p->tf.vocab_size > c->vocab_size)
        return mhar_fail("%s: vocabulary %d is larger than the model's %d", p->data, p->tf.vocab_size, c->vocab_size);
    if (model_alloc_acts(&p->m, p->B, p->T) || loader_init(&p->ld, &p->tf, p->T, 0)) return MHAR_ERR;
    p->windows = p->ld.n_windows / p->B;
    if (p->windows > o->batches) p->windows = o->batches;
    if (p->windows < 1) return mhar_fail("%s: fewer than one batch of %d x %d tokens", p->data, p->B, p->T + 1);
    return MHAR_OK;
}

// Every site's sums and random queries (site 0 too: it keeps the RNG's draws
// in the same order whatever the site count).
static int init_sites(Probe *p, const ProbeOptions *o) {
    int d = p->m.cfg.hidden_size;
    p->sites = calloc(p->n_sites, sizeof *p->sites);
    p->buf = malloc(sizeof(double) * (size_t)p->B * p->T * p->per);
    if (!p->sites || !p->buf) return mhar_fail("out of memory");
    Rng rng;
    rng_seed(&rng, o->seed);
    for (int s = 0; s < p->n_sites; s++) {
        Site *si = &p->sites[s];
        si->n_src = s + 1;   // full routing: site s reads emb and every earlier sublayer output
        si->trained_head = calloc(p->per, sizeof(double));
        si->null_draw = calloc(o->draws, sizeof(double));
        si->rq = malloc(sizeof(float) * (size_t)o->draws * d);
        size_t qo, go;
        if (!si->trained_head || !si->null_draw || !si->rq) return mhar_fail("out of memory");
        if (residual_route_site(&p->m.res, s, &qo, &go)) return MHAR_ERR;
        for (int k = 0; k < o->draws; k++) probe_random_query(si->rq + (size_t)k * d, p->m.params + qo, d, p->per, &rng);
    }
    return MHAR_OK;
}

// One site of the batch just forwarded: the trained query (k = -1) and each
// random one, summed over the tokens.
static void measure_site(Probe *p, const ProbeOptions *o, int s) {
    const Config *c = &p->m.cfg;
    int d = c->hidden_size, H = c->attnres_num_heads, n_tok = p->B * p->T, per = p->per;
    Site *si = &p->sites[s];
    const RouteSources src = {p->m.sources, p->m.row_floats, si->n_src, NULL};
    size_t qo, go;
    residual_route_site(&p->m.res, s, &qo, &go);
    const float *q = p->m.params + qo, *g = p->m.params + go;
    int n_src_w;
    const float *w = p->m.scheme->route_weights(&p->m.res, s, &n_src_w);
    double e = route_probe_weight_error(p->m.ctx, w, src, q, g, n_tok, d, H, c->rms_norm_eps);
    if (!(e <= p->route_err)) p->route_err = e;
    for (int k = -1; k < o->draws; k++) {
        const float *qq = k < 0 ? q : si->rq + (size_t)k * d;
        if (p->width) route_probe_width(p->m.ctx, p->buf, src, qq, g, n_tok, d, o->slices, c->rms_norm_eps);
        else route_probe_heads(p->m.ctx, p->buf, src, qq, g, n_tok, d, H, c->rms_norm_eps);
        for (int h = 0; h < per; h++) {
            double sum = 0;
            for (int t = 0; t < n_tok; t++) sum += p->buf[(size_t)t * per + h];
            if (k < 0) si->trained_head[h] += sum;
            else si->null_draw[k] += sum / per;
        }
    }
}

// Forward the held-out batches; after each, the model's source buffer holds
// every site's sources for these tokens (SPEC §5).
static void run_batches(Probe *p, const ProbeOptions *o) {
    for (long b = 0; b < p->windows; b++) {
        for (int i = 0; i < p->B; i++)
            loader_window(&p->ld, b * p->B + i, p->m.tokens + (size_t)i * p->T, p->m.targets + (size_t)i * p->T);
        model_forward(&p->m, p->m.tokens, NULL);
        for (int s = 1; s < p->n_sites; s++) measure_site(p, o, s);
        if (o->progress) fprintf(o->progress, "\rbatch %ld/%ld", b + 1, p->windows);
    }
}

// Per site and overall: trained, null (mean over draws), excess.
static int summarise(const Probe *p, const ProbeOptions *o, ProbeResult *r) {
    int per = p->per, n_used = p->n_sites - 1, draws = o->draws;
    double tokens = r->tokens = (double)p->windows * p->B * p->T;
    double *site_tr = calloc(n_used, sizeof(double)), *draw_tot = calloc(draws, sizeof(double));
    r->sites = calloc(n_used, sizeof *r->sites);
    int rc = site_tr && draw_tot && r->sites ? MHAR_OK : mhar_fail("out of memory");
    r->n_sites = rc ? 0 : n_used;
    for (int s = 1; !rc && s < p->n_sites; s++) {
        const Site *si = &p->sites[s];
        ProbeSite *ps = &r->sites[s - 1];
        probe_site_name(s, p->m.cfg.num_hidden_layers, ps->site, sizeof ps->site);
        ps->n_sources = si->n_src;
        double tr = 0, nl = 0;
        for (int h = 0; h < per; h++) tr += si->trained_head[h] / tokens / per;
        for (int k = 0; k < draws; k++) { nl += si->null_draw[k] / tokens / draws; draw_tot[k] += si->null_draw[k] / tokens / n_used; }
        site_tr[s - 1] = ps->trained = tr;
        ps->null = nl;
        ps->excess = tr - nl;
        if (p->width) continue;
        if (!(ps->per_head = malloc(sizeof(double) * per))) { rc = mhar_fail("out of memory"); break; }
        for (int h = 0; h < per; h++) ps->per_head[h] = si->trained_head[h] / tokens;
    }
    if (!rc) {
        r->trained = stats_mean(site_tr, n_used);
        r->null = stats_mean(draw_tot, draws);
        r->null_sd = draws > 1 ? stats_sd(draw_tot, draws) : NAN;
        r->excess = r->trained - r->null;
    }
    free(site_tr);
    free(draw_tot);
    return rc;
}

static void describe(ProbeResult *r, const Probe *p, const ProbeOptions *o) {
    const Config *c = &p->m.cfg;
    r->width = p->width;
    snprintf(r->run, sizeof r->run, "%s", o->run);
    snprintf(r->mode, sizeof r->mode, "%s", c->attnres_mode);
    snprintf(r->data, sizeof r->data, "%s", p->data);
    r->heads = c->attnres_num_heads;
    r->slices = o->slices;
    r->draws = o->draws;
    r->d = c->hidden_size;
    r->route_check = p->route_err;
}

static void probe_free(Probe *p) {
    for (int s = 0; p->sites && s < p->n_sites; s++) {
        free(p->sites[s].trained_head);
        free(p->sites[s].null_draw);
        free(p->sites[s].rq);
    }
    free(p->sites);
    free(p->buf);
    loader_free(&p->ld);
    tokens_free(&p->tf);
    if (p->m.params) model_free(&p->m);
}

int probe_run(const ProbeOptions *o, ProbeResult *r) {
    Probe *p = calloc(1, sizeof *p);
    memset(r, 0, sizeof *r);
    if (!p) return mhar_fail("out of memory");
    p->have_state = read_run_state(o->run, &p->st);
    int rc = load_model(p, o);
    if (!rc) {
        const Config *c = &p->m.cfg;
        p->n_sites = 2 * c->num_hidden_layers + 1;
        p->B = o->batch ? o->batch : p->st.batch ? p->st.batch : 8;
        p->T = o->seq ? o->seq : p->st.seq ? p->st.seq : 256;
        if (p->width && c->hidden_size % o->slices)
            rc = mhar_fail("--slices %d does not divide the width d = %d of %s", o->slices, c->hidden_size, o->run);
        if (!rc) rc = open_data(p, o);
        if (!rc) rc = init_sites(p, o);
        if (!rc) run_batches(p, o);
        if (o->progress) fprintf(o->progress, "\n");
    }
    if (!rc && !(p->route_err < 1e-3))
        rc = mhar_fail("the probe's routing weights differ from the model's by %.3g: it does not read what the "
                       "forward pass read (a bug)", p->route_err);
    if (!rc) describe(r, p, o);
    if (!rc) rc = summarise(p, o, r);
    probe_free(p);
    free(p);
    if (rc) probe_result_free(r);
    return rc;
}

void probe_result_free(ProbeResult *r) {
    for (int i = 0; r->sites && i < r->n_sites; i++) free(r->sites[i].per_head);
    free(r->sites);
    r->sites = NULL;
    r->n_sites = 0;
}
