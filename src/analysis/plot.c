#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/common.h"

// A title inside a gnuplot double-quoted string.
static void put_quoted(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

// gnuplot SCRIPT in dir: 0 ok, 1 not installed, -1 failed.
static int run_gnuplot(const char *dir, const char *script) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return mhar_fail("fork failed: %s", strerror(errno));
    if (pid == 0) {
        if (chdir(dir)) _exit(126);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(errno == ENOENT ? 127 : 126);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0) return mhar_fail("waitpid failed: %s", strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return mhar_fail("%s/%s: gnuplot failed (status %d)", dir, script, status);
    return 0;
}

// One data block per series, two blank lines apart: gnuplot's "index".
static int write_data(const char *path, const PlotSeries *s, int n_series) {
    FILE *f = fopen(path, "w");
    if (!f) return mhar_fail("%s: cannot write: %s", path, strerror(errno));
    for (int i = 0; i < n_series; i++) {
        fprintf(f, "# %s\n", s[i].title);
        for (int k = 0; k < s[i].n; k++) {
            if (s[i].style == SERIES_HLINE) break;
            fprintf(f, "%.10g %.10g", s[i].x[k], s[i].y[k]);
            if (s[i].style == SERIES_ERRORBARS) fprintf(f, " %.10g", isfinite(s[i].err[k]) ? s[i].err[k] : 0.0);
            fprintf(f, "\n");
        }
        fprintf(f, "%s\n\n\n", s[i].style == SERIES_HLINE || s[i].n == 0 ? "nan nan nan" : "");
    }
    if (fclose(f)) return mhar_fail("%s: write failed", path);
    return MHAR_OK;
}

// Log-2 x axis with each distinct x value of the data as a tick.
static void put_log2_ticks(FILE *f, const PlotSeries *s, int n_series) {
    double lo = INFINITY, hi = -INFINITY;
    fprintf(f, "set logscale x 2\nset xtics (");
    int first = 1;
    for (int i = 0; i < n_series; i++)
        for (int k = 0; s[i].style != SERIES_HLINE && k < s[i].n; k++) {
            int dup = 0;   // each x once
            for (int i2 = 0; i2 <= i && !dup; i2++)
                for (int k2 = 0; k2 < (i2 == i ? k : s[i2].n) && !dup; k2++)
                    dup = s[i2].style != SERIES_HLINE && s[i2].x[k2] == s[i].x[k];
            if (dup) continue;
            fprintf(f, "%s\"%g\" %g", first ? "" : ", ", s[i].x[k], s[i].x[k]);
            first = 0;
            lo = fmin(lo, s[i].x[k]);
            hi = fmax(hi, s[i].x[k]);
        }
    fprintf(f, ")\n");
    if (isfinite(lo)) fprintf(f, "set xrange [%g:%g]\n", lo / 1.5, hi * 1.5);
}

static int write_script(const char *path, const Plot *p, const PlotSeries *s, int n_series, const char *dat,
                        const char *gp, const char *png) {
    FILE *f = fopen(path, "w");
    if (!f) return mhar_fail("%s: cannot write: %s", path, strerror(errno));
    fprintf(f, "# written by mhar report; redraw with: gnuplot %s\n", gp);
    fprintf(f, "set terminal pngcairo noenhanced size 960,600 font \",11\"\nset output \"%s\"\n", png);
    fprintf(f, "set title ");
    put_quoted(f, p->title);
    fprintf(f, "\nset xlabel ");
    put_quoted(f, p->xlabel);
    fprintf(f, "\nset ylabel ");
    put_quoted(f, p->ylabel);
    // curves: many series, key at the side; H plots: few, key below (the side would squeeze the axis)
    fprintf(f, "\nset grid\nset key %s\n", p->logx2 ? "below" : "outside right top");
    if (isfinite(p->xmin)) fprintf(f, "set xrange [%.10g:*]\n", p->xmin);
    if (p->logx2) put_log2_ticks(f, s, n_series);
    fprintf(f, "plot ");
    for (int i = 0; i < n_series; i++) {
        if (i) fprintf(f, ", \\\n     ");
        if (s[i].style == SERIES_HLINE) fprintf(f, "%.10g with lines dashtype 2 lw 2", s[i].y[0]);
        else if (s[i].style == SERIES_ERRORBARS)
            fprintf(f, "\"%s\" index %d using 1:2:3 with yerrorlines lw 2 pt 7", dat, i);
        else {
            // gnuplot's colours repeat after 8: later lines are dashed, then dotted, ...
            fprintf(f, "\"%s\" index %d using 1:2 with lines lw 2", dat, i);
            if (i >= 8) fprintf(f, " dashtype %d", 1 + i / 8);
        }
        fprintf(f, " title ");
        put_quoted(f, s[i].title);
    }
    fprintf(f, "\n");
    if (fclose(f)) return mhar_fail("%s: write failed", path);
    return MHAR_OK;
}

int plot_draw(const Plot *p, const PlotSeries *s, int n_series) {
    char path[MHAR_PATH_MAX], dat[300], gp[300], png[300];
    snprintf(dat, sizeof dat, "%s.dat", p->name);
    snprintf(gp, sizeof gp, "%s.gp", p->name);
    snprintf(png, sizeof png, "%s.png", p->name);
    if (path_join(path, sizeof path, p->dir, dat) || write_data(path, s, n_series)) return -1;
    if (path_join(path, sizeof path, p->dir, gp) || write_script(path, p, s, n_series, dat, gp, png)) return -1;
    return run_gnuplot(p->dir, gp);
}
