// The streaming-read probe of mhar bench (ops.h): a sum that runs at the
// memory's pace, not at the pace of one chain of dependent adds.
#include "kernels/ops.h"
#include "context.h"

// Chunks: fixed in number, not per thread, so the result does not depend on
// the thread count; enough of them that a static schedule still gives every
// thread an even, contiguous share on a many-core machine.
enum { CHUNKS = 4096, LANES = 32 };

// 32 independent fp32 partial sums (four AVX2 vectors, two AVX-512 ones):
// the loads are never waiting on the previous add.
static double chunk_sum(const float *restrict a, size_t n) {
    float lane[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int k = 0; k < LANES; k++) lane[k] += a[i + k];
    double s = 0;
    for (int k = 0; k < LANES; k++) s += lane[k];
    for (; i < n; i++) s += a[i];
    return s;
}

double stream_sum(OpsContext *ctx, const float *a, size_t n) {
    OPS_TIMED(ctx);
    (void)ctx;
    double part[CHUNKS];
#pragma omp parallel for schedule(static)
    for (int c = 0; c < CHUNKS; c++) {
        size_t lo = n / CHUNKS * c + (n % CHUNKS) * c / CHUNKS;
        size_t hi = n / CHUNKS * (c + 1) + (n % CHUNKS) * (c + 1) / CHUNKS;
        part[c] = chunk_sum(a + lo, hi - lo);
    }
    double s = 0;
    for (int c = 0; c < CHUNKS; c++) s += part[c];
    return s;
}
