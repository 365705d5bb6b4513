// Shared basics: error reporting, RNG, timing, small helpers.
// Library code never exits: a function that can fail returns MHAR_OK or
// MHAR_ERR and leaves a message (file, field, reason) in mhar_error().
#pragma once
#include <stddef.h>
#include <stdint.h>

#define MHAR_OK 0
#define MHAR_ERR (-1)

// Room for a path, NUL included: every path buffer has this size, and every
// function that composes a path (path_join, path_format) refuses one that
// does not fit instead of truncating it.
#define MHAR_PATH_MAX 4096

// Record an error message (printf-style) and return MHAR_ERR. The arguments
// may include mhar_error() itself, to wrap an earlier message:
// mhar_fail("%s: %s", what, mhar_error()).
int mhar_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// The last recorded message ("" if none).
const char *mhar_error(void);

// Deterministic RNG (xoshiro256**-style state, splitmix64-seeded); its state
// is part of a checkpoint so a resumed run draws the same numbers.
typedef struct { uint64_t s[4]; } Rng;
void rng_seed(Rng *r, uint64_t seed);
uint64_t rng_next(Rng *r);
float rng_uniform(Rng *r);            // [0, 1)
float rng_normal(Rng *r);             // N(0, 1), Box-Muller
uint64_t rng_below(Rng *r, uint64_t n); // uniform integer in [0, n)

double now_seconds(void);             // monotonic clock
double peak_rss_mb(void);             // from getrusage
// Checked allocation: 64-byte aligned, zeroed; NULL (with mhar_fail) on failure.
void *mhar_alloc(size_t bytes);
void mhar_free(void *p);

// dir + "/" + name into out[cap]; MHAR_ERR (with message) if it won't fit.
int path_join(char *out, size_t cap, const char *dir, const char *name);
// A path from a printf format into out[cap]; MHAR_ERR (with message) if it
// won't fit, never a truncated path.
int path_format(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// Bounded string copy; MHAR_ERR if src does not fit.
int copy_str(char *dst, size_t cap, const char *src);
