// Which OpenBLAS kernels this process runs. Debian's OpenBLAS is built with
// DYNAMIC_ARCH: at load time it reads the processor's model and picks a
// kernel set. A model newer than the library (0.3.21 and an Emerald Rapids,
// model 207) falls back to Prescott's SSE3 kernels, 3.5x slower on nano than
// SkylakeX's on the same core, and nothing says so. The choice is made before
// main and cannot be changed afterwards, so the fix is to start again with
// OPENBLAS_CORETYPE naming kernels the processor's features allow.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kernels/cpu/blas_core.h"
#include "kernels/ops.h"

char *openblas_get_corename(void);   // OpenBLAS's own; cblas.h declares it too
char *openblas_get_config(void);

// Kernel sets of OpenBLAS's x86-64 DYNAMIC_ARCH list that need AVX2 and FMA
// (or more); every other x86 set is SSE or AVX without FMA.
static const char *const fma_cores[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};

const char *blas_core_wanted(const char *chosen, int has_avx2_fma, int has_avx512) {
    if (!chosen || !has_avx2_fma) return NULL;
    for (size_t i = 0; i < sizeof fma_cores / sizeof fma_cores[0]; i++)
        if (!strcasecmp(chosen, fma_cores[i])) return NULL;   // already a modern set: OpenBLAS knows best
    return has_avx512 ? "SkylakeX" : "Haswell";
}

static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};

int blas_core_leaves_avx512(const char *running, int has_avx512) {
    if (!running || !has_avx512) return 0;
    for (size_t i = 0; i < sizeof avx512_cores / sizeof avx512_cores[0]; i++)
        if (!strcasecmp(running, avx512_cores[i])) return 0;
    return 1;
}

static int cpu_avx2_fma(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
static int cpu_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

#define FALLBACK_ENV "MHAR_BLAS_FALLBACK"   // what OpenBLAS had chosen, for ops_library_name

void ops_process_start(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) return;   // the user's (or our earlier start's) choice stands
    const char *chosen = openblas_get_corename();
    const char *wanted = blas_core_wanted(chosen, cpu_avx2_fma(), cpu_avx512());
    if (!wanted) return;
    // Set both before execv: the new image inherits them. If the exec fails
    // (no /proc), carry on with the slow kernels rather than not at all.
    if (setenv("OPENBLAS_CORETYPE", wanted, 1) || setenv(FALLBACK_ENV, chosen, 1)) return;
    execv("/proc/self/exe", argv);
    fprintf(stderr, "warning: OpenBLAS runs its %s kernels on this CPU; set OPENBLAS_CORETYPE=%s for full speed\n",
            chosen, wanted);
    unsetenv("OPENBLAS_CORETYPE");
}

const char *ops_library_name(void) {
    static char name[256];
    char version[32] = "?";   // the config string starts "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
    const char *config = openblas_get_config();
    if (config) sscanf(config, "OpenBLAS %31s", version);
    const char *fallback = getenv(FALLBACK_ENV);
    const char *coretype = getenv("OPENBLAS_CORETYPE");
    if (fallback && coretype)
        snprintf(name, sizeof name, "OpenBLAS %s, %s kernels (OPENBLAS_CORETYPE set by mhar: OpenBLAS chose %s)", version,
                 openblas_get_corename(), fallback);
    else if (coretype && blas_core_leaves_avx512(openblas_get_corename(), cpu_avx512()))
        snprintf(name, sizeof name,
                 "OpenBLAS %s, %s kernels (OPENBLAS_CORETYPE=%s: this processor's AVX-512 unused; unset it for "
                 "AVX-512 kernels)",
                 version, openblas_get_corename(), coretype);
    else if (coretype)
        snprintf(name, sizeof name, "OpenBLAS %s, %s kernels (OPENBLAS_CORETYPE=%s)", version, openblas_get_corename(),
                 coretype);
    else
        snprintf(name, sizeof name, "OpenBLAS %s, %s kernels", version, openblas_get_corename());
    return name;
}
