/*
 * baseline_cma - the ceiling for single-copy shared-memory RMA.
 *
 * A forked child sits in pause() with a buffer; the parent copies into it
 * with process_vm_writev (cross memory attach), the same system call a
 * shared-memory transport uses for RMA.  Each size from 4 KiB up to the
 * maximum (default 4 MiB) is written repeatedly and reported as MB/s
 * (10^6 bytes per second).  No CCI code is involved.
 *
 * usage: baseline_cma [-m max_bytes] [--json]
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIN_SIZE (4u << 10)
#define BYTES_PER_SIZE (1ull << 30) /* enough traffic per size to average */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The child owns its copy of buf: touching every page first means the
 * copies measure the copy, not copy-on-write faults.  It then tells the
 * parent it is ready and waits to be killed. */
static void __attribute__((noreturn)) child(unsigned char *buf, size_t len, int ready_fd)
{
	memset(buf, 1, len);
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

static int write_all(pid_t pid, void *local, void *remote, size_t len)
{
	struct iovec l = { local, len }, r = { remote, len };
	ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	fprintf(stderr, "baseline_cma: process_vm_writev: %s\n",
		n < 0 ? strerror(errno) : "short write");
	return -1;
}

/* MB/s for one size, or a negative value on failure. */
static double measure(pid_t pid, unsigned char *src, unsigned char *dst, size_t size)
{
	uint64_t iters = BYTES_PER_SIZE / size;

	if (iters < 16)
		iters = 16;
	for (int i = 0; i < 8; i++) /* warm caches and the page tables */
		if (write_all(pid, src, dst, size))
			return -1;
	uint64_t t0 = now_ns();

	for (uint64_t i = 0; i < iters; i++)
		if (write_all(pid, src, dst, size))
			return -1;
	return (double)size * (double)iters * 1e3 / (double)(now_ns() - t0);
}

static int sweep(pid_t pid, unsigned char *src, unsigned char *dst, size_t max, bool json)
{
	if (!json)
		printf("%8s %16s\n", "Bytes", "process_vm_writev");
	for (size_t size = MIN_SIZE; size <= max; size *= 2) {
		double mbps = measure(pid, src, dst, size);

		if (mbps < 0)
			return -1;
		if (json)
			printf("{\"benchmark\":\"cma_write\",\"bytes\":%zu,"
			       "\"throughput_MBps\":%.1f}\n", size, mbps);
		else
			printf("%8zu %11.1f MB/s\n", size, mbps);
		fflush(stdout);
	}
	return 0;
}

static void parse(int argc, char **argv, size_t *max, bool *json)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' }, { NULL, 0, NULL, 0 } };
	int c;

	while ((c = getopt_long(argc, argv, "m:", longs, NULL)) != -1) {
		if (c == 'm')
			*max = (size_t)strtoull(optarg, NULL, 0);
		else if (c == 'j')
			*json = true;
		else
			goto bad;
	}
	if (optind == argc && *max >= MIN_SIZE)
		return;
bad:
	fprintf(stderr, "usage: baseline_cma [-m max_bytes (>= %u)] [--json]\n", MIN_SIZE);
	exit(EXIT_FAILURE);
}

int main(int argc, char **argv)
{
	size_t max = 4u << 20;
	bool json = false;
	int pipefd[2];
	char c;

	parse(argc, argv, &max, &json);
	unsigned char *src = malloc(max), *dst = malloc(max);

	if (!src || !dst || pipe(pipefd)) {
		perror("baseline_cma: setup");
		free(src);
		free(dst);
		return EXIT_FAILURE;
	}
	memset(src, 2, max);
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		free(src);
		free(dst);
		return EXIT_FAILURE;
	}
	if (pid == 0)
		child(dst, max, pipefd[1]);
	/* dst is the child's address too: fork keeps the layout */
	int rc = read(pipefd[0], &c, 1) == 1 ? sweep(pid, src, dst, max, json) : -1;

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	free(src);
	free(dst);
	return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
