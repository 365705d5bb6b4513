// A probe's result as mhar probe shows it: the table, probe.json (probe_run.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic.h"
#include "probe_run.h"
#include "util/common.h"

void probe_result_print(FILE *f, const ProbeResult *r) {
    fprintf(f, "%s of %s (%s, H = %d), %.0f held-out tokens of %s; null: %d random %s of matched norm\n",
            r->width ? "width disagreement" : "head deviation from the head consensus", r->run, r->mode, r->heads,
            r->tokens, r->data, r->draws, r->draws == 1 ? "query" : "queries");
    if (r->width) fprintf(f, "slices S = %d of width %d; KL(a_s || alpha) in nats, mean over slices and tokens\n",
                          r->slices, r->d / r->slices);
    else fprintf(f, "H = %d heads of width %d; KL(w_h || mean_h w_h) in nats, mean over tokens\n", r->heads, r->d / r->heads);
    fprintf(f, "\n%-16s %5s %10s %10s %10s", "site", "srcs", "trained", "null", "excess");
    if (!r->width) for (int h = 0; h < r->heads && h < 16; h++) fprintf(f, "  head%-3d", h);
    fprintf(f, "\n");
    for (int s = 0; s < r->n_sites; s++) {
        const ProbeSite *ps = &r->sites[s];
        fprintf(f, "%-16s %5d %10.4f %10.4f %10.4f", ps->site, ps->n_sources, ps->trained, ps->null, ps->excess);
        for (int h = 0; !r->width && h < r->heads && h < 16; h++) fprintf(f, "  %7.4f", ps->per_head[h]);
        fprintf(f, "\n");
    }
    fprintf(f, "%-16s %5s %10.4f %10.4f %10.4f\n", "overall", "", r->trained, r->null, r->excess);
    fprintf(f, "\nnull spread over draws: sd %.4f (n %d); the probe's routing matches the model's to %.1e\n",
            r->null_sd, r->draws, r->route_check);
}

static cJSON *site_json(const ProbeResult *r, const ProbeSite *ps) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "site", ps->site);
    cJSON_AddNumberToObject(o, "n_sources", ps->n_sources);
    cJSON_AddNumberToObject(o, "trained", ps->trained);
    cJSON_AddNumberToObject(o, "null", ps->null);
    cJSON_AddNumberToObject(o, "excess", ps->excess);
    if (!r->width) {
        cJSON *ph = cJSON_CreateArray();
        for (int h = 0; h < r->heads; h++) cJSON_AddItemToArray(ph, cJSON_CreateNumber(ps->per_head[h]));
        cJSON_AddItemToObject(o, "per_head", ph);
    }
    return o;
}

cJSON *probe_result_json(const ProbeResult *r) {
    cJSON *j = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    cJSON_AddStringToObject(j, "probe", r->width ? "width_disagreement" : "head_deviation");
    cJSON_AddStringToObject(j, "run", r->run);
    cJSON_AddStringToObject(j, "mode", r->mode);
    cJSON_AddNumberToObject(j, "heads", r->heads);
    if (r->width) cJSON_AddNumberToObject(j, "slices", r->slices);
    cJSON_AddNumberToObject(j, "draws", r->draws);
    cJSON_AddStringToObject(j, "data", r->data);
    cJSON_AddNumberToObject(j, "tokens", r->tokens);
    cJSON_AddNumberToObject(j, "trained", r->trained);
    cJSON_AddNumberToObject(j, "null", r->null);
    if (r->draws > 1) cJSON_AddNumberToObject(j, "null_sd", r->null_sd);
    cJSON_AddNumberToObject(j, "excess", r->excess);
    cJSON_AddNumberToObject(j, "route_check", r->route_check);
    for (int s = 0; s < r->n_sites; s++) cJSON_AddItemToArray(arr, site_json(r, &r->sites[s]));
    cJSON_AddItemToObject(j, "sites", arr);
    return j;
}

int probe_result_save(const ProbeResult *r, const char *json, char **line, char *path, size_t cap) {
    cJSON *j = probe_result_json(r);
    char *text = *line = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    path[0] = '\0';
    if (!text) return mhar_fail("out of memory");
    if (json && !strcmp(json, "none")) return MHAR_OK;
    int rc = json ? copy_str(path, cap, json) : path_join(path, cap, r->run, "probe.json");
    if (rc) return rc;
    size_t n = strlen(text);
    text[n] = '\n';   // the file ends with a newline; cJSON's buffer has room for the NUL it replaces
    rc = atomic_write_file(path, text, n + 1);
    text[n] = '\0';
    return rc;
}
