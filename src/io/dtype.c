#include "dtype.h"

#include <math.h>
#include <string.h>

#include "../util/common.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dtype.c copies float32 data as it lies in memory: little-endian hosts only"
#endif

static const struct {
    const char *st, *torch, *flag;
    size_t size;
} DTYPES[DTYPE_COUNT] = {
    [DTYPE_F32] = {"F32", "float32", "f32", 4},
    [DTYPE_BF16] = {"BF16", "bfloat16", "bf16", 2},
    [DTYPE_F16] = {"F16", "float16", "f16", 2},
};

const char *dtype_st_name(Dtype t) { return DTYPES[t].st; }
const char *dtype_torch_name(Dtype t) { return DTYPES[t].torch; }
const char *dtype_flag_name(Dtype t) { return DTYPES[t].flag; }
size_t dtype_size(Dtype t) { return DTYPES[t].size; }

int dtype_from_st_name(const char *name, Dtype *out) {
    for (int t = 0; t < DTYPE_COUNT; t++)
        if (strcmp(name, DTYPES[t].st) == 0) {
            *out = (Dtype)t;
            return MHAR_OK;
        }
    return MHAR_ERR;
}

int dtype_from_flag(const char *name, Dtype *out) {
    for (int t = 0; t < DTYPE_COUNT; t++)
        if (strcmp(name, DTYPES[t].flag) == 0) {
            *out = (Dtype)t;
            return MHAR_OK;
        }
    return MHAR_ERR;
}

size_t st_dtype_size(const char *name) {
    // Every dtype of the safetensors specification (0.4+).
    static const struct { const char *name; size_t size; } all[] = {
        {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
        {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"U32", 4},
        {"F32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8}, {"C64", 8},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(name, all[i].name) == 0) return all[i].size;
    return 0;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t to_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

float bf16_to_f32(uint16_t h) { return from_bits((uint32_t)h << 16); }

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return from_bits(sign | 0x7f800000u | mant << 13); // inf, NaN (payload kept)
    if (exp != 0) return from_bits(sign | (exp + 112) << 23 | mant << 13); // 127 - 15 = 112
    if (mant == 0) return from_bits(sign);
    // Subnormal mant·2^-24: shift the leading 1 up to the implicit bit.
    int e = 113; // the biased fp32 exponent of 2^-14, the f16 subnormals' scale
    while (!(mant & 0x400u)) {
        mant <<= 1;
        e--;
    }
    return from_bits(sign | (uint32_t)e << 23 | (mant & 0x3ffu) << 13);
}

uint16_t f32_to_bf16(float x) {
    uint32_t u = to_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x0040u); // quiet NaN
    // Ties to even: add 0x7fff plus the bit that will become the last one.
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// Round m >> shift to nearest, ties to even (1 <= shift <= 31).
static uint32_t shift_round(uint32_t m, int shift) {
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return r + (rem > half || (rem == half && (r & 1u)));
}

uint16_t f32_to_f16(float x) {
    uint32_t u = to_bits(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); // quiet NaN
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); // >= 65520 (and inf): infinity
    if (a >= 0x38800000u) // normal in f16 (>= 2^-14): rebias, round off 13 bits (may carry to the exponent)
        return (uint16_t)(sign | shift_round(a - 0x38000000u, 13));
    if (a <= 0x33000000u) return (uint16_t)sign; // <= 2^-25: rounds to zero (2^-25 is a tie, 0 is even)
    // Subnormal: value / 2^-24 = mant24 · 2^(exp - 126), exp <= 112.
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(a >> 23);
    return (uint16_t)(sign | shift_round(mant, shift)); // a carry to 0x400 is the smallest normal
}

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

void dtype_to_f32(Dtype t, const unsigned char *src, float *dst, size_t n) {
    switch (t) {
    case DTYPE_F32:
        memcpy(dst, src, n * sizeof(float)); // little-endian host (safetensors.c checks)
        break;
    case DTYPE_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(le16(src + 2 * i));
        break;
    case DTYPE_F16:
        for (size_t i = 0; i < n; i++) dst[i] = f16_to_f32(le16(src + 2 * i));
        break;
    default:
        break;
    }
}

void f32_to_dtype(Dtype t, const float *src, unsigned char *dst, size_t n) {
    if (t == DTYPE_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h = t == DTYPE_BF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
        dst[2 * i] = (unsigned char)(h & 0xff);
        dst[2 * i + 1] = (unsigned char)(h >> 8);
    }
}

size_t dtype_overflow(Dtype t, const float *src, size_t n) {
    if (t == DTYPE_F32) return n;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(src[i])) continue;
        uint16_t h = t == DTYPE_BF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
        if ((h & 0x7fffu) == (t == DTYPE_BF16 ? 0x7f80u : 0x7c00u)) return i;
    }
    return n;
}
