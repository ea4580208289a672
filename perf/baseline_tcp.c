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

#include "baseline.h"

#define TIMEOUT_NS (30ull * 1000000000ull) /* a stuck peer ends the run */

struct opts {
	bool stream, json;
	int pin[2]; /* server and client CPU, -1: not pinned */
	uint64_t max, only, budget;
	uint32_t iters, warmup;
};

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
			bl_die(n == 0 ? "peer closed" : "recv");
		if (++spins % 4096 == 0) {
			if (!start)
				start = bl_now_ns();
			else if (bl_now_ns() - start > TIMEOUT_NS)
				bl_die("no data for 30 s");
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
			bl_die("send");
		}
	}
}

static void set_nodelay(int fd, bool nonblock)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		bl_die("TCP_NODELAY");
	if (nonblock && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		bl_die("O_NONBLOCK");
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
		bl_die("listen on 127.0.0.1");
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

struct round {
	int fd;
	unsigned char *buf;
	uint64_t size;
};

static void round_trip(void *arg)
{
	struct round *r = arg;

	write_all(r->fd, r->buf, r->size);
	spin_read(r->fd, r->buf, r->size);
}

/* Nanoseconds to push count writes of size bytes and get the byte back. */
static uint64_t stream_round(int fd, unsigned char *buf, uint64_t size, uint64_t count)
{
	uint64_t t0 = bl_now_ns();
	char ack;

	for (uint64_t i = 0; i < count; i++)
		write_all(fd, buf, size);
	if (read(fd, &ack, 1) != 1)
		bl_die("stream acknowledgement");
	return bl_now_ns() - t0;
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
			struct round r = { fd, buf, size };
			double us = bl_pingpong_us(scaled(o->iters, size), scaled(o->warmup, size),
						   round_trip, &r);

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
		case 'm': o->max = bl_parse_size(optarg); break;
		case 'S': o->only = bl_parse_size(optarg); break;
		case 'i': o->iters = (uint32_t)bl_parse_size(optarg); break;
		case 'W': o->warmup = (uint32_t)bl_parse_size(optarg); break;
		case 'B': o->budget = bl_parse_size(optarg); break;
		case 'p': bl_parse_pin(optarg, o->pin); break;
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

int main(int argc, char **argv)
{
	struct opts o;
	struct sockaddr_in addr;
	int status;

	bl_prog = "baseline_tcp";
	parse(argc, argv, &o);
	unsigned char *buf = malloc(o.max);
	int lfd = listen_loopback(&addr);

	if (!buf)
		bl_die("malloc");
	memset(buf, 0x5a, o.max);
	pid_t pid = fork();

	if (pid < 0)
		bl_die("fork");
	if (pid == 0) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		bl_pin_to(o.pin[0]);
		close(lfd);
		if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
			bl_die("connect to 127.0.0.1");
		set_nodelay(fd, !o.stream);
		serve(fd, &o, buf);
	}
	bl_pin_to(o.pin[1]);
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		bl_die("accept");
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
