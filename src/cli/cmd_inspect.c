// mhar inspect: what a routed model learned to read, from DIR/routing.jsonl.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "io/atomic.h"
#include "model/config.h"
#include "residual/residual.h"
#include "util/common.h"

static int records_routing(const ResidualScheme *s) { return s->route_weights != NULL; }

static const char *usage =
    "usage: mhar inspect --run DIR [--step S]\n\n"
    "Prints the model (family, residual scheme, shape, RoPE) from DIR/config.json,\n"
    "then, for each routing site (rows) and routing head (columns), the mean\n"
    "entropy of the routing weights over the sources, the mean weight on\n"
    "source 0 (the embedding; delta_mh: the null source) and on the most\n"
    "recent source, and for delta_mh each site's gate res_alpha, measured at\n"
    "an evaluation (default: the last one). Written by mhar train for the\n"
    "schemes that save routing weights.";

static void print_table(const cJSON *sites, const char *key, const char *title, int H) {
    printf("\n%s\n%-16s %5s", title, "site", "srcs");
    for (int h = 0; h < H; h++) printf("  head%-3d", h);
    printf("\n");
    const cJSON *site;
    cJSON_ArrayForEach(site, sites) {
        const cJSON *name = cJSON_GetObjectItem(site, "site"), *n = cJSON_GetObjectItem(site, "n_sources");
        const cJSON *row = cJSON_GetObjectItem(site, key), *v;
        printf("%-16s %5d", cJSON_IsString(name) ? name->valuestring : "?", cJSON_IsNumber(n) ? n->valueint : 0);
        cJSON_ArrayForEach(v, row) printf("  %7.3f", cJSON_IsNumber(v) ? v->valuedouble : 0.0);
        printf("\n");
    }
}

// The line for `step` (or the last line when step < 0), parsed.
static cJSON *find_line(char *text, long step, const char *path) {
    cJSON *found = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *s = j ? cJSON_GetObjectItem(j, "step") : NULL;
        if (!cJSON_IsNumber(s) || !cJSON_IsArray(cJSON_GetObjectItem(j, "sites"))) {
            cJSON_Delete(j);
            cJSON_Delete(found);
            mhar_fail("%s: malformed line (not a routing record)", path);
            return NULL;
        }
        if (step < 0 || (long)s->valuedouble == step) { cJSON_Delete(found); found = j; }
        else cJSON_Delete(j);
    }
    if (!found) mhar_fail(step < 0 ? "%s: no evaluations recorded yet" : "%s: no evaluation at step %ld", path, step);
    return found;
}

int cmd_inspect(int argc, char **argv) {
    const char *run = NULL;
    long step = -1;
    Flag flags[] = {
        {"run", FLAG_STR, &run, "run directory", 0, 0, 0},
        {"step", FLAG_LONG, &step, "evaluation step to show (default: the last)", 0, 1e15, 0},
    };
    int r = args_parse(argc, argv, flags, sizeof flags / sizeof flags[0], usage);
    if (r) return r > 0 ? 0 : 2;
    if (!run) { fprintf(stderr, "error: --run DIR is required (see --help)\n"); return 2; }
    char path[MHAR_PATH_MAX], *text = NULL, line[512];
    size_t n;
    Config cfg;
    if (path_join(path, sizeof path, run, "config.json") || config_load(path, &cfg)) {
        fprintf(stderr, "note: no model description: %s\n", mhar_error());
    } else {
        config_describe(&cfg, line, sizeof line);
        printf("model: %s\n", line);
    }
    if (path_join(path, sizeof path, run, "routing.jsonl") || read_file(path, &text, &n)) {
        char names[256];
        fprintf(stderr, "error: %s (only %s runs record routing)\n", mhar_error(),
                residual_names(names, sizeof names, ", ", records_routing));
        return 1;
    }
    cJSON *j = find_line(text, step, path);
    free(text);
    if (!j) { fprintf(stderr, "error: %s\n", mhar_error()); return 1; }
    const cJSON *sites = cJSON_GetObjectItem(j, "sites"), *heads = cJSON_GetObjectItem(j, "heads");
    int H = cJSON_IsNumber(heads) ? heads->valueint : 1;
    printf("routing of %s at step %.0f (%d head%s)\n", run, cJSON_GetObjectItem(j, "step")->valuedouble, H,
           H == 1 ? "" : "s");
    print_table(sites, "entropy", "entropy of the routing weights (nats; uniform over n sources = ln n)", H);
    const cJSON *site0 = cJSON_GetArrayItem(sites, 0);
    if (cJSON_GetObjectItem(site0, "w_null")) print_table(sites, "w_null", "mean weight on the null source (source 0)", H);
    else print_table(sites, "w_emb", "mean weight on the embedding (source 0)", H);
    print_table(sites, "w_last", "mean weight on the most recent source", H);
    if (cJSON_GetObjectItem(site0, "res_alpha")) {
        printf("\ngate res_alpha of each site (0: the read adds nothing to the stream)\n");
        const cJSON *site;
        cJSON_ArrayForEach(site, sites) {
            const cJSON *name = cJSON_GetObjectItem(site, "site"), *a = cJSON_GetObjectItem(site, "res_alpha");
            printf("%-16s %9.5f\n", cJSON_IsString(name) ? name->valuestring : "?",
                   cJSON_IsNumber(a) ? a->valuedouble : NAN);
        }
    }
    cJSON_Delete(j);
    return 0;
}
