// The decision behind ops_process_start, separate so that tests can ask it
// about processors other than this one.
#pragma once

// The OPENBLAS_CORETYPE to start again with, given the kernel set OpenBLAS
// chose and the processor's features; NULL when its choice stands (it chose
// an AVX2/FMA set or better, or the processor has no AVX2 with FMA).
const char *blas_core_wanted(const char *chosen, int has_avx2_fma, int has_avx512);

// Whether kernel set `running` leaves AVX-512 unused on a processor that has
// it: true for every set but SkylakeX, Cooperlake and SapphireRapids. Said
// when OPENBLAS_CORETYPE came from the environment, which mhar never
// overrides (a machine's profile that sets Haswell halves sgemm on an
// AVX-512 AMD EPYC: README, "Which OpenBLAS kernels run").
int blas_core_leaves_avx512(const char *running, int has_avx512);
