/*
 * baseline_tcp - what bare TCP on loopback reaches, no CCI code involved:
 * the yardstick for the tcp transport.
 *
 * The parent listens on 127.0.0.1 (an ephemeral port), forks, and the
 * child connects; the parent is the client, the child the server.
 *   ping-pong (default)  both sockets TCP_NODELAY and non-blocking; each
 *       side spins on recv(MSG_DONTWAIT) (polled reads, as a
 *       latency-minded transport does), the child echoes every byte.
 *       One-way latency is half a round trip; from 1000 iterations on the
 *       round trips are timed in batches of 100 and the median batch is
 *       printed (pingpong's rule, so the figures compare).
 *   --stream  blocking sockets; the client write()s SIZE bytes at a time,
 *       the child read()s up to SIZE bytes at a time, and when all bytes
 *       of a size are in it answers one byte, which stops the clock.
 * MB/s is 10^6 bytes per second.
 *
 * --pin S,C puts the server (child) on CPU S and the client on CPU C, as
 * perf/compare pins the two processes of every other two-process tool.
 *
 * usage: baseline_tcp [--stream] [-m max] [-S size] [-i iters] [-B bytes]
 *                     [--pin S,C] [--json]
 */
#include <errno.h>
#include <sched.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <fcntl.h>

#define BATCH 100
#define TIMEOUT_NS (30ull * 1000000000ull) /* a stuck peer ends the run */

struct opts {
	bool stream, json;
	int pin[2]; /* server and client CPU, -1: not pinned */
	uint64_t max, only, budget;
	uint32_t iters, warmup;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "baseline_tcp: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(EXIT_FAILURE);
}

/* ------------------------------------------------------------ socket I/O */

/* Polled exact read on a non-blocking socket (ping-pong). */
static void spin_read(int fd, unsigned char *p, size_t len)
{
	uint64_t start = 0;
	unsigned spins = 0;

	while (len) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			die(n == 0 ? "peer closed" : "recv");
		if (++spins % 4096 == 0) {
			if (!start)
				start = now_ns();
			else if (now_ns() - start > TIMEOUT_NS)
				die("no data for 30 s");
		}
	}
}

/* Exact write; spins on a full socket buffer when non-blocking. */
static void write_all(int fd, const unsigned char *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			die("send");
		}
	}
}

static void set_nodelay(int fd, bool nonblock)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("TCP_NODELAY");
	if (nonblock && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		die("O_NONBLOCK");
}

/* A loopback listener on an ephemeral port; *addr gets its address. */
static int listen_loopback(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)addr, sizeof(*addr)) || listen(fd, 1) ||
	    getsockname(fd, (struct sockaddr *)addr, &len))
		die("listen on 127.0.0.1");
	return fd;
}

/* ------------------------------------------------------------ sizes */

static uint64_t first_size(const struct opts *o)
{
	return o->only ? o->only : o->stream ? 1024 : 1;
}

static uint64_t next_size(const struct opts *o, uint64_t size)
{
	if (o->only || size >= o->max)
		return 0;
	return size * 2 > o->max ? o->max : size * 2;
}

/* Bytes per stream size: the budget, in whole writes, at least 16. */
static uint64_t stream_count(const struct opts *o, uint64_t size)
{
	uint64_t n = o->budget / size;

	return n < 16 ? 16 : n;
}

/* Ping-pong iterations, halved per doubling from 64 KiB as pingpong does. */
static uint32_t scaled(uint32_t n, uint64_t size)
{
	for (uint64_t s = 64 * 1024; s <= size && n > 16; s *= 2)
		n /= 2;
	return n;
}

/* ------------------------------------------------------------ the child */

static void __attribute__((noreturn)) serve(int fd, const struct opts *o, unsigned char *buf)
{
	if (!o->stream) {
		for (;;) { /* echo whatever comes until the parent closes */
			ssize_t n = recv(fd, buf, o->max, MSG_DONTWAIT);

			if (n > 0)
				write_all(fd, buf, (size_t)n);
			else if (n == 0)
				_exit(0);
			else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				_exit(1);
		}
	}
	for (uint64_t size = first_size(o); size; size = next_size(o, size)) {
		/* warm-up round then the timed one, each closed by one byte */
		for (int round = 0; round < 2; round++) {
			uint64_t n = stream_count(o, size);
			uint64_t left = (round ? n : n / 8) * size;

			while (left) {
				ssize_t n = read(fd, buf, left < size ? left : size);

				if (n <= 0)
					_exit(1);
				left -= (uint64_t)n;
			}
			write_all(fd, (const unsigned char *)"k", 1);
		}
	}
	_exit(0);
}

/* ------------------------------------------------------------ the client */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* One-way microseconds for one size (see the header for the rule). */
static double pingpong_size(int fd, unsigned char *buf, uint64_t size, uint32_t iters,
			    uint32_t warmup)
{
	uint32_t nb = iters < 10 * BATCH ? 0 : iters / BATCH;
	uint64_t *batch = nb ? calloc(nb, sizeof(*batch)) : NULL;
	uint64_t t0 = 0, tb = 0;
	double us;

	if (nb && !batch)
		die("calloc");
	for (uint32_t i = 0; i < warmup + iters; i++) {
		if (i == warmup) {
			t0 = tb = now_ns();
		} else if (nb && i > warmup && (i - warmup) % BATCH == 0) {
			uint64_t t = now_ns();

			batch[(i - warmup) / BATCH - 1] = t - tb;
			tb = t;
		}
		write_all(fd, buf, size);
		spin_read(fd, buf, size);
	}
	us = (double)(now_ns() - t0) / 1e3 / iters / 2;
	if (nb) {
		if (iters % BATCH == 0) /* the loop ended before recording it */
			batch[nb - 1] = now_ns() - tb;
		qsort(batch, nb, sizeof(*batch), cmp_u64);
		us = (double)batch[nb / 2] / 1e3 / BATCH / 2;
		free(batch);
	}
	return us;
}

/* Nanoseconds to push count writes of size bytes and get the byte back. */
static uint64_t stream_round(int fd, unsigned char *buf, uint64_t size, uint64_t count)
{
	uint64_t t0 = now_ns();
	char ack;

	for (uint64_t i = 0; i < count; i++)
		write_all(fd, buf, size);
	if (read(fd, &ack, 1) != 1)
		die("stream acknowledgement");
	return now_ns() - t0;
}

static void print_row(const struct opts *o, uint64_t size, double lat_us, double mbps,
		      double rate)
{
	if (o->json && o->stream)
		printf("{\"benchmark\":\"tcp_stream\",\"bytes\":%" PRIu64 ",\"throughput_MBps\":%.3f,"
		       "\"msg_rate\":%.1f}\n", size, mbps, rate);
	else if (o->json)
		printf("{\"benchmark\":\"tcp_pingpong\",\"bytes\":%" PRIu64 ",\"latency_us\":%.3f,"
		       "\"throughput_MBps\":%.3f,\"latency\":\"one-way\"}\n", size, lat_us, mbps);
	else if (o->stream)
		printf("%9" PRIu64 " %12.2f MB/s %14.0f\n", size, mbps, rate);
	else
		printf("%9" PRIu64 " %12.2f us %12.2f MB/s\n", size, lat_us, mbps);
	fflush(stdout);
}

static void run_client(int fd, const struct opts *o, unsigned char *buf)
{
	if (!o->json)
		printf(o->stream ? "# bare TCP stream on 127.0.0.1\n%9s %17s %14s\n"
				 : "# bare TCP ping-pong on 127.0.0.1, TCP_NODELAY, polled reads\n"
				   "%9s %15s %17s\n",
		       "Bytes", o->stream ? "Throughput" : "Latency (one-way)",
		       o->stream ? "Writes/s" : "Throughput");
	for (uint64_t size = first_size(o); size; size = next_size(o, size)) {
		if (!o->stream) {
			double us = pingpong_size(fd, buf, size, scaled(o->iters, size),
						  scaled(o->warmup, size));

			print_row(o, size, us, (double)size / us, 0);
			continue;
		}
		uint64_t n = stream_count(o, size);

		stream_round(fd, buf, size, n / 8);
		double s = (double)stream_round(fd, buf, size, n) / 1e9;

		print_row(o, size, 0, (double)(n * size) / s / 1e6, (double)n / s);
	}
}

/* ------------------------------------------------------------ options */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: baseline_tcp [--stream] [-m max] [-S size] [-i iters] [-W warmup]\n"
		"                    [-B bytes] [--json]\n"
		"  --stream    one-way stream instead of ping-pong\n"
		"  -m MAX      largest size, k/m/g suffixes (ping-pong 8k, stream 4m)\n"
		"  -S SIZE     this size only\n"
		"  -i ITERS    ping-pong: timed round trips per size (default 10000)\n"
		"  -W WARMUP   ping-pong: untimed round trips per size (default 100)\n"
		"  -B BYTES    stream: bytes per size (default 512m)\n"
		"  --pin S,C   run the server on CPU S and the client on CPU C\n"
		"  --json      one JSON object per row\n");
}

static uint64_t parse_size(const char *s)
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
	fprintf(stderr, "baseline_tcp: bad number \"%s\"\n", s);
	exit(EXIT_FAILURE);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "stream", no_argument, NULL, 's' }, { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' }, { "pin", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 } };
	int c;

	*o = (struct opts){ .budget = 512u << 20, .iters = 10000, .warmup = 100, .pin = { -1, -1 } };
	while ((c = getopt_long(argc, argv, "m:S:i:W:B:", longs, NULL)) != -1) {
		switch (c) {
		case 's': o->stream = true; break;
		case 'j': o->json = true; break;
		case 'm': o->max = parse_size(optarg); break;
		case 'S': o->only = parse_size(optarg); break;
		case 'i': o->iters = (uint32_t)parse_size(optarg); break;
		case 'W': o->warmup = (uint32_t)parse_size(optarg); break;
		case 'B': o->budget = parse_size(optarg); break;
		case 'p':
			if (sscanf(optarg, "%d,%d", &o->pin[0], &o->pin[1]) != 2 || o->pin[0] < 0 ||
			    o->pin[1] < 0 || o->pin[0] >= CPU_SETSIZE || o->pin[1] >= CPU_SETSIZE) {
				fprintf(stderr, "baseline_tcp: --pin wants two CPU numbers, \"S,C\"\n");
				exit(EXIT_FAILURE);
			}
			break;
		case 'h': usage(stdout); exit(EXIT_SUCCESS);
		default: usage(stderr); exit(EXIT_FAILURE);
		}
	}
	if (!o->max)
		o->max = o->only ? o->only : o->stream ? 4u << 20 : 8u << 10;
	if (optind != argc || !o->iters || !o->budget || o->only > o->max ||
	    (o->only == 0 && o->max < first_size(o)) || o->iters > UINT32_MAX / 2) {
		usage(stderr);
		exit(EXIT_FAILURE);
	}
}

/* Put this process on cpu (when not -1). */
static void pin_to(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		die("sched_setaffinity (--pin)");
}

int main(int argc, char **argv)
{
	struct opts o;
	struct sockaddr_in addr;
	int status;

	parse(argc, argv, &o);
	unsigned char *buf = malloc(o.max);
	int lfd = listen_loopback(&addr);

	if (!buf)
		die("malloc");
	memset(buf, 0x5a, o.max);
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		pin_to(o.pin[0]);
		close(lfd);
		if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
			die("connect to 127.0.0.1");
		set_nodelay(fd, !o.stream);
		serve(fd, &o, buf);
	}
	pin_to(o.pin[1]);
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		die("accept");
	close(lfd);
	set_nodelay(fd, !o.stream);
	run_client(fd, &o, buf);
	close(fd); /* the child sees EOF and exits */
	free(buf);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "baseline_tcp: the server process failed\n");
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}
