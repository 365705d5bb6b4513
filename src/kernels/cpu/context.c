// The CPU backend's context: OpenMP threads over host memory. Ops run
// synchronously, so ops_sync has nothing to wait for.
#include <stdlib.h>

#include "context.h"
#include "kernels/ops.h"
#include "util/common.h"

#ifdef _OPENMP
#include <omp.h>
#else
static inline int omp_get_max_threads(void) { return 1; }
static inline void omp_set_num_threads(int n) { (void)n; }
#endif
void openblas_set_num_threads(int n);   // OpenBLAS's cblas.h declares it too

OpsContext *ops_open(void) {
    OpsContext *ctx = mhar_alloc(sizeof *ctx);
    if (!ctx) return NULL;
    ctx->threads = omp_get_max_threads();
    return ctx;
}

void ops_close(OpsContext *ctx) { mhar_free(ctx); }

const char *ops_backend_name(const OpsContext *ctx) {
    (void)ctx;
    return "cpu";
}

void *ops_alloc(OpsContext *ctx, size_t bytes) {
    (void)ctx;
    return mhar_alloc(bytes);
}

void ops_free(OpsContext *ctx, void *p) {
    (void)ctx;
    mhar_free(p);
}

void ops_sync(OpsContext *ctx) { (void)ctx; }

void ops_set_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int ops_threads(void) { return omp_get_max_threads(); }
