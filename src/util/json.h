// Typed getters for the members of a cJSON object, with range checks.
// Every error names the file (or other origin), the key and the reason:
//   "run/config.json: key 'hidden_size' is 100000, out of range 1..65536".
// A key that is absent is an error when required, else MHAR_OK with *out
// left as it was (the caller's default). Nothing is written on error.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

// An integer-valued number (3.0 is fine, 3.5 is not) in [lo, hi].
int json_get_int(const cJSON *obj, const char *file, const char *key, int required, long lo, long hi,
                 int *out);
// The same for 64-bit integers; |values| above 2^53 are refused (a JSON
// number reaches cJSON as a double, exact only up to there).
int json_get_i64(const cJSON *obj, const char *file, const char *key, int required, int64_t lo,
                 int64_t hi, int64_t *out);
// A finite number in [lo, hi].
int json_get_double(const cJSON *obj, const char *file, const char *key, int required, double lo,
                    double hi, double *out);
// A string that fits out[cap] (NUL included).
int json_get_string(const cJSON *obj, const char *file, const char *key, int required, char *out,
                    size_t cap);
// true or false, as 1 or 0.
int json_get_bool(const cJSON *obj, const char *file, const char *key, int required, int *out);

// Lenient reads, for optional members where a wrong type means "not given":
// the value when the member is there with the right type, else dflt.
const char *json_string_or(const cJSON *obj, const char *key, const char *dflt);
double json_number_or(const cJSON *obj, const char *key, double dflt);
int json_bool_or(const cJSON *obj, const char *key, int dflt);

// Parse text[0..n) (need not be NUL-terminated) as one JSON value; anything
// but whitespace after it is an error too. *out is freed with cJSON_Delete.
int json_parse(const char *text, size_t n, const char *file, cJSON **out);
// read_file + json_parse.
int json_load(const char *path, cJSON **out);
// The JSON value in path, or NULL when it is absent, unreadable or not JSON:
// for optional files (a run's probe.json, a sweep's records).
cJSON *json_load_or_null(const char *path);
