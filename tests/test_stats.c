// The sweep report's statistics (analysis/stats.h) on hand-computed data,
// and the metrics.jsonl reader on a file with a repeated evaluation, a
// diverged value and a line cut short by a kill.
#include "check.h"
#include "analysis/metrics.h"
#include "analysis/stats.h"
#include "util/common.h"

#include <string.h>
#include <unistd.h>

static int close_to(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void test_tail_mean(void) {
    // 13 evaluations 1..13: the last 11 are 3..13, mean 8.
    double x[13];
    for (int i = 0; i < 13; i++) x[i] = i + 1;
    int used = -1;
    double m = stats_tail_mean(x, 13, STATS_TAIL_EVALS, &used);
    CHECK(m == 8.0 && used == 11, "tail_mean_13_evals", "got %g over %d, want 8 over 11", m, used);
    // exactly 11: all of them, mean of 1..11 = 6
    m = stats_tail_mean(x, 11, STATS_TAIL_EVALS, &used);
    CHECK(m == 6.0 && used == 11, "tail_mean_11_evals", "got %g over %d, want 6 over 11", m, used);
    // fewer than 11 (5): all five are averaged and the caller learns it: (2+4+4+4+5)/5 = 3.8
    double y[5] = {2, 4, 4, 4, 5};
    m = stats_tail_mean(y, 5, STATS_TAIL_EVALS, &used);
    CHECK(close_to(m, 3.8, 1e-15) && used == 5, "tail_mean_fewer_than_11", "got %g over %d, want 3.8 over 5", m, used);
    m = stats_tail_mean(y, 0, STATS_TAIL_EVALS, &used);
    CHECK(isnan(m) && used == 0, "tail_mean_no_evals", "got %g over %d, want NaN over 0", m, used);
}

static void test_tail_slope(void) {
    // 13 points on y = 10 − 0.002·x with x = 0, 100, …, 1200, and a bump on the
    // first two (outside the last 11): the slope is exactly −0.002.
    double x[13], y[13];
    for (int i = 0; i < 13; i++) x[i] = 100.0 * i, y[i] = 10 - 0.002 * x[i] + (i < 2 ? 5 : 0);
    double b = stats_tail_slope(x, y, 13, STATS_TAIL_EVALS);
    CHECK(close_to(b, -0.002, 1e-15), "tail_slope_line", "got %.17g, want -0.002", b);
    // hand-computed: x 1 2 3, y 1 3 2: mean (2, 2), Σ dx·dy = (−1)(−1) + 0 + (1)(0) = 1, Σ dx² = 2 → 0.5
    double x3[3] = {1, 2, 3}, y3[3] = {1, 3, 2};
    b = stats_tail_slope(x3, y3, 3, STATS_TAIL_EVALS);
    CHECK(close_to(b, 0.5, 1e-15), "tail_slope_three_points", "got %.17g, want 0.5", b);
    CHECK(isnan(stats_tail_slope(x3, y3, 1, STATS_TAIL_EVALS)), "tail_slope_one_point", "not NaN");
}

static void test_mean_sd(void) {
    // 2 4 4 4 5 5 7 9: mean 5, squared deviations 9+1+1+1+0+0+4+16 = 32, sample sd sqrt(32/7)
    double x[8] = {2, 4, 4, 4, 5, 5, 7, 9};
    double m = stats_mean(x, 8), sd = stats_sd(x, 8);
    CHECK(m == 5.0, "mean", "got %g, want 5", m);
    CHECK(close_to(sd, sqrt(32.0 / 7.0), 1e-14), "sample_sd", "got %.17g, want %.17g", sd, sqrt(32.0 / 7.0));
    // two values a, b: sd = |a - b| / sqrt(2)
    double two[2] = {3.0, 3.5};
    CHECK(close_to(stats_sd(two, 2), 0.5 / sqrt(2.0), 1e-15), "sample_sd_two", "got %.17g", stats_sd(two, 2));
    CHECK(isnan(stats_sd(x, 1)) && isnan(stats_mean(x, 0)), "sd_mean_undefined", "sd of 1 value or mean of 0 not NaN");
    // close values far from 0 (losses agreeing to 4 digits): no cancellation
    double c[3] = {3.0001, 3.0002, 3.0003};
    CHECK(close_to(stats_sd(c, 3), 1e-4, 1e-12), "sample_sd_no_cancellation", "got %.17g, want 1e-4", stats_sd(c, 3));
}

static void test_paired(void) {
    // method a on seeds 1 2 3 4, reference b on seeds 3 1 2 (another order, no seed 4):
    //   seed 1: 3.00 - 3.20 = -0.20;  seed 2: 3.10 - 3.15 = -0.05;  seed 3: 2.90 - 3.00 = -0.10
    //   mean -0.35/3 = -0.116667; deviations -0.083333, +0.066667, +0.016667,
    //   squares 0.0069444 + 0.0044444 + 0.0002778 = 0.0116667, / 2 -> sd sqrt(0.0058333) = 0.0763763
    double a[4] = {3.00, 3.10, 2.90, 2.80}, b[3] = {3.00, 3.20, 3.15}, d[4];
    uint64_t ka[4] = {1, 2, 3, 4}, kb[3] = {3, 1, 2};
    int n = stats_paired_diff(a, ka, 4, b, kb, 3, d);
    CHECK(n == 3, "paired_count", "got %d pairs, want 3 (seed 4 has no partner)", n);
    CHECK(n == 3 && close_to(d[0], -0.20, 1e-12) && close_to(d[1], -0.05, 1e-12) && close_to(d[2], -0.10, 1e-12),
          "paired_by_seed", "got %g %g %g, want -0.20 -0.05 -0.10", d[0], d[1], d[2]);
    double m = stats_mean(d, n), sd = stats_sd(d, n);
    CHECK(close_to(m, -0.35 / 3, 1e-12) && close_to(sd, sqrt(0.0116666666666667 / 2), 1e-9), "paired_mean_sd",
          "got mean %.9g sd %.9g, want -0.116666667 0.0763762616", m, sd);
    uint64_t kc[2] = {7, 8};
    CHECK(stats_paired_diff(a, ka, 4, b, kc, 2, d) == 0, "paired_no_common_seed", "pairs found without common seeds");
    // a repeated seed pairs once
    uint64_t kd[4] = {1, 1, 2, 2};
    CHECK(stats_paired_diff(a, kd, 4, b, kb, 3, d) == 2 && close_to(d[0], -0.20, 1e-12) && close_to(d[1], 2.90 - 3.15, 1e-12),
          "paired_repeated_seed", "got %g %g", d[0], d[1]);
}

static void test_metrics(void) {
    char path[] = "/tmp/mhar_test_metrics_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) { CHECK(0, "metrics_tmpfile", "cannot create %s", path); return; }
    // 14 steps, evaluations at 2 4 ... 14 (7 of them); the evaluation at 6 is
    // written twice (a resumed run before trimming): the later value counts;
    // the one at 12 diverged (nan); the last line was cut short by a kill.
    for (int s = 1; s <= 14; s++) {
        fprintf(f, "{\"step\":%d,\"loss\":%.6f,\"lr\":0.0005,\"grad_norm\":1,\"tok_per_s\":%d.0,\"tokens\":%d}\n", s,
                5.0 - 0.1 * s, 100 * s, 64 * s);
        if (s % 2 == 0) {
            if (s == 12) fprintf(f, "{\"step\":12,\"val_loss\":nan,\"val_tokens\":64}\n");
            else fprintf(f, "{\"step\":%d,\"val_loss\":%.6f,\"val_tokens\":64}\n", s, 6.0 - 0.1 * s);
        }
        if (s == 6) fprintf(f, "{\"step\":6,\"val_loss\":1.000000,\"val_tokens\":64}\n");
    }
    fprintf(f, "{\"step\":15,\"loss\":3.4");   // no newline: cut short
    fclose(f);
    Metrics m;
    int rc = metrics_load(path, &m);
    unlink(path);
    CHECK(rc == 0, "metrics_load", "failed: %s", mhar_error());
    if (rc) return;
    CHECK(m.n_evals == 7 && m.eval_step[0] == 2 && m.eval_step[6] == 14, "metrics_evals", "got %d evals, first at %ld",
          m.n_evals, m.n_evals ? m.eval_step[0] : -1L);
    CHECK(m.n_evals == 7 && m.val_loss[2] == 1.0, "metrics_repeated_eval_keeps_later", "eval at 6 = %g, want 1",
          m.n_evals > 2 ? m.val_loss[2] : NAN);
    CHECK(m.n_evals == 7 && isnan(m.val_loss[5]), "metrics_nan_value", "eval at 12 = %g, want nan",
          m.n_evals > 5 ? m.val_loss[5] : 0.0);
    CHECK(m.last_step == 14 && close_to(m.last_loss, 3.6, 1e-9) && m.skipped_lines == 1, "metrics_cut_line",
          "last step %ld loss %g, %d skipped (want 14, 3.6, 1)", m.last_step, m.last_loss, m.skipped_lines);
    CHECK(close_to(m.tok_per_s, 750, 1e-9), "metrics_median_tok_s", "got %g, want 750 (median of 100..1400)", m.tok_per_s);
    int used;
    double t = stats_tail_mean(m.val_loss, m.n_evals, STATS_TAIL_EVALS, &used);
    CHECK(used == 7 && isnan(t), "metrics_tail_with_diverged_eval", "tail %g over %d: a NaN must show, not vanish", t, used);
    metrics_free(&m);
    CHECK(metrics_load("/nonexistent/metrics.jsonl", &m) != 0, "metrics_missing_file", "no error for a missing file");
}

static void test_common_seeds(void) {
    // H = 1 on seeds 1 2 3, H = 8 on seeds 3 1 2, H = 2 on seed 1 only, H = 4 on seeds 2 1:
    // every list holds seed 1 only -> loss against H on seed 1.
    uint64_t h1[3] = {1, 2, 3}, h8[3] = {3, 1, 2}, h2[1] = {1}, h4[2] = {2, 1}, common[3];
    const uint64_t *keys[4] = {h1, h8, h2, h4};
    int n[4] = {3, 3, 1, 2};
    int nc = stats_common_keys(keys, n, 4, common);
    CHECK(nc == 1 && common[0] == 1, "common_seeds_one", "got %d seeds (first %llu), want seed 1 only", nc,
          nc ? (unsigned long long)common[0] : 0ull);
    nc = stats_common_keys(keys, n, 2, common);   // H = 1 and 8: all three, in H = 1's order
    CHECK(nc == 3 && common[0] == 1 && common[1] == 2 && common[2] == 3, "common_seeds_all", "got %d", nc);
    uint64_t none[1] = {9};
    const uint64_t *k2[2] = {h1, none};
    int n2[2] = {3, 1};
    CHECK(stats_common_keys(k2, n2, 2, common) == 0, "common_seeds_none", "found a common seed");
    uint64_t rep[3] = {2, 2, 1};   // a repeated seed is listed once
    const uint64_t *k3[2] = {rep, h1};
    int n3[2] = {3, 3};
    nc = stats_common_keys(k3, n3, 2, common);
    CHECK(nc == 2 && common[0] == 2 && common[1] == 1, "common_seeds_repeated", "got %d", nc);
    // H = 8's losses on seeds 3 1 2 are 4.0 4.5 5.5: on seed 1 -> 4.5; on seeds {1, 3} -> 4.25
    double x[3] = {4.0, 4.5, 5.5};
    uint64_t keep1[1] = {1}, keep13[2] = {3, 1};
    CHECK(stats_mean_on_keys(x, h8, 3, keep1, 1) == 4.5 && stats_mean_on_keys(x, h8, 3, keep13, 2) == 4.25,
          "mean_on_seeds", "got %g and %g, want 4.5 and 4.25", stats_mean_on_keys(x, h8, 3, keep1, 1),
          stats_mean_on_keys(x, h8, 3, keep13, 2));
    // a repeated seed counts once (its first value); no kept seed -> NaN
    uint64_t kr[3] = {1, 1, 2};
    CHECK(stats_mean_on_keys(x, kr, 3, keep1, 1) == 4.0 && isnan(stats_mean_on_keys(x, h8, 3, none, 1)),
          "mean_on_seeds_repeated_none", "got %g", stats_mean_on_keys(x, kr, 3, keep1, 1));
}

int main(void) {
    test_tail_mean();
    test_tail_slope();
    test_mean_sd();
    test_paired();
    test_common_seeds();
    test_metrics();
    CHECK_EXIT();
}
