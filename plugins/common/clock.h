/*
 * clock.h - the one clock of the library: monotonic nanoseconds, for
 * timeouts, keepalives and deadlines in the core and every plugin.
 */
#ifndef CCI_COMMON_CLOCK_H
#define CCI_COMMON_CLOCK_H

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

static inline uint64_t cci__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same clock as the kernel last stored it: at most a jiffy (1 to
 * 10 ms) behind cci__now_ns(), never ahead, and a quarter of its cost (a
 * load, no counter read and scaling). */
static inline uint64_t cci__now_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A timeval (a cci_connect timeout) as nanoseconds, saturating at
 * UINT64_MAX / 2 so that now + it never wraps; 0 for NULL. */
static inline uint64_t cci__tv_ns(const struct timeval *tv)
{
	if (!tv)
		return 0;
	if ((uint64_t)tv->tv_sec > UINT64_MAX / 2000000000ull)
		return UINT64_MAX / 2;
	return (uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull;
}

#endif /* CCI_COMMON_CLOCK_H */
