// routing.jsonl as series over training (routing_log.h).
#include "routing_log.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/common.h"
#include "util/file.h"
#include "util/json.h"

static double ln(int n) { return log((double)n); }   // before `log` names the RoutingLog

// Grow the per-record arrays to hold record r.
static int grow(RoutingLog *log, int r, int *cap, int gates) {
    if (r < *cap) return MHAR_OK;
    int nc = *cap ? 2 * *cap : 64;
    double *s = realloc(log->step, sizeof(double) * nc);
    if (s) log->step = s;
    double *e = realloc(log->entropy_norm, sizeof(double) * nc * log->n_sites);
    if (e) log->entropy_norm = e;
    double *a = gates ? realloc(log->res_alpha, sizeof(double) * nc * log->n_sites) : NULL;
    if (a) log->res_alpha = a;
    if (!s || !e || (gates && !a)) return mhar_fail("out of memory");
    *cap = nc;
    return MHAR_OK;
}

// The first record fixes the sites, their source counts and whether there are gates.
static int take_sites(RoutingLog *log, const cJSON *sites, const char *path, int line) {
    int n = cJSON_GetArraySize(sites);
    if (n < 1 || n > ROUTING_LOG_MAX_SITES) return mhar_fail("%s:%d: %d sites (1 to %d)", path, line, n, ROUTING_LOG_MAX_SITES);
    log->n_sites = n;
    log->site = calloc(n, sizeof *log->site);
    log->n_sources = calloc(n, sizeof *log->n_sources);
    if (!log->site || !log->n_sources) return mhar_fail("out of memory");
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(sites, i);
        snprintf(log->site[i], sizeof log->site[i], "%s", json_string_or(s, "site", "?"));
        log->n_sources[i] = (int)json_number_or(s, "n_sources", 0);
        if (log->n_sources[i] < 1) return mhar_fail("%s:%d: site %d has no n_sources", path, line, i);
    }
    return MHAR_OK;
}

static int take_record(RoutingLog *log, const cJSON *j, const char *path, int line, int *cap) {
    const cJSON *sites = cJSON_GetObjectItemCaseSensitive(j, "sites");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(j, "step");
    if (!cJSON_IsNumber(step) || !cJSON_IsArray(sites)) return mhar_fail("%s:%d: not a routing record", path, line);
    if (!log->n_sites && take_sites(log, sites, path, line)) return MHAR_ERR;
    if (cJSON_GetArraySize(sites) != log->n_sites)
        return mhar_fail("%s:%d: %d sites, the first record has %d", path, line, cJSON_GetArraySize(sites),
                         log->n_sites);
    const int gates = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(sites, 0), "res_alpha") != NULL;
    if (log->n_records && gates != (log->res_alpha != NULL))
        return mhar_fail("%s:%d: res_alpha present in some records only", path, line);
    const int r = log->n_records;
    if (grow(log, r, cap, gates)) return MHAR_ERR;
    log->step[r] = step->valuedouble;
    for (int i = 0; i < log->n_sites; i++) {
        const cJSON *s = cJSON_GetArrayItem(sites, i), *ent = cJSON_GetObjectItemCaseSensitive(s, "entropy"), *v;
        if (strcmp(json_string_or(s, "site", "?"), log->site[i]))
            return mhar_fail("%s:%d: site %d is %s, the first record's is %s", path, line, i,
                             json_string_or(s, "site", "?"), log->site[i]);
        double sum = 0;
        int h = 0;
        cJSON_ArrayForEach(v, ent) {
            if (!cJSON_IsNumber(v)) return mhar_fail("%s:%d: site %s: entropy is not a list of numbers", path, line, log->site[i]);
            sum += v->valuedouble, h++;
        }
        if (!h) return mhar_fail("%s:%d: site %s: no entropy", path, line, log->site[i]);
        const int n = log->n_sources[i];
        log->entropy_norm[(size_t)r * log->n_sites + i] = n >= 2 ? sum / h / ln(n) : NAN;
        if (gates) log->res_alpha[(size_t)r * log->n_sites + i] = json_number_or(s, "res_alpha", NAN);
    }
    log->n_records++;
    return MHAR_OK;
}

int routing_log_load(const char *path, RoutingLog *log) {
    memset(log, 0, sizeof *log);
    char *text;
    size_t n;
    if (read_file(path, &text, &n)) return MHAR_ERR;
    int rc = MHAR_OK, line = 0, cap = 0;
    for (char *p = text, *end; !rc && p < text + n; p = end + 1) {
        end = memchr(p, '\n', (size_t)(text + n - p));
        if (!end) end = text + n;
        line++;
        if (end == p) continue;
        cJSON *j;
        rc = json_parse(p, (size_t)(end - p), path, &j);
        if (!rc) rc = take_record(log, j, path, line, &cap);
        cJSON_Delete(j);
    }
    free(text);
    if (!rc && !log->n_records) rc = mhar_fail("%s: no records", path);
    if (rc) routing_log_free(log);
    return rc;
}

void routing_log_free(RoutingLog *log) {
    free(log->step); free(log->site); free(log->n_sources); free(log->entropy_norm); free(log->res_alpha);
    memset(log, 0, sizeof *log);
}
