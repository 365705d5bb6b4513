// mhar probe: SPEC §4's width disagreement of a trained AttnRes model (why
// heads help), against a random query of matched norm, and for an MHAR model
// each head's deviation from the head consensus; on held-out tokens.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/probe.h"
#include "analysis/stats.h"
#include "args.h"
#include "commands.h"
#include "data/loader.h"
#include "data/tokens.h"
#include "io/atomic.h"
#include "model/model.h"

static const char *usage =
    "usage: mhar probe --run DIR [--data FILE] [--slices 4] [--draws 8] [--batches 8]\n"
    "                  [--batch B --seq T] [--seed S] [--json FILE|none]\n\n"
    "On held-out tokens (default: the run's validation file), per routing site:\n"
    "attnres run: the width disagreement of SPEC §4 -- cut the trained query q into\n"
    "  S contiguous slices, a_s = softmax_n <q_[s], K_n,[s]>, alpha = the full-width\n"
    "  routing; mean over slices and tokens of KL(a_s || alpha) -- beside the same\n"
    "  figure for random queries of matched norm (Gaussian direction scaled to |q|\n"
    "  of the site; mean over --draws draws) and the excess, trained - null.\n"
    "mhar run (H heads): each head's deviation from the head consensus, the mean\n"
    "  over tokens of KL(w_h || mean_h' w_h'), against random queries whose every\n"
    "  head slice has the trained head's norm.\n"
    "The first sublayer (one source) makes no routing decision and is left out;\n"
    "'overall' is the mean over the other sites. Writes DIR/probe.json (which\n"
    "mhar report shows) unless --json says otherwise; the last line is JSON.";

typedef struct {
    int n_src;
    double trained, *trained_head;   // sums over tokens (per head: [H])
    double *null_draw;               // [draws] sums over tokens
    float *rq;                       // [draws, d] the random queries of this site
} Site;

static void site_name(int s, int L, char *out, size_t cap) {
    if (s == 2 * L) snprintf(out, cap, "final");
    else snprintf(out, cap, "layers.%d.%s", s / 2, s % 2 ? "mlp" : "attn");
}

// What the probe takes from the run's checkpoint/state.json: the validation
// file and the batch shape. Read field by field (not through the trainer's
// full state loader), so the probe keeps working as that format grows.
typedef struct { char val[2048]; int batch, seq; } RunState;

static int read_run_state(const char *run, RunState *st) {
    char path[4300], *text;
    size_t n;
    memset(st, 0, sizeof *st);
    if (path_join(path, sizeof path, run, "checkpoint/state.json") || access(path, F_OK) != 0 ||
        read_file(path, &text, &n))
        return 0;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "val"), *b = cJSON_GetObjectItemCaseSensitive(j, "batch"),
                *t = cJSON_GetObjectItemCaseSensitive(j, "seq");
    if (cJSON_IsString(v)) snprintf(st->val, sizeof st->val, "%s", v->valuestring);
    if (cJSON_IsNumber(b) && b->valuedouble >= 1 && b->valuedouble <= (1 << 20)) st->batch = (int)b->valuedouble;
    if (cJSON_IsNumber(t) && t->valuedouble >= 1 && t->valuedouble <= (1 << 20)) st->seq = (int)t->valuedouble;
    cJSON_Delete(j);
    return 1;
}

typedef struct {
    const char *run, *data, *json;
    int slices, draws, batches, batch, seq;
    uint64_t seed;
} ProbeArgs;

static int probe(const ProbeArgs *a) {
    Model m;
    TokenFile tf = {0};
    Loader ld = {0};
    RunState st;
    int have_state = read_run_state(a->run, &st);
    int rc = model_load(&m, a->run);
    if (rc) {
        if (m.params) model_free(&m);
        return mhar_fail("%s: cannot load the model: %s", a->run, mhar_error());
    }
    const Config *c = &m.cfg;
    const char *mode = c->attnres_mode;
    int L = c->num_hidden_layers, d = c->hidden_size, H = c->attnres_num_heads, n_sites = 2 * L + 1;
    int width_mode = !strcmp(mode, "attnres") || (!strcmp(mode, "mhar") && H == 1);
    if (strcmp(mode, "attnres") && strcmp(mode, "mhar")) {
        rc = mhar_fail("%s: attnres_mode is '%s'; the probe reads full depth routing (attnres or mhar) %s", a->run,
                       mode, !strcmp(mode, "block") ? "and not yet block routing's summaries"
                                                    : "and this scheme does not route");
        model_free(&m);
        return rc;
    }
    if (width_mode && d % a->slices)
        rc = mhar_fail("--slices %d does not divide the width d = %d of %s", a->slices, d, a->run);
    const char *data = a->data;
    if (!rc && !data) {
        if (!have_state || !st.val[0])
            rc = mhar_fail("%s: no readable checkpoint/state.json naming the validation file; give --data", a->run);
        else data = st.val;
    }
    int B = a->batch ? a->batch : st.batch ? st.batch : 8, T = a->seq ? a->seq : st.seq ? st.seq : 256;
    if (!rc) rc = tokens_load(data, &tf);
    if (!rc && tf.vocab_size > c->vocab_size)
        rc = mhar_fail("%s: vocabulary %d is larger than the model's %d", data, tf.vocab_size, c->vocab_size);
    if (!rc) rc = model_alloc_acts(&m, B, T);
    if (!rc) rc = loader_init(&ld, &tf, T, 0);
    long windows = rc ? 0 : ld.n_windows / B;
    if (windows > a->batches) windows = a->batches;
    if (!rc && windows < 1) rc = mhar_fail("%s: fewer than one batch of %d x %d tokens", data, B, T + 1);

    int n_tok = B * T, per = width_mode ? 1 : H;
    Site *sites = calloc(n_sites, sizeof *sites);
    double *buf = malloc(sizeof(double) * (size_t)n_tok * (width_mode ? 1 : H));
    if (!rc && (!sites || !buf)) rc = mhar_fail("out of memory");
    Rng rng;
    rng_seed(&rng, a->seed);
    for (int s = 0; !rc && s < n_sites; s++) {
        Site *si = &sites[s];
        si->n_src = s + 1;   // full routing: site s reads emb and every earlier sublayer output
        si->trained_head = calloc(per, sizeof(double));
        si->null_draw = calloc(a->draws, sizeof(double));
        si->rq = malloc(sizeof(float) * (size_t)a->draws * d);
        size_t qo, go;
        if (!si->trained_head || !si->null_draw || !si->rq) { rc = mhar_fail("out of memory"); break; }
        if ((rc = residual_route_site(&m.res, s, &qo, &go))) break;
        for (int k = 0; k < a->draws; k++) probe_random_query(si->rq + (size_t)k * d, m.params + qo, d, per, &rng);
    }

    // Forward the held-out batches; after each, the model's source buffer holds
    // every site's sources for these tokens (SPEC §5).
    double route_err = 0;
    int tty = isatty(2);
    for (long b = 0; !rc && b < windows; b++) {
        for (int i = 0; i < B; i++)
            loader_window(&ld, b * B + i, m.tokens + (size_t)i * T, m.targets + (size_t)i * T);
        model_forward(&m, m.tokens, NULL);
        for (int s = 1; s < n_sites; s++) {
            Site *si = &sites[s];
            const RouteSources src = {m.sources, m.row_floats, si->n_src, NULL};
            size_t qo, go;
            residual_route_site(&m.res, s, &qo, &go);
            const float *q = m.params + qo, *g = m.params + go;
            int n_src_w;
            const float *w = m.scheme->route_weights(&m.res, s, &n_src_w);
            double e = route_probe_weight_error(m.ctx, w, src, q, g, n_tok, d, H, c->rms_norm_eps);
            if (!(e <= route_err)) route_err = e;
            for (int k = -1; k < a->draws; k++) {
                const float *qq = k < 0 ? q : si->rq + (size_t)k * d;
                if (width_mode) route_probe_width(m.ctx, buf, src, qq, g, n_tok, d, a->slices, c->rms_norm_eps);
                else route_probe_heads(m.ctx, buf, src, qq, g, n_tok, d, H, c->rms_norm_eps);
                for (int h = 0; h < per; h++) {
                    double sum = 0;
                    for (int t = 0; t < n_tok; t++) sum += buf[(size_t)t * per + h];
                    if (k < 0) si->trained_head[h] += sum;
                    else si->null_draw[k] += sum / per;
                }
            }
        }
        if (tty) fprintf(stderr, "\rbatch %ld/%ld", b + 1, windows);
    }
    if (tty) fprintf(stderr, "\n");
    if (!rc && !(route_err < 1e-3))
        rc = mhar_fail("the probe's routing weights differ from the model's by %.3g: it does not read what the "
                       "forward pass read (a bug)", route_err);

    if (!rc) {
        double tokens = (double)windows * n_tok;
        int n_used = n_sites - 1;
        double *site_tr = calloc(n_used, sizeof(double)), *draw_tot = calloc(a->draws, sizeof(double));
        cJSON *j = cJSON_CreateObject(), *arr = cJSON_CreateArray();
        cJSON_AddStringToObject(j, "probe", width_mode ? "width_disagreement" : "head_deviation");
        cJSON_AddStringToObject(j, "run", a->run);
        cJSON_AddStringToObject(j, "mode", mode);
        cJSON_AddNumberToObject(j, "heads", H);
        if (width_mode) cJSON_AddNumberToObject(j, "slices", a->slices);
        cJSON_AddNumberToObject(j, "draws", a->draws);
        cJSON_AddStringToObject(j, "data", data);
        cJSON_AddNumberToObject(j, "tokens", tokens);
        printf("%s of %s (%s, H = %d), %.0f held-out tokens of %s; null: %d random %s of matched norm\n",
               width_mode ? "width disagreement" : "head deviation from the head consensus", a->run, mode, H,
               tokens, data, a->draws, a->draws == 1 ? "query" : "queries");
        if (width_mode) printf("slices S = %d of width %d; KL(a_s || alpha) in nats, mean over slices and tokens\n",
                               a->slices, d / a->slices);
        else printf("H = %d heads of width %d; KL(w_h || mean_h w_h) in nats, mean over tokens\n", H, d / H);
        printf("\n%-16s %5s %10s %10s %10s", "site", "srcs", "trained", "null", "excess");
        if (!width_mode) for (int h = 0; h < H && h < 16; h++) printf("  head%-3d", h);
        printf("\n");
        for (int s = 1; s < n_sites; s++) {
            Site *si = &sites[s];
            char name[48];
            site_name(s, L, name, sizeof name);
            double tr = 0, nl = 0;
            for (int h = 0; h < per; h++) tr += si->trained_head[h] / tokens / per;
            for (int k = 0; k < a->draws; k++) { nl += si->null_draw[k] / tokens / a->draws; draw_tot[k] += si->null_draw[k] / tokens / n_used; }
            site_tr[s - 1] = tr;
            printf("%-16s %5d %10.4f %10.4f %10.4f", name, si->n_src, tr, nl, tr - nl);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "site", name);
            cJSON_AddNumberToObject(o, "n_sources", si->n_src);
            cJSON_AddNumberToObject(o, "trained", tr);
            cJSON_AddNumberToObject(o, "null", nl);
            cJSON_AddNumberToObject(o, "excess", tr - nl);
            if (!width_mode) {
                cJSON *ph = cJSON_CreateArray();
                for (int h = 0; h < H; h++) {
                    if (h < 16) printf("  %7.4f", si->trained_head[h] / tokens);
                    cJSON_AddItemToArray(ph, cJSON_CreateNumber(si->trained_head[h] / tokens));
                }
                cJSON_AddItemToObject(o, "per_head", ph);
            }
            printf("\n");
            cJSON_AddItemToArray(arr, o);
        }
        double tr = stats_mean(site_tr, n_used), nl = stats_mean(draw_tot, a->draws), nsd = stats_sd(draw_tot, a->draws);
        printf("%-16s %5s %10.4f %10.4f %10.4f\n", "overall", "", tr, nl, tr - nl);
        printf("\nnull spread over draws: sd %.4f (n %d); the probe's routing matches the model's to %.1e\n",
               a->draws > 1 ? nsd : NAN, a->draws, route_err);
        cJSON_AddNumberToObject(j, "trained", tr);
        cJSON_AddNumberToObject(j, "null", nl);
        if (a->draws > 1) cJSON_AddNumberToObject(j, "null_sd", nsd);
        cJSON_AddNumberToObject(j, "excess", tr - nl);
        cJSON_AddNumberToObject(j, "route_check", route_err);
        cJSON_AddItemToObject(j, "sites", arr);
        char *line = cJSON_PrintUnformatted(j);
        char path[4200];
        if (line && strcmp(a->json ? a->json : "", "none")) {
            if (a->json) rc = copy_str(path, sizeof path, a->json);
            else rc = path_join(path, sizeof path, a->run, "probe.json");
            if (!rc) {
                size_t n = strlen(line);
                line[n] = '\n';   // the file ends with a newline; cJSON's buffer has room for the NUL it replaces
                rc = atomic_write_file(path, line, n + 1);
                line[n] = 0;
            }
            if (!rc) fprintf(stderr, "wrote %s\n", path);
        }
        if (line) printf("%s\n", line);
        else rc = mhar_fail("out of memory");
        free(line);
        cJSON_Delete(j);
        free(site_tr);
        free(draw_tot);
    }
    for (int s = 0; sites && s < n_sites; s++) { free(sites[s].trained_head); free(sites[s].null_draw); free(sites[s].rq); }
    free(sites);
    free(buf);
    loader_free(&ld);
    tokens_free(&tf);
    model_free(&m);
    return rc;
}

int cmd_probe(int argc, char **argv) {
    ProbeArgs a = {.slices = 4, .draws = 8, .batches = 8, .seed = 1};
    Flag flags[] = {
        {"run", FLAG_STR, &a.run, "run directory (attnres or mhar)", 0, 0, 0},
        {"data", FLAG_STR, &a.data, "held-out token file (default: the run's validation file)", 0, 0, 0},
        {"slices", FLAG_INT, &a.slices, "slices S of the attnres query (default 4)", 1, 65536, 0},
        {"draws", FLAG_INT, &a.draws, "random queries per site for the null (default 8)", 1, 100000, 0},
        {"batches", FLAG_INT, &a.batches, "batches of the data, read in order (default 8)", 1, 1e9, 0},
        {"batch", FLAG_INT, &a.batch, "sequences per batch (default: the run's)", 1, 1 << 20, 0},
        {"seq", FLAG_INT, &a.seq, "tokens per sequence (default: the run's)", 1, 1 << 20, 0},
        {"seed", FLAG_U64, &a.seed, "seed of the random queries (default 1)", 0, 0, 0},
        {"json", FLAG_STR, &a.json, "where to write the result (default DIR/probe.json; none: nowhere)", 0, 0, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!a.run) { fprintf(stderr, "error: --run DIR is required (see --help)\n"); return 2; }
    if (probe(&a)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        return 1;
    }
    return 0;
}
