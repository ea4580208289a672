/*
 * baseline_udp - what bare UDP on loopback reaches, no CCI code involved:
 * the yardstick for the sock transport.
 *
 * The parent binds a UDP socket on 127.0.0.1, forks, and the child binds
 * another; both connect() to each other.  Ping-pong: each side spins on
 * recv(MSG_DONTWAIT) (polled reads, as the sock transport polls), the
 * child echoes every datagram.  One-way latency is half a round trip;
 * from 1000 iterations on the round trips are timed in batches of 100 and
 * the median batch is printed (pingpong's rule, so the figures compare).
 * Sizes go up to one datagram (at most 65507 bytes).  A lost datagram
 * (loopback does not lose them unless a socket buffer overflows, which a
 * ping-pong never fills) ends the run after 30 s without an answer.
 * MB/s is 10^6 bytes per second.
 *
 * usage: baseline_udp [-m max] [-S size] [-i iters] [-W warmup] [--pin S,C] [--json]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baseline.h"

#define DGRAM_MAX 65507u
#define TIMEOUT_NS (30ull * 1000000000ull)

struct opts {
	bool json;
	int pin[2]; /* server and client CPU, -1: not pinned */
	uint64_t max, only;
	uint32_t iters, warmup;
};

/* Polled receive of one datagram; its length. */
static size_t spin_recv(int fd, unsigned char *p, size_t cap)
{
	uint64_t start = 0;
	unsigned spins = 0;

	for (;;) {
		ssize_t n = recv(fd, p, cap, MSG_DONTWAIT);

		if (n >= 0)
			return (size_t)n;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			bl_die("recv");
		if (++spins % 4096 == 0) {
			if (!start)
				start = bl_now_ns();
			else if (bl_now_ns() - start > TIMEOUT_NS)
				bl_die("no datagram for 30 s");
		}
	}
}

static void send_one(int fd, const unsigned char *p, size_t len)
{
	while (send(fd, p, len, 0) != (ssize_t)len)
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)
			bl_die("send");
}

static int udp_bound(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)addr, sizeof(*addr)) ||
	    getsockname(fd, (struct sockaddr *)addr, &len))
		bl_die("bind on 127.0.0.1");
	return fd;
}

static uint64_t next_size(const struct opts *o, uint64_t size)
{
	if (o->only || size >= o->max)
		return 0;
	return size * 2 > o->max ? o->max : size * 2;
}

struct round {
	int fd;
	unsigned char *buf;
	uint64_t size;
};

static void round_trip(void *arg)
{
	struct round *r = arg;

	send_one(r->fd, r->buf, r->size);
	if (spin_recv(r->fd, r->buf, DGRAM_MAX) != r->size)
		bl_die("echo of the wrong size");
}

static void run_client(int fd, const struct opts *o, unsigned char *buf)
{
	if (!o->json)
		printf("# bare UDP ping-pong on 127.0.0.1, polled reads\n%9s %15s %17s\n", "Bytes",
		       "Latency (one-way)", "Throughput");
	for (uint64_t size = o->only ? o->only : 1; size; size = next_size(o, size)) {
		struct round r = { fd, buf, size };
		double us = bl_pingpong_us(o->iters, o->warmup, round_trip, &r);

		if (o->json)
			printf("{\"benchmark\":\"udp_pingpong\",\"bytes\":%" PRIu64 ",\"latency_us\":"
			       "%.3f,\"throughput_MBps\":%.3f,\"latency\":\"one-way\"}\n", size, us,
			       (double)size / us);
		else
			printf("%9" PRIu64 " %12.2f us %12.2f MB/s\n", size, us, (double)size / us);
		fflush(stdout);
	}
	send_one(fd, buf, 0); /* an empty datagram ends the child */
}

static void __attribute__((noreturn)) serve(int fd, unsigned char *buf)
{
	for (;;) {
		size_t n = spin_recv(fd, buf, DGRAM_MAX);

		if (n == 0)
			_exit(0);
		send_one(fd, buf, n);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: baseline_udp [-m max] [-S size] [-i iters] [-W warmup] [--pin S,C] [--json]\n"
		"  -m MAX      largest size, k suffix (default 8k, at most 65507)\n"
		"  -S SIZE     this size only\n"
		"  -i ITERS    timed round trips per size (default 10000)\n"
		"  -W WARMUP   untimed round trips per size (default 100)\n"
		"  --pin S,C   run the server on CPU S and the client on CPU C\n"
		"  --json      one JSON object per row\n");
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' },
		{ "pin", required_argument, NULL, 'p' }, { NULL, 0, NULL, 0 } };
	int c;

	*o = (struct opts){ .iters = 10000, .warmup = 100, .pin = { -1, -1 } };
	while ((c = getopt_long(argc, argv, "m:S:i:W:", longs, NULL)) != -1) {
		switch (c) {
		case 'j': o->json = true; break;
		case 'm': o->max = bl_parse_size(optarg); break;
		case 'S': o->only = bl_parse_size(optarg); break;
		case 'i': o->iters = (uint32_t)bl_parse_size(optarg); break;
		case 'W': o->warmup = (uint32_t)bl_parse_size(optarg); break;
		case 'p': bl_parse_pin(optarg, o->pin); break;
		case 'h': usage(stdout); exit(EXIT_SUCCESS);
		default: usage(stderr); exit(EXIT_FAILURE);
		}
	}
	if (!o->max)
		o->max = o->only ? o->only : 8u << 10;
	if (optind != argc || !o->iters || o->max > DGRAM_MAX || o->only > o->max ||
	    (o->only == 0 && o->max < 1) || o->iters > UINT32_MAX / 2) {
		usage(stderr);
		exit(EXIT_FAILURE);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a, b;
	struct opts o;
	unsigned char *buf;
	int fa, fb, status;
	pid_t pid;

	bl_prog = "baseline_udp";
	parse(argc, argv, &o);
	buf = malloc(DGRAM_MAX);
	if (!buf)
		bl_die("malloc");
	memset(buf, 0x5a, DGRAM_MAX);
	fa = udp_bound(&a);
	fb = udp_bound(&b);
	if (connect(fa, (struct sockaddr *)&b, sizeof(b)) || connect(fb, (struct sockaddr *)&a, sizeof(a)))
		bl_die("connect");
	pid = fork();
	if (pid < 0)
		bl_die("fork");
	if (pid == 0) {
		close(fa);
		bl_pin_to(o.pin[0]);
		serve(fb, buf);
	}
	close(fb);
	bl_pin_to(o.pin[1]);
	run_client(fa, &o, buf);
	close(fa);
	free(buf);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "baseline_udp: the server process failed\n");
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}
