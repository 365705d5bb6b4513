// Small vector-math helpers shared by the CPU kernels (header-only so they
// inline into the loops that gcc vectorises).
#pragma once
#include <stdint.h>
#include <string.h>

// Vectorised running max of `m`. gcc vectorises this reduction under
// `omp simd`; clang 14 cannot without fast-math and would warn
// (-Wpass-failed), so clang gets the plain loop.
#ifdef __clang__
#define SIMD_MAX_M
#else
#define SIMD_MAX_M _Pragma("omp simd reduction(max : m)")
#endif

// exp(x) for the softmax and sigmoid loops, written so that gcc vectorises it
// without -ffast-math (glibc's expf is a scalar call there): Cody-Waite
// reduction x = n·ln2 + r, degree-6 polynomial on r, 2ⁿ built in the exponent
// bits (the classic minimax coefficients for expf). Max relative error
// ~1e-7 on [-87, 88]; inputs are clamped to that range (below -87 it returns ~1.6e-38 instead of 0).
static inline float vexp(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round
    float r = x - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // A NaN input passes the clamps and must come out NaN (p is): its n must
    // not reach the integer conversion, where it would be undefined.
    n = n == n ? n : 0.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return p * s;
}
