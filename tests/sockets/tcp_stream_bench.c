/*
 * tcp_stream_bench - streaming throughput of the tcp transport over
 * loopback, to set beside baseline_tcp_pingpong's bare TCP stream.
 *
 * A server process and a client process (fork), one RO connection.  The
 * client keeps sending 1 MiB messages (or 1 MiB RMA writes) as fast as
 * completions allow; the server takes each message and returns it at once;
 * the last one (an RMA with a completion message) is answered, and the
 * client stops its clock at the answer.
 *
 * usage: tcp_stream_bench [-n count] [-s size] [-r] [-z]
 *   -r: RMA writes instead of messages; -z: messages with CCI_FLAG_NO_COPY
 * Runs on its own config (one tcp device on 127.0.0.1, mss = size).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cci.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void check(int rc, const char *what)
{
	if (rc != CCI_SUCCESS) {
		fprintf(stderr, "%s: %s\n", what, cci_strerror(NULL, (enum cci_status)rc));
		exit(1);
	}
}

/* The next event; the clock is read once per 1024 empty polls, so that
 * waiting costs what cci_get_event costs. */
static cci_event_t *next(cci_endpoint_t *ep)
{
	uint64_t stop = now_ns() + 30000000000ull;
	cci_event_t *ev;

	for (unsigned spins = 1;; spins++) {
		if (cci_get_event(ep, &ev) == CCI_SUCCESS)
			return ev;
		if (spins % 1024 == 0 && now_ns() > stop)
			break;
	}
	fprintf(stderr, "no event within 30 s\n");
	exit(1);
}

static cci_endpoint_t *open_ep(uint32_t size)
{
	char path[64];
	cci_device_t *const *devs;
	cci_endpoint_t *ep;
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/cci-stream-%d.ini", (int)getpid());
	f = fopen(path, "w");
	if (!f)
		exit(1);
	fprintf(f, "[lo]\ntransport = tcp\nip = 127.0.0.1\nmss = %u\n", size);
	fclose(f);
	setenv("CCI_CONFIG", path, 1);
	check(cci_init(CCI_ABI_VERSION, 0, NULL), "cci_init");
	unlink(path);
	check(cci_get_devices(&devs), "cci_get_devices");
	check(cci_create_endpoint(devs[0], 0, &ep, NULL), "cci_create_endpoint");
	return ep;
}

static void serve(int wfd, uint32_t size)
{
	cci_endpoint_t *ep = open_ep(size);
	char *mem = malloc(size), *uri;
	cci_connection_t *c = NULL;
	cci_rma_handle_t *h;

	check(cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri), "uri");
	if (write(wfd, uri, strlen(uri) + 1) < 0)
		exit(1);
	check(cci_rma_register(ep, mem, size, CCI_FLAG_WRITE, &h), "register");
	for (;;) {
		cci_event_t *ev = next(ep);
		int last = 0;
		switch (ev->type) {
		case CCI_EVENT_CONNECT_REQUEST:
			cci_accept(ev, NULL);
			break;
		case CCI_EVENT_ACCEPT:
			c = ev->accept.connection;
			check(cci_send(c, h, sizeof(*h), NULL, 0), "send handle");
			break;
		case CCI_EVENT_RECV:
			last = ev->recv.len == 4 && !memcmp(ev->recv.ptr, "last", 4);
			break;
		default:
			break;
		}
		cci_return_event(ev);
		if (last) {
			check(cci_send(c, "done", 4, NULL, CCI_FLAG_BLOCKING), "send done");
			break;
		}
	}
	cci_destroy_endpoint(ep);
	cci_finalize();
}

/* Issue one op, draining completions while the send buffers are busy. */
static int send_flags;

static void issue(cci_endpoint_t *ep, cci_connection_t *c, char *buf, uint32_t size,
                  cci_rma_handle_t *lh, struct cci_rma_handle *rh, int last, uint32_t *out)
{
	for (;;) {
		int rc;
		if (lh)
			rc = cci_rma(c, last ? "last" : NULL, last ? 4 : 0, lh, 0, rh, 0, size, NULL,
			             CCI_FLAG_WRITE);
		else
			rc = cci_send(c, last ? "last" : buf, last ? 4 : size, NULL, send_flags);
		if (rc == CCI_SUCCESS)
			break;
		if (rc != CCI_ENOBUFS)
			check(rc, "send");
		cci_event_t *ev = next(ep);
		if (ev->type == CCI_EVENT_SEND)
			(*out)--;
		cci_return_event(ev);
	}
	(*out)++;
}

/* The client: connect, get the server's handle, stream, wait for the answer. */
static void stream(const char *uri, uint32_t n, uint32_t size, int rma)
{
	struct cci_rma_handle rh;
	cci_rma_handle_t *lh = NULL;
	cci_endpoint_t *ep = open_ep(size);
	char *buf = calloc(1, size);
	cci_connection_t *c;
	cci_event_t *ev;
	uint32_t out = 0;
	uint64_t t0;

	check(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL), "connect");
	ev = next(ep);
	check(ev->type == CCI_EVENT_CONNECT ? (int)ev->connect.status : CCI_ERROR, "connect");
	c = ev->connect.connection;
	cci_return_event(ev);
	ev = next(ep);
	memcpy(&rh, ev->recv.ptr, sizeof(rh));
	cci_return_event(ev);
	if (rma)
		check(cci_rma_register(ep, buf, size, 0, &lh), "register");
	t0 = now_ns();
	for (uint32_t i = 0; i < n; i++)
		issue(ep, c, buf, size, lh, &rh, 0, &out);
	issue(ep, c, buf, size, lh, &rh, 1, &out);
	for (int done = 0; !done;) {
		ev = next(ep);
		done = ev->type == CCI_EVENT_RECV;
		cci_return_event(ev);
	}
	printf("tcp %s stream of %u x %u B: %.1f MB/s\n",
	       rma ? "RMA write" : send_flags ? "NO_COPY message" : "message", n, size,
	       (double)n * size / ((double)(now_ns() - t0) / 1e9) / 1e6);
	cci_destroy_endpoint(ep);
	cci_finalize();
	free(buf);
}

int main(int argc, char **argv)
{
	uint32_t n = 2000, size = 1u << 20;
	int rma = 0, p[2], opt, status;
	char uri[128] = "";
	pid_t pid;

	while ((opt = getopt(argc, argv, "n:s:rz")) != -1) {
		if (opt == 'n')
			n = (uint32_t)strtoul(optarg, NULL, 10);
		else if (opt == 's')
			size = (uint32_t)strtoul(optarg, NULL, 10);
		else if (opt == 'r')
			rma = 1;
		else if (opt == 'z')
			send_flags = CCI_FLAG_NO_COPY;
		else
			return 2;
	}
	setenv("CCI_CTP", "sockets", 1);
	if (pipe(p) != 0 || (pid = fork()) < 0)
		return 1;
	if (pid == 0) {
		serve(p[1], size);
		_exit(0);
	}
	for (size_t got = 0; got < sizeof(uri) - 1; got++)
		if (read(p[0], uri + got, 1) != 1 || uri[got] == '\0')
			break;
	stream(uri, n, size, rma);
	waitpid(pid, &status, 0);
	return 0;
}
