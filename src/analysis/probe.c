#include "probe.h"

#include <math.h>

void probe_random_query(float *out, const float *q, int d, int blocks, Rng *rng) {
    int w = d / blocks;
    for (int b = 0; b < blocks; b++) {
        const float *qb = q + (size_t)b * w;
        float *ob = out + (size_t)b * w;
        double nq = 0, nz = 0;
        for (int k = 0; k < w; k++) {
            nq += (double)qb[k] * qb[k];
            ob[k] = rng_normal(rng);
            nz += (double)ob[k] * ob[k];
        }
        double scale = nz > 0 ? sqrt(nq / nz) : 0;
        for (int k = 0; k < w; k++) ob[k] = (float)(ob[k] * scale);
    }
}
