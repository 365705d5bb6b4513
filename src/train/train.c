#include "train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../data/loader.h"
#include "../io/atomic.h"

static volatile sig_atomic_t stop_signal = 0, stop_from_launcher = 0;
// SIGTERM or SIGINT from the parent process is the launcher (mpirun's
// daemon, slurmstepd) taking the job down; SIGUSR1 it only passes on.
static void on_signal(int sig, siginfo_t *info, void *context) {
    (void)context;
    stop_signal = sig;
    if (sig != SIGUSR1 && info && info->si_pid == getppid()) stop_from_launcher = 1;
}

// The sums of the routing statistics over every rank's batches.
static void route_stats_reduce(RouteStats *st, Comm *c) {
    const size_t n = (size_t)st->n_sites * st->H;
    if (c->size == 1) return;
    comm_sum_f64(c, st->entropy, n);
    comm_sum_f64(c, st->w_first, n);
    comm_sum_f64(c, st->w_last, n);
    comm_sum_f64(c, &st->tokens, 1);
}

double evaluate(Model *m, const TokenFile *val, int batches, long *tokens, RouteStats *stats) {
    Comm *c = comm_world();
    int B = m->B, T = m->T;
    Loader ld;
    if (loader_init(&ld, val, T, 0)) return NAN;
    long windows = ld.n_windows / B;
    if (windows > batches) windows = batches;
    // Rank r evaluates batches r, r + size, …; each batch's loss has one
    // rank's value (the others add 0, exactly), summed in batch order.
    double *loss = mhar_alloc(sizeof(double) * (windows ? windows : 1));
    if (!loss) { loader_free(&ld); return NAN; }
    memset(loss, 0, sizeof(double) * (windows ? windows : 1));
    for (long b = c->rank; b < windows; b += c->size) {
        for (int i = 0; i < B; i++)
            loader_window(&ld, b * B + i, m->tokens + (size_t)i * T, m->targets + (size_t)i * T);
        loss[b] = model_forward(m, m->tokens, m->targets);
        if (stats) route_stats_add(stats, &m->res);
    }
    double sum = 0;
    if (!comm_sum_f64(c, loss, windows))
        for (long b = 0; b < windows; b++) sum += loss[b];
    else sum = NAN;
    if (stats) route_stats_reduce(stats, c);
    mhar_free(loss);
    loader_free(&ld);
    if (tokens) *tokens = windows * B * T;
    return windows ? sum / windows : NAN;
}

// The validation loss of the weights' EMA: every rank puts its shard of the
// EMA into the parameters and gathers the others', evaluates, and gets its
// weights back bit for bit from a copy. NaN (on every rank) if the copy
// cannot be had.
static double evaluate_ema(Model *m, DataParallel *dp, const AdamW *opt, const TokenFile *val, int batches) {
    const size_t n = m->table.total;
    float *keep = ops_alloc(m->ctx, sizeof(float) * n);
    if (comm_agree(dp->comm, keep ? MHAR_OK : MHAR_ERR)) {
        ops_free(m->ctx, keep);
        return NAN;
    }
    vec_copy(m->ctx, keep, m->params, n);
    vec_copy(m->ctx, m->params + dp->lo, opt->ema, dp->n_mine);
    double vl = NAN;
    if (!comm_allgather_shards(dp->comm, m->params, &dp->shards)) vl = evaluate(m, val, batches, NULL, NULL);
    vec_copy(m->ctx, m->params, keep, n);
    ops_free(m->ctx, keep);
    return vl;
}

// Drop metrics of steps after the checkpoint we resume from, so the file
// reads as one run.
static int trim_metrics(const char *path, long step) {
    char *text;
    size_t n;
    if (access(path, F_OK) != 0) return MHAR_OK;
    if (read_file(path, &text, &n)) return MHAR_ERR;
    size_t kept = 0;
    for (char *line = text; *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        const char *k = strstr(line, "\"step\":");
        if (k && k < line + len && strtol(k + 7, NULL, 10) <= step) {
            memmove(text + kept, line, len);
            kept += len;
        }
        line += len;
    }
    int rc = atomic_write_file(path, text, kept);
    free(text);
    return rc;
}

static void format_eta(char *buf, size_t cap, double s) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)s;
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
}

// JSON has no NaN or infinity: metrics.jsonl writes a non-finite value as null.
static const char *json_num(char *buf, size_t cap, const char *fmt, double v) {
    if (!isfinite(v)) return "null";
    snprintf(buf, cap, fmt, v);
    return buf;
}

// A checkpoint, written by rank 0 with the optimizer state of every shard.
static int save(const char *dir, Model *m, DataParallel *dp, AdamW *opt, TrainState *st, Loader *ld) {
    st->data_epoch = ld->epoch;
    st->data_pos = ld->pos;
    st->opt_step = opt->step;
    if (dp->comm->size == 1) return checkpoint_save(dir, m, opt, st);
    AdamW full;
    if (dp_gather_optimizer(dp, opt, &full)) return MHAR_ERR;
    int rc = dp->comm->rank == 0 ? checkpoint_save(dir, m, &full, st) : MHAR_OK;
    adamw_free(&full);
    return comm_agree(dp->comm, rc);
}

int train_run(const char *dir, Model *m, DataParallel *dp, AdamW *opt, TrainState *st,
              const TokenFile *train, const TokenFile *val, long stop_at) {
    const int B = st->opt.batch, T = st->opt.seq;
    const int lead = dp->comm->rank == 0;          // rank 0 writes files and prints
    const int tty = lead && isatty(2);
    const long max_bad = st->opt.max_bad_steps > 0 ? st->opt.max_bad_steps : TRAIN_MAX_BAD_STEPS;
    long saved_at = st->step > 0 ? st->step : -1;  // step of DIR/checkpoint (-1: none yet)
    char num[3][32];
    char path[MHAR_PATH_MAX];
    FILE *metrics = NULL, *routing = NULL;
    int rc = MHAR_OK;
    if (lead) {
        if (path_join(path, sizeof path, dir, "metrics.jsonl") || trim_metrics(path, st->step) ||
            !(metrics = fopen(path, "a")))
            rc = mhar_fail("%s: cannot open for appending", path);
        if (!rc && m->scheme->route_weights &&
            (path_join(path, sizeof path, dir, "routing.jsonl") || trim_metrics(path, st->step) ||
             !(routing = fopen(path, "a"))))
            rc = mhar_fail("%s: cannot open for appending", path);
    }
    Loader ld = {0};
    if (!rc && (loader_init(&ld, train, T, st->opt.seed) || loader_seek(&ld, st->data_epoch, st->data_pos)))
        rc = MHAR_ERR;
    int *inputs = mhar_alloc(sizeof(int) * B * T), *targets = mhar_alloc(sizeof(int) * B * T);
    double *micro_loss = mhar_alloc(sizeof(double) * dp->accum), *micro_z = mhar_alloc(sizeof(double) * dp->accum);
    if (!inputs || !targets || !micro_loss || !micro_z) rc = MHAR_ERR;
    rc = comm_agree(dp->comm, rc);
    struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);   // mpirun forwards it to every rank as it is

    long first = st->step;
    double t_start = now_seconds();
    while (rc == MHAR_OK && st->step < st->opt.steps) {
        double t0 = now_seconds();
        float lr = lr_schedule(st->step, st->opt.steps, st->opt.warmup, (float)st->opt.lr);
        // accum micro-batches of B sequences on each rank; every one's
        // gradient is reduced into the step's as soon as its backward ends.
        dp->comm_seconds = 0;
        for (int k = 0; k < dp->accum && rc == MHAR_OK; k++) {
            dp_next_batch(dp, &ld, B, inputs, targets);
            model_zero_grad(m);
            micro_loss[k] = model_forward(m, inputs, targets);
            micro_z[k] = m->z_term;
            model_backward(m, 1.0f / st->opt.accum);
            rc = dp_reduce(dp, m->grads, k);
        }
        // loss: the cross-entropy; z: the z-loss term the gradient also
        // follows (reported apart, so losses compare across recipes).
        double loss, z = 0, norm;
        if (rc || dp_loss(dp, micro_loss, &loss) || (m->z_loss > 0 && dp_loss(dp, micro_z, &z)) ||
            dp_grad_norm(dp, &norm)) {
            rc = MHAR_ERR;
            break;
        }
        if (isfinite(loss) && isfinite(norm)) {
            if (dp_update(dp, opt, m->params, norm, lr)) { rc = MHAR_ERR; break; }
            st->bad_steps = 0;
        } else if (++st->bad_steps >= max_bad) {
            char kept[MHAR_PATH_MAX + 64]; // a sentence around dir
            if (saved_at >= 0) snprintf(kept, sizeof kept, "the checkpoint of step %ld in %s is kept", saved_at, dir);
            else snprintf(kept, sizeof kept, "no checkpoint was written yet");
            rc = mhar_fail("step %ld: loss %g, gradient norm %g: %ld non-finite steps in a row "
                           "(--max-bad-steps %ld); stopped without applying them, %s",
                           st->step + 1, loss, norm, st->bad_steps, max_bad, kept);
            break;
        } else if (lead) {
            fprintf(stderr, "\nstep %ld: non-finite loss or gradient (loss %g, norm %g): update skipped\n",
                    st->step + 1, loss, norm);
        }
        st->step++;
        double dt = now_seconds() - t0, tok_s = (double)B * T * st->opt.accum / dt;
        st->tokens_seen += (double)B * T * st->opt.accum;
        if (metrics) {
            fprintf(metrics, "{\"step\":%ld,\"loss\":%s,", st->step, json_num(num[0], sizeof num[0], "%.6f", loss));
            if (m->z_loss > 0) fprintf(metrics, "\"z_loss\":%s,", json_num(num[0], sizeof num[0], "%.6g", z));
            fprintf(metrics, "\"lr\":%.6g,\"grad_norm\":%s,\"tok_per_s\":%.1f,\"tokens\":%.0f}\n", lr,
                    json_num(num[1], sizeof num[1], "%.6g", norm), tok_s, st->tokens_seen);
        }
        double avg = (now_seconds() - t_start) / (st->step - first);
        char eta[32];
        format_eta(eta, sizeof eta, avg * (st->opt.steps - st->step));
        if (lead && (tty || st->step % 10 == 0 || st->step == st->opt.steps))
            fprintf(stderr, "%sstep %ld/%ld | loss %.4f | lr %.2e | norm %.3f | %.0f tok/s | ETA %s%s",
                    tty ? "\r" : "", st->step, st->opt.steps, loss, lr, norm, tok_s, eta, tty ? "   " : "\n");
        int last = st->step == st->opt.steps, stop_here = st->step == stop_at;
        if (st->opt.eval_every > 0 && (st->step % st->opt.eval_every == 0 || last)) {
            long ntok;
            RouteStats rs;
            route_stats_init(&rs, &m->res);
            double vl = evaluate(m, val, st->opt.eval_batches, &ntok, &rs);
            if (routing) {
                route_stats_write(&rs, routing, st->step, m->cfg.num_hidden_layers);
                fflush(routing);
            }
            route_stats_free(&rs);
            double vl_ema = opt->ema ? evaluate_ema(m, dp, opt, val, st->opt.eval_batches) : NAN;
            if (metrics) {
                fprintf(metrics, "{\"step\":%ld,\"val_loss\":%s,", st->step,
                        json_num(num[2], sizeof num[2], "%.6f", vl));
                if (opt->ema) fprintf(metrics, "\"val_loss_ema\":%s,", json_num(num[2], sizeof num[2], "%.6f", vl_ema));
                fprintf(metrics, "\"val_tokens\":%ld}\n", ntok);
            }
            if (lead) {
                fprintf(stderr, "%sstep %ld: val loss %.4f", tty ? "\n" : "", st->step, vl);
                if (opt->ema) fprintf(stderr, ", EMA %.4f", vl_ema);
                fprintf(stderr, " (%ld tokens)\n", ntok);
            }
        }
        if (metrics) fflush(metrics);
        // Every rank stops after the same step when any was signalled.
        int stop = stop_signal != 0;
        if (comm_max_int(dp->comm, &stop)) { rc = MHAR_ERR; break; }
        // A periodic checkpoint waits for a finite step, so a run that stops
        // on non-finite steps keeps the checkpoint of its last good one.
        int periodic = st->opt.save_every > 0 && st->step % st->opt.save_every == 0 && st->bad_steps == 0;
        if (last || stop_here || periodic || stop) {
            rc = save(dir, m, dp, opt, st, &ld);
            if (rc == MHAR_OK) saved_at = st->step;
            if (stop_here && rc == MHAR_OK) {
                if (lead) fprintf(stderr, "%sstopped at step %ld as asked; continue with --resume\n", tty ? "\n" : "", st->step);
                break;
            }
            if (stop && rc == MHAR_OK) {
                // The launcher that signalled no longer answers MPI's
                // closing handshake.
                if (stop_from_launcher) comm_job_ending(dp->comm);
                if (lead && stop_signal)
                    fprintf(stderr, "\nsignal %d: checkpoint saved at step %ld in %s; continue with --resume\n",
                            (int)stop_signal, st->step, dir);
                else if (lead)
                    fprintf(stderr, "\nanother rank was signalled: checkpoint saved at step %ld in %s; continue with "
                            "--resume\n", st->step, dir);
                break;
            }
        }
    }
    if (tty) fprintf(stderr, "\n");
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
    if (metrics) fclose(metrics);
    if (routing) fclose(routing);
    mhar_free(inputs); mhar_free(targets); mhar_free(micro_loss); mhar_free(micro_z);
    loader_free(&ld);
    return rc;
}
