/*
 * baseline_clpingpong - the floor under any shared-memory message latency.
 *
 * Two processes (fork) share one anonymous mapping and bounce a counter in
 * a single cache line: the parent stores odd values, the child answers each
 * with the next even one.  Loads are acquire and stores release, the same
 * ordering a ring buffer needs, so nothing here is cheaper than what a
 * transport can reach.  One-way latency is half a round trip; the printed
 * figure is the median of several runs, which hides a run disturbed by
 * scheduling.
 *
 * usage: baseline_clpingpong [-i iters] [-r runs] [--json]
 * Pin with taskset to choose the two cores (same or different sockets).
 */
#include <getopt.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RUNS 101

/* The shared line, aligned so nothing else shares it. */
struct line {
	_Alignas(64) _Atomic uint64_t counter;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Spins until the counter reaches want.  On a machine with fewer cores
 * than spinners, yielding now and then lets the other side run at all. */
static void wait_for(struct line *l, uint64_t want)
{
	unsigned spins = 0;

	while (atomic_load_explicit(&l->counter, memory_order_acquire) != want)
		if (++spins % 4096 == 0)
			sched_yield();
}

/* The child answers every odd value with the next even one, then exits. */
static void __attribute__((noreturn)) child(struct line *l, uint64_t total)
{
	for (uint64_t i = 0; i < total; i++) {
		wait_for(l, 2 * i + 1);
		atomic_store_explicit(&l->counter, 2 * i + 2, memory_order_release);
	}
	_exit(0);
}

/* One run of iters round trips starting at round trip `first`;
 * returns the one-way latency in ns. */
static double run(struct line *l, uint64_t first, uint64_t iters)
{
	uint64_t t0 = now_ns();

	for (uint64_t i = first; i < first + iters; i++) {
		atomic_store_explicit(&l->counter, 2 * i + 1, memory_order_release);
		wait_for(l, 2 * i + 2);
	}
	return (double)(now_ns() - t0) / (double)iters / 2.0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void parse(int argc, char **argv, uint64_t *iters, int *runs, bool *json)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' }, { NULL, 0, NULL, 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "i:r:", longs, NULL)) != -1) {
		if (c == 'i')
			*iters = strtoull(optarg, NULL, 0);
		else if (c == 'r')
			*runs = atoi(optarg);
		else if (c == 'j')
			*json = true;
		else
			goto bad;
	}
	if (optind == argc && *iters > 0 && *runs > 0 && *runs <= MAX_RUNS)
		return;
bad:
	fprintf(stderr, "usage: baseline_clpingpong [-i iters] [-r runs (1..%d)] [--json]\n",
		MAX_RUNS);
	exit(EXIT_FAILURE);
}

int main(int argc, char **argv)
{
	uint64_t iters = 200000;
	int runs = 7, status;
	bool json = false;
	double lat[MAX_RUNS];

	parse(argc, argv, &iters, &runs, &json);
	struct line *l = mmap(NULL, sizeof(*l), PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (l == MAP_FAILED) {
		perror("mmap");
		return EXIT_FAILURE;
	}
	atomic_init(&l->counter, 0);
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		return EXIT_FAILURE;
	}
	if (pid == 0)
		child(l, iters * (uint64_t)(runs + 1));
	run(l, 0, iters); /* warm up: page faults, frequency ramp-up */
	for (int r = 0; r < runs; r++)
		lat[r] = run(l, iters * (uint64_t)(r + 1), iters);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "baseline_clpingpong: child failed\n");
		return EXIT_FAILURE;
	}
	qsort(lat, (size_t)runs, sizeof(lat[0]), cmp_double);
	if (json)
		printf("{\"benchmark\":\"cacheline_pingpong\",\"latency_ns\":%.2f,"
		       "\"min_ns\":%.2f,\"max_ns\":%.2f,\"runs\":%d,\"iters\":%llu}\n",
		       lat[runs / 2], lat[0], lat[runs - 1], runs, (unsigned long long)iters);
	else
		printf("cache-line ping-pong, one-way latency: %.2f ns "
		       "(median of %d runs of %llu round trips; min %.2f, max %.2f)\n",
		       lat[runs / 2], runs, (unsigned long long)iters, lat[0], lat[runs - 1]);
	return EXIT_SUCCESS;
}
