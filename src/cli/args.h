// Command-line flags: "--name value" or "--name=value", strictly parsed
// (a number must be all digits and in range), unknown flags refused.
#pragma once
#include <stdint.h>

typedef enum { FLAG_INT, FLAG_LONG, FLAG_U64, FLAG_FLOAT, FLAG_STR, FLAG_BOOL, FLAG_DOUBLE } FlagType;

typedef struct {
    const char *name;   // without the dashes
    FlagType type;
    void *dst;          // int*, long*, uint64_t*, float*, const char**, int*, double*
    const char *help;
    double lo, hi;      // accepted range for numbers (ignored when lo == hi)
    int given;          // set by args_parse
} Flag;

// Returns 0 to go on, 1 if --help was printed (exit 0), -1 on a bad flag
// (message printed to stderr).
int args_parse(int argc, char **argv, Flag *flags, int n_flags, const char *usage);
const Flag *args_flag(const Flag *flags, int n_flags, const char *name);
