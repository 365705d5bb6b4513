// The checkpoint formats (src/io/dtype.h) against references computed another
// way: every bf16 and f16 bit pattern decoded through ldexp from its fields;
// rounding fp32 -> bf16/f16 checked against a search for the nearest value
// among all 65536 patterns (ties to the even pattern), at every rounding
// boundary (each midpoint between neighbours and the floats either side of
// it), at the overflow and subnormal edges, and on random floats.
// Exact equality everywhere: every conversion here is exact or correctly
// rounded, so there is no tolerance to state.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "io/dtype.h"
#include "util/common.h"

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

// Format fields: bf16 has 8 exponent and 7 mantissa bits (bias 127), f16 5
// and 10 (bias 15).
typedef struct {
    const char *name;
    int exp_bits, mant_bits, bias;
    float (*decode)(uint16_t);
    uint16_t (*encode)(float);
    Dtype dt;
} Format;

static const Format BF16 = {"bf16", 8, 7, 127, bf16_to_f32, f32_to_bf16, DTYPE_BF16};
static const Format F16 = {"f16", 5, 10, 15, f16_to_f32, f32_to_f16, DTYPE_F16};

// The value of a pattern from its fields, in double.
static double ref_decode(const Format *f, uint16_t h) {
    int sign = h >> 15, e = (h >> f->mant_bits) & ((1 << f->exp_bits) - 1);
    int m = h & ((1 << f->mant_bits) - 1);
    double v;
    if (e == (1 << f->exp_bits) - 1) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp(m, 1 - f->bias - f->mant_bits);
    else v = ldexp(m + (1 << f->mant_bits), e - f->bias - f->mant_bits);
    return sign ? -v : v;
}

static void test_decode_all(const Format *f) {
    long bad = 0, first = -1;
    for (uint32_t h = 0; h < 65536; h++) {
        float got = f->decode((uint16_t)h);
        double want = ref_decode(f, (uint16_t)h);
        int ok;
        if (isnan(want)) {
            // NaN: sign kept, payload kept in the high mantissa bits.
            uint32_t g = bits(got), shift = 23 - (uint32_t)f->mant_bits;
            ok = isnan(got) && (g >> 31) == (h >> 15) && ((g >> shift) & ((1u << f->mant_bits) - 1)) ==
                                                               (h & ((1u << f->mant_bits) - 1));
        } else {
            ok = (double)got == want && !signbit(got) == !signbit(want);
        }
        if (!ok && bad++ == 0) first = (long)h;
    }
    char name[64];
    snprintf(name, sizeof name, "dtype.%s_decode_all_65536", f->name);
    CHECK(bad == 0, name, "%ld patterns wrong, first 0x%04lx", bad, first);
}

// The finite non-negative values of the format in pattern order (which is
// value order), plus the first value past the largest: 2^(emax+1).
static double *positive_values(const Format *f, int *n) {
    int count = ((1 << f->exp_bits) - 1) << f->mant_bits; // patterns below the inf/NaN exponent
    double *v = malloc(sizeof(double) * ((size_t)count + 1));
    for (int h = 0; h < count; h++) v[h] = ref_decode(f, (uint16_t)h);
    v[count] = ldexp(1.0, (1 << f->exp_bits) - 1 - f->bias); // where infinity starts
    *n = count;
    return v;
}

// Nearest pattern by search; ties to the even pattern; past the largest
// finite value's half-way point, infinity.
static uint16_t ref_encode(const Format *f, const double *v, int n, float x) {
    uint16_t inf = (uint16_t)(((1 << f->exp_bits) - 1) << f->mant_bits);
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (isinf(x)) return sign | inf;
    int lo = 0, hi = n; // largest i with v[i] <= a, in [0, n]
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (v[mid] <= a) lo = mid;
        else hi = mid - 1;
    }
    int k = lo;
    if (k < n && v[k] != a) {
        double dl = a - v[k], dh = v[k + 1] - a;
        if (dh < dl || (dh == dl && (k & 1))) k++;
    }
    return sign | (k >= n ? inf : (uint16_t)k);
}

static int encode_ok(const Format *f, const double *v, int n, float x, uint16_t *got, uint16_t *want) {
    *got = f->encode(x);
    if (isnan(x)) { // any quiet NaN of the same sign
        uint16_t e = (uint16_t)(((1 << f->exp_bits) - 1) << f->mant_bits), quiet = (uint16_t)(1 << (f->mant_bits - 1));
        *want = (uint16_t)((signbit(x) ? 0x8000 : 0) | e | quiet);
        return (*got & 0x7fff) > e && (*got & quiet) && (*got & 0x8000) == (*want & 0x8000);
    }
    *want = ref_encode(f, v, n, x);
    return *got == *want;
}

static void test_encode(const Format *f) {
    int n;
    double *v = positive_values(f, &n);
    long tried = 0, bad = 0;
    float first = 0;
    uint16_t fg = 0, fw = 0;
#define TRY(xv)                                                     \
    do {                                                            \
        float x_ = (xv);                                            \
        uint16_t g_, w_;                                            \
        tried++;                                                    \
        if (!encode_ok(f, v, n, x_, &g_, &w_) && bad++ == 0) {      \
            first = x_;                                             \
            fg = g_;                                                \
            fw = w_;                                                \
        }                                                           \
    } while (0)
    // Every value and every rounding boundary: the midpoint of each pair of
    // neighbours (exact in fp32: one more mantissa bit than the format) and
    // the floats just below and above it; both signs.
    for (int k = 0; k < n; k++) {
        for (int s = 0; s < 2; s++) {
            double sg = s ? -1.0 : 1.0;
            float mid = (float)((v[k] + v[k + 1]) / 2);
            TRY((float)(sg * v[k]));
            TRY((float)(sg * mid));
            TRY((float)sg * nextafterf(mid, 0));
            TRY((float)sg * nextafterf(mid, INFINITY));
            TRY((float)sg * nextafterf((float)v[k], INFINITY));
        }
    }
    // Edges: fp32 subnormals, the largest float, infinities, NaNs.
    float edges[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1.17549421e-38f, 1.17549435e-38f, 3.4028235e38f,
                     -3.4028235e38f, INFINITY, -INFINITY, NAN, -NAN, from_bits(0x7f800001u),
                     from_bits(0xffbfffffu), 65504.0f, 65519.996f, 65520.0f, 65536.0f, 5.96046448e-8f,
                     2.98023224e-8f, 2.98023259e-8f, 6.10351562e-5f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) TRY(edges[i]);
    // Random bit patterns: every exponent, arbitrary low bits.
    Rng r;
    rng_seed(&r, 42);
    for (int i = 0; i < 2000000; i++) TRY(from_bits((uint32_t)rng_next(&r)));
#undef TRY
    char name[64];
    snprintf(name, sizeof name, "dtype.%s_round_to_nearest_even", f->name);
    CHECK(bad == 0, name, "%ld of %ld wrong, first %a (0x%08x): got 0x%04x, want 0x%04x", bad, tried,
          (double)first, bits(first), fg, fw);
    free(v);
}

// Decoding then encoding gives every non-NaN pattern back.
static void test_roundtrip(const Format *f) {
    long bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float x = f->decode((uint16_t)h);
        if (!isnan(x) && f->encode(x) != h) bad++;
    }
    char name[64];
    snprintf(name, sizeof name, "dtype.%s_decode_encode_identity", f->name);
    CHECK(bad == 0, name, "%ld patterns changed", bad);
}

// The array forms: little-endian bytes, unaligned source, overflow index.
static void test_arrays(void) {
    float x[5] = {1.0f, -2.5f, 65504.0f, 1e-8f, 3.0e38f};
    unsigned char raw[1 + 5 * 4];
    float back[5];
    f32_to_dtype(DTYPE_F16, x, raw + 1, 4);
    CHECK(raw[1] == 0x00 && raw[2] == 0x3c && raw[3] == 0x00 && raw[4] == 0xc1, "dtype.f16_little_endian",
          "bytes %02x %02x %02x %02x", raw[1], raw[2], raw[3], raw[4]);
    dtype_to_f32(DTYPE_F16, raw + 1, back, 4);
    CHECK(back[0] == 1.0f && back[1] == -2.5f && back[2] == 65504.0f && back[3] == f16_to_f32(f32_to_f16(1e-8f)),
          "dtype.f16_array_unaligned", "%g %g %g %g", back[0], back[1], back[2], back[3]);
    f32_to_dtype(DTYPE_BF16, x, raw + 1, 5);
    dtype_to_f32(DTYPE_BF16, raw + 1, back, 5);
    int ok = 1;
    for (int i = 0; i < 5; i++) ok &= bits(back[i]) == (uint32_t)f32_to_bf16(x[i]) << 16;
    CHECK(ok, "dtype.bf16_array_unaligned", "values differ");
    f32_to_dtype(DTYPE_F32, x, raw + 1, 5);
    dtype_to_f32(DTYPE_F32, raw + 1, back, 5);
    CHECK(memcmp(back, x, sizeof x) == 0, "dtype.f32_array_copy", "values differ");

    float y[4] = {NAN, INFINITY, 65519.0f, 65520.0f};
    CHECK(dtype_overflow(DTYPE_F16, x, 5) == 4 && dtype_overflow(DTYPE_F16, x, 4) == 4 &&
              dtype_overflow(DTYPE_F16, y, 4) == 3 && dtype_overflow(DTYPE_BF16, x, 5) == 5 &&
              dtype_overflow(DTYPE_F32, y, 4) == 4,
          "dtype.overflow_index", "f16 %zu %zu %zu bf16 %zu", dtype_overflow(DTYPE_F16, x, 5),
          dtype_overflow(DTYPE_F16, x, 4), dtype_overflow(DTYPE_F16, y, 4), dtype_overflow(DTYPE_BF16, x, 5));
    float big[2] = {3.38953139e38f, 3.4e38f}; // bf16's largest finite value; one that rounds past it
    CHECK(dtype_overflow(DTYPE_BF16, big, 2) == 1, "dtype.bf16_overflow", "index %zu",
          dtype_overflow(DTYPE_BF16, big, 2));
}

static void test_names(void) {
    Dtype t;
    CHECK(dtype_from_st_name("BF16", &t) == MHAR_OK && t == DTYPE_BF16 && dtype_from_flag("f16", &t) == MHAR_OK &&
              t == DTYPE_F16 && dtype_from_st_name("I64", &t) == MHAR_ERR && dtype_from_flag("F16", &t) == MHAR_ERR &&
              !strcmp(dtype_torch_name(DTYPE_BF16), "bfloat16") && st_dtype_size("I64") == 8 &&
              st_dtype_size("F8_E4M3") == 1 && st_dtype_size("Q4") == 0,
          "dtype.names", "lookup mismatch");
}

int main(void) {
    test_decode_all(&BF16);
    test_decode_all(&F16);
    test_encode(&BF16);
    test_encode(&F16);
    test_roundtrip(&BF16);
    test_roundtrip(&F16);
    test_arrays();
    test_names();
    CHECK_EXIT();
}
