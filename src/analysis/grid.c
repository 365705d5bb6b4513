#include "grid.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/corpus.h"
#include "../io/atomic.h"
#include "../model/config.h"
#include "../residual/residual.h"
#include "../util/common.h"
#include "../util/dir.h"
#include "../util/json.h"
#include "../util/sha256.h"

// The grid's own keys; the recipe's are the run options with RUN_GRID.
static const char *const TOP_KEYS[] = {"name", "preset", "schemes", "seeds", "train", "val", "manifest", "lr"};
static const char *const SCHEME_KEYS[] = {"residual", "route_heads", "route_blocks", "route_query_init"};

static int known_key(const char *k, const char *const *keys, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, keys[i])) return 1;
    if (keys != TOP_KEYS) return 0;
    const RunOption *opt = run_option_find(k);
    return opt && (opt->use & RUN_GRID) && !strcmp(opt->key, k);
}

static int check_keys(const cJSON *obj, const char *const *keys, size_t n, const char *path, const char *where) {
    const cJSON *it;
    cJSON_ArrayForEach(it, obj)
        if (!known_key(it->string, keys, n)) return mhar_fail("%s: unknown field '%s%s'", path, where, it->string);
    return MHAR_OK;
}

// An integer field: absent -> def (or an error when def < 0 means required).
static int get_int(const cJSON *j, const char *key, double lo, double hi, double def, const char *path, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v) {
        if (def < 0) return mhar_fail("%s: field '%s' is required", path, key);
        *out = def;
        return MHAR_OK;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return mhar_fail("%s: field '%s' must be an integer in [%.0f, %.0f]", path, key, lo, hi);
    *out = v->valuedouble;
    return MHAR_OK;
}

// The recipe: the run options with RUN_GRID, in their ranges (0 refused
// where RUN_GRID_NONZERO), absent ones at mhar train's defaults.
static int grid_recipe(const cJSON *j, const char *path, RunOptions *o) {
    run_options_default(o);
    for (int i = 0; i < run_option_count(); i++) {
        const RunOption *opt = run_option_at(i);
        if (!(opt->use & RUN_GRID)) continue;
        double lo = (opt->use & RUN_GRID_NONZERO) && opt->lo < 1 ? 1 : opt->lo, x = 0;
        if (!cJSON_GetObjectItemCaseSensitive(j, opt->key)) {
            if (opt->use & RUN_GRID_REQUIRED) return mhar_fail("%s: field '%s' is required", path, opt->key);
            continue;
        }
        if (get_int(j, opt->key, lo, opt->hi, 0, path, &x)) return MHAR_ERR;
        run_option_set_num(opt, o, x);
    }
    run_options_finish(o);
    return MHAR_OK;
}

// A number or a list of numbers (integers when integral) -> out[0..*n).
static int get_list(const cJSON *j, const char *key, const char *path, int integral, double lo, double hi,
                    double *out, int cap, int *n) {
    *n = 0;
    if (!j) return MHAR_OK;
    const cJSON *it, *one[1] = {j};
    int is_array = cJSON_IsArray(j);
    if (is_array && cJSON_GetArraySize(j) == 0) return mhar_fail("%s: field '%s' is an empty list", path, key);
    for (int i = 0; is_array ? i < cJSON_GetArraySize(j) : i < 1; i++) {
        it = is_array ? cJSON_GetArrayItem(j, i) : one[0];
        if (!cJSON_IsNumber(it) || (integral && it->valuedouble != floor(it->valuedouble)) ||
            !(it->valuedouble >= lo && it->valuedouble <= hi))
            return mhar_fail("%s: field '%s' must be %s in [%g, %g] or a list of them", path, key,
                             integral ? "an integer" : "a number", lo, hi);
        if (*n == cap) return mhar_fail("%s: field '%s' has more than %d values", path, key, cap);
        for (int k = 0; k < *n; k++)
            if (out[k] == it->valuedouble) return mhar_fail("%s: field '%s' repeats %g", path, key, it->valuedouble);
        out[(*n)++] = it->valuedouble;
    }
    return MHAR_OK;
}

// path relative to base_dir unless absolute, made absolute (realpath when it exists).
static int resolve(const char *base_dir, const char *p, char *out, size_t cap) {
    char joined[MHAR_PATH_MAX];
    if (p[0] == '/') { if (copy_str(joined, sizeof joined, p)) return MHAR_ERR; }
    else if (path_join(joined, sizeof joined, base_dir, p)) return MHAR_ERR;
    char *abs = realpath(joined, NULL);
    int rc = copy_str(out, cap, abs ? abs : joined);
    free(abs);
    return rc;
}

typedef struct { char residual[16], query_init[8]; int heads[64], n_heads, blocks[64], n_blocks; } SchemeSpec;

static int sweep_scheme(const ResidualScheme *s) { return s->from_scratch; }

static int parse_scheme(const cJSON *s, int idx, const char *path, SchemeSpec *sp) {
    char where[48], names[256];
    residual_names(names, sizeof names, ", ", sweep_scheme);
    snprintf(where, sizeof where, "schemes[%d].", idx);
    if (!cJSON_IsObject(s)) return mhar_fail("%s: schemes[%d] must be an object like {\"residual\": \"mhar\"}", path, idx);
    if (check_keys(s, SCHEME_KEYS, sizeof SCHEME_KEYS / sizeof *SCHEME_KEYS, path, where)) return MHAR_ERR;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "residual");
    if (!cJSON_IsString(r)) return mhar_fail("%s: schemes[%d].residual is required (%s)", path, idx, names);
    const char *m = r->valuestring;
    const ResidualScheme *rs = residual_find(m);
    if (!rs || !rs->from_scratch)
        return mhar_fail("%s: schemes[%d].residual '%s' is not a sweep scheme (%s; %s)", path, idx, m, names,
                         rs ? "it does not train from a fresh init" : "not a residual scheme");
    snprintf(sp->residual, sizeof sp->residual, "%s", m);
    const RunOption *heads = run_option_find("route_heads"), *blocks = run_option_find("route_blocks");
    double v[64];
    char key[64];
    snprintf(key, sizeof key, "%sroute_heads", where);
    if (get_list(cJSON_GetObjectItemCaseSensitive(s, "route_heads"), key, path, 1, heads->lo, heads->hi, v, 64,
                 &sp->n_heads))
        return MHAR_ERR;
    for (int i = 0; i < sp->n_heads; i++) sp->heads[i] = (int)v[i];
    snprintf(key, sizeof key, "%sroute_blocks", where);
    if (get_list(cJSON_GetObjectItemCaseSensitive(s, "route_blocks"), key, path, 1, blocks->lo, blocks->hi, v, 64,
                 &sp->n_blocks))
        return MHAR_ERR;
    for (int i = 0; i < sp->n_blocks; i++) sp->blocks[i] = (int)v[i];
    const cJSON *qi = cJSON_GetObjectItemCaseSensitive(s, "route_query_init");
    if (qi && !(cJSON_IsString(qi) && config_query_init_find(qi->valuestring) >= 0))
        return mhar_fail("%s: schemes[%d].route_query_init must be \"zero\" or \"normal\"", path, idx);
    if (qi) snprintf(sp->query_init, sizeof sp->query_init, "%s", qi->valuestring);
    int routed = residual_is_routed(rs);
    if (!routed && qi)
        return mhar_fail("%s: schemes[%d]: '%s' does not route; route_query_init does not apply", path, idx, m);
    if (!routed && (sp->n_heads || sp->n_blocks))
        return mhar_fail("%s: schemes[%d]: '%s' does not route; route_heads/route_blocks do not apply", path, idx, m);
    if (rs->heads == HEADS_ONE && (sp->n_blocks || sp->n_heads > 1 || (sp->n_heads && sp->heads[0] != 1)))
        return mhar_fail("%s: schemes[%d]: %s is single-head full routing (use a scheme with H heads for H > 1, "
                         "one with blocks for blocks)", path, idx, m);
    if (!rs->needs_blocks && sp->n_blocks)
        return mhar_fail("%s: schemes[%d]: %s routes over every sublayer; route_blocks do not apply", path, idx, m);
    if (rs->needs_blocks && !sp->n_blocks)
        return mhar_fail("%s: schemes[%d]: %s routing needs route_blocks", path, idx, m);
    if (!sp->n_heads) { sp->heads[0] = routed ? rs->default_heads : 0; sp->n_heads = 1; }
    if (!sp->n_blocks) { sp->blocks[0] = 0; sp->n_blocks = 1; }
    return MHAR_OK;
}

// baseline, attnres; mhar-h4 (a scheme with H heads); block-h4-b2 (and
// blocks); "-qnormal" after any of them whose queries start N(0, 0.02).
void grid_method_name(const char *residual, int heads, int blocks, const char *query_init, char *out, size_t cap) {
    const ResidualScheme *s = residual_find(residual);
    const char *q = !strcmp(query_init, "normal") ? GRID_QNORMAL_SUFFIX : "";
    if (s && s->needs_blocks) snprintf(out, cap, "%s-h%d-b%d%s", residual, heads, blocks, q);
    else if (s && s->heads == HEADS_ANY) snprintf(out, cap, "%s-h%d%s", residual, heads, q);
    else snprintf(out, cap, "%s%s", residual, q);
}

// Does the model config accept this scheme on this preset (H divides d, ...)?
static int check_model(const char *path, const char *preset, const SchemeSpec *sp, int h, int b) {
    Config c;
    if (config_preset(preset, &c)) return mhar_fail("%s: %s", path, mhar_error());
    c.vocab_size = 2;
    snprintf(c.attnres_mode, sizeof c.attnres_mode, "%s", sp->residual);
    c.attnres_num_heads = h ? h : 1;
    c.attnres_num_blocks = b;
    char origin[256];
    snprintf(origin, sizeof origin, "%s (preset %s, %s, H %d)", path, preset, sp->residual, h);
    return config_validate(&c, origin);
}

int grid_load(const char *path, Grid *g) {
    memset(g, 0, sizeof *g);
    char *text;
    size_t len;
    if (read_file(path, &text, &len)) return MHAR_ERR;
    g->json = cJSON_Parse(text);
    free(text);
    if (!g->json || !cJSON_IsObject(g->json)) {
        grid_free(g);
        return mhar_fail("%s: not a JSON object (see mhar sweep --help for the grid format)", path);
    }
    if (resolve(".", path, g->path, sizeof g->path)) { grid_free(g); return MHAR_ERR; }
    char dir_buf[MHAR_PATH_MAX];
    snprintf(dir_buf, sizeof dir_buf, "%s", g->path);
    const char *base = dirname(dir_buf);
    const cJSON *j = g->json;
    SchemeSpec *specs = NULL;
    int rc = check_keys(j, TOP_KEYS, sizeof TOP_KEYS / sizeof *TOP_KEYS, path, "");

    // presets
    const char *presets[16];
    int n_presets = 0;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "preset"), *it;
    if (!rc && cJSON_IsString(p)) presets[n_presets++] = p->valuestring;
    else if (!rc && cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0 && cJSON_GetArraySize(p) <= 16) {
        cJSON_ArrayForEach(it, p) {
            if (!cJSON_IsString(it)) { rc = mhar_fail("%s: field 'preset' must hold preset names", path); break; }
            presets[n_presets++] = it->valuestring;
        }
    } else if (!rc) rc = mhar_fail("%s: field 'preset' is required: a preset name or a list of 1 to 16", path);
    for (int i = 0; !rc && i < n_presets; i++) {
        Config c;
        if (config_preset(presets[i], &c)) rc = mhar_fail("%s: field 'preset': %s", path, mhar_error());
    }

    // schemes
    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(j, "schemes");
    int n_schemes = cJSON_IsArray(sch) ? cJSON_GetArraySize(sch) : 0;
    if (!rc && !n_schemes) rc = mhar_fail("%s: field 'schemes' is required: a non-empty list of {\"residual\": ...}", path);
    if (!rc && !(specs = calloc(n_schemes, sizeof *specs))) rc = mhar_fail("out of memory");
    for (int i = 0; !rc && i < n_schemes; i++) rc = parse_scheme(cJSON_GetArrayItem(sch, i), i, path, &specs[i]);

    // seeds, learning rates, recipe
    double seeds[256], lrs[16];
    int n_seeds = 0;
    if (!rc) rc = get_list(cJSON_GetObjectItemCaseSensitive(j, "seeds"), "seeds", path, 1, 0, 9007199254740991.0,
                           seeds, 256, &n_seeds);
    if (!rc && !n_seeds) rc = mhar_fail("%s: field 'seeds' is required (a list of integers)", path);
    const RunOption *lr_opt = run_option_find("lr");
    if (!rc) rc = get_list(cJSON_GetObjectItemCaseSensitive(j, "lr"), "lr", path, 0, lr_opt->lo, lr_opt->hi, lrs, 16,
                           &g->n_lr);
    if (!rc && !g->n_lr) { lrs[0] = lr_opt->def; g->n_lr = 1; }
    SweepRun base_run = {0};
    rc = rc ? rc : grid_recipe(j, path, &base_run.opt);
    if (!rc && base_run.opt.eval_every > base_run.opt.steps)
        rc = mhar_fail("%s: eval_every %d is more than steps %ld, so each run would be evaluated once; the "
                       "metric averages the last 11 evaluations: set eval_every to steps/11 or less", path,
                       base_run.opt.eval_every, base_run.opt.steps);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (!rc && name && !cJSON_IsString(name)) rc = mhar_fail("%s: field 'name' must be a string", path);

    // data
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "train"), *va = cJSON_GetObjectItemCaseSensitive(j, "val");
    const cJSON *man = cJSON_GetObjectItemCaseSensitive(j, "manifest");
    if (!rc && (tr || va) && !(cJSON_IsString(tr) && cJSON_IsString(va)))
        rc = mhar_fail("%s: give both 'train' and 'val' as token file paths", path);
    if (!rc && tr) {
        rc = resolve(base, tr->valuestring, base_run.opt.train, sizeof base_run.opt.train);
        if (!rc) rc = resolve(base, va->valuestring, base_run.opt.val, sizeof base_run.opt.val);
        if (!rc && !path_is_file(base_run.opt.train)) rc = mhar_fail("%s: field 'train': %s: cannot open", path, base_run.opt.train);
        if (!rc && !path_is_file(base_run.opt.val)) rc = mhar_fail("%s: field 'val': %s: cannot open", path, base_run.opt.val);
    }
    if (!rc && man) {
        if (!cJSON_IsString(man)) rc = mhar_fail("%s: field 'manifest' must be a path", path);
        if (!rc) rc = resolve(base, man->valuestring, g->manifest, sizeof g->manifest);
        if (!rc && !path_is_file(g->manifest)) rc = mhar_fail("%s: field 'manifest': %s: cannot open", path, g->manifest);
    } else if (!rc && tr) {
        // Where the corpus builder's manifest usually is: beside the token files,
        // in corpus/ beside them (mhar train's default data), or one directory up.
        char d1[MHAR_PATH_MAX], d2[MHAR_PATH_MAX], cand[MHAR_PATH_MAX];
        snprintf(d1, sizeof d1, "%s", base_run.opt.train);
        snprintf(d2, sizeof d2, "%s", dirname(d1));
        const char *dirs[3] = {d1, d1, dirname(d2)}, *names[3] = {"manifest.json", "corpus/manifest.json", "manifest.json"};
        for (int i = 0; i < 3 && !g->manifest[0]; i++)
            if (path_join(cand, sizeof cand, dirs[i], names[i]) == MHAR_OK && path_is_file(cand))
                rc = copy_str(g->manifest, sizeof g->manifest, cand);
    }

    // expand: preset, seed, lr, scheme, H, blocks (seed-major, so a sweep cut
    // short still holds a complete comparison for its first seeds)
    int total = 0;
    for (int i = 0; !rc && i < n_schemes; i++) total += specs[i].n_heads * specs[i].n_blocks;
    total *= n_presets * n_seeds * g->n_lr;
    if (!rc && !(g->runs = calloc(total ? total : 1, sizeof *g->runs))) rc = mhar_fail("out of memory");
    for (int pi = 0; !rc && pi < n_presets; pi++)
        for (int si = 0; !rc && si < n_seeds; si++)
            for (int li = 0; !rc && li < g->n_lr; li++)
                for (int ci = 0; !rc && ci < n_schemes; ci++)
                    for (int hi = 0; !rc && hi < specs[ci].n_heads; hi++)
                        for (int bi = 0; !rc && bi < specs[ci].n_blocks; bi++) {
                            SweepRun *r = &g->runs[g->n_runs];
                            *r = base_run;
                            RunOptions *o = &r->opt;
                            snprintf(o->preset, sizeof o->preset, "%s", presets[pi]);
                            snprintf(o->residual, sizeof o->residual, "%s", specs[ci].residual);
                            o->heads = specs[ci].heads[hi];
                            o->blocks = specs[ci].blocks[bi];
                            snprintf(o->route_query_init, sizeof o->route_query_init, "%s", specs[ci].query_init);
                            o->seed = (uint64_t)seeds[si];
                            o->lr = lrs[li];
                            rc = check_model(path, o->preset, &specs[ci], o->heads, o->blocks);
                            grid_method_name(o->residual, o->heads, o->blocks, o->route_query_init, r->method, sizeof r->method);
                            char lr_part[40] = "";
                            if (g->n_lr > 1) snprintf(lr_part, sizeof lr_part, "-lr%g", o->lr);
                            snprintf(r->name, sizeof r->name, "%s-%s%s-s%llu", o->preset, r->method, lr_part,
                                     (unsigned long long)o->seed);
                            for (int k = 0; !rc && k < g->n_runs; k++)
                                if (!strcmp(g->runs[k].name, r->name))
                                    rc = mhar_fail("%s: run %s appears twice (a scheme listed twice?)", path, r->name);
                            g->n_runs++;
                        }
    free(specs);
    // Last, so a grid's other mistakes are reported first. Every run reads the
    // same token files: letting each run build mhar train's default data would
    // build (and tokenize) the same corpus once per run.
    if (!rc && !tr)
        rc = mhar_fail("%s: fields 'train' and 'val' are required: token files shared by every run. The default "
                       "data of mhar train: mhar data corpus --out D/corpus && mhar tokenizer train --corpus "
                       "D/corpus --vocab 8192 --out D/tokenizer.bpe && mhar data tokenize --tokenizer "
                       "D/tokenizer.bpe --corpus D/corpus --out D (gives D/train.bin, D/val.bin)", path);
    if (rc) grid_free(g);
    return rc;
}

void grid_free(Grid *g) {
    cJSON_Delete(g->json);
    free(g->runs);
    memset(g, 0, sizeof *g);
}

int sweep_run_args(const SweepRun *r, const char *dir, char **argv, int cap, char *buf, size_t buf_cap) {
    size_t len = strlen(dir) + 1;
    if (cap < 3 || buf_cap < len + 6)
        return mhar_fail("run %s: the train command line does not fit (%zu bytes)", r->name, buf_cap);
    memcpy(buf, "--out", 6);
    memcpy(buf + 6, dir, len);
    argv[0] = buf;
    argv[1] = buf + 6;
    if (run_options_argv(&r->opt, RUN_SWEEP, argv + 2, cap - 2, buf + 6 + len, buf_cap - 6 - len))
        return mhar_fail("run %s: the train command line does not fit (%zu bytes)", r->name, buf_cap);
    return MHAR_OK;
}

cJSON *sweep_run_to_json(const SweepRun *r) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "name", r->name);
    cJSON_AddStringToObject(j, "method", r->method);
    run_options_to_json(&r->opt, RUN_SWEEP, j);
    return j;
}

static int rec_str(const cJSON *j, const char *origin, const char *key, char *out, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsString(v)) return mhar_fail("%s: field '%s' missing or not a string", origin, key);
    return copy_str(out, cap, v->valuestring) ? mhar_fail("%s: field '%s' is too long", origin, key) : MHAR_OK;
}

int sweep_run_from_json(const cJSON *j, const char *origin, SweepRun *r) {
    memset(r, 0, sizeof *r);
    run_options_default(&r->opt);
    if (rec_str(j, origin, "name", r->name, sizeof r->name) ||
        rec_str(j, origin, "method", r->method, sizeof r->method))
        return MHAR_ERR;
    return run_options_from_json(j, RUN_SWEEP, origin, &r->opt);
}

int sweep_run_progress(const char *dir, long *step, long *steps) {
    char path[MHAR_PATH_MAX], *text;
    size_t n;
    *step = -1;
    *steps = 0;
    if (path_join(path, sizeof path, dir, "checkpoint/state.json") || access(path, F_OK) != 0 ||
        read_file(path, &text, &n))
        return -1;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "step"), *b = cJSON_GetObjectItemCaseSensitive(j, "steps");
    int ok = cJSON_IsNumber(a) && cJSON_IsNumber(b) && a->valuedouble >= 0 && b->valuedouble >= 1;
    if (ok) { *step = (long)a->valuedouble; *steps = (long)b->valuedouble; }
    cJSON_Delete(j);
    return ok ? 0 : -1;
}

