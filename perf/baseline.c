/*
 * baseline.c - see baseline.h.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baseline.h"

const char *bl_prog = "baseline";

uint64_t bl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bl_die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", bl_prog, what, errno ? strerror(errno) : "failed");
	exit(EXIT_FAILURE);
}

uint64_t bl_parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);
	int shift = 0;

	if (end == s || *s == '-')
		goto bad;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (!*end && v <= (1ull << 40) >> shift)
		return (uint64_t)v << shift;
bad:
	fprintf(stderr, "%s: bad number \"%s\"\n", bl_prog, s);
	exit(EXIT_FAILURE);
}

void bl_parse_pin(const char *arg, int pin[2])
{
	if (sscanf(arg, "%d,%d", &pin[0], &pin[1]) != 2 || pin[0] < 0 || pin[1] < 0 ||
	    pin[0] >= CPU_SETSIZE || pin[1] >= CPU_SETSIZE) {
		fprintf(stderr, "%s: --pin wants two CPU numbers, \"S,C\"\n", bl_prog);
		exit(EXIT_FAILURE);
	}
}

void bl_pin_to(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		bl_die("sched_setaffinity (--pin)");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

double bl_pingpong_us(uint32_t iters, uint32_t warmup, void (*round)(void *arg), void *arg)
{
	uint32_t nb = iters < 10 * BL_BATCH ? 0 : iters / BL_BATCH;
	uint64_t *batch = nb ? calloc(nb, sizeof(*batch)) : NULL;
	uint64_t t0 = 0, tb = 0;
	double us;

	if (nb && !batch)
		bl_die("calloc");
	for (uint32_t i = 0; i < warmup + iters; i++) {
		if (i == warmup) {
			t0 = tb = bl_now_ns();
		} else if (nb && i > warmup && (i - warmup) % BL_BATCH == 0) {
			uint64_t t = bl_now_ns();

			batch[(i - warmup) / BL_BATCH - 1] = t - tb;
			tb = t;
		}
		round(arg);
	}
	us = (double)(bl_now_ns() - t0) / 1e3 / iters / 2;
	if (nb) {
		if (iters % BL_BATCH == 0) /* the loop ended before recording it */
			batch[nb - 1] = bl_now_ns() - tb;
		qsort(batch, nb, sizeof(*batch), cmp_u64);
		us = (double)batch[nb / 2] / 1e3 / BL_BATCH / 2;
		free(batch);
	}
	return us;
}
