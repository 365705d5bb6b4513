#include "json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "file.h"

// The member, or NULL with *rc set: an error if absent and required.
static const cJSON *member(const cJSON *obj, const char *file, const char *key, int required, int *rc) {
    const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    *rc = MHAR_OK;
    if (!it && required) *rc = mhar_fail("%s: required key '%s' is missing", file, key);
    return it;
}

// An integral number in [lo, hi] into *v (exactness checked before any cast).
static int get_integral(const cJSON *it, const char *file, const char *key, double lo, double hi,
                        double *v) {
    if (!cJSON_IsNumber(it)) return mhar_fail("%s: key '%s' must be an integer number", file, key);
    double x = it->valuedouble;
    if (!isfinite(x) || x != floor(x)) return mhar_fail("%s: key '%s' is %g, not an integer", file, key, x);
    if (x < lo || x > hi)
        return mhar_fail("%s: key '%s' is %.0f, out of range %.0f..%.0f", file, key, x, lo, hi);
    *v = x;
    return MHAR_OK;
}

int json_get_int(const cJSON *obj, const char *file, const char *key, int required, long lo, long hi,
                 int *out) {
    int rc;
    const cJSON *it = member(obj, file, key, required, &rc);
    if (!it) return rc;
    if (lo < -2147483647L - 1) lo = -2147483647L - 1; // an int can hold no more
    if (hi > 2147483647L) hi = 2147483647L;
    double v = 0;
    if (get_integral(it, file, key, (double)lo, (double)hi, &v)) return MHAR_ERR;
    *out = (int)v;
    return MHAR_OK;
}

int json_get_i64(const cJSON *obj, const char *file, const char *key, int required, int64_t lo,
                 int64_t hi, int64_t *out) {
    int rc;
    const cJSON *it = member(obj, file, key, required, &rc);
    if (!it) return rc;
    const int64_t exact = (int64_t)1 << 53;
    if (lo < -exact) lo = -exact;
    if (hi > exact) hi = exact;
    double v = 0;
    if (get_integral(it, file, key, (double)lo, (double)hi, &v)) return MHAR_ERR;
    *out = (int64_t)v;
    return MHAR_OK;
}

int json_get_double(const cJSON *obj, const char *file, const char *key, int required, double lo,
                    double hi, double *out) {
    int rc;
    const cJSON *it = member(obj, file, key, required, &rc);
    if (!it) return rc;
    if (!cJSON_IsNumber(it)) return mhar_fail("%s: key '%s' must be a number", file, key);
    double v = it->valuedouble;
    if (!isfinite(v) || v < lo || v > hi)
        return mhar_fail("%s: key '%s' is %g, outside %g..%g", file, key, v, lo, hi);
    *out = v;
    return MHAR_OK;
}

int json_get_string(const cJSON *obj, const char *file, const char *key, int required, char *out,
                    size_t cap) {
    int rc;
    const cJSON *it = member(obj, file, key, required, &rc);
    if (!it) return rc;
    if (!cJSON_IsString(it)) return mhar_fail("%s: key '%s' must be a string", file, key);
    size_t n = strlen(it->valuestring);
    if (n >= cap) return mhar_fail("%s: key '%s' is %zu characters, more than the %zu allowed", file, key, n,
                                   cap ? cap - 1 : 0);
    memcpy(out, it->valuestring, n + 1);
    return MHAR_OK;
}

int json_get_bool(const cJSON *obj, const char *file, const char *key, int required, int *out) {
    int rc;
    const cJSON *it = member(obj, file, key, required, &rc);
    if (!it) return rc;
    if (!cJSON_IsBool(it)) return mhar_fail("%s: key '%s' must be true or false", file, key);
    *out = cJSON_IsTrue(it) ? 1 : 0;
    return MHAR_OK;
}

const char *json_string_or(const cJSON *obj, const char *key, const char *dflt) {
    const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    return cJSON_IsString(it) ? it->valuestring : dflt;
}

double json_number_or(const cJSON *obj, const char *key, double dflt) {
    const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    return cJSON_IsNumber(it) ? it->valuedouble : dflt;
}

int json_bool_or(const cJSON *obj, const char *key, int dflt) {
    const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    return cJSON_IsBool(it) ? cJSON_IsTrue(it) : dflt;
}

int json_parse(const char *text, size_t n, const char *file, cJSON **out) {
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    if (!root) {
        long at = end ? (long)(end - text) : (long)(cJSON_GetErrorPtr() - text);
        if (at < 0 || (size_t)at > n) at = 0;
        return mhar_fail("%s: invalid JSON near byte %ld", file, at);
    }
    // Anything but whitespace after the value means a damaged file.
    for (const char *q = end; q && q < text + n; q++)
        if (*q != ' ' && *q != '\n' && *q != '\r' && *q != '\t') {
            long at = (long)(q - text);
            cJSON_Delete(root);
            return mhar_fail("%s: invalid JSON: trailing characters at byte %ld", file, at);
        }
    *out = root;
    return MHAR_OK;
}

int json_load(const char *path, cJSON **out) {
    char *text;
    size_t n;
    *out = NULL;
    if (read_file(path, &text, &n)) return MHAR_ERR;
    int rc = json_parse(text, n, path, out);
    free(text);
    return rc;
}

cJSON *json_load_or_null(const char *path) {
    cJSON *j = NULL;
    if (json_load(path, &j) != MHAR_OK) return NULL;
    return j;
}
