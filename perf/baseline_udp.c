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
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 100
#define DGRAM_MAX 65507u
#define TIMEOUT_NS (30ull * 1000000000ull)

struct opts {
	bool json;
	int pin[2]; /* server and client CPU, -1: not pinned */
	uint64_t max, only;
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
	fprintf(stderr, "baseline_udp: %s: %s\n", what, errno ? strerror(errno) : "failed");
	exit(EXIT_FAILURE);
}

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
			die("recv");
		if (++spins % 4096 == 0) {
			if (!start)
				start = now_ns();
			else if (now_ns() - start > TIMEOUT_NS)
				die("no datagram for 30 s");
		}
	}
}

static void send_one(int fd, const unsigned char *p, size_t len)
{
	while (send(fd, p, len, 0) != (ssize_t)len)
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)
			die("send");
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
		die("bind on 127.0.0.1");
	return fd;
}

static uint64_t next_size(const struct opts *o, uint64_t size)
{
	if (o->only || size >= o->max)
		return 0;
	return size * 2 > o->max ? o->max : size * 2;
}

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
		send_one(fd, buf, size);
		if (spin_recv(fd, buf, DGRAM_MAX) != size)
			die("echo of the wrong size");
	}
	us = (double)(now_ns() - t0) / 1e3 / iters / 2;
	if (nb) {
		if (iters % BATCH == 0)
			batch[nb - 1] = now_ns() - tb;
		qsort(batch, nb, sizeof(*batch), cmp_u64);
		us = (double)batch[nb / 2] / 1e3 / BATCH / 2;
		free(batch);
	}
	return us;
}

static void run_client(int fd, const struct opts *o, unsigned char *buf)
{
	if (!o->json)
		printf("# bare UDP ping-pong on 127.0.0.1, polled reads\n%9s %15s %17s\n", "Bytes",
		       "Latency (one-way)", "Throughput");
	for (uint64_t size = o->only ? o->only : 1; size; size = next_size(o, size)) {
		double us = pingpong_size(fd, buf, size, o->iters, o->warmup);

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

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (end == s || *s == '-')
		goto bad;
	if (*end == 'k' || *end == 'K') {
		v <<= 10;
		end++;
	}
	if (!*end && v <= UINT32_MAX)
		return v;
bad:
	fprintf(stderr, "baseline_udp: bad number \"%s\"\n", s);
	exit(EXIT_FAILURE);
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
		case 'm': o->max = parse_size(optarg); break;
		case 'S': o->only = parse_size(optarg); break;
		case 'i': o->iters = (uint32_t)parse_size(optarg); break;
		case 'W': o->warmup = (uint32_t)parse_size(optarg); break;
		case 'p':
			if (sscanf(optarg, "%d,%d", &o->pin[0], &o->pin[1]) != 2 || o->pin[0] < 0 ||
			    o->pin[1] < 0 || o->pin[0] >= CPU_SETSIZE || o->pin[1] >= CPU_SETSIZE) {
				fprintf(stderr, "baseline_udp: --pin wants two CPU numbers, \"S,C\"\n");
				exit(EXIT_FAILURE);
			}
			break;
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
	struct sockaddr_in a, b;
	struct opts o;
	unsigned char *buf;
	int fa, fb, status;
	pid_t pid;

	parse(argc, argv, &o);
	buf = malloc(DGRAM_MAX);
	if (!buf)
		die("malloc");
	memset(buf, 0x5a, DGRAM_MAX);
	fa = udp_bound(&a);
	fb = udp_bound(&b);
	if (connect(fa, (struct sockaddr *)&b, sizeof(b)) || connect(fb, (struct sockaddr *)&a, sizeof(a)))
		die("connect");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(fa);
		pin_to(o.pin[0]);
		serve(fb, buf);
	}
	close(fb);
	pin_to(o.pin[1]);
	run_client(fa, &o, buf);
	close(fa);
	free(buf);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "baseline_udp: the server process failed\n");
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}
