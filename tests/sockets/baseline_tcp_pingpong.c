/*
 * baseline_tcp_pingpong - what bare TCP does on this host, to hold the tcp
 * transport's figures against (measure both in the same run).
 *
 * Two processes (fork) joined by one loopback TCP connection with
 * TCP_NODELAY.  Latency: the client sends a message, the server echoes it;
 * both poll non-blocking recv() in a loop, as a polling library does.  The
 * one-way latency is half the round trip: the median batch of 100 round
 * trips, median of several runs.
 * Streaming: the client writes 1 MiB messages back to back, the server
 * reads them (into one buffer, as a receiver that consumes the data would)
 * and answers one byte at the end.
 *
 * usage: baseline_tcp_pingpong [-i iters] [-r runs] [-n stream_msgs]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RUNS 51
#define MAX_BATCHES 10000
#define STREAM_MSG (1u << 20)

static const uint32_t sizes[] = { 1, 8, 16, 32, 64 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Read exactly len bytes, spinning on non-blocking recv. */
static void recv_poll(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		if (n > 0)
			got += (size_t)n;
		else if (n == 0)
			exit(0); /* the other side is done */
		else if (errno != EAGAIN && errno != EINTR)
			die("recv");
	}
}

static void send_all(int fd, const char *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno != EINTR && errno != EAGAIN)
			die("send");
	}
}

/* Round trips the client makes per size: warm-up, then whole batches. */
static uint32_t echoes(uint32_t iters)
{
	uint32_t nb = iters / 100 < MAX_BATCHES ? iters / 100 : MAX_BATCHES;

	return iters / 10 + nb * 100;
}

static void serve(int fd, uint32_t iters, uint32_t runs, uint32_t nstream)
{
	char *buf = malloc(STREAM_MSG);

	if (!buf)
		die("malloc");
	for (uint32_t r = 0; r < runs; r++)
		for (size_t s = 0; s < NSIZES; s++)
			for (uint32_t i = 0; i < echoes(iters); i++) {
				recv_poll(fd, buf, sizes[s]);
				send_all(fd, buf, sizes[s]);
			}
	for (uint32_t i = 0; i < nstream; i++)
		recv_poll(fd, buf, STREAM_MSG);
	send_all(fd, buf, 1);
	free(buf);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One-way microseconds for one size: the median batch of 100 round trips
 * (pingpong's rule, so a descheduled moment does not weigh in). */
static double one_size(int fd, char *buf, uint32_t size, uint32_t iters)
{
	static double batch[MAX_BATCHES];
	uint32_t nb = iters / 100 < MAX_BATCHES ? iters / 100 : MAX_BATCHES;

	for (uint32_t i = 0; i < iters / 10; i++) {
		send_all(fd, buf, size);
		recv_poll(fd, buf, size);
	}
	for (uint32_t b = 0; b < nb; b++) {
		uint64_t t0 = now_ns();
		for (int i = 0; i < 100; i++) {
			send_all(fd, buf, size);
			recv_poll(fd, buf, size);
		}
		batch[b] = (double)(now_ns() - t0) / 100 / 2 / 1e3;
	}
	qsort(batch, nb, sizeof(double), cmp_double);
	return batch[nb / 2];
}

static void client(int fd, uint32_t iters, uint32_t runs, uint32_t nstream)
{
	static double lat[NSIZES][MAX_RUNS];
	char *buf = calloc(1, STREAM_MSG);
	uint64_t t0;

	if (!buf)
		die("malloc");
	for (uint32_t r = 0; r < runs; r++)
		for (size_t s = 0; s < NSIZES; s++)
			lat[s][r] = one_size(fd, buf, sizes[s], iters);
	printf("# bare TCP over loopback, TCP_NODELAY, polled non-blocking recv\n");
	printf("%-8s %s\n", "Bytes", "Latency one-way (us, median)");
	for (size_t s = 0; s < NSIZES; s++) {
		qsort(lat[s], runs, sizeof(double), cmp_double);
		printf("%-8u %.2f\n", sizes[s], lat[s][runs / 2]);
	}
	t0 = now_ns();
	for (uint32_t i = 0; i < nstream; i++)
		send_all(fd, buf, STREAM_MSG);
	recv_poll(fd, buf, 1);
	printf("stream of %u x 1 MiB: %.1f MB/s\n", nstream,
	       (double)nstream * STREAM_MSG / ((double)(now_ns() - t0) / 1e9) / 1e6);
	free(buf);
}

int main(int argc, char **argv)
{
	uint32_t iters = 20000, runs = 5, nstream = 2000;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int one = 1, c, lfd, fd, status;
	pid_t pid;

	while ((c = getopt(argc, argv, "i:r:n:")) != -1) {
		if (c == 'i')
			iters = (uint32_t)strtoul(optarg, NULL, 10);
		else if (c == 'r')
			runs = (uint32_t)strtoul(optarg, NULL, 10);
		else if (c == 'n')
			nstream = (uint32_t)strtoul(optarg, NULL, 10);
		else
			return 2;
	}
	if (runs < 1 || runs > MAX_RUNS || iters < 100)
		return 2;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sl) != 0 || listen(lfd, 1) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0)
		die("listen");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			die("accept");
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		serve(fd, iters, runs, nstream);
		_exit(0);
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sl) != 0)
		die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	client(fd, iters, runs, nstream);
	close(fd);
	waitpid(pid, &status, 0);
	return 0;
}
