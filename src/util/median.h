// The median of n doubles: the middle value, or the mean of the two middle
// ones when n is even; NAN when n is 0. Sorts v in place (NaNs last).
#pragma once
#include <stddef.h>

double median(double *v, size_t n);

// The median, least and greatest of n doubles, leaving v as it is (NaNs are
// ignored by min and max, and sort last for the median); all NAN when n is 0
// or the copy cannot be had.
typedef struct { double median, min, max; } Spread;
Spread spread(const double *v, size_t n);
