#include "route_stats.h"

#include "../kernels/ops.h"

#include <math.h>
#include <string.h>

int route_stats_init(RouteStats *st, const Residual *r) {
    memset(st, 0, sizeof *st);
    const ResidualScheme *sc = r->scheme;
    if (!sc->route_weights) return MHAR_OK;
    const int L2 = 2 * r->cfg->num_hidden_layers;
    int n_final;
    st->n_sites = L2 + (sc->route_weights(r, L2, &n_final) != NULL);
    st->H = r->cfg->attnres_num_heads;
    st->source0 = sc->source0 ? sc->source0 : "emb";
    size_t n = (size_t)st->n_sites * st->H;
    st->n_src = mhar_alloc(sizeof(int) * st->n_sites);
    st->entropy = mhar_alloc(sizeof(double) * (n * 3 + (size_t)st->n_sites));
    if (!st->n_src || !st->entropy) return MHAR_ERR;
    st->w_first = st->entropy + n;
    st->w_last = st->w_first + n;
    if (sc->route_gate) st->gate = st->w_last + n;
    return MHAR_OK;
}

void route_stats_add(RouteStats *st, const Residual *r) {
    int H = st->H, n_tok = r->n_tok;
    for (int s = 0; s < st->n_sites; s++) {
        int n_src;
        const float *w = r->scheme->route_weights(r, s, &n_src);
        st->n_src[s] = n_src;
        route_weight_stats(r->ctx, st->entropy + s * H, st->w_first + s * H, st->w_last + s * H, w, n_src,
                           n_tok, H);
        if (st->gate) st->gate[s] = r->scheme->route_gate(r, s); // a parameter: the same every batch
    }
    st->tokens += n_tok;
}

static void write_row(FILE *f, const char *key, const double *v, int H, double tokens) {
    fprintf(f, ", \"%s\": [", key);
    for (int h = 0; h < H; h++) fprintf(f, "%s%.5f", h ? ", " : "", v[h] / tokens);
    fprintf(f, "]");
}

void route_stats_write(const RouteStats *st, FILE *f, long step, int n_layers) {
    if (!st->n_sites || st->tokens == 0) return;
    char w0[24]; // the key of source 0's weight
    snprintf(w0, sizeof w0, "w_%s", st->source0);
    fprintf(f, "{\"step\": %ld, \"heads\": %d, \"sites\": [", step, st->H);
    for (int s = 0; s < st->n_sites; s++) {
        char name[48];
        if (s == 2 * n_layers) snprintf(name, sizeof name, "final");
        else snprintf(name, sizeof name, "layers.%d.%s", s / 2, s % 2 ? "mlp" : "attn");
        fprintf(f, "%s{\"site\": \"%s\", \"n_sources\": %d", s ? ", " : "", name, st->n_src[s]);
        write_row(f, "entropy", st->entropy + s * st->H, st->H, st->tokens);
        write_row(f, w0, st->w_first + s * st->H, st->H, st->tokens);
        write_row(f, "w_last", st->w_last + s * st->H, st->H, st->tokens);
        if (st->gate && isfinite(st->gate[s])) fprintf(f, ", \"res_alpha\": %.6g", st->gate[s]);
        else if (st->gate) fprintf(f, ", \"res_alpha\": null"); // JSON has no NaN
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
}

void route_stats_free(RouteStats *st) {
    mhar_free(st->n_src);
    mhar_free(st->entropy);
    memset(st, 0, sizeof *st);
}
