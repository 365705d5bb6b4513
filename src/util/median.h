// The median of n doubles: the middle value, or the mean of the two middle
// ones when n is even; NAN when n is 0. Sorts v in place (NaNs last).
#pragma once
#include <stddef.h>

double median(double *v, size_t n);
