// mhar sweep's scheduler: a grid of training runs, one `mhar train` child
// process per run (this same binary, /proc/self/exe), one after another or
// --jobs at a time. Resumable: a run whose checkpoint reached its last step
// is skipped, an interrupted one continues with `train --resume`, so a killed
// sweep started again with the same command picks up where it stopped.
//
// Why child processes: each run gets its own memory, thread count and log,
// and a crash or a divergence stops that run only. Why the locks: a sweep
// killed with SIGKILL leaves its trainers running until they have saved a
// checkpoint (they get SIGTERM through PR_SET_PDEATHSIG); the next sweep
// waits on each run's lock instead of training the same directory twice.
#include "sweep.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../io/atomic.h"
#include "../kernels/ops.h"
#include "../util/common.h"
#include "grid.h"
#include "metrics.h"
#include "stats.h"
#include "../util/dir.h"
#include "../util/json.h"
#include "../util/sha256.h"

enum { PENDING, RUNNING, DONE, FAILED, STOPPED };

typedef struct {
    const SweepRun *run;
    char dir[MHAR_PATH_MAX];
    int status;
    pid_t pid;
    double t0;
} Job;

typedef struct {
    const char *out;
    char exe[MHAR_PATH_MAX];
    const char *commit;
    int dirty;
    char manifest_sha[65], train_sha[65], val_sha[65];   // "" when absent
    const Grid *grid;
    int threads;
} Sweep;

// Signals: remember, and pass SIGTERM on to the running trainers at once
// (from the handler: kill() is async-signal-safe), so they checkpoint.
static volatile sig_atomic_t stop_sig = 0;
static volatile pid_t live[SWEEP_MAX_JOBS];
static void on_signal(int sig) {
    stop_sig = sig;
    for (int i = 0; i < SWEEP_MAX_JOBS; i++)
        if (live[i] > 0) kill(live[i], SIGTERM);
}

static void format_time(char *buf, size_t cap, double s) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, cap, "%.1fs", s);
}

static int cpu_count(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}


static int write_json(const char *path, const cJSON *j) {
    char *text = cJSON_Print(j);
    if (!text) return mhar_fail("%s: out of memory", path);
    int rc = atomic_write_file(path, text, strlen(text));
    free(text);
    return rc;
}

// Is the run finished (its checkpoint at its last step)? *step: where it is
// (-1: no checkpoint yet).
static int run_finished(const Job *j, long *step) {
    long steps;
    if (sweep_run_progress(j->dir, step, &steps)) return 0;
    return *step >= steps && steps == j->run->opt.steps;
}

static const char *str_field(const cJSON *j, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

// The token files: compared by their hashes (below), not by their paths.
static int is_data(const RunOption *opt) {
    return opt->offset == offsetof(RunOptions, train) || opt->offset == offsetof(RunOptions, val);
}

// A run directory made by an earlier invocation must have been made with
// the same settings and data, or resuming it would mix two experiments.
static int check_existing(const Sweep *sw, const Job *j) {
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, j->dir, "run.json") || access(path, F_OK) != 0) return MHAR_OK;
    cJSON *rec = json_load_or_null(path);
    if (!rec) return mhar_fail("%s: unreadable or not JSON; move the run directory away to restart it", path);
    SweepRun old;
    int rc = sweep_run_from_json(rec, path, &old);
    for (int i = 0; !rc && i < run_option_count(); i++) {
        const RunOption *opt = run_option_at(i);
        if (!(opt->use & RUN_SWEEP) || is_data(opt)) continue;
        if (!run_option_equal(opt, &old.opt, &j->run->opt)) {
            char was[64], now[64];
            run_option_format(opt, &old.opt, was, sizeof was);
            run_option_format(opt, &j->run->opt, now, sizeof now);
            rc = mhar_fail("%s: this run was started with other settings than the grid now gives (%s %s, now %s); "
                           "use another --out or restore the grid", path, opt->key, was, now);
        }
    }
    if (!rc && !old.opt.train[0] != !j->run->opt.train[0])
        rc = mhar_fail("%s: this run was started with other settings than the grid now gives (train); use another "
                       "--out or restore the grid", path);
    const char *keys[2] = {"train_sha256", "val_sha256"};
    const char *now[2] = {sw->train_sha, sw->val_sha};
    for (int i = 0; i < 2 && !rc; i++)
        if (strcmp(str_field(rec, keys[i]), now[i]))
            rc = mhar_fail("%s: the run was trained on %s data with sha256 %.16s..., the grid's file now hashes "
                           "to %.16s...; the data changed: use another --out", path, i ? "validation" : "training",
                           str_field(rec, keys[i]), now[i]);
    cJSON_Delete(rec);
    return rc;
}

// In the child, before exec: record this start in run.json.
static int record_start(const Sweep *sw, const Job *j, long from_step) {
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, j->dir, "run.json")) return MHAR_ERR;
    cJSON *rec = json_load_or_null(path);
    if (!rec) {   // the first start: the run's settings and provenance
        rec = sweep_run_to_json(j->run);
        cJSON_AddStringToObject(rec, "commit", sw->commit);
        cJSON_AddBoolToObject(rec, "dirty", sw->dirty);
        cJSON_AddStringToObject(rec, "manifest", sw->grid->manifest);
        cJSON_AddStringToObject(rec, "manifest_sha256", sw->manifest_sha);
        cJSON_AddStringToObject(rec, "train_sha256", sw->train_sha);
        cJSON_AddStringToObject(rec, "val_sha256", sw->val_sha);
        cJSON_AddItemToObject(rec, "starts", cJSON_CreateArray());
    }
    cJSON *starts = cJSON_GetObjectItemCaseSensitive(rec, "starts");
    if (!cJSON_IsArray(starts)) {
        cJSON_DeleteItemFromObjectCaseSensitive(rec, "starts");
        starts = cJSON_AddArrayToObject(rec, "starts");
    }
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "time", (double)time(NULL));
    cJSON_AddStringToObject(s, "commit", sw->commit);
    cJSON_AddBoolToObject(s, "dirty", sw->dirty);
    cJSON_AddNumberToObject(s, "from_step", from_step < 0 ? 0 : from_step);
    cJSON_AddNumberToObject(s, "threads", sw->threads);
    cJSON_AddStringToObject(s, "blas", ops_library_name());   // kernels differ in rounding: part of provenance
    cJSON_AddItemToArray(starts, s);
    int rc = write_json(path, rec);
    cJSON_Delete(rec);
    return rc;
}

// The child: log, lock, decide fresh/resume under the lock, exec `mhar train`.
static void child(const Sweep *sw, const Job *j, pid_t parent, const sigset_t *old_mask) {
    char path[MHAR_PATH_MAX];
    signal(SIGINT, SIG_DFL);   // the parent blocked both around fork: no handler of its runs here
    signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    if (path_join(path, sizeof path, j->dir, "train.log")) _exit(126);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) { fprintf(stderr, "error: %s: cannot open: %s\n", path, strerror(errno)); _exit(126); }
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    // The trainer must not outlive the sweep unnoticed: SIGTERM makes it checkpoint and exit.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(125);
    if (path_join(path, sizeof path, j->dir, ".train.lock")) _exit(126);
    int lk = open(path, O_RDWR | O_CREAT, 0644);   // inherited by the trainer: held until it exits
    if (lk < 0) { fprintf(stderr, "error: %s: cannot open: %s\n", path, strerror(errno)); _exit(126); }
    if (flock(lk, LOCK_EX | LOCK_NB)) {
        fprintf(stderr, "sweep: waiting for an earlier trainer of this run to exit\n");
        if (flock(lk, LOCK_EX)) _exit(126);
    }
    long step;
    if (run_finished(j, &step)) _exit(0);
    if (record_start(sw, j, step)) { fprintf(stderr, "error: %s\n", mhar_error()); _exit(126); }
    char *argv[64], buf[16384];
    argv[0] = (char *)sw->exe;
    argv[1] = "train";
    if (step >= 0) {   // a checkpoint exists: continue it (its options are the saved ones)
        argv[2] = "--out"; argv[3] = (char *)j->dir; argv[4] = "--resume"; argv[5] = NULL;
    } else if (sweep_run_args(j->run, j->dir, argv + 2, 62, buf, sizeof buf)) {
        fprintf(stderr, "error: %s\n", mhar_error());
        _exit(126);
    }
    char threads[16];
    snprintf(threads, sizeof threads, "%d", sw->threads);
    setenv("OMP_NUM_THREADS", threads, 1);
    time_t now = time(NULL);
    fprintf(stderr, "\n==== sweep %s: %s, commit %s%s, OMP_NUM_THREADS=%s\n====", step >= 0 ? "resume" : "start",
            strtok(ctime(&now), "\n"), sw->commit, sw->dirty ? " (dirty)" : "", threads);
    for (int i = 1; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n");
    fflush(stderr);
    execv(sw->exe, argv);
    fprintf(stderr, "error: cannot run %s: %s\n", sw->exe, strerror(errno));
    _exit(127);
}

static int write_sweep_json(const Sweep *sw, const Job *jobs, int n, int jobs_n, const char *grid_file) {
    char path[MHAR_PATH_MAX];
    if (path_join(path, sizeof path, sw->out, "sweep.json")) return MHAR_ERR;
    cJSON *old = json_load_or_null(path), *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "grid_file", grid_file);
    cJSON_AddItemToObject(j, "grid", cJSON_Duplicate(sw->grid->json, 1));
    cJSON_AddStringToObject(j, "commit", sw->commit);
    cJSON_AddBoolToObject(j, "dirty", sw->dirty);
    cJSON_AddStringToObject(j, "binary", sw->exe);
    cJSON_AddStringToObject(j, "manifest", sw->grid->manifest);
    cJSON_AddStringToObject(j, "manifest_sha256", sw->manifest_sha);
    cJSON_AddStringToObject(j, "train_sha256", sw->train_sha);
    cJSON_AddStringToObject(j, "val_sha256", sw->val_sha);
    // every invocation, oldest first: which commit trained which part
    cJSON *inv = old ? cJSON_DetachItemFromObjectCaseSensitive(old, "invocations") : NULL;
    if (!cJSON_IsArray(inv)) { cJSON_Delete(inv); inv = cJSON_CreateArray(); }
    cJSON *me = NULL, *last = cJSON_GetArrayItem(inv, cJSON_GetArraySize(inv) - 1);
    const cJSON *pid = last ? cJSON_GetObjectItemCaseSensitive(last, "pid") : NULL;
    if (cJSON_IsNumber(pid) && pid->valuedouble == getpid()) me = last;   // this invocation's entry: update it
    if (!me) {
        me = cJSON_CreateObject();
        cJSON_AddNumberToObject(me, "time", (double)time(NULL));
        cJSON_AddNumberToObject(me, "pid", getpid());
        cJSON_AddStringToObject(me, "commit", sw->commit);
        cJSON_AddBoolToObject(me, "dirty", sw->dirty);
        cJSON_AddNumberToObject(me, "jobs", jobs_n);
        cJSON_AddNumberToObject(me, "threads", sw->threads);
        cJSON_AddStringToObject(me, "blas", ops_library_name());
        cJSON_AddItemToArray(inv, me);
    }
    cJSON_AddItemToObject(j, "invocations", inv);
    cJSON *runs = cJSON_AddArrayToObject(j, "runs");
    for (int i = 0; i < n; i++) {
        cJSON *r = cJSON_CreateObject();
        long step;
        int fin = run_finished(&jobs[i], &step);
        cJSON_AddStringToObject(r, "name", jobs[i].run->name);
        cJSON_AddStringToObject(r, "status", fin ? "done" : jobs[i].status == FAILED ? "failed"
                                                 : step >= 0 ? "partial" : "not started");
        cJSON_AddNumberToObject(r, "step", step < 0 ? 0 : step);
        cJSON_AddNumberToObject(r, "steps", jobs[i].run->opt.steps);
        cJSON_AddItemToArray(runs, r);
    }
    int rc = write_json(path, j);
    cJSON_Delete(j);
    cJSON_Delete(old);
    return rc;
}

// DIR/grid.json: the grid with its data paths made absolute, so `mhar sweep
// --out DIR` resolves them the same from there.
static int save_grid(const Grid *g, const char *out) {
    cJSON *j = cJSON_Duplicate(g->json, 1);
    if (g->n_runs && g->runs[0].opt.train[0]) {
        cJSON_ReplaceItemInObjectCaseSensitive(j, "train", cJSON_CreateString(g->runs[0].opt.train));
        cJSON_ReplaceItemInObjectCaseSensitive(j, "val", cJSON_CreateString(g->runs[0].opt.val));
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "manifest"))
        cJSON_ReplaceItemInObjectCaseSensitive(j, "manifest", cJSON_CreateString(g->manifest));
    char path[MHAR_PATH_MAX];
    int rc = path_join(path, sizeof path, out, "grid.json");
    if (!rc) rc = write_json(path, j);
    cJSON_Delete(j);
    return rc;
}

static void report_finish(Job *j, int idx, int n, int exit_ok) {
    char t[32], path[MHAR_PATH_MAX];
    format_time(t, sizeof t, now_seconds() - j->t0);
    long step;
    if (run_finished(j, &step)) {
        j->status = DONE;
        Metrics m;
        double metric = NAN;
        int used = 0;
        if (path_join(path, sizeof path, j->dir, "metrics.jsonl") == MHAR_OK && metrics_load(path, &m) == MHAR_OK) {
            metric = stats_tail_mean(m.val_loss, m.n_evals, STATS_TAIL_EVALS, &used);
            printf("[%d/%d] %s: done in %s; val loss, mean of the last %d of %d evaluations: %.4f\n", idx, n,
                   j->run->name, t, used, m.n_evals, metric);
            metrics_free(&m);
        } else {
            printf("[%d/%d] %s: done in %s (no metrics.jsonl?)\n", idx, n, j->run->name, t);
        }
    } else if (stop_sig) {
        j->status = STOPPED;
        printf("[%d/%d] %s: interrupted at step %ld after %s; the next sweep resumes it\n", idx, n, j->run->name,
               step < 0 ? 0 : step, t);
    } else {
        j->status = FAILED;
        printf("[%d/%d] %s: FAILED after %s (%s, step %ld of %ld); see %s/train.log\n", idx, n, j->run->name, t,
               exit_ok ? "exited 0 before its last step" : "exited with an error", step < 0 ? 0 : step,
               j->run->opt.steps, j->dir);
    }
    fflush(stdout);
}

int sweep_execute(const SweepOptions *so, SweepOutcome *outcome) {
    const char *grid_path = so->grid, *out = so->out;
    const int jobs_n = so->jobs > 0 ? so->jobs : 1, max_runs = so->max_runs;
    memset(outcome, 0, sizeof *outcome);
    Sweep sw = {.out = out, .commit = so->commit, .dirty = so->dirty};
    Grid g = {0};
    Job *jobs = NULL;
    char saved_grid[MHAR_PATH_MAX];
    int rc = mkdir_p(out), lock = -1;
    if (!rc) {
        char p[MHAR_PATH_MAX];
        rc = path_join(p, sizeof p, out, "runs");
        if (!rc) rc = mkdir_p(p);
        if (!rc) rc = path_join(p, sizeof p, out, ".sweep.lock");
        if (!rc && (lock = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
            rc = mhar_fail("%s: cannot open: %s", p, strerror(errno));
        if (!rc && flock(lock, LOCK_EX | LOCK_NB))
            rc = mhar_fail("%s: another mhar sweep is running on this directory", out);
    }
    if (!rc) rc = path_join(saved_grid, sizeof saved_grid, out, "grid.json");
    if (!rc && !grid_path) {
        if (access(saved_grid, F_OK) != 0) rc = mhar_fail("%s holds no grid.json: give --grid FILE", out);
        else grid_path = saved_grid;
    }
    if (!rc) rc = grid_load(grid_path, &g);
    if (!rc && g.n_runs == 0) rc = mhar_fail("%s: the grid has no runs", grid_path);
    sw.grid = &g;
    if (!rc) {
        ssize_t n = readlink("/proc/self/exe", sw.exe, sizeof sw.exe - 1);
        if (n <= 0) rc = mhar_fail("cannot find this program's path (/proc/self/exe): %s", strerror(errno));
        else sw.exe[n] = 0;
    }
    if (!rc) {
        if (g.manifest[0]) rc = sha256_file(g.manifest, sw.manifest_sha);
        if (!rc && g.runs[0].opt.train[0]) rc = sha256_file(g.runs[0].opt.train, sw.train_sha);
        if (!rc && g.runs[0].opt.val[0]) rc = sha256_file(g.runs[0].opt.val, sw.val_sha);
    }
    int cores = cpu_count();
    sw.threads = so->threads ? so->threads : cores / jobs_n > 0 ? cores / jobs_n : 1;
    if (!rc && !(jobs = calloc(g.n_runs, sizeof *jobs))) rc = mhar_fail("out of memory");
    int n_done = 0;
    for (int i = 0; !rc && i < g.n_runs; i++) {
        char rel[200];
        snprintf(rel, sizeof rel, "runs/%s", g.runs[i].name);
        jobs[i].run = &g.runs[i];
        rc = path_join(jobs[i].dir, sizeof jobs[i].dir, out, rel);
        if (!rc) rc = check_existing(&sw, &jobs[i]);
        long step;
        if (!rc && run_finished(&jobs[i], &step)) { jobs[i].status = DONE; n_done++; }
    }
    if (!rc && so->dry_run) {
        printf("%d runs (%d done), %s%s, %d at a time with %d threads each\n", g.n_runs, n_done, sw.commit,
               sw.dirty ? " (dirty)" : "", jobs_n, sw.threads);
        for (int i = 0; i < g.n_runs; i++) {
            long step;
            int fin = run_finished(&jobs[i], &step);
            char *av[64], buf[16384];
            printf("%-40s %-12s", g.runs[i].name, fin ? "done" : step >= 0 ? "partial" : "pending");
            if (!fin && step >= 0) printf(" (step %ld) mhar train --out %s --resume", step, jobs[i].dir);
            else if (!fin && sweep_run_args(&g.runs[i], jobs[i].dir, av, 64, buf, sizeof buf) == MHAR_OK) {
                printf(" mhar train");
                for (int k = 0; av[k]; k++) printf(" %s", av[k]);
            }
            printf("\n");
        }
        grid_free(&g);
        free(jobs);
        close(lock);
        return MHAR_OK;
    }
    if (!rc && grid_path != saved_grid) rc = save_grid(&g, out);
    if (!rc) rc = write_sweep_json(&sw, jobs, g.n_runs, jobs_n, g.path);
    if (rc) {
        grid_free(&g);
        free(jobs);
        if (lock >= 0) close(lock);
        return MHAR_ERR;
    }

    printf("sweep %s: %d runs, %d already done; commit %s%s; %d at a time, OMP_NUM_THREADS=%d each (%d cores)\n",
           out, g.n_runs, n_done, sw.commit, sw.dirty ? " (uncommitted changes)" : "", jobs_n, sw.threads, cores);
    printf("data: %s (sha256 %.12s...), %s; corpus manifest: %s%s%.12s%s\n", g.runs[0].opt.train, sw.train_sha,
           g.runs[0].opt.val, g.manifest[0] ? g.manifest : "none found", g.manifest[0] ? " (sha256 " : "",
           sw.manifest_sha, g.manifest[0] ? "...)" : "");
    long n_evals = g.runs[0].opt.steps / g.runs[0].opt.eval_every + (g.runs[0].opt.steps % g.runs[0].opt.eval_every != 0);
    if (n_evals < 11)
        printf("note: %ld evaluations per run (steps / eval_every), fewer than the 11 the metric averages: it will "
               "average all of them\n", n_evals);
    fflush(stdout);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    pid_t me = getpid();
    int running = 0, started = 0, next = 0, finished = n_done, failed = 0;
    double t_start = now_seconds();
    for (;;) {
        while (!stop_sig && running < jobs_n && (!max_runs || started < max_runs)) {
            while (next < g.n_runs && jobs[next].status != PENDING) next++;
            if (next == g.n_runs) break;
            Job *j = &jobs[next];
            if (mkdir_p(j->dir)) { printf("%s: %s\n", j->run->name, mhar_error()); j->status = FAILED; failed++; continue; }
            long step;
            run_finished(j, &step);
            fflush(NULL);
            sigset_t block, old;
            sigemptyset(&block);
            sigaddset(&block, SIGINT);
            sigaddset(&block, SIGTERM);
            sigprocmask(SIG_BLOCK, &block, &old);
            pid_t pid = fork();
            if (pid == 0) child(&sw, j, me, &old);
            if (pid < 0) {
                sigprocmask(SIG_SETMASK, &old, NULL);
                rc = mhar_fail("fork failed: %s", strerror(errno));
                break;
            }
            j->pid = pid;
            j->status = RUNNING;
            j->t0 = now_seconds();
            for (int k = 0; k < SWEEP_MAX_JOBS; k++) if (live[k] == 0) { live[k] = pid; break; }
            sigprocmask(SIG_SETMASK, &old, NULL);   // a signal pending since fork now reaches this child too
            running++;
            started++;
            if (step >= 0) printf("[%d/%d] %s: resuming from step %ld of %ld\n", next + 1, g.n_runs, j->run->name,
                                  step, j->run->opt.steps);
            else printf("[%d/%d] %s: started\n", next + 1, g.n_runs, j->run->name);
            fflush(stdout);
        }
        if (running == 0) break;
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            rc = mhar_fail("waitpid failed: %s", strerror(errno));
            break;
        }
        for (int k = 0; k < SWEEP_MAX_JOBS; k++) if (live[k] == pid) live[k] = 0;
        for (int i = 0; i < g.n_runs; i++) {
            if (jobs[i].status != RUNNING || jobs[i].pid != pid) continue;
            running--;
            report_finish(&jobs[i], i + 1, g.n_runs, WIFEXITED(status) && WEXITSTATUS(status) == 0);
            finished += jobs[i].status == DONE;
            failed += jobs[i].status == FAILED;
            write_sweep_json(&sw, jobs, g.n_runs, jobs_n, g.path);
            // ETA from this invocation's pace (wall time per finished run, jobs included)
            int left = 0, done_now = finished - n_done;
            for (int k = 0; k < g.n_runs; k++) left += jobs[k].status == PENDING || jobs[k].status == RUNNING;
            if (done_now > 0 && left > 0 && !stop_sig) {
                char eta[32];
                format_time(eta, sizeof eta, (now_seconds() - t_start) / done_now * left);
                printf("      %d of %d runs done, %d to go, about %s left\n", finished, g.n_runs, left, eta);
                fflush(stdout);
            }
        }
    }
    int pending = 0;
    for (int i = 0; i < g.n_runs; i++) pending += jobs[i].status == PENDING || jobs[i].status == STOPPED;
    char t[32];
    format_time(t, sizeof t, now_seconds() - t_start);
    printf("sweep %s: %d of %d runs done, %d failed, %d to go (%s this time)\n", out, finished, g.n_runs, failed,
           pending, t);
    if (stop_sig) printf("stopped by signal %d; run the same command to continue\n", (int)stop_sig);
    else if (pending && max_runs) printf("started %d runs as --max-runs asked; run the same command to continue\n", started);
    else if (!pending && !failed) printf("next: mhar report %s\n", out);
    outcome->failed = failed;
    outcome->stop_signal = (int)stop_sig;
    grid_free(&g);
    free(jobs);
    close(lock);
    return rc;
}
