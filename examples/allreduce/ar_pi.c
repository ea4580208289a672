/*
 * ar_pi.c - pi as the integral of 4/(1+x^2) over [0,1], midpoint rule.
 *
 * The terms are added with Neumaier's compensation: a plain running sum
 * of 10^7 terms drifts by some 1e-13, so slices summed apart and then
 * combined would differ from the single-process sum by about as much as
 * the tolerance the ranks check against.  Compensated, both are within a
 * few ulps of the exact sum of the terms.
 */
#include <math.h>

#include "ar.h"

double ar_pi_partial(uint64_t intervals, uint64_t first, uint64_t last)
{
	double h = 1.0 / (double)intervals, sum = 0.0, carry = 0.0;

	for (uint64_t i = first; i < last; i++) {
		double x = ((double)i + 0.5) * h;
		double term = 4.0 / (1.0 + x * x);
		double t = sum + term;

		/* the low-order bits that the addition just lost */
		carry += fabs(sum) >= fabs(term) ? (sum - t) + term : (term - t) + sum;
		sum = t;
	}
	return (sum + carry) * h;
}
