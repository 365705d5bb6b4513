// report.json: the numbers of report.md for scripts (report.h).
#include <math.h>
#include <stdio.h>

#include "report.h"

static cJSON *paired_json(const Paired *p) {
    cJSON *q = cJSON_CreateObject();
    cJSON_AddNumberToObject(q, "n", p->n);
    cJSON_AddNumberToObject(q, "mean", p->mean);
    if (p->n > 1) { cJSON_AddNumberToObject(q, "sd", p->sd); cJSON_AddNumberToObject(q, "t", p->t); }
    cJSON_AddNumberToObject(q, "lower", p->better);
    return q;
}

// A group: its metric over seeds and its paired differences to the
// reference and the single-head scheme ("minus_baseline", "minus_attnres"),
// and for a "-qnormal" method to its zero-init twin ("minus_zero_init").
static cJSON *group_json(const ReportGroup *gs, int ng, const ReportGroup *g) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "preset", g->preset);
    cJSON_AddStringToObject(o, "method", g->method);
    cJSON_AddNumberToObject(o, "lr", g->lr);
    cJSON_AddNumberToObject(o, "n", g->n);
    cJSON_AddNumberToObject(o, "n_runs", g->n_all);
    if (g->n) cJSON_AddNumberToObject(o, "mean", g->mean);
    if (g->n > 1) cJSON_AddNumberToObject(o, "sd", g->sd);
    if (g->n) cJSON_AddNumberToObject(o, "min_evals_in_tail", g->min_used);
    cJSON *v = cJSON_AddArrayToObject(o, "values"), *sd = cJSON_AddArrayToObject(o, "seeds");
    for (int i = 0; i < g->n; i++) {
        cJSON_AddItemToArray(v, cJSON_CreateNumber(g->vals[i]));
        cJSON_AddItemToArray(sd, cJSON_CreateNumber((double)g->seeds[i]));
    }
    const char *refs[2] = {report_reference_scheme(), report_single_head_scheme()};
    for (int k = 0; k < 2; k++) {
        Paired p = report_paired(g, report_find_group(gs, ng, g, refs[k]));
        if (!p.n) continue;
        char key[64];
        snprintf(key, sizeof key, "minus_%s", refs[k]);
        cJSON_AddItemToObject(o, key, paired_json(&p));
    }
    const Paired z = report_paired(g, report_zero_init_twin(gs, ng, g));
    if (z.n) cJSON_AddItemToObject(o, "minus_zero_init", paired_json(&z));
    return o;
}

static cJSON *run_json(const ReportRun *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", r->r.name);
    cJSON_AddBoolToObject(o, "done", r->done);
    cJSON_AddBoolToObject(o, "sweep", !r->plain);   // false: trained by mhar train, no run.json
    cJSON_AddNumberToObject(o, "step", r->step < 0 ? 0 : r->step);
    cJSON_AddNumberToObject(o, "evals", r->have_metrics ? r->m.n_evals : 0);
    if (isfinite(r->tail)) cJSON_AddNumberToObject(o, "metric", r->tail);
    cJSON_AddNumberToObject(o, "evals_in_metric", r->tail_used);
    if (isfinite(r->tail_slope)) cJSON_AddNumberToObject(o, "tail_slope_per_1k_steps", r->tail_slope);
    if (r->probe) cJSON_AddItemToObject(o, "probe", cJSON_Duplicate(r->probe, 1));
    return o;
}

cJSON *report_json(const Report *rep) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "dir", rep->dir);
    cJSON_AddStringToObject(j, "metric", "mean of the last 11 validation evaluations of each finished run");
    cJSON *ga = cJSON_AddArrayToObject(j, "groups"), *ra = cJSON_AddArrayToObject(j, "runs");
    for (int i = 0; i < rep->n_groups; i++) cJSON_AddItemToArray(ga, group_json(rep->groups, rep->n_groups, &rep->groups[i]));
    for (int i = 0; i < rep->n_runs; i++) cJSON_AddItemToArray(ra, run_json(&rep->runs[i]));
    ReportSlice rows[128];
    int n = report_slices(rep, rows, 128);
    if (report_slice_presets(rows, n) >= 2) {   // as report.md: only across presets
        cJSON *sa = cJSON_AddArrayToObject(j, "slice_width");
        for (int i = 0; i < n; i++) {
            const ReportSlice *r = &rows[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "preset", r->g->preset);
            cJSON_AddStringToObject(o, "method", r->g->method);
            cJSON_AddNumberToObject(o, "d", r->d);
            cJSON_AddNumberToObject(o, "heads", r->heads);
            cJSON_AddNumberToObject(o, "width", r->d / r->heads);
            cJSON_AddNumberToObject(o, "lr", r->g->lr);
            cJSON_AddNumberToObject(o, "n", r->g->n);
            cJSON_AddNumberToObject(o, "mean", r->g->mean);
            if (r->p.n) {
                cJSON *q = cJSON_AddObjectToObject(o, "minus_baseline");
                cJSON_AddNumberToObject(q, "n", r->p.n);
                cJSON_AddNumberToObject(q, "mean", r->p.mean);
                if (r->p.n > 1) cJSON_AddNumberToObject(q, "sd", r->p.sd);
                cJSON_AddNumberToObject(q, "baseline_lr", r->base->lr);
            }
            cJSON_AddItemToArray(sa, o);
        }
    }
    return j;
}
