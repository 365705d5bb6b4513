// The one table of run options (see run_options.h).
#include "run_options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../residual/residual.h"
#include "../util/common.h"

#define F(field) offsetof(RunOptions, field), sizeof(((RunOptions *)0)->field)
#define NUM(lo, hi, def) lo, hi, def, NULL
#define TEXT(def) 0, 0, 0, def

// clang-format off
static const RunOption options[] = {
    // key            flag             type      field            range + default           use
    {"preset",        "preset",        OPT_TEXT, F(preset),       TEXT("nano"),             RUN_MODEL | RUN_SWEEP, RESUME_IGNORES,
     "nano|micro|mini|100m|350m|1b (default nano)"},
    {"config",        "config",        OPT_TEXT, F(config),       TEXT(""),                 RUN_MODEL, RESUME_IGNORES,
     "HF-style config.json instead of a preset"},
    {"family",        "family",        OPT_TEXT, F(family),       TEXT(""),                 RUN_MODEL, RESUME_IGNORES,
     "model family qwen3|llama (default: qwen3, or the config's)"},
    {"residual",      "residual",      OPT_TEXT, F(residual),     TEXT(""),                 RUN_MODEL | RUN_SWEEP, RESUME_IGNORES,
     "residual scheme (default baseline)"},
    {"route_heads",   "route-heads",   OPT_INT,  F(heads),        NUM(1, 4096, 0),          RUN_MODEL | RUN_SWEEP | RUN_ZERO_UNSET,
     RESUME_IGNORES, "routing heads H (default: the scheme's)"},
    {"route_blocks",  "route-blocks",  OPT_INT,  F(blocks),       NUM(1, 1024, 0),          RUN_MODEL | RUN_SWEEP | RUN_ZERO_UNSET,
     RESUME_IGNORES, "blocks N for block routing"},
    {"route_query_init", "route-query-init", OPT_TEXT, F(route_query_init), TEXT(""), RUN_MODEL | RUN_SWEEP,
     RESUME_IGNORES, "routing queries start zero|normal: 0 (default, SPEC) or N(0, 0.02), the paper's head sweep"},
    {"train",         "train",         OPT_TEXT, F(train),        TEXT(""),                 RUN_STATE | RUN_SWEEP, RESUME_IGNORES,
     "training token file"},
    {"val",           "val",           OPT_TEXT, F(val),          TEXT(""),                 RUN_STATE | RUN_SWEEP, RESUME_IGNORES,
     "validation token file"},
    {"steps",         "steps",         OPT_LONG, F(steps),        NUM(1, 1e12, 1000),
     RUN_STATE | RUN_SWEEP | RUN_GRID | RUN_GRID_REQUIRED,
     RESUME_KEEPS, "optimizer steps (default 1000)"},
    {"batch",         "batch",         OPT_INT,  F(batch),        NUM(1, 1 << 20, 8),       RUN_STATE | RUN_SWEEP | RUN_GRID,
     RESUME_KEEPS, "sequences per micro-batch (default 8)"},
    {"seq",           "seq",           OPT_INT,  F(seq),          NUM(1, 1 << 20, 256),     RUN_STATE | RUN_SWEEP | RUN_GRID,
     RESUME_KEEPS, "tokens per sequence (default 256)"},
    {"accum",         "accum",         OPT_INT,  F(accum),        NUM(1, 1 << 20, 1),       RUN_STATE | RUN_SWEEP | RUN_GRID,
     RESUME_KEEPS, "micro-batches per step (default 1)"},
    {"lr",            "lr",            OPT_REAL, F(lr),           NUM(1e-12, 10, 5e-4),     RUN_STATE | RUN_SWEEP,
     RESUME_KEEPS, "peak learning rate (default 5e-4)"},
    {"warmup",        "warmup",        OPT_LONG, F(warmup),       NUM(0, 1e12, -1),         RUN_STATE | RUN_SWEEP | RUN_GRID,
     RESUME_KEEPS, "warm-up steps (default steps/20)"},
    {"seed",          "seed",          OPT_U64,  F(seed),         NUM(0, 0, 1),             RUN_STATE | RUN_SWEEP,
     RESUME_KEEPS, "seed of init and data order (default 1)"},
    {"eval_every",    "eval-every",    OPT_INT,  F(eval_every),   NUM(0, 1e9, 100),
     RUN_STATE | RUN_SWEEP | RUN_GRID | RUN_GRID_NONZERO, RESUME_KEEPS,
     "steps between evaluations (default 100; 0 = end only)"},
    {"eval_batches",  "eval-batches",  OPT_INT,  F(eval_batches), NUM(1, 1e9, 20),          RUN_STATE | RUN_SWEEP | RUN_GRID,
     RESUME_KEEPS, "validation batches per evaluation (default 20)"},
    {"save_every",    "save-every",    OPT_INT,  F(save_every),   NUM(0, 1e9, -1),
     RUN_STATE | RUN_SWEEP | RUN_GRID | RUN_GRID_NONZERO, RESUME_KEEPS,
     "steps between checkpoints (default eval-every)"},
    {"max_bad_steps", "max-bad-steps", OPT_LONG, F(max_bad_steps), NUM(1, 1e9, TRAIN_MAX_BAD_STEPS),
     RUN_STATE | RUN_STATE_OPTIONAL, RESUME_MAY_CHANGE,
     "stop after N non-finite steps in a row, none applied (default 5; may change on --resume)"},
    {"wd_exclude",    "wd-exclude",    OPT_TEXT, F(wd_exclude),   TEXT(""),
     RUN_STATE | RUN_STATE_OPTIONAL, RESUME_KEEPS,
     "no weight decay on these parameter classes: embed,norm,route or all (default: decay all)"},
    {"z_loss",        "z-loss",        OPT_REAL, F(z_loss),       NUM(0, 1, 0),
     RUN_STATE | RUN_STATE_OPTIONAL, RESUME_KEEPS,
     "z-loss coefficient C: minimise CE + C·mean(logsumexp²) (default 0; PaLM 1e-4)"},
    {"ema",           "ema",           OPT_REAL, F(ema),          NUM(0, 0.999999, 0),
     RUN_STATE | RUN_STATE_OPTIONAL, RESUME_KEEPS,
     "EMA of the weights with decay D, saved as DIR/ema (default 0: none)"},
};
// clang-format on
_Static_assert(sizeof options / sizeof options[0] <= RUN_OPTIONS_MAX, "raise RUN_OPTIONS_MAX");

int run_option_count(void) { return (int)(sizeof options / sizeof options[0]); }

const RunOption *run_option_at(int i) { return i >= 0 && i < run_option_count() ? &options[i] : NULL; }

const RunOption *run_option_find(const char *name) {
    for (int i = 0; i < run_option_count(); i++)
        if (!strcmp(options[i].key, name) || !strcmp(options[i].flag, name)) return &options[i];
    return NULL;
}

void *run_option_field(const RunOption *opt, RunOptions *o) { return (char *)o + opt->offset; }
const void *run_option_cfield(const RunOption *opt, const RunOptions *o) { return (const char *)o + opt->offset; }

// A number option's value as a double (a u64 seed loses nothing below 2^53).
static double get_num(const RunOption *opt, const RunOptions *o) {
    const void *p = run_option_cfield(opt, o);
    switch (opt->type) {
    case OPT_INT: return *(const int *)p;
    case OPT_LONG: return (double)*(const long *)p;
    case OPT_U64: return (double)*(const uint64_t *)p;
    case OPT_REAL: return *(const double *)p;
    default: return 0;
    }
}

void run_option_set_num(const RunOption *opt, RunOptions *o, double v) {
    void *p = run_option_field(opt, o);
    switch (opt->type) {
    case OPT_INT: *(int *)p = (int)v; break;
    case OPT_LONG: *(long *)p = (long)v; break;
    case OPT_U64: *(uint64_t *)p = (uint64_t)v; break;
    case OPT_REAL: *(double *)p = v; break;
    default: break;
    }
}

void run_options_default(RunOptions *o) {
    memset(o, 0, sizeof *o);
    for (int i = 0; i < run_option_count(); i++) {
        const RunOption *opt = &options[i];
        if (opt->type == OPT_TEXT) snprintf(run_option_field(opt, o), opt->size, "%s", opt->def_text);
        else run_option_set_num(opt, o, opt->def);
    }
}

void run_options_finish(RunOptions *o) {
    if (o->warmup < 0) o->warmup = o->steps / 20;
    if (o->save_every < 0) o->save_every = o->eval_every;
    if (o->eval_every == 0) o->eval_every = o->steps < 1000000000 ? (int)o->steps : 1000000000;
}

// The shortest %.Ng (N >= 9) that reads back as exactly v: "0.0005", not
// "0.00050000000000000001", and still exact for any double.
static void format_real(char *buf, size_t cap, double v) {
    for (int digits = 9; digits <= 17; digits++) {
        snprintf(buf, cap, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) return;
    }
}

void run_option_format(const RunOption *opt, const RunOptions *o, char *buf, size_t cap) {
    const void *p = run_option_cfield(opt, o);
    switch (opt->type) {
    case OPT_INT: snprintf(buf, cap, "%d", *(const int *)p); break;
    case OPT_LONG: snprintf(buf, cap, "%ld", *(const long *)p); break;
    case OPT_U64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case OPT_REAL: format_real(buf, cap, *(const double *)p); break;
    case OPT_TEXT: snprintf(buf, cap, "%s", (const char *)p); break;
    }
}

int run_option_equal(const RunOption *opt, const RunOptions *a, const RunOptions *b) {
    const void *x = run_option_cfield(opt, a), *y = run_option_cfield(opt, b);
    switch (opt->type) {
    case OPT_INT: return *(const int *)x == *(const int *)y;
    case OPT_LONG: return *(const long *)x == *(const long *)y;
    case OPT_U64: return *(const uint64_t *)x == *(const uint64_t *)y;
    case OPT_REAL: return (float)*(const double *)x == (float)*(const double *)y;
    case OPT_TEXT: return !strcmp(x, y);
    }
    return 0;
}

int run_option_applies(const RunOption *opt, const RunOptions *o) {
    if (opt->type == OPT_TEXT) return ((const char *)run_option_cfield(opt, o))[0] != 0;
    const ResidualScheme *s = residual_find(o->residual);
    if (opt->offset == offsetof(RunOptions, heads)) return o->heads && s && s->heads == HEADS_ANY;
    if (opt->offset == offsetof(RunOptions, blocks)) return o->blocks && s && s->needs_blocks;
    return 1;
}

void run_options_to_json(const RunOptions *o, unsigned use, cJSON *j) {
    char buf[64];
    for (int i = 0; i < run_option_count(); i++) {
        const RunOption *opt = &options[i];
        if ((opt->use & use) != use) continue;
        if (opt->type == OPT_TEXT) {
            cJSON_AddStringToObject(j, opt->key, run_option_cfield(opt, o));
        } else if (opt->type == OPT_U64) {   // a string: a u64 does not fit a double
            run_option_format(opt, o, buf, sizeof buf);
            cJSON_AddStringToObject(j, opt->key, buf);
        } else if (opt->type == OPT_REAL) {  // as formatted, not cJSON's %.15g/%.17g
            run_option_format(opt, o, buf, sizeof buf);
            cJSON_AddRawToObject(j, opt->key, buf);
        } else {
            cJSON_AddNumberToObject(j, opt->key, get_num(opt, o));
        }
    }
}

static int from_json(const RunOption *opt, const cJSON *v, const char *origin, RunOptions *o) {
    if (opt->type == OPT_TEXT) {
        if (!cJSON_IsString(v)) return mhar_fail("%s: field '%s' missing or not a string", origin, opt->key);
        if (copy_str(run_option_field(opt, o), opt->size, v->valuestring))
            return mhar_fail("%s: field '%s' is too long", origin, opt->key);
        return MHAR_OK;
    }
    if (opt->type == OPT_U64) {
        if (!cJSON_IsString(v)) return mhar_fail("%s: field '%s' missing or not a string", origin, opt->key);
        char *end;
        unsigned long long u = strtoull(v->valuestring, &end, 10);
        if (*end || v->valuestring[0] < '0' || v->valuestring[0] > '9')
            return mhar_fail("%s: field '%s' is not an integer", origin, opt->key);
        *(uint64_t *)run_option_field(opt, o) = u;
        return MHAR_OK;
    }
    if (!cJSON_IsNumber(v)) return mhar_fail("%s: field '%s' missing or not a number", origin, opt->key);
    double x = v->valuedouble;
    int unset = x == 0 && (opt->use & RUN_ZERO_UNSET);
    // The range first: an int field never receives a value that overflows it.
    if (!unset && !(x >= opt->lo && x <= opt->hi))
        return mhar_fail("%s: field '%s' = %g is outside [%g, %g]", origin, opt->key, x, opt->lo, opt->hi);
    if (opt->type != OPT_REAL && x != floor(x))
        return mhar_fail("%s: field '%s' = %g is not an integer", origin, opt->key, x);
    run_option_set_num(opt, o, x);
    return MHAR_OK;
}

int run_options_from_json(const cJSON *j, unsigned use, const char *origin, RunOptions *o) {
    for (int i = 0; i < run_option_count(); i++) {
        const RunOption *opt = &options[i];
        if ((opt->use & use) != use) continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, opt->key);
        if (!v && (opt->use & RUN_STATE_OPTIONAL)) {
            run_option_set_num(opt, o, opt->def);
            continue;
        }
        if (from_json(opt, v, origin, o)) return MHAR_ERR;
    }
    return MHAR_OK;
}

int run_options_resume(RunOptions *saved, const RunOptions *given, const int *given_flags) {
    for (int i = 0; i < run_option_count(); i++) {
        const RunOption *opt = &options[i];
        if (!given_flags[i]) continue;
        if (opt->resume == RESUME_MAY_CHANGE) {
            memcpy(run_option_field(opt, saved), run_option_cfield(opt, given), opt->size);
        } else if (opt->resume == RESUME_IGNORES) {
            fprintf(stderr, "note: --%s ignored on --resume: %s\n", opt->flag,
                    opt->use & RUN_MODEL ? "the model comes from the checkpoint" : "the run keeps its token files");
        } else if (!run_option_equal(opt, saved, given)) {
            char a[64], b[64];
            run_option_format(opt, given, a, sizeof a);
            run_option_format(opt, saved, b, sizeof b);
            return mhar_fail("--%s %s differs from the run's saved value %s (a resumed run keeps its options)",
                             opt->flag, a, b);
        }
    }
    return MHAR_OK;
}

int run_options_argv(const RunOptions *o, unsigned use, char **argv, int cap, char *buf, size_t buf_cap) {
    int n = 0;
    size_t used = 0;
    for (int i = 0; i < run_option_count(); i++) {
        const RunOption *opt = &options[i];
        if ((opt->use & use) != use || !run_option_applies(opt, o)) continue;
        char value[RUN_PATH_MAX];
        run_option_format(opt, o, value, sizeof value);
        const char *pair[2] = {NULL, value};
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", opt->flag);
        pair[0] = flag;
        for (int k = 0; k < 2; k++) {
            size_t len = strlen(pair[k]) + 1;
            if (used + len > buf_cap || n + 1 >= cap) {
                argv[n] = NULL;
                return mhar_fail("the train command line does not fit (%zu bytes)", buf_cap);
            }
            memcpy(buf + used, pair[k], len);
            argv[n++] = buf + used;
            used += len;
        }
    }
    argv[n] = NULL;
    return MHAR_OK;
}
