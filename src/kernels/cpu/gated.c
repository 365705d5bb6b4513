// delta_mh's gated read x = r + a·y (SPEC §2.7): its backward in one pass.
#include "kernels/ops.h"
#include "context.h"

enum {
    NCHUNK = 64,     // fixed token chunks of the da reduction
    PAR_MIN = 32768, // below this many floats a fork costs more than the work
};

// Explicit 8-lane vectors with a fixed final tree (as in route_impl.h): a
// plain float sum does not vectorise without -ffast-math.
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));
#define load8(p) (*(const v8u *)(p))

static inline float dot(const float *restrict a, const float *restrict b, int d) {
    v8 s = {0};
    int k = 0;
    for (; k + 8 <= d; k += 8) s += load8(a + k) * load8(b + k);
    float t = 0;
    for (; k < d; k++) t += a[k] * b[k];
    return (((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))) + t;
}

static inline size_t chunk_start(int c, int n_tok) { return (size_t)n_tok * c / NCHUNK; }

// dr += dx, dy = a·dx, and *da += Σ dx·y: float lanes per token, double per
// fixed token chunk, chunks in order.
void gated_read_backward(OpsContext *ctx, float *restrict dr, float *restrict dy, float *da,
                         const float *restrict dx, const float *restrict y, float a, int n_tok, int d) {
    OPS_TIMED(ctx);
    (void)ctx;
    double part[NCHUNK];
#pragma omp parallel for schedule(static) if ((size_t)n_tok * d >= PAR_MIN)
    for (int c = 0; c < NCHUNK; c++) {
        double acc = 0;
        for (size_t t = chunk_start(c, n_tok); t < chunk_start(c + 1, n_tok); t++) {
            const size_t o = t * d;
            acc += dot(dx + o, y + o, d);
            for (int k = 0; k < d; k++) {
                dr[o + k] += dx[o + k];
                dy[o + k] = a * dx[o + k];
            }
        }
        part[c] = acc;
    }
    double sum = 0;
    for (int c = 0; c < NCHUNK; c++) sum += part[c];
    *da += (float)sum;
}
