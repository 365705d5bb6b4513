// mhar report's model of a sweep: the runs, their groups over seeds and the
// comparisons between groups (report.h). The Markdown is report_md.c, the
// figures report_plots.c, the JSON report_json.c.
#include "report.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic.h"
#include "model/config.h"
#include "residual/residual.h"
#include "stats.h"
#include "util/common.h"
#include "util/json.h"
#include "util/median.h"

// ---- order of the tables

// Presets by size, unknown ones last by name.
static int preset_cmp(const char *a, const char *b) {
    Config ca, cb;
    int ka = config_preset(a, &ca) == MHAR_OK, kb = config_preset(b, &cb) == MHAR_OK;
    if (ka != kb) return kb - ka;
    if (ka && ca.hidden_size != cb.hidden_size) return ca.hidden_size - cb.hidden_size;
    if (ka && ca.num_hidden_layers != cb.num_hidden_layers) return ca.num_hidden_layers - cb.num_hidden_layers;
    return strcmp(a, b);
}

// Schemes in the registry's order, unknown ones last.
static int scheme_rank(const char *residual) {
    for (int i = 0; i < residual_count(); i++)
        if (!strcmp(residual, residual_at(i)->name)) return i;
    return residual_count();
}

// What orders the tables: preset, lr, scheme, H, blocks.
typedef struct { const char *preset, *residual; double lr; int heads, blocks; } Setting;

static int cmp_setting(Setting a, Setting b) {
    int c = preset_cmp(a.preset, b.preset);
    if (c) return c;
    if (a.lr != b.lr) return a.lr < b.lr ? -1 : 1;
    if ((c = scheme_rank(a.residual) - scheme_rank(b.residual))) return c;
    if (a.heads != b.heads) return a.heads - b.heads;
    return a.blocks - b.blocks;
}

static int cmp_run(const void *pa, const void *pb) {
    const SweepRun *a = &((const ReportRun *)pa)->r, *b = &((const ReportRun *)pb)->r;
    int c = cmp_setting((Setting){a->opt.preset, a->opt.residual, a->opt.lr, a->opt.heads, a->opt.blocks},
                        (Setting){b->opt.preset, b->opt.residual, b->opt.lr, b->opt.heads, b->opt.blocks});
    return c ? c : (a->opt.seed > b->opt.seed) - (a->opt.seed < b->opt.seed);
}

static int cmp_group(const void *pa, const void *pb) {
    const ReportGroup *a = pa, *b = pb;
    return cmp_setting((Setting){a->preset, a->residual, a->lr, a->heads, a->blocks},
                       (Setting){b->preset, b->residual, b->lr, b->heads, b->blocks});
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// ---- loading

// The entries of dir but . and .., sorted; *names freed by the caller.
static int list_dir(const char *dir, const char *sweep, char ***names, int *n_out) {
    DIR *dp = opendir(dir);
    if (!dp) return mhar_fail("%s: cannot open (is %s a sweep directory? mhar sweep --out %s)", dir, sweep, sweep);
    char **v = NULL;
    int n = 0, cap = 0, rc = MHAR_OK;
    struct dirent *e;
    while (!rc && (e = readdir(dp))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nv = realloc(v, sizeof *v * cap);
            if (!nv) { rc = mhar_fail("out of memory"); break; }
            v = nv;
        }
        if (!(v[n] = strdup(e->d_name))) rc = mhar_fail("out of memory");
        else n++;
    }
    closedir(dp);
    if (n) qsort(v, n, sizeof *v, cmp_name);
    *names = v;
    *n_out = n;
    return rc;
}

// run.json's data hashes and starts (commits, dirty flag).
static void read_provenance(ReportRun *r, const cJSON *rec) {
    snprintf(r->train_sha, sizeof r->train_sha, "%s", json_string_or(rec, "train_sha256", ""));
    snprintf(r->val_sha, sizeof r->val_sha, "%s", json_string_or(rec, "val_sha256", ""));
    snprintf(r->manifest_sha, sizeof r->manifest_sha, "%s", json_string_or(rec, "manifest_sha256", ""));
    const cJSON *starts = cJSON_GetObjectItemCaseSensitive(rec, "starts"), *s;
    cJSON_ArrayForEach(s, starts) {
        r->n_starts++;
        const char *c = json_string_or(s, "commit", "");
        int seen = 0;
        for (int q = 0; q < r->n_commits; q++) seen |= !strncmp(r->commits[q], c, 40);
        if (!seen && r->n_commits < 4) snprintf(r->commits[r->n_commits++], 48, "%.40s", c);
        r->dirty |= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "dirty"));
    }
}

// Progress, metrics, the metric and its slope, probe.json.
static void read_results(ReportRun *r) {
    char path[MHAR_PATH_MAX];
    long steps;
    if (sweep_run_progress(r->dir, &r->step, &steps) == 0) r->done = r->step >= steps;
    if (path_join(path, sizeof path, r->dir, "metrics.jsonl") == MHAR_OK && access(path, F_OK) == 0)
        r->have_metrics = metrics_load(path, &r->m) == MHAR_OK;
    r->tail = r->have_metrics ? stats_tail_mean(r->m.val_loss, r->m.n_evals, STATS_TAIL_EVALS, &r->tail_used) : NAN;
    if (!r->have_metrics || r->m.n_evals == 0) r->done = 0;   // finished but nothing to report
    r->tail_slope = NAN;
    if (r->have_metrics && r->m.n_evals >= 2) {
        double *xs = malloc(sizeof(double) * r->m.n_evals);
        if (xs) {
            for (int e = 0; e < r->m.n_evals; e++) xs[e] = (double)r->m.eval_step[e];
            r->tail_slope = 1000 * stats_tail_slope(xs, r->m.val_loss, r->m.n_evals, STATS_TAIL_EVALS);
            free(xs);
        }
    }
    if (path_join(path, sizeof path, r->dir, "probe.json") == MHAR_OK) r->probe = json_load_or_null(path);
}

// The preset whose model shape c has (its scheme, vocabulary and special
// tokens aside), or "config" when none has it.
static const char *preset_of(const Config *c) {
    for (int i = 0; config_preset_name(i); i++) {
        Config p;
        if (config_preset(config_preset_name(i), &p)) continue;
        if (p.family == c->family && p.hidden_size == c->hidden_size && p.num_hidden_layers == c->num_hidden_layers &&
            p.num_attention_heads == c->num_attention_heads && p.num_key_value_heads == c->num_key_value_heads &&
            p.head_dim == c->head_dim && p.intermediate_size == c->intermediate_size &&
            p.tie_word_embeddings == c->tie_word_embeddings)
            return config_preset_name(i);
    }
    return "config";
}

// A run trained by `mhar train` itself (no run.json): its settings from
// checkpoint/state.json (the recipe) and config.json (the scheme), its name
// from its directory. 0 when loaded; the error says which file failed.
static int load_plain_run(ReportRun *r, const char *name) {
    char path[MHAR_PATH_MAX], *text;
    size_t n;
    Config c;
    SweepRun *sr = &r->r;
    run_options_default(&sr->opt);
    if (path_join(path, sizeof path, r->dir, "config.json") || config_load(path, &c)) return MHAR_ERR;
    if (path_join(path, sizeof path, r->dir, "checkpoint/state.json") || read_file(path, &text, &n)) return MHAR_ERR;
    cJSON *state;
    int rc = json_parse(text, n, path, &state);
    free(text);
    if (!rc) rc = run_options_from_json(state, RUN_STATE, path, &sr->opt);
    cJSON_Delete(state);
    if (rc) return rc;
    const ResidualScheme *s = residual_find(c.attnres_mode);
    if (!s) return mhar_fail("%s/config.json: unknown scheme '%s'", r->dir, c.attnres_mode);
    RunOptions *o = &sr->opt;
    snprintf(o->preset, sizeof o->preset, "%s", preset_of(&c));
    snprintf(o->residual, sizeof o->residual, "%s", s->name);
    o->heads = residual_is_routed(s) ? c.attnres_num_heads : 0;
    o->blocks = s->needs_blocks ? c.attnres_num_blocks : 0;
    snprintf(o->route_query_init, sizeof o->route_query_init, "%s",
             c.route_query_init == ROUTE_QUERY_NORMAL ? "normal" : "");
    grid_method_name(o->residual, o->heads, o->blocks, o->route_query_init, sr->method, sizeof sr->method);
    snprintf(sr->name, sizeof sr->name, "%s", name);
    r->plain = 1;
    return MHAR_OK;
}

// One run directory into r: 1 when loaded, 0 when left out (said on notes).
// A sweep's run has run.json; one trained by hand is read from its
// checkpoint and config (it has no commits or data hashes to report).
static int load_run(ReportRun *r, const char *runs_dir, const char *name, FILE *notes) {
    char path[MHAR_PATH_MAX];
    struct stat st;
    memset(r, 0, sizeof *r);
    if (path_join(r->dir, sizeof r->dir, runs_dir, name) || path_join(path, sizeof path, r->dir, "run.json")) return 0;
    if (stat(r->dir, &st) || !S_ISDIR(st.st_mode)) return 0;   // a file beside the runs (a log)
    cJSON *rec = json_load_or_null(path);
    if (!rec && access(path, F_OK) != 0) {
        if (load_plain_run(r, name) == MHAR_OK) {
            read_results(r);
            return 1;
        }
        if (notes) fprintf(notes, "note: %s: no run.json, and not a run of mhar train (%s): left out\n", r->dir,
                           mhar_error());
        return 0;
    }
    if (!rec) {
        if (notes) fprintf(notes, "note: %s: run.json is not readable JSON: left out\n", r->dir);
        return 0;
    }
    if (sweep_run_from_json(rec, path, &r->r)) {
        if (notes) fprintf(notes, "note: %s: left out\n", mhar_error());
        cJSON_Delete(rec);
        return 0;
    }
    read_provenance(r, rec);
    cJSON_Delete(rec);
    read_results(r);
    return 1;
}

static int load_runs(Report *rep, const char *dir, FILE *notes) {
    char runs_dir[MHAR_PATH_MAX];
    char **names = NULL;
    int n = 0;
    if (path_join(runs_dir, sizeof runs_dir, dir, "runs")) return MHAR_ERR;
    int rc = list_dir(runs_dir, dir, &names, &n);
    rep->runs = rc ? NULL : calloc(n ? n : 1, sizeof *rep->runs);
    if (!rc && !rep->runs) rc = mhar_fail("out of memory");
    for (int i = 0; i < n && !rc; i++) rep->n_runs += load_run(&rep->runs[rep->n_runs], runs_dir, names[i], notes);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    if (rc) return rc;
    qsort(rep->runs, rep->n_runs, sizeof *rep->runs, cmp_run);
    return MHAR_OK;
}

// ---- groups

int report_in_group(const ReportGroup *g, const SweepRun *r) {
    return !strcmp(g->preset, r->opt.preset) && !strcmp(g->method, r->method) && g->lr == r->opt.lr;
}

static int cmp_seed_idx(const void *a, const void *b, void *runs) {
    const ReportRun *ra = &((const ReportRun *)runs)[*(const int *)a], *rb = &((const ReportRun *)runs)[*(const int *)b];
    return (ra->r.opt.seed > rb->r.opt.seed) - (ra->r.opt.seed < rb->r.opt.seed);
}

static int new_group(ReportGroup *g, const SweepRun *r, int cap) {
    snprintf(g->preset, sizeof g->preset, "%s", r->opt.preset);
    snprintf(g->method, sizeof g->method, "%s", r->method);
    snprintf(g->residual, sizeof g->residual, "%s", r->opt.residual);
    g->heads = r->opt.heads;
    g->blocks = r->opt.blocks;
    g->lr = r->opt.lr;
    g->idx = calloc(cap, sizeof(int));
    g->vals = calloc(cap, sizeof(double));
    g->seeds = calloc(cap, sizeof(uint64_t));
    g->min_used = 1 << 30;
    return g->idx && g->vals && g->seeds ? MHAR_OK : mhar_fail("out of memory");
}

// The finished runs' metrics by seed, their mean and sd.
static void group_stats(ReportGroup *g, ReportRun *runs) {
    qsort_r(g->idx, g->n, sizeof(int), cmp_seed_idx, runs);
    for (int i = 0; i < g->n; i++) {
        const ReportRun *r = &runs[g->idx[i]];
        g->vals[i] = r->tail;
        g->seeds[i] = r->r.opt.seed;
        if (r->tail_used < g->min_used) g->min_used = r->tail_used;
    }
    g->mean = stats_mean(g->vals, g->n);
    g->sd = stats_sd(g->vals, g->n);
}

static int build_groups(Report *rep) {
    int n = rep->n_runs;
    ReportGroup *gs = rep->groups = calloc(n ? n : 1, sizeof *gs);
    if (!gs) return mhar_fail("out of memory");
    for (int i = 0; i < n; i++) {
        const ReportRun *r = &rep->runs[i];
        int k = 0;
        while (k < rep->n_groups && !report_in_group(&gs[k], &r->r)) k++;
        if (k == rep->n_groups && new_group(&gs[rep->n_groups++], &r->r, n)) return MHAR_ERR;
        gs[k].n_all++;
        if (r->done) gs[k].idx[gs[k].n++] = i;
    }
    for (int k = 0; k < rep->n_groups; k++) group_stats(&gs[k], rep->runs);
    qsort(gs, rep->n_groups, sizeof *gs, cmp_group);
    return MHAR_OK;
}

int report_load(Report *rep, const char *dir, FILE *notes) {
    memset(rep, 0, sizeof *rep);
    rep->dir = dir;
    int rc = load_runs(rep, dir, notes);
    if (!rc && rep->n_runs == 0) rc = mhar_fail("%s/runs: no runs yet (a sweep's run.json, or the checkpoint and config.json of mhar train)", dir);
    if (!rc) rc = build_groups(rep);
    char path[MHAR_PATH_MAX];
    if (!rc && path_join(path, sizeof path, dir, "sweep.json") == MHAR_OK) rep->sweep = json_load_or_null(path);
    return rc;
}

void report_free(Report *rep) {
    for (int i = 0; i < rep->n_runs; i++) { metrics_free(&rep->runs[i].m); cJSON_Delete(rep->runs[i].probe); }
    free(rep->runs);
    for (int i = 0; i < rep->n_groups; i++) { free(rep->groups[i].idx); free(rep->groups[i].vals); free(rep->groups[i].seeds); }
    free(rep->groups);
    cJSON_Delete(rep->sweep);
    memset(rep, 0, sizeof *rep);
}

// ---- comparisons

const ReportGroup *report_find_group(const ReportGroup *gs, int n, const ReportGroup *like, const char *method) {
    for (int i = 0; i < n; i++)
        if (!strcmp(gs[i].preset, like->preset) && gs[i].lr == like->lr && !strcmp(gs[i].method, method)) return &gs[i];
    return NULL;
}

const ReportGroup *report_zero_init_twin(const ReportGroup *gs, int n, const ReportGroup *g) {
    const size_t len = strlen(g->method), sl = strlen(GRID_QNORMAL_SUFFIX);
    if (len <= sl || strcmp(g->method + len - sl, GRID_QNORMAL_SUFFIX)) return NULL;
    char zero[sizeof g->method];
    snprintf(zero, sizeof zero, "%.*s", (int)(len - sl), g->method);
    return report_find_group(gs, n, g, zero);
}

int report_section_end(const Report *rep, int lo) {
    const ReportGroup *gs = rep->groups;
    int hi = lo + 1;
    while (hi < rep->n_groups && !strcmp(gs[hi].preset, gs[lo].preset) && gs[hi].lr == gs[lo].lr) hi++;
    return hi;
}

Paired report_paired(const ReportGroup *a, const ReportGroup *b) {
    Paired p = {NAN, NAN, NAN, 0, 0};
    if (!a || !b || a == b) return p;
    double *d = malloc(sizeof(double) * (a->n ? a->n : 1));
    if (!d) return p;
    p.n = stats_paired_diff(a->vals, a->seeds, a->n, b->vals, b->seeds, b->n, d);
    p.mean = stats_mean(d, p.n);
    p.sd = stats_sd(d, p.n);
    // Equal differences leave an sd of rounding (~1e-16), not 0: no t then.
    if (p.sd <= 1e-9 * fabs(p.mean)) p.sd = 0;
    p.t = p.n > 1 && p.sd > 0 ? p.mean / (p.sd / sqrt(p.n)) : NAN;
    for (int i = 0; i < p.n; i++) p.better += d[i] < 0;
    free(d);
    return p;
}

const char *report_reference_scheme(void) { return residual_at(0)->name; }

const char *report_single_head_scheme(void) {
    for (int i = 0; i < residual_count(); i++)
        if (residual_at(i)->heads == HEADS_ONE) return residual_at(i)->name;
    return "";
}

int report_routes(const char *residual) {
    const ResidualScheme *s = residual_find(residual);
    return s && residual_is_routed(s);
}

int report_routes_heads(const char *residual) {
    const ResidualScheme *s = residual_find(residual);
    return s && residual_is_routed(s) && !s->needs_blocks;
}

int report_group_heads(const ReportGroup *g) {
    const ResidualScheme *s = residual_find(g->residual);
    return s && s->heads == HEADS_ONE ? 1 : g->heads;
}

int report_heads_groups(const ReportGroup *gs, int lo, int hi, const ReportGroup **out, int cap) {
    int n = 0;
    for (int i = lo; i < hi && n < cap; i++) {
        if (!report_routes_heads(gs[i].residual) || gs[i].n == 0) continue;
        int dup = 0;
        for (int k = 0; k < n; k++) dup |= report_group_heads(out[k]) == report_group_heads(&gs[i]);
        if (!dup) out[n++] = &gs[i];
    }
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && report_group_heads(out[b]) < report_group_heads(out[b - 1]); b--) {
            const ReportGroup *t = out[b]; out[b] = out[b - 1]; out[b - 1] = t;
        }
    return n;
}

const ReportGroup *report_best_lr(const Report *rep, const char *preset, const char *method) {
    const ReportGroup *best = NULL;
    for (int k = 0; k < rep->n_groups; k++) {
        const ReportGroup *c = &rep->groups[k];
        if (strcmp(c->preset, preset) || strcmp(c->method, method) || !c->n || !isfinite(c->mean)) continue;
        if (!best || c->mean < best->mean) best = c;
    }
    return best;
}

int report_slices(const Report *rep, ReportSlice *out, int cap) {
    int n = 0;
    for (int i = 0; i < rep->n_groups && n < cap; i++) {
        const ReportGroup *g = &rep->groups[i];
        const ResidualScheme *sc = residual_find(g->residual);
        Config c;
        if (!sc || !sc->from_scratch || !report_routes_heads(g->residual) || report_best_lr(rep, g->preset, g->method) != g ||
            config_preset(g->preset, &c))
            continue;
        const int H = report_group_heads(g);
        int dup = 0;   // attnres and mhar-h1 are the same model: the first is kept
        for (int k = 0; k < n; k++) dup |= !strcmp(out[k].g->preset, g->preset) && out[k].heads == H;
        if (dup) continue;
        ReportSlice r = {g, report_best_lr(rep, g->preset, report_reference_scheme()), c.hidden_size, H, {0, 0, 0, 0, 0}};
        r.p = report_paired(g, r.base);
        int at = n++;   // insertion: by preset as the table has them, then H
        for (; at > 0 && !strcmp(out[at - 1].g->preset, g->preset) && out[at - 1].heads > H; at--) out[at] = out[at - 1];
        out[at] = r;
    }
    return n;
}

int report_slice_presets(const ReportSlice *rows, int n) {
    int presets = 0;
    for (int i = 0; i < n; i++) presets += i == 0 || strcmp(rows[i].g->preset, rows[i - 1].g->preset) != 0;
    return presets;
}

// When the head counts were run on different seeds (say H = 8 on three,
// H = 2 on one), their plain means differ by the seeds' own spread as well,
// so the comparison is also made on the common seeds.
int report_heads_on_common_seeds(const ReportGroup *const *hg, int n, uint64_t *common, double *y) {
    const uint64_t *keys[64] = {0};
    int counts[64] = {0}, same = 1;
    if (n < 2 || n > 64) return 0;
    for (int k = 0; k < n; k++) keys[k] = hg[k]->seeds, counts[k] = hg[k]->n;
    int nc = stats_common_keys(keys, counts, n, common);
    for (int k = 0; k < n; k++) same &= hg[k]->n == nc;
    if (same || nc == 0) return 0;
    for (int k = 0; k < n; k++) y[k] = stats_mean_on_keys(hg[k]->vals, hg[k]->seeds, hg[k]->n, common, nc);
    return nc;
}

// ---- the whole report

static int write_json(const Report *rep, const char *path) {
    cJSON *j = report_json(rep);
    char *text = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    int rc = text ? atomic_write_file(path, text, strlen(text)) : mhar_fail("out of memory");
    free(text);
    return rc;
}

int report_make(const char *dir, int plots, FILE *notes, ReportSummary *sum) {
    Report rep;
    char md[MHAR_PATH_MAX], js[MHAR_PATH_MAX], plots_dir[MHAR_PATH_MAX];
    memset(sum, 0, sizeof *sum);
    if (path_join(md, sizeof md, dir, "report.md") || path_join(js, sizeof js, dir, "report.json") ||
        path_join(plots_dir, sizeof plots_dir, dir, "plots"))
        return MHAR_ERR;
    int rc = report_load(&rep, dir, notes);
    if (!rc && plots && mkdir(plots_dir, 0755) != 0) {
        int err = errno;
        if (access(plots_dir, F_OK) != 0) rc = mhar_fail("%s: cannot create: %s", plots_dir, strerror(err));
    }
    if (!rc) rc = report_write_md(&rep, md, plots ? plots_dir : NULL, sum);
    if (!rc) rc = write_json(&rep, js);
    report_free(&rep);
    return rc;
}
