// PNG plots drawn by gnuplot (mhar report): each plot is left as
// NAME.dat (the numbers) and NAME.gp (the script) beside NAME.png, so it can
// be restyled and redrawn with `gnuplot NAME.gp` without rerunning anything.
#pragma once

typedef enum { SERIES_LINES, SERIES_ERRORBARS, SERIES_HLINE } SeriesStyle;

typedef struct {
    const char *title;
    SeriesStyle style;
    const double *x, *y, *err;  // [n]; err only for SERIES_ERRORBARS; SERIES_HLINE: y[0] only
    int n;
} PlotSeries;

typedef struct {
    const char *dir, *name;              // writes dir/name.{dat,gp,png}
    const char *title, *xlabel, *ylabel;
    double xmin;                         // NAN: automatic
    int logx2;                           // x axis log base 2 with the data's x values as ticks
} Plot;

// Write the data and the script and run gnuplot. Returns 0 when the PNG was
// drawn, 1 when gnuplot is not installed (the .dat and .gp are written), -1
// on another error (message in mhar_error()).
int plot_draw(const Plot *p, const PlotSeries *s, int n_series);
