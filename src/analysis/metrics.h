// Reading a run's metrics.jsonl (written by train/train.c): one line per
// step {"step","loss","lr","grad_norm","tok_per_s","tokens"} and one per
// evaluation {"step","val_loss","val_tokens"}.
#pragma once

typedef struct {
    int n_evals;
    long *eval_step;        // [n_evals], increasing
    double *val_loss;       // [n_evals]
    long last_step;         // the last training step recorded (0 if none)
    double last_loss;       // its training loss
    double tok_per_s;       // median tokens/s over the step lines (0 if none)
    int skipped_lines;      // lines that were neither (e.g. one cut short by a kill)
} Metrics;

// Load path. A missing file is an error; a line cut short is skipped and
// counted. An evaluation repeated at the same step keeps the later value.
// Values are parsed with strtod, so "nan" (a diverged run) reads as NAN.
int metrics_load(const char *path, Metrics *m);
void metrics_free(Metrics *m);
