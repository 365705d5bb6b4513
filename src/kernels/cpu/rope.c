// RoPE, "rotate half" convention: coordinate j pairs with j + hd/2.
#include <math.h>
#include <stddef.h>

#include "kernels/ops.h"
#include "context.h"

// -> cos_t, sin_t [max_pos, hd/2], angle = pos · inv_freq[j], in double so
// large positions keep full float accuracy.
void rope_table(OpsContext *ctx, float *cos_t, float *sin_t, int max_pos, int hd, const double *inv_freq) {
    OPS_TIMED(ctx);
    (void)ctx;
    int half = hd / 2;
    for (int j = 0; j < half; j++) {
        for (int p = 0; p < max_pos; p++) {
            double a = p * inv_freq[j];
            cos_t[(size_t)p * half + j] = (float)cos(a);
            sin_t[(size_t)p * half + j] = (float)sin(a);
        }
    }
}

// x1, x2 [half]: (x1, x2) <- (x1·c − x2·s, x2·c + x1·s); sg = −1 gives the
// transpose (inverse) rotation.
static inline void rotate_half(float *restrict x1, float *restrict x2,
                               const float *restrict c, const float *restrict s,
                               float sg, int half) {
    for (int j = 0; j < half; j++) {
        float a = x1[j], b = x2[j], sn = sg * s[j];
        x1[j] = a * c[j] - b * sn;
        x2[j] = b * c[j] + a * sn;
    }
}

// x [B, T, n_heads, hd] in place; token t has position pos0 + t.
static void rope_apply(float *x, int B, int T, int n_heads, int hd, int pos0,
                       const float *cos_t, const float *sin_t, float sg) {
    int half = hd / 2;
#pragma omp parallel for schedule(static)
    for (long bt = 0; bt < (long)B * T; bt++) {
        size_t pos = (size_t)(pos0 + (int)(bt % T));
        const float *c = cos_t + pos * half, *s = sin_t + pos * half;
        float *row = x + (size_t)bt * n_heads * hd;
        for (int h = 0; h < n_heads; h++)
            rotate_half(row + (size_t)h * hd, row + (size_t)h * hd + half, c, s, sg, half);
    }
}

// x [B, T, n_heads, hd], in place
void rope_forward(OpsContext *ctx, float *x, int B, int T, int n_heads, int hd, int pos0,
                  const float *cos_t, const float *sin_t) {
    OPS_TIMED(ctx);
    (void)ctx;
    rope_apply(x, B, T, n_heads, hd, pos0, cos_t, sin_t, 1.0f);
}

// dx [B, T, n_heads, hd], in place: the rotation is orthogonal, so its
// transpose is the rotation by −angle.
void rope_backward(OpsContext *ctx, float *dx, int B, int T, int n_heads, int hd, int pos0,
                   const float *cos_t, const float *sin_t) {
    OPS_TIMED(ctx);
    (void)ctx;
    rope_apply(dx, B, T, n_heads, hd, pos0, cos_t, sin_t, -1.0f);
}
