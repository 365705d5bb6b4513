// The options of a training run, declared once. One table (run_options.c)
// drives everything that names them:
//   - the `mhar train` flags and their --help (src/cli/cmd_train.c);
//   - state.json, the options a resumed run keeps (checkpoint.c);
//   - the checks on --resume: a given flag must agree with the saved value,
//     may change it, or is ignored with a note (the model, the data);
//   - a sweep run: its record run.json, the grid's scalar keys and the
//     `mhar train` command line the sweep starts it with (analysis/grid.c).
// Keys are the option's name with '_' (state.json, run.json, the grid);
// flags the same with '-'.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#define RUN_PATH_MAX 2048
#define TRAIN_MAX_BAD_STEPS 5   // default of --max-bad-steps
#define RUN_OPTIONS_MAX 32      // room for the table (checked in run_options.c)

typedef struct {
    // the model of a fresh run (a resumed run's comes from its checkpoint)
    char preset[32];
    char config[RUN_PATH_MAX];   // HF-style config.json instead of the preset ("" none)
    char family[16];             // "" the preset's (qwen3) or config's family
    char residual[16];           // "" the preset's or config's scheme
    int heads, blocks;           // routing heads H, blocks N (0: the scheme's default)
    char route_query_init[8];    // "" zero (SPEC), or "zero" | "normal" (config_query_init_find)
    // data: token files (absolute once a run has started)
    char train[RUN_PATH_MAX], val[RUN_PATH_MAX];
    // the recipe
    long steps, warmup;          // warmup < 0: steps / 20
    int batch, seq, accum;
    double lr;                   // peak learning rate; training uses it as a float
    uint64_t seed;
    int eval_every, eval_batches, save_every;   // save_every < 0: eval_every
    long max_bad_steps;          // non-finite steps in a row that stop the run
    // the continued-training recipe (all off by default: SPEC §4 as published)
    char wd_exclude[64];         // parameter classes without weight decay (param_classes_parse; "" none)
    double z_loss;               // z-loss coefficient (0: none)
    double ema;                  // decay of the weights' EMA (0: none)
} RunOptions;

typedef enum { OPT_INT, OPT_LONG, OPT_U64, OPT_REAL, OPT_TEXT } RunOptionType;

// Where an option goes (bits of RunOption.use).
enum {
    RUN_MODEL = 1,          // builds the model of a fresh run: ignored on --resume, refused with --init-from
    RUN_STATE = 2,          // saved in state.json
    RUN_STATE_OPTIONAL = 4, // ... and absent from checkpoints older than the option (read as the default)
    RUN_SWEEP = 8,          // a sweep run's setting: in run.json and on its `mhar train` command line
    RUN_GRID = 16,          // a scalar key of a grid file (absent: the default)
    RUN_GRID_NONZERO = 32,  // ... where 0 is refused (a sweep needs periodic evaluations and checkpoints)
    RUN_GRID_REQUIRED = 64, // ... that every grid must give (a sweep has no default length)
    RUN_ZERO_UNSET = 128,   // 0 is accepted besides [lo, hi]: "not given"
};

// What --resume does with a flag given again.
typedef enum {
    RESUME_KEEPS,       // the run keeps its saved value: a different one is an error
    RESUME_MAY_CHANGE,  // the given value replaces the saved one
    RESUME_IGNORES,     // ignored, with a note (the model and the data come from the run)
} ResumeRule;

typedef struct {
    const char *key;       // state.json / run.json / grid key; the flag is the same with '-'
    const char *flag;
    RunOptionType type;
    size_t offset, size;   // the field in RunOptions
    double lo, hi;         // range of a number
    double def;            // default of a number
    const char *def_text;  // default of a text
    unsigned use;          // RUN_* bits
    ResumeRule resume;
    const char *help;      // for --help
} RunOption;

int run_option_count(void);
const RunOption *run_option_at(int i);
// By key ("eval_every") or flag ("eval-every"); NULL if none.
const RunOption *run_option_find(const char *name);
// The option's field in o.
void *run_option_field(const RunOption *opt, RunOptions *o);
const void *run_option_cfield(const RunOption *opt, const RunOptions *o);
// Set a number option (the value converted to its type).
void run_option_set_num(const RunOption *opt, RunOptions *o, double v);

// Every option at its default.
void run_options_default(RunOptions *o);
// The defaults that derive from other options: warmup < 0 -> steps / 20,
// save_every < 0 -> eval_every, then eval_every 0 (evaluate at the end only)
// -> steps.
void run_options_finish(RunOptions *o);

// The value as text: what `--flag VALUE` takes and what error messages show.
void run_option_format(const RunOption *opt, const RunOptions *o, char *buf, size_t cap);
// Equal as the run uses them (the learning rate at float precision).
int run_option_equal(const RunOption *opt, const RunOptions *a, const RunOptions *b);
// Whether the option means anything for o: routing heads only for a scheme
// that takes H, blocks only for one that needs them, a text only when set.
int run_option_applies(const RunOption *opt, const RunOptions *o);

// Add every option with all bits of `use` to the JSON object j (numbers as
// numbers, the seed as a string: a u64 does not fit a double).
void run_options_to_json(const RunOptions *o, unsigned use, cJSON *j);
// Read every option with all bits of `use` from j into o; each must be
// present (RUN_STATE_OPTIONAL ones may be absent) and in range. Errors name
// origin and the field.
int run_options_from_json(const cJSON *j, unsigned use, const char *origin, RunOptions *o);

// The resume rules: for each option given (given[i] for run_option_at(i)),
// RESUME_KEEPS must equal the saved value, RESUME_MAY_CHANGE replaces it in
// *saved, RESUME_IGNORES prints a note on stderr.
int run_options_resume(RunOptions *saved, const RunOptions *given, const int *given_flags);

// `--flag value` pairs of every option with all bits of `use` that applies
// to o, as argv strings (NULL-terminated, at most cap - 1 entries) in buf.
int run_options_argv(const RunOptions *o, unsigned use, char **argv, int cap, char *buf, size_t buf_cap);
