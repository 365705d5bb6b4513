// mhar bench's measurements: the machine's sgemm rate through the model's
// own matmul op, timed training steps of one scheme in a child process (so
// its peak memory is its own), and the PyTorch comparison.
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../data/synth.h"
#include "../kernels/ops.h"
#include "../model/model.h"
#include "../train/data_parallel.h"
#include "../train/optim.h"
#include "../util/median.h"

// The machine's sgemm rate through the model's own matmul op: median of 5
// square 2048³ products (GFLOP/s).
double bench_sgemm_gflops(void) {
    const int n = 2048;
    OpsContext *ctx = ops_open();
    if (!ctx) return 0;
    float *a = ops_alloc(ctx, sizeof(float) * n * n), *b = ops_alloc(ctx, sizeof(float) * n * n);
    float *c = ops_alloc(ctx, sizeof(float) * n * n);
    double t[5] = {0};
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)n * n; i++) { a[i] = (float)(i % 7) * 0.1f; b[i] = (float)(i % 5) * 0.1f; }
        matmul_forward(ctx, c, a, b, n, n, n);  // warm-up
        for (int r = 0; r < 5; r++) {
            double t0 = now_seconds();
            matmul_forward(ctx, c, a, b, n, n, n);
            ops_sync(ctx);
            t[r] = now_seconds() - t0;
        }
    }
    ops_free(ctx, a); ops_free(ctx, b); ops_free(ctx, c);
    ops_close(ctx);
    return t[0] > 0 ? 2.0 * n * n * n / median(t, 5) / 1e9 : 0;
}

static int build_model(Model *m, const char *preset, const BenchScheme *s, int vocab, int B, int T) {
    Config c;
    if (config_preset(preset, &c)) return MHAR_ERR;
    c.vocab_size = vocab;
    snprintf(c.attnres_mode, sizeof c.attnres_mode, "%s", s->mode);
    c.attnres_num_heads = s->heads;
    c.attnres_num_blocks = s->blocks;
    if (model_create(m, &c)) return MHAR_ERR;
    model_init_weights(m, 1);
    return model_alloc_grads(m) || model_alloc_acts(m, B, T);
}

static int build(Model *m, AdamW *opt, const char *preset, const BenchScheme *s, int vocab, int B, int T) {
    if (build_model(m, preset, s, vocab, B, T)) return MHAR_ERR;
    return adamw_init(opt, m->ctx, m->table.total);
}

// In the child: the median tokens/s of `steps` timed training steps.
static double time_steps(const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps, double *flops) {
    Model m;
    AdamW opt = {0};
    memset(&m, 0, sizeof m);
    if (build(&m, &opt, preset, s, vocab, B, T)) return -1;
    size_t n = (size_t)B * T + 1;
    int *tok = mhar_alloc(sizeof(int) * n);
    double *t = mhar_alloc(sizeof(double) * steps);
    synth_tokens(tok, n, vocab, "random", 7);
    for (int i = -1; i < steps; i++) {  // one untimed warm-up step
        double t0 = now_seconds();
        model_zero_grad(&m);
        model_forward(&m, tok, tok + 1);
        model_backward(&m, 1.0f);
        adamw_step(&opt, m.params, m.grads, grad_global_norm(m.ctx, m.grads, m.table.total), 1e-4f);
        if (i >= 0) t[i] = now_seconds() - t0;
    }
    *flops = model_train_flops_per_token(&m, T);
    double tok_s = B * T / median(t, steps);
    mhar_free(tok); mhar_free(t);
    adamw_free(&opt);
    model_free(&m);
    return tok_s;
}

// Run one scheme in a child; its peak RSS comes from wait4.
int bench_scheme(const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps,
                 BenchSample *out, double *flops) {
    int fd[2];
    if (pipe(fd)) return mhar_fail("pipe failed");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return mhar_fail("fork failed");
    if (pid == 0) {
        close(fd[0]);
        double res[2];
        res[0] = time_steps(preset, s, vocab, B, T, steps, &res[1]);
        if (res[0] < 0) fprintf(stderr, "error: %s: %s\n", s->name, mhar_error());
        ssize_t w = write(fd[1], res, sizeof res);
        _exit(w == sizeof res && res[0] > 0 ? 0 : 1);
    }
    close(fd[1]);
    double res[2] = {0, 0};
    ssize_t got = read(fd[0], res, sizeof res);
    close(fd[0]);
    int status;
    struct rusage ru;
    wait4(pid, &status, 0, &ru);
    if (got != sizeof res || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || res[0] <= 0)
        return mhar_fail("scheme %s failed", s->name);
    out->tok_s = res[0];
    out->peak_mb = ru.ru_maxrss / 1024.0;
    *flops = res[1];
    return MHAR_OK;
}

// tools/bench_torch.py on the same shape: its last line is {"tok_per_s": ...}.
double bench_torch_tok_s(const char *preset, int vocab, int B, int T, int steps) {
    char cmd[512], line[512], last[512] = "";
    snprintf(cmd, sizeof cmd, "python3 tools/bench_torch.py --preset %s --vocab %d --batch %d --seq %d --steps %d",
             preset, vocab, B, T, steps);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    while (fgets(line, sizeof line, p)) memcpy(last, line, sizeof line);
    if (pclose(p) != 0) return -1;
    const char *k = strstr(last, "\"tok_per_s\":");
    return k ? atof(k + 12) : -1;
}


// Timed data-parallel steps on comm's ranks, `accum_global` micro-batches of
// B × T a step: median step seconds and communication seconds per step.
static int dp_time(Comm *comm, const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps,
                   int accum_global, int overlap, double *step_s, double *comm_s, double *opt_mb) {
    Model m = {0};
    AdamW opt = {0};
    DataParallel dp = {0};
    int rc = build_model(&m, preset, s, vocab, B, T);
    if (!rc) rc = dp_init(&dp, comm, &m, accum_global);
    if (!rc) dp_set_overlap(&dp, &m, overlap);
    if (!rc) rc = adamw_init(&opt, m.ctx, dp.n_mine);
    size_t n = (size_t)B * T + 1;
    int *tok = mhar_alloc(sizeof(int) * n);
    double *t = mhar_alloc(sizeof(double) * steps), *c = mhar_alloc(sizeof(double) * steps);
    double *loss = mhar_alloc(sizeof(double) * (dp.accum > 0 ? dp.accum : 1));
    if (!tok || !t || !c || !loss) rc = MHAR_ERR;
    rc = comm_agree(comm, rc);
    if (!rc) synth_tokens(tok, n, vocab, "random", 7 + comm->rank);
    for (int i = -1; i < steps && !rc; i++) {  // one untimed warm-up step
        rc = comm_barrier(comm);
        double t0 = now_seconds(), norm, mean;
        dp.comm_seconds = 0;
        for (int k = 0; k < dp.accum && !rc; k++) {
            model_zero_grad(&m);
            loss[k] = model_forward(&m, tok, tok + 1);
            model_backward(&m, 1.0f / accum_global);
            rc = dp_reduce(&dp, m.grads, k);
        }
        if (!rc) rc = dp_loss(&dp, loss, &mean) || dp_grad_norm(&dp, &norm) || dp_update(&dp, &opt, m.params, norm, 1e-4f);
        if (i >= 0) t[i] = now_seconds() - t0, c[i] = dp.comm_seconds;
    }
    if (!rc) {
        *step_s = median(t, steps);
        *comm_s = median(c, steps);
        *opt_mb = sizeof(float) * 2.0 * dp.n_mine / 1e6;
    }
    mhar_free(tok); mhar_free(t); mhar_free(c); mhar_free(loss);
    dp_free(&dp);
    adamw_free(&opt);
    model_free(&m);
    return rc;
}

int bench_data_parallel(Comm *comm, const char *preset, const BenchScheme *s, int vocab, int B, int T, int steps,
                        int repeat, BenchScaling *out) {
    memset(out, 0, sizeof *out);
    out->ranks = comm->size;
    out->threads = ops_threads();
    double *ranks_tok = mhar_alloc(sizeof(double) * repeat), *one_tok = mhar_alloc(sizeof(double) * repeat);
    double *comm_ms = mhar_alloc(sizeof(double) * repeat), *step_ms = mhar_alloc(sizeof(double) * repeat);
    double *serial_tok = mhar_alloc(sizeof(double) * repeat), *serial_comm = mhar_alloc(sizeof(double) * repeat);
    if (!ranks_tok || !one_tok || !comm_ms || !step_ms || !serial_tok || !serial_comm) return MHAR_ERR;
    Comm solo = {.rank = 0, .size = 1};
    snprintf(solo.host, sizeof solo.host, "%s", comm->host);
    int rc = MHAR_OK;
    for (int k = 0; k < repeat && !rc; k++) {
        double step_s = 0, comm_s = 0, one_s = 0, serial_s = 0, unused;
        rc = dp_time(comm, preset, s, vocab, B, T, steps, comm->size, 1, &step_s, &comm_s, &out->opt_mb_rank);
        // The same without overlap: every gradient sent after the backward.
        if (!rc) rc = dp_time(comm, preset, s, vocab, B, T, steps, comm->size, 0, &serial_s, &serial_comm[k], &unused);
        // 1 rank with every rank's threads takes the same global batch while
        // the others sleep (not spin) at a barrier.
        if (!rc && comm->rank == 0) {
            ops_set_threads(out->ranks * out->threads);
            rc = dp_time(&solo, preset, s, vocab, B, T, steps, comm->size, 0, &one_s, &unused, &out->opt_mb_full);
            ops_set_threads(out->threads);
        }
        if (comm_idle_barrier(comm)) rc = MHAR_ERR;
        rc = comm_agree(comm, rc);
        ranks_tok[k] = (double)B * T * comm->size / step_s;
        serial_tok[k] = (double)B * T * comm->size / serial_s;
        serial_comm[k] *= 1e3;
        one_tok[k] = one_s > 0 ? (double)B * T * comm->size / one_s : 0;
        comm_ms[k] = 1e3 * comm_s;
        step_ms[k] = 1e3 * step_s;
        if (!rc && comm->rank == 0)
            fprintf(stderr, "  round %d  %d ranks x %d threads %8.0f tok/s (communication %.1f ms of %.1f ms; "
                            "without overlap %.0f tok/s, %.1f ms)   1 rank x %d threads %8.0f tok/s\n", k + 1,
                    out->ranks, out->threads, ranks_tok[k], comm_ms[k], 1e3 * step_s, serial_tok[k], serial_comm[k],
                    out->ranks * out->threads, one_tok[k]);
    }
    if (!rc) {
        out->ranks_tok_s = median(ranks_tok, repeat);
        out->single_tok_s = median(one_tok, repeat);
        out->comm_ms = median(comm_ms, repeat);
        out->step_ms = median(step_ms, repeat);
        out->serial_tok_s = median(serial_tok, repeat);
        out->serial_comm_ms = median(serial_comm, repeat);
    }
    mhar_free(serial_tok); mhar_free(serial_comm);
    mhar_free(ranks_tok); mhar_free(one_tok); mhar_free(comm_ms); mhar_free(step_ms);
    return rc;
}
