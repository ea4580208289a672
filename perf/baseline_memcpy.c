/*
 * baseline_memcpy - what one core copies per second, no CCI code involved.
 *
 * A shared-memory transport moves a message with at least one memcpy
 * (into the ring) and an RMA with one copy in the kernel, so memcpy's rate
 * at a size bounds the streaming bandwidth there.  For each size the same
 * source is copied to the same destination over and over (as a streaming
 * benchmark reuses its buffers, so small sizes stay in cache), and the
 * median of several runs is printed in MB/s (10^6 bytes per second).
 *
 * usage: baseline_memcpy [-m max] [-S size] [-B bytes] [-r runs] [--json]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RUNS 101

struct opts {
	uint64_t min, max, only, budget;
	int runs;
	bool json;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* An empty asm that claims to read memory: the compiler may not drop or
 * merge copies whose results nobody reads. */
static inline void keep(void *p)
{
	__asm__ __volatile__("" : : "r"(p) : "memory");
}

static double one_run(unsigned char *dst, const unsigned char *src, uint64_t size,
		      uint64_t count)
{
	uint64_t t0 = now_ns();

	for (uint64_t i = 0; i < count; i++) {
		memcpy(dst, src, size);
		keep(dst);
	}
	return (double)(size * count) * 1e3 / (double)(now_ns() - t0);
}

static double measure(unsigned char *dst, const unsigned char *src, uint64_t size,
		      const struct opts *o)
{
	uint64_t count = o->budget / size;
	double mbps[MAX_RUNS];

	if (count < 16)
		count = 16;
	one_run(dst, src, size, count / 8 + 1); /* page faults, caches */
	for (int r = 0; r < o->runs; r++)
		mbps[r] = one_run(dst, src, size, count);
	qsort(mbps, (size_t)o->runs, sizeof(mbps[0]), cmp_double);
	return mbps[o->runs / 2];
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);
	int shift = 0;

	switch (end == s || *s == '-' ? '!' : *end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case '\0': break;
	default: end = (char *)"!"; break;
	}
	if (*end || !v || v > (1ull << 36) >> shift) {
		fprintf(stderr, "baseline_memcpy: bad number \"%s\"\n", s);
		exit(EXIT_FAILURE);
	}
	return (uint64_t)v << shift;
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' }, { NULL, 0, NULL, 0 } };
	int c;

	*o = (struct opts){ .min = 64, .max = 4u << 20, .budget = 1u << 30, .runs = 5 };
	while ((c = getopt_long(argc, argv, "m:S:B:r:", longs, NULL)) != -1) {
		switch (c) {
		case 'm': o->max = parse_size(optarg); break;
		case 'S': o->only = o->min = o->max = parse_size(optarg); break;
		case 'B': o->budget = parse_size(optarg); break;
		case 'r': o->runs = atoi(optarg); break;
		case 'j': o->json = true; break;
		default: goto bad;
		}
	}
	if (optind == argc && o->runs > 0 && o->runs <= MAX_RUNS && o->min <= o->max)
		return;
bad:
	fprintf(stderr, "usage: baseline_memcpy [-m max] [-S size] [-B bytes per run]"
		" [-r runs (1..%d)] [--json]\n", MAX_RUNS);
	exit(EXIT_FAILURE);
}

int main(int argc, char **argv)
{
	struct opts o;

	parse(argc, argv, &o);
	unsigned char *src = malloc(o.max), *dst = malloc(o.max);

	if (!src || !dst) {
		fprintf(stderr, "baseline_memcpy: cannot allocate 2 x %" PRIu64 " bytes\n", o.max);
		return EXIT_FAILURE;
	}
	memset(src, 1, o.max);
	memset(dst, 2, o.max);
	if (!o.json)
		printf("# memcpy, one core, median of %d runs\n%9s %17s\n", o.runs, "Bytes",
		       "Throughput");
	for (uint64_t size = o.min;; size = size * 2 > o.max ? o.max : size * 2) {
		double mbps = measure(dst, src, size, &o);

		if (o.json)
			printf("{\"benchmark\":\"memcpy\",\"bytes\":%" PRIu64
			       ",\"throughput_MBps\":%.1f}\n", size, mbps);
		else
			printf("%9" PRIu64 " %12.1f MB/s\n", size, mbps);
		fflush(stdout);
		if (size == o.max)
			break;
	}
	free(src);
	free(dst);
	return EXIT_SUCCESS;
}
