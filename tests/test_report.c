// mhar report's library (analysis/report.h, plot.h) on a hand-made sweep
// whose metrics are known: 19 runs over two presets, seven schemes, three
// seeds, one unfinished run and a directory without run.json. Checks the
// table order (registry order, presets by size), the groups' numbers, the
// scheme roles taken from the registry, loss against H on common seeds, the
// Markdown and JSON, and the gnuplot files written without gnuplot.
#include <cjson/cJSON.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analysis/plot.h"
#include "analysis/report.h"
#include "analysis/routing_log.h"
#include "check.h"
#include "io/atomic.h"
#include "model/config.h"
#include "testfiles.h"
#include "util/common.h"

static int close_to(double a, double b, double tol) { return fabs(a - b) <= tol; }

static char *slurp(const char *path) {
    char *text = NULL;
    size_t n;
    if (read_file(path, &text, &n)) return NULL;
    return text;
}

// Write a JSON object to path.
static void put_json(const char *path, cJSON *j) {
    char *text = cJSON_Print(j);
    write_bytes(path, text, strlen(text));
    free(text);
    cJSON_Delete(j);
}

// dir/metrics.jsonl with an evaluation every 10 steps up to step (with a
// training line before each when train_lines): the first 10.0 (outside the
// last 11 of 12), every later one `metric`.
static void write_metrics(const char *dir, int step, double metric, int train_lines) {
    char text[4096], path[600];
    size_t n = 0;
    for (int e = 10; e <= step; e += 10) {
        if (train_lines)
            n += snprintf(text + n, sizeof text - n, "{\"step\":%d,\"loss\":3.5,\"lr\":0.001,\"grad_norm\":1,"
                          "\"tok_per_s\":1000,\"tokens\":%d}\n", e, e * 32);
        n += snprintf(text + n, sizeof text - n, "{\"step\":%d,\"val_loss\":%.17g,\"val_tokens\":64}\n", e,
                      e == 10 ? 10.0 : metric);
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    write_bytes(path, text, n);
}

// Where make_run puts its runs, their lr and query init (test_slices and
// test_query_init change them).
static const char *runs_dir = "sw/runs";
static double run_lr = 1e-3;
static const char *run_query_init = "";

// One run directory under runs_dir: run.json, checkpoint/state.json at step
// of 120, and metrics.jsonl with an evaluation every 10 steps up to step:
// the first 10.0 (outside the last 11 of 12), every later one `metric`.
static void make_run(const char *preset, const char *residual, const char *method, int heads, int blocks,
                     int seed, double metric, int step) {
    SweepRun r = {0};
    run_options_default(&r.opt);
    snprintf(r.name, sizeof r.name, "%s-%s-lr%g-s%d", preset, method, run_lr, seed);
    if (run_lr == 1e-3) snprintf(r.name, sizeof r.name, "%s-%s-s%d", preset, method, seed);
    snprintf(r.opt.preset, sizeof r.opt.preset, "%s", preset);
    snprintf(r.opt.residual, sizeof r.opt.residual, "%s", residual);
    snprintf(r.method, sizeof r.method, "%s", method);
    snprintf(r.opt.route_query_init, sizeof r.opt.route_query_init, "%s", run_query_init);
    r.opt.heads = heads, r.opt.blocks = blocks, r.opt.seed = seed, r.opt.lr = run_lr, r.opt.steps = 120, r.opt.warmup = 6;
    r.opt.batch = 2, r.opt.seq = 16, r.opt.accum = 1, r.opt.eval_every = 10, r.opt.eval_batches = 2, r.opt.save_every = 10;
    snprintf(r.opt.train, sizeof r.opt.train, "/data/train.bin");
    snprintf(r.opt.val, sizeof r.opt.val, "/data/val.bin");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s", tpath(runs_dir));
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", r.name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/checkpoint", dir);
    mkdir(path, 0755);
    cJSON *rec = sweep_run_to_json(&r), *starts = cJSON_AddArrayToObject(rec, "starts"), *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "commit", "0123456789abcdef0123456789abcdef01234567");
    cJSON_AddBoolToObject(s, "dirty", 0);
    cJSON_AddItemToArray(starts, s);
    snprintf(path, sizeof path, "%s/run.json", dir);
    put_json(path, rec);
    cJSON *st = cJSON_CreateObject();
    cJSON_AddNumberToObject(st, "step", step);
    cJSON_AddNumberToObject(st, "steps", 120);
    snprintf(path, sizeof path, "%s/checkpoint/state.json", dir);
    put_json(path, st);
    write_metrics(dir, step, metric, 1);
}

static void make_sweep(void) {
    mkdir(tpath("sw"), 0755);
    mkdir(tpath("sw/runs"), 0755);
    mkdir(tpath("sw/runs/junk"), 0755);
    const double base[3] = {3.00, 3.10, 3.20}, hc[3] = {2.95, 3.05, 3.15}, att[3] = {2.90, 3.08, 3.16},
                 h2[3] = {2.80, 3.00, 3.30}, h4[2] = {2.70, 2.90};
    for (int s = 1; s <= 3; s++) {
        make_run("nano", "baseline", "baseline", 0, 0, s, base[s - 1], 120);
        make_run("nano", "hc", "hc", 0, 0, s, hc[s - 1], 120);
        make_run("nano", "attnres", "attnres", 1, 0, s, att[s - 1], 120);
        make_run("nano", "mhar", "mhar-h2", 2, 0, s, h2[s - 1], 120);
        if (s < 3) make_run("nano", "mhar", "mhar-h4", 4, 0, s, h4[s - 1], 120);
        make_run("nano", "block", "block-h2-b2", 2, 2, s, 3.0, 120);
    }
    make_run("nano", "denseformer", "denseformer", 0, 0, 1, 3.5, 50);   // unfinished
    make_run("micro", "baseline", "baseline", 0, 0, 1, 2.5, 120);
    const char *probe = "{\"probe\":\"width_disagreement\",\"slices\":4,\"tokens\":64,\"trained\":0.5,\"null\":0.125,"
                        "\"excess\":0.375}\n";
    write_bytes(tpath("sw/runs/nano-attnres-s1/probe.json"), probe, strlen(probe));
}

static void test_load(void) {
    Report rep;
    FILE *notes = tmpfile();
    int rc = report_load(&rep, tpath("sw"), notes);
    CHECK(rc == 0 && rep.n_runs == 19, "report_load_runs", "rc %d, %d runs (%s)", rc, rep.n_runs, mhar_error());
    char buf[512] = "";
    rewind(notes);
    size_t got = fread(buf, 1, sizeof buf - 1, notes);
    buf[got] = 0;
    fclose(notes);
    CHECK(has(buf, "junk: no run.json, and not a run of mhar train") && has(buf, "junk/config.json"),
          "report_load_notes_junk", "notes: '%s'", buf);
    if (rc) return;
    const char *want[8] = {"baseline", "hc", "denseformer", "attnres", "mhar-h2", "mhar-h4", "block-h2-b2", "baseline"};
    int order = rep.n_groups == 8;
    for (int i = 0; order && i < 8; i++) order &= !strcmp(rep.groups[i].method, want[i]);
    CHECK(order && !strcmp(rep.groups[7].preset, "micro"), "report_group_order_registry_then_size",
          "%d groups, first %s, last %s %s", rep.n_groups, rep.groups[0].method, rep.groups[rep.n_groups - 1].preset,
          rep.groups[rep.n_groups - 1].method);
    CHECK(!strcmp(rep.runs[0].r.name, "nano-baseline-s1") && !strcmp(rep.runs[18].r.name, "micro-baseline-s1"),
          "report_run_order", "first %s, last %s", rep.runs[0].r.name, rep.runs[18].r.name);
    const ReportGroup *b = &rep.groups[0], *hc = &rep.groups[1], *df = &rep.groups[2];
    CHECK(b->n == 3 && close_to(b->mean, 3.1, 1e-12) && close_to(b->sd, 0.1, 1e-12) && b->min_used == 11,
          "report_group_mean_sd", "n %d mean %.17g sd %.17g used %d", b->n, b->mean, b->sd, b->min_used);
    CHECK(df->n == 0 && df->n_all == 1 && !rep.runs[6].done, "report_unfinished_not_counted", "n %d of %d", df->n,
          df->n_all);
    Paired p = report_paired(hc, b);
    CHECK(p.n == 3 && close_to(p.mean, -0.05, 1e-12) && p.better == 3, "report_paired_to_baseline",
          "n %d mean %g better %d", p.n, p.mean, p.better);
    p = report_paired(&rep.groups[5], b);
    CHECK(p.n == 2 && close_to(p.mean, -0.25, 1e-12), "report_paired_common_seeds_only", "n %d mean %g", p.n, p.mean);
    CHECK(report_section_end(&rep, 0) == 7 && report_section_end(&rep, 7) == 8, "report_sections_by_preset",
          "ends %d %d", report_section_end(&rep, 0), report_section_end(&rep, 7));
    CHECK(report_find_group(rep.groups, 7, b, "attnres") == &rep.groups[3] &&
          report_find_group(rep.groups, 8, &rep.groups[7], "hc") == NULL, "report_find_group", "wrong group");
    CHECK(isfinite(rep.runs[0].tail_slope) && close_to(rep.runs[0].tail_slope, 0, 1e-9), "report_tail_slope_flat",
          "slope %g", rep.runs[0].tail_slope);

    const ReportGroup *hg[8];
    int n = report_heads_groups(rep.groups, 0, 7, hg, 8);
    CHECK(n == 3 && report_group_heads(hg[0]) == 1 && !strcmp(hg[0]->method, "attnres") &&
          report_group_heads(hg[1]) == 2 && report_group_heads(hg[2]) == 4, "report_heads_groups_sorted",
          "%d groups", n);
    uint64_t common[8];
    double y[8];
    int nc = n == 3 ? report_heads_on_common_seeds(hg, n, common, y) : 0;
    CHECK(nc == 2 && common[0] == 1 && common[1] == 2 && close_to(y[0], 2.99, 1e-12) && close_to(y[1], 2.9, 1e-12) &&
          close_to(y[2], 2.8, 1e-12), "report_heads_on_common_seeds", "%d common, y %g %g %g", nc, y[0], y[1], y[2]);
    report_free(&rep);
}

// The roles the report gives schemes come from the registry.
static void test_roles(void) {
    CHECK(!strcmp(report_reference_scheme(), "baseline") && !strcmp(report_single_head_scheme(), "attnres"),
          "report_roles_reference_single_head", "%s, %s", report_reference_scheme(), report_single_head_scheme());
    CHECK(report_routes("attnres") && report_routes("mhar") && report_routes("block") && !report_routes("hc") &&
          !report_routes("baseline") && !report_routes("nonsense"), "report_roles_routes", "wrong routing schemes");
    CHECK(report_routes_heads("attnres") && report_routes_heads("mhar") && !report_routes_heads("block") &&
          !report_routes_heads("denseformer"), "report_roles_routes_heads", "wrong heads schemes");
}

static void test_make(void) {
    ReportSummary sum;
    int rc = report_make(tpath("sw"), 1, NULL, &sum);
    CHECK(rc == 0 && sum.n_runs == 19 && sum.n_done == 18 && sum.missing_gnuplot && sum.plots_drawn == 0 &&
          sum.plots_failed == 0, "report_make_summary", "rc %d (%s), %d runs %d done, missing %d drawn %d failed %d",
          rc, mhar_error(), sum.n_runs, sum.n_done, sum.missing_gnuplot, sum.plots_drawn, sum.plots_failed);
    char *md = slurp(tpath("sw/report.md"));
    if (!md) { CHECK(0, "report_md_written", "no report.md"); return; }
    CHECK(has(md, "19 runs, 18 finished") && has(md, "### preset nano\n") && has(md, "### preset micro\n"),
          "report_md_sections", "title or sections missing");
    CHECK(has(md, "| baseline | 3 of 3 | 11 | 3.1000 ± 0.1000 | - | - | - |"), "report_md_baseline_row", "row missing");
    CHECK(has(md, "- Lowest mean: **mhar-h4**, 2.8000 (n 2).") &&
          has(md, "- Loss against H: H=1 3.0467, H=2 3.0333, H=4 2.8000. Minimum at H=4, the largest H tried."),
          "report_md_headline", "headline missing");
    CHECK(has(md, "on the seeds every H has (1, 2): H=1 2.9900, H=2 2.9000, H=4 2.8000. Minimum at H=4."),
          "report_md_common_seeds", "common-seeds line missing");
    CHECK(has(md, "| nano-attnres-s1 | width disagreement | S 4 | 64 | 0.5 | 0.125 | 0.375 |"), "report_md_probe",
          "probe row missing");
    CHECK(has(md, "| nano-denseformer-s1 | 1 | unfinished | 50/120 | 5 |"), "report_md_unfinished_run",
          "run row missing");
    CHECK(has(md, "gnuplot is not installed") && has(md, "](plots/heads_nano.png)"), "report_md_plots_without_gnuplot",
          "no note or no link");
    free(md);
    char *dat = slurp(tpath("sw/plots/heads_nano.dat"));
    CHECK(dat && has(dat, "# MHAR (H = 1: attnres), mean ± sd over seeds\n1 3.046666667 ") && has(dat, "\n4 2.8 ") &&
          has(dat, "# baseline\nnan nan nan") && has(dat, "# hc\nnan nan nan") && !has(dat, "denseformer"),
          "report_heads_plot_data", "%.300s", dat ? dat : "(none)");
    free(dat);
    char *js = slurp(tpath("sw/report.json"));
    cJSON *j = js ? cJSON_Parse(js) : NULL;
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(j, "groups"), *runs = cJSON_GetObjectItemCaseSensitive(j, "runs");
    const cJSON *g1 = cJSON_GetArrayItem(groups, 1);
    const cJSON *mb = cJSON_GetObjectItemCaseSensitive(g1, "minus_baseline");
    CHECK(cJSON_GetArraySize(groups) == 8 && cJSON_GetArraySize(runs) == 19 &&
          close_to(cJSON_GetObjectItemCaseSensitive(mb, "mean")->valuedouble, -0.05, 1e-12) &&
          cJSON_GetObjectItemCaseSensitive(mb, "lower")->valueint == 3, "report_json_numbers", "%.200s", js ? js : "");
    cJSON_Delete(j);
    free(js);
}

// Runs of mhar train itself (experiment 4's continued arms): no run.json;
// the scheme from config.json, the recipe from checkpoint/state.json, the
// preset from the model's shape, and a file beside them (a log) ignored.
static void make_plain_run(const char *name, const char *residual, int heads, int blocks, int seed, double metric) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/%s", tpath("plain/runs"), name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/checkpoint", dir);
    mkdir(path, 0755);
    Config c;
    config_preset("nano", &c);
    c.vocab_size = 64;
    snprintf(c.attnres_mode, sizeof c.attnres_mode, "%s", residual);
    c.attnres_num_heads = heads, c.attnres_num_blocks = blocks;
    snprintf(path, sizeof path, "%s/config.json", dir);
    config_save(path, &c);
    RunOptions o;
    run_options_default(&o);
    o.steps = 120, o.warmup = 6, o.lr = 2e-3, o.seed = seed, o.batch = 2, o.seq = 16, o.accum = 1;
    o.eval_every = 10, o.eval_batches = 2, o.save_every = 10;
    snprintf(o.train, sizeof o.train, "/data/train.bin");
    snprintf(o.val, sizeof o.val, "/data/val.bin");
    cJSON *st = cJSON_CreateObject();
    cJSON_AddNumberToObject(st, "step", 120);
    run_options_to_json(&o, RUN_STATE, st);
    snprintf(path, sizeof path, "%s/checkpoint/state.json", dir);
    put_json(path, st);
    write_metrics(dir, 120, metric, 0);
}

static void test_plain_runs(void) {
    mkdir(tpath("plain"), 0755);
    mkdir(tpath("plain/runs"), 0755);
    write_bytes(tpath("plain/runs/train-s1.log"), "log\n", 4);
    const double base[2] = {3.00, 3.10}, conv[2] = {2.98, 3.06};
    for (int s = 1; s <= 2; s++) {
        char name[64];
        snprintf(name, sizeof name, "cont-baseline-s%d", s);
        make_plain_run(name, "baseline", 1, 0, s, base[s - 1]);
        snprintf(name, sizeof name, "cont-delta-mh-s%d", s);
        make_plain_run(name, "delta_mh", 8, 3, s, conv[s - 1]);
    }
    // the converted arm's routing statistics: two evaluations, a one-source
    // site (no entropy to show) and a two-source one, with gates
    const char *routing =
        "{\"step\": 10, \"heads\": 2, \"sites\": [{\"site\": \"layers.0.attn\", \"n_sources\": 1, "
        "\"entropy\": [0, 0], \"res_alpha\": 0.01}, {\"site\": \"layers.0.mlp\", \"n_sources\": 2, "
        "\"entropy\": [0.6931, 0.6931], \"res_alpha\": -0.02}]}\n"
        "{\"step\": 120, \"heads\": 2, \"sites\": [{\"site\": \"layers.0.attn\", \"n_sources\": 1, "
        "\"entropy\": [0, 0], \"res_alpha\": 0.5}, {\"site\": \"layers.0.mlp\", \"n_sources\": 2, "
        "\"entropy\": [0.2, 0.4], \"res_alpha\": -0.25}]}\n";
    write_bytes(tpath("plain/runs/cont-delta-mh-s1/routing.jsonl"), routing, strlen(routing));
    RoutingLog lg;
    int rc = routing_log_load(tpath("plain/runs/cont-delta-mh-s1/routing.jsonl"), &lg);
    CHECK(rc == 0 && lg.n_records == 2 && lg.n_sites == 2 && lg.step[1] == 120 && lg.n_sources[1] == 2 &&
          !strcmp(lg.site[1], "layers.0.mlp") && isnan(lg.entropy_norm[0]) &&
          close_to(lg.entropy_norm[3], 0.3 / log(2.0), 1e-12) && lg.res_alpha && lg.res_alpha[2] == 0.5 &&
          lg.res_alpha[3] == -0.25, "routing_log_series", "rc %d (%s)", rc, mhar_error());
    if (!rc) routing_log_free(&lg);
    // one line each, so that no array element is a concatenation (clang warns of those)
    static const char bad0[] = "{\"step\": 10}\n";
    static const char bad1[] = "{\"step\": 10, \"sites\": [{\"site\": \"a\", \"n_sources\": 2, \"entropy\": [0.5]}]}\n"
                               "{\"step\": 20, \"sites\": [{\"site\": \"b\", \"n_sources\": 2, \"entropy\": [0.5]}]}\n";
    static const char bad2[] = "{\"step\": 10, \"sites\": [{\"site\": \"a\", \"n_sources\": 2, \"entropy\": [0.5]}]}\n"
                               "not json\n";
    const char *bad[3] = {bad0, bad1, bad2};
    const char *why[3] = {":1: not a routing record", ":2: site 0 is b, the first record's is a", "invalid JSON"};
    for (int k = 0; k < 3; k++) {
        write_bytes(tpath("bad-routing.jsonl"), bad[k], strlen(bad[k]));
        rc = routing_log_load(tpath("bad-routing.jsonl"), &lg);
        CHECK(rc != 0 && has(mhar_error(), why[k]) && has(mhar_error(), "bad-routing.jsonl"), "routing_log_refuses",
              "case %d: rc %d, '%s'", k, rc, mhar_error());
    }
    Report rep;
    FILE *notes = tmpfile();
    rc = report_load(&rep, tpath("plain"), notes);
    long noted = ftell(notes);
    fclose(notes);
    CHECK(rc == 0 && rep.n_runs == 4 && rep.n_groups == 2 && noted == 0, "report_plain_runs_load",
          "rc %d (%s), %d runs, %d groups, %ld bytes of notes", rc, mhar_error(), rep.n_runs, rep.n_groups, noted);
    if (rc || rep.n_groups != 2) { report_free(&rep); return; }
    const ReportGroup *b = &rep.groups[0], *d = &rep.groups[1];
    CHECK(!strcmp(b->method, "baseline") && !strcmp(d->method, "delta_mh-h8-b3") && !strcmp(d->preset, "nano") &&
          d->lr == 2e-3 && rep.runs[0].plain && rep.runs[0].done && rep.runs[0].r.opt.seed == 1,
          "report_plain_runs_settings", "%s %s %s lr %g", b->method, d->method, d->preset, d->lr);
    Paired p = report_paired(d, b);
    CHECK(p.n == 2 && close_to(p.mean, -0.03, 1e-12) && close_to(p.sd, 0.02 * sqrt(0.5), 1e-12) && p.better == 2,
          "report_plain_runs_paired", "n %d mean %.17g sd %.17g", p.n, p.mean, p.sd);
    report_free(&rep);
    ReportSummary sum;
    rc = report_make(tpath("plain"), 1, NULL, &sum);
    char *md = rc ? NULL : slurp(tpath("plain/report.md"));
    CHECK(md && has(md, "4 of 4 runs were trained by `mhar train` outside a sweep") && !has(md, "- code: commit") &&
          has(md, "| cont-delta-mh-s2 | 2 | done | 120/120 | 12 | 3.0600 (11) |"), "report_plain_runs_md",
          "%.400s", md ? md : mhar_error());
    CHECK(md && has(md, "## Routing over training") &&
          has(md, "- **cont-delta-mh-s1**, step 120 (2 evaluations): entropy / ln n 0.433 to 0.433 over 2 sites; "
                  "gates res_alpha -0.250 to +0.500\n") &&
          has(md, "](plots/routing_cont-delta-mh-s1.png)") && has(md, "](plots/gates_cont-delta-mh-s1.png)") &&
          !has(md, "cont-delta-mh-s2**"), "report_routing_md", "%.600s", md ? md : mhar_error());
    free(md);
    char *dat = slurp(tpath("plain/plots/routing_cont-delta-mh-s1.dat"));
    CHECK(dat && !has(dat, "layers.0.attn") && has(dat, "# layers.0.mlp\n10 0.9999") && has(dat, "\n120 0.43"),
          "report_routing_plot_data", "%.300s", dat ? dat : "(none)");
    free(dat);
}

static void test_errors(void) {
    Report rep;
    int rc = report_load(&rep, tpath("nothing"), NULL);
    CHECK(rc != 0 && has(mhar_error(), "cannot open"), "report_not_a_sweep", "%s", mhar_error());
    report_free(&rep);
    mkdir(tpath("empty"), 0755);
    mkdir(tpath("empty/runs"), 0755);
    rc = report_load(&rep, tpath("empty"), NULL);
    CHECK(rc != 0 && has(mhar_error(), "no runs yet"), "report_no_runs", "%s", mhar_error());
    report_free(&rep);
}

// plot.c alone: the data blocks and the script, log-2 ticks each x once.
static void test_plot(void) {
    double x1[3] = {1, 2, 4}, y1[3] = {5, 6, 7}, e1[3] = {0.5, NAN, 0.25}, x2[2] = {2, 4}, y2[2] = {1, 2}, r = 3;
    PlotSeries s[3] = {{"a \"q\"", SERIES_ERRORBARS, x1, y1, e1, 3}, {"b", SERIES_LINES, x2, y2, NULL, 2},
                       {"ref", SERIES_HLINE, NULL, &r, NULL, 1}};
    Plot p = {tmpdir, "p1", "title", "x", "y", NAN, 1};
    int rc = plot_draw(&p, s, 3);
    char *dat = slurp(tpath("p1.dat")), *gp = slurp(tpath("p1.gp"));
    CHECK(rc == 1 && dat && !strcmp(dat, "# a \"q\"\n1 5 0.5\n2 6 0\n4 7 0.25\n\n\n\n# b\n2 1\n4 2\n\n\n\n# ref\nnan nan nan\n\n\n"),
          "plot_data_blocks", "rc %d, dat:\n%s", rc, dat ? dat : "(none)");
    PlotSeries many[9];
    for (int k = 0; k < 9; k++) many[k] = (PlotSeries){"s", SERIES_LINES, x1, y1, NULL, 3};
    Plot pm = {tmpdir, "p9", "nine", "x", "y", NAN, 0};
    plot_draw(&pm, many, 9);
    char *gp9 = slurp(tpath("p9.gp"));
    CHECK(gp9 && has(gp9, "index 7 using 1:2 with lines lw 2 title") && has(gp9, "index 8 using 1:2 with lines lw 2 dashtype 2"),
          "plot_lines_after_eight_dashed", "%s", gp9 ? gp9 : "(none)");
    free(gp9);
    CHECK(gp && has(gp, "set xtics (\"1\" 1, \"2\" 2, \"4\" 4)\n") && has(gp, "set xrange [0.666667:6]\n") &&
          has(gp, "title \"a \\\"q\\\"\"") && has(gp, "3 with lines dashtype 2 lw 2 title \"ref\"") &&
          has(gp, "\"p1.dat\" index 1 using 1:2 with lines"), "plot_script", "%s", gp ? gp : "(none)");
    free(dat);
    free(gp);
}

// Loss against slice width across presets: routing schemes at their best
// lr, paired with baseline at its best lr; nano's d 128 and micro's d 256.
static void test_slices(void) {
    mkdir(tpath("sl"), 0755);
    mkdir(tpath("sl/runs"), 0755);
    runs_dir = "sl/runs";
    const double nb1[2] = {3.00, 3.10}, nb2[2] = {2.95, 3.05}, na1[2] = {2.90, 3.00}, na2[2] = {3.20, 3.30},
                 nh8[2] = {2.99, 3.05}, mb[2] = {2.50, 2.60}, ma[2] = {2.42, 2.50}, mh4[2] = {2.40, 2.52},
                 mh8[2] = {2.45, 2.55};
    for (int s = 1; s <= 2; s++) {
        run_lr = 1e-3;
        make_run("nano", "baseline", "baseline", 0, 0, s, nb1[s - 1], 120);
        make_run("nano", "attnres", "attnres", 1, 0, s, na1[s - 1], 120);
        make_run("nano", "mhar", "mhar-h8", 8, 0, s, nh8[s - 1], 120);
        make_run("micro", "baseline", "baseline", 0, 0, s, mb[s - 1], 120);
        make_run("micro", "attnres", "attnres", 1, 0, s, ma[s - 1], 120);
        make_run("micro", "mhar", "mhar-h4", 4, 0, s, mh4[s - 1], 120);
        make_run("micro", "mhar", "mhar-h8", 8, 0, s, mh8[s - 1], 120);
        make_run("micro", "block", "block-h2-b2", 2, 2, s, 2.0, 120);   // blocks: not on the width axis
        run_lr = 2e-3;
        make_run("nano", "baseline", "baseline", 0, 0, s, nb2[s - 1], 120);
        make_run("nano", "attnres", "attnres", 1, 0, s, na2[s - 1], 120);
    }
    runs_dir = "sw/runs", run_lr = 1e-3;
    Report rep;
    ReportSlice rows[16];
    int n = report_load(&rep, tpath("sl"), NULL) ? -1 : report_slices(&rep, rows, 16);
    // nano: attnres (lr 1e-3) and H 8 against baseline at 2e-3; micro: H 1, 4, 8 against baseline at 1e-3
    const int want_h[5] = {1, 8, 1, 4, 8}, want_d[5] = {128, 128, 256, 256, 256};
    const double want[5] = {-0.05, 0.02, -0.09, -0.09, -0.05};
    int ok = n == 5 && report_slice_presets(rows, n) == 2;
    for (int i = 0; ok && i < 5; i++)
        ok = rows[i].heads == want_h[i] && rows[i].d == want_d[i] && rows[i].p.n == 2 &&
             close_to(rows[i].p.mean, want[i], 1e-9) && rows[i].base->lr == (i < 2 ? 2e-3 : 1e-3) &&
             rows[i].g->lr == 1e-3;
    CHECK(ok, "report_slices_best_lr_pairs", "%d rows", n);
    if (n >= 0) report_free(&rep);
    ReportSummary sum;
    int rc = report_make(tpath("sl"), 1, NULL, &sum);
    char *md = slurp(tpath("sl/report.md")), *dat = slurp(tpath("sl/plots/slices.dat")), *js = slurp(tpath("sl/report.json"));
    CHECK(rc == 0 && md && has(md, "## Loss against slice width d/H") &&
          has(md, "| nano | 128 | 8 | 16 | 0.001 | 3.0200 ± 0.0424 (n 2) | +0.0200 ± 0.0283 (n 2, t 1.0) |") &&
          has(md, "| micro | 256 | 4 | 64 | 0.001 |") && has(md, "](plots/slices.png)"),
          "report_md_slices", "%s", md && strstr(md, "## Loss against") ? strstr(md, "## Loss against") : "(none)");
    CHECK(dat && has(dat, "# nano\n128 -0.05 ") && has(dat, "\n16 0.02 ") && has(dat, "# micro\n256 -0.09 ") &&
          has(dat, "\n32 -0.05 ") &&
          has(dat, "# baseline\nnan nan nan"), "report_slices_plot_data", "%s", dat ? dat : "(none)");
    cJSON *j = js ? cJSON_Parse(js) : NULL;
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(j, "slice_width"), *r4 = cJSON_GetArrayItem(sa, 4);
    const cJSON *mbj = cJSON_GetObjectItemCaseSensitive(r4, "minus_baseline");
    CHECK(cJSON_GetArraySize(sa) == 5 && cJSON_GetObjectItemCaseSensitive(r4, "width")->valueint == 32 &&
          close_to(cJSON_GetObjectItemCaseSensitive(mbj, "mean")->valuedouble, -0.05, 1e-9),
          "report_json_slices", "%.300s", js ? js : "(none)");
    cJSON_Delete(j);
    // The best-lr table pairs each method with baseline and attnres at their own best lrs:
    // nano mhar-h8 (1e-3) - attnres (1e-3): +0.09, +0.05; attnres - baseline (2e-3): -0.05, -0.05.
    CHECK(md && has(md, "| nano | mhar-h8 | 0.001 | 3.0200 ± 0.0424 (n 2) | +0.0200 ± 0.0283 (n 2, t 1.0) | "
                        "+0.0700 ± 0.0283 (n 2, t 3.5) |") &&
          has(md, "| nano | baseline | 0.002 | 3.0000 ± 0.0707 (n 2) | - | - |") &&
          // equal differences (-0.05 twice): an sd of 0, not of rounding, and no t
          has(md, "| nano | attnres | 0.001 | 2.9500 ± 0.0707 (n 2) | -0.0500 ± 0.0000 (n 2) |"),
          "report_md_best_lr_pairs", "%s", md && strstr(md, "### Each method") ? strstr(md, "### Each method") : "(none)");
    // One preset's heads alone: the H plots cover it, no slice section.
    char *sw = slurp(tpath("sw/report.md"));
    CHECK(sw && !has(sw, "slice width"), "report_md_no_slices_in_one_preset", "section present");
    free(sw);
    free(md), free(dat), free(js);
}

// The query-init comparison: attnres and MHAR H 8 with queries N(0, 0.02)
// against the same with zero queries, same seeds (experiment 3's layout);
// a qnormal method without its zero twin gets no row.
static void test_query_init(void) {
    mkdir(tpath("qi"), 0755);
    mkdir(tpath("qi/runs"), 0755);
    runs_dir = "qi/runs";
    const double az[3] = {2.94, 3.02, 2.94}, an[3] = {2.99, 3.00, 2.98}, hz[3] = {3.11, 3.15, 3.06},
                 hn[3] = {3.10, 3.12, 3.07};
    for (int s = 1; s <= 3; s++) {
        run_query_init = "";
        make_run("nano", "baseline", "baseline", 0, 0, s, 3.15, 120);
        make_run("nano", "attnres", "attnres", 1, 0, s, az[s - 1], 120);
        make_run("nano", "mhar", "mhar-h8", 8, 0, s, hz[s - 1], 120);
        run_query_init = "normal";
        make_run("nano", "attnres", "attnres-qnormal", 1, 0, s, an[s - 1], 120);
        make_run("nano", "mhar", "mhar-h8-qnormal", 8, 0, s, hn[s - 1], 120);
        make_run("nano", "mhar", "mhar-h4-qnormal", 4, 0, s, 3.0, 120);   // no zero twin
    }
    runs_dir = "sw/runs", run_query_init = "";
    Report rep;
    const ReportGroup *twin[4] = {0};
    const char *names[4] = {"attnres-qnormal", "mhar-h8-qnormal", "mhar-h4-qnormal", "attnres"};
    int loaded = report_load(&rep, tpath("qi"), NULL) == 0;
    for (int i = 0; loaded && i < rep.n_groups; i++)
        for (int k = 0; k < 4; k++)
            if (!strcmp(rep.groups[i].method, names[k]))
                twin[k] = report_zero_init_twin(rep.groups, rep.n_groups, &rep.groups[i]);
    CHECK(loaded && twin[0] && !strcmp(twin[0]->method, "attnres") && twin[1] && !strcmp(twin[1]->method, "mhar-h8") &&
              !twin[2] && !twin[3], "report_zero_init_twin", "loaded %d", loaded);
    if (loaded) report_free(&rep);
    ReportSummary sum;
    int rc = report_make(tpath("qi"), 0, NULL, &sum);
    char *md = slurp(tpath("qi/report.md")), *js = slurp(tpath("qi/report.json"));
    // attnres: +0.05, -0.02, +0.04 (mean +0.0233, lower on 1); H 8: -0.01, -0.03, +0.01 (mean -0.01, lower on 2)
    CHECK(rc == 0 && md && has(md, "### The routing queries' initial value") &&
              has(md, "| nano | 0.001 | attnres | 2.9900 ± 0.0100 (n 3) | 2.9667 ± 0.0462 (n 3) | "
                      "+0.0233 ± 0.0379 (n 3, t 1.1) | 1 of 3 seeds |") &&
              has(md, "| nano | 0.001 | mhar-h8 | 3.0967 ± 0.0252 (n 3) | 3.1067 ± 0.0451 (n 3) | "
                      "-0.0100 ± 0.0200 (n 3, t -0.9) | 2 of 3 seeds |") &&
              !has(md, "| mhar-h4 |"),
          "report_md_query_init", "%s", md && strstr(md, "### The routing") ? strstr(md, "### The routing") : "(none)");
    cJSON *j = js ? cJSON_Parse(js) : NULL;
    const cJSON *g, *zq = NULL;
    int n_zero = 0;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(j, "groups")) {
        const cJSON *z = cJSON_GetObjectItemCaseSensitive(g, "minus_zero_init");
        n_zero += z != NULL;
        if (z && !strcmp(cJSON_GetObjectItemCaseSensitive(g, "method")->valuestring, "mhar-h8-qnormal")) zq = z;
    }
    CHECK(n_zero == 2 && zq && close_to(cJSON_GetObjectItemCaseSensitive(zq, "mean")->valuedouble, -0.01, 1e-9) &&
              cJSON_GetObjectItemCaseSensitive(zq, "lower")->valueint == 2,
          "report_json_query_init", "%d groups with minus_zero_init", n_zero);
    cJSON_Delete(j);
    char *sw = slurp(tpath("sw/report.md"));
    CHECK(sw && !has(sw, "initial value"), "report_md_no_query_init_without_pairs", "section present");
    free(sw), free(md), free(js);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_report.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    setenv("PATH", "/nonexistent", 1);   // no gnuplot: the data and scripts are still written
    make_sweep();
    test_load();
    test_roles();
    test_plain_runs();
    test_errors();
    test_plot();
    test_make();
    test_slices();
    test_query_init();
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    CHECK_EXIT();
}
