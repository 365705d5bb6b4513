#include "memlimit.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysinfo.h>

#include "common.h"

// A cgroup v2 limit file: a number of bytes, or "max" (none: returns 0).
static double cgroup_value(const char *name) {
    char path[128], text[64] = {0};
    snprintf(path, sizeof path, "/sys/fs/cgroup/%s", name);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    double v = 0;
    return sscanf(text, "%lf", &v) == 1 && v > 0 ? v : 0;
}

double mem_limit_bytes(void) {
    struct sysinfo si;
    double limit = 0;
    if (sysinfo(&si) == 0) limit = ((double)si.totalram + (double)si.totalswap) * si.mem_unit;
    const int rlimits[] = {RLIMIT_AS, RLIMIT_DATA};
    for (size_t i = 0; i < sizeof rlimits / sizeof rlimits[0]; i++) {
        struct rlimit rl;
        if (getrlimit(rlimits[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            (limit == 0 || (double)rl.rlim_cur < limit))
            limit = (double)rl.rlim_cur;
    }
    double cg = cgroup_value("memory.max");
    if (cg > 0) {
        cg += cgroup_value("memory.swap.max");
        if (limit == 0 || cg < limit) limit = cg;
    }
    return limit > 0 ? limit : 1e300; // unknown: no limit of ours
}

int mem_check(double bytes, const char *fmt, ...) {
    double limit = mem_limit_bytes();
    if (bytes <= limit) return MHAR_OK;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const double gib = 1024.0 * 1024 * 1024;
    return mhar_fail("%s needs %.1f GiB, more than the %.1f GiB of memory this machine allows "
                     "(RAM + swap, or the process/cgroup limit)", what, bytes / gib, limit / gib);
}
