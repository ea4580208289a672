/*
 * pingpong - latency and throughput between two CCI endpoints.
 *
 * A server (-s) waits for one client (-h URI).  The client's connect
 * payload tells the server the mode (messages, RMA write or RMA read), the
 * RMA size and the flags (-V, -n), so the server needs no options of its
 * own beyond its device and -b (blocking is a property of each side's
 * endpoint, chosen when it is opened).  For each size the client times
 * `iters` round trips after `warmup` untimed ones:
 *   messages  the client sends, the server echoes; latency is one-way
 *             (half the round trip);
 *   RMA       the client moves the data with cci_rma() and waits for its
 *             SEND event; latency is that round trip.
 * Throughput is bytes divided by the printed latency (1 MB = 10^6 bytes).
 *
 * Control messages (RMA handle, RMA completion, done) start with a magic
 * word that a ping payload can never hold: ping bytes always count up by
 * one from byte to byte, the magic's bytes do not.
 *
 * With -L the two sides are the ranks of a job started by a launcher
 * (mpirun -np 2, mpiexec.hydra -n 2, cci_wire_launch -n 2): rank 0 serves,
 * rank 1 is the client of the URI rank 0 published through libcci_wire.
 *
 * Every CCI call is checked; a failure prints cci_strerror() and exits
 * non-zero, and so does a wait that sees no event for the timeout (-t).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cci.h"
#include "cci_wire.h"
#include "perf_util.h"

#define PP_MAGIC 0x9e3779b97f4a7c15ull /* bytes do not count up by one */
#define PP_HELLO_MAGIC 0x70696e67u     /* "ping" */
#define PP_VERSION 2
#define PP_MAX_RMA (1ull << 30)        /* largest RMA buffer a server grants */
#define PP_SEED_READ 0x5a              /* pattern the server exposes to reads */
#define PP_MAX_EXTRA_REGS 10000000u    /* -R: other registrations per side */

enum pp_ctl_type { CTL_HANDLE = 1, CTL_RMA_DONE, CTL_ACK, CTL_DONE, CTL_DONE_ACK };

/* hello flags: what the server mirrors from the client */
enum { HF_VERIFY = 1, HF_NOCOPY = 2 };

/* The connect payload: fixed-width fields, both sides are on one host
 * or share the byte order of the transports we run on. */
struct pp_hello {
	uint32_t magic;
	uint32_t version;
	uint32_t rma_op; /* 0, CCI_FLAG_WRITE or CCI_FLAG_READ */
	uint32_t flags;  /* HF_* */
	uint64_t rma_max;
	uint32_t extra_regs; /* -R: the server registers as many */
	uint32_t pad;
};

struct pp_ctl {
	uint64_t magic;
	uint32_t type;
	uint32_t size;
	uint64_t seq;
	uint64_t handle[4]; /* CTL_HANDLE only: the serialized cci_rma_handle_t */
};

struct pp_opts {
	bool server, blocking, nocopy, json, verify, nomsg, mean, launched;
	const char *uri, *outfile, *device;
	cci_conn_attribute_t attr;
	uint32_t rma_op;
	uint64_t rma_max;
	uint32_t iters, warmup;
	uint32_t extra_regs;
	double timeout_s;
};

struct pp {
	struct pp_opts o;
	cci_endpoint_t *ep;
	cci_os_handle_t fd;
	cci_connection_t *conn;
	unsigned char *buf;
	uint64_t buf_len;
	cci_rma_handle_t *local_h;
	struct cci_rma_handle remote_h;
	cci_rma_handle_t **extra_h; /* -R: registrations besides local_h */
	unsigned char *extra_mem;
	uint32_t n_extra;
	cci_wire_t *wire;    /* -L: started by a launcher, rank 0 serves rank 1 */
	char *peer_uri;      /* -L: rank 0's URI, for rank 1 */
	cci_event_t *stash;  /* a RECV that arrived while waiting for something else */
	cci_event_t *held;   /* the last echo, given back once the next ping left */
	uint32_t inflight;   /* sends and RMAs whose SEND event is pending */
	int send_flags;
};

/* Bytes count up by one from a seed: cheap, position-sensitive, and never
 * equal to PP_MAGIC. */
static void fill(unsigned char *p, uint64_t len, uint64_t seed)
{
	for (uint64_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seed + i);
}

static void verify(const void *ptr, uint64_t len, uint64_t seed, const char *what)
{
	const unsigned char *p = ptr;

	for (uint64_t i = 0; i < len; i++)
		if (p[i] != (unsigned char)(seed + i))
			perf_die("data check failed (%s, %" PRIu64 " bytes): byte %" PRIu64
				 " is 0x%02x, expected 0x%02x", what, len, i, p[i],
				 (unsigned char)(seed + i));
}

/* ---------------------------------------------------------------- events */

/* Next event, or false when timeout_ns (0: the -t timeout) passes with
 * none.  The clock is read once per 1024 empty polls so that spinning
 * costs no more than cci_get_event itself. */
static bool next_event(struct pp *pp, cci_event_t **ev, uint64_t timeout_ns)
{
	uint64_t deadline = 0;
	uint64_t limit = timeout_ns ? timeout_ns : (uint64_t)(pp->o.timeout_s * 1e9);
	unsigned spins = 0;

	if (pp->o.blocking && limit)
		deadline = perf_now_ns() + limit;
	for (;;) {
		int rc = cci_get_event(pp->ep, ev);

		if (rc == CCI_SUCCESS)
			return true;
		if (rc != CCI_EAGAIN)
			perf_check(rc, "cci_get_event");
		if (pp->o.blocking) {
			if (!perf_block_on_fd(pp->ep, pp->fd, deadline))
				return false;
			continue;
		}
		if (++spins % 1024 || !limit)
			continue;
		if (!deadline)
			deadline = perf_now_ns() + limit;
		else if (perf_now_ns() > deadline)
			return false;
	}
}

static cci_event_t *must_event(struct pp *pp)
{
	cci_event_t *ev;

	if (!next_event(pp, &ev, 0))
		perf_die("no event for %.0f s: the peer is gone or stuck", pp->o.timeout_s);
	return ev;
}

static void give_back(cci_event_t *ev)
{
	perf_check(cci_return_event(ev), "cci_return_event");
}

/* Handles an event nobody waits for specifically.  A RECV is kept in the
 * stash for the next wait_recv(); the protocol never has two in flight. */
static void handle_event(struct pp *pp, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_SEND:
		if (ev->send.status != CCI_SUCCESS)
			perf_check(ev->send.status, "send completion");
		if (pp->inflight == 0)
			perf_die("SEND event with nothing in flight");
		pp->inflight--;
		break;
	case CCI_EVENT_RECV:
		if (pp->stash)
			perf_die("protocol error: two messages pending");
		pp->stash = ev;
		return;
	case CCI_EVENT_CONNECT_REQUEST:
		/* one client at a time: turn the others away */
		perf_check(cci_reject(ev), "cci_reject");
		break;
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		fprintf(stderr, "pingpong: keepalive timed out\n");
		break;
	default:
		perf_die("unexpected event %s", cci_event_type_str(ev->type));
	}
	give_back(ev);
}

/* The next RECV event; the caller returns it. */
static cci_event_t *wait_recv(struct pp *pp)
{
	while (!pp->stash)
		handle_event(pp, must_event(pp));
	cci_event_t *ev = pp->stash;

	pp->stash = NULL;
	return ev;
}

/* As wait_recv(), but gives up (NULL) after timeout_ns: for UU, where the
 * message may be lost. */
static cci_event_t *try_recv(struct pp *pp, uint64_t timeout_ns)
{
	cci_event_t *ev;

	while (!pp->stash) {
		if (!next_event(pp, &ev, timeout_ns))
			return NULL;
		handle_event(pp, ev);
	}
	ev = pp->stash;
	pp->stash = NULL;
	return ev;
}

/* Waits until every send and RMA has its SEND event. */
static void wait_idle(struct pp *pp)
{
	while (pp->inflight)
		handle_event(pp, must_event(pp));
}

static cci_event_t *wait_type(struct pp *pp, cci_event_type_t type)
{
	for (;;) {
		cci_event_t *ev = must_event(pp);

		if (ev->type == type)
			return ev;
		handle_event(pp, ev);
	}
}

/* cci_send, waiting for completions while every send buffer is busy. */
static void post_send(struct pp *pp, const void *p, uint32_t len, int flags)
{
	for (;;) {
		int rc = cci_send(pp->conn, p, len, NULL, flags);

		if (rc == CCI_SUCCESS)
			break;
		if (rc != CCI_ENOBUFS || !pp->inflight)
			perf_check(rc, "cci_send");
		handle_event(pp, must_event(pp));
	}
	pp->inflight++;
}

static void send_ctl(struct pp *pp, uint32_t type, uint32_t size, uint64_t seq)
{
	struct pp_ctl c = { .magic = PP_MAGIC, .type = type, .size = size, .seq = seq };

	if (type == CTL_HANDLE)
		memcpy(c.handle, pp->local_h, sizeof(c.handle));
	post_send(pp, &c, sizeof(c), 0);
}

/* The control message in ev, or NULL for a ping payload. */
static const struct pp_ctl *as_ctl(cci_event_t *ev)
{
	return perf_ctl_payload(ev, sizeof(struct pp_ctl), PP_MAGIC);
}

static void expect_ctl(cci_event_t *ev, uint32_t type)
{
	const struct pp_ctl *c = as_ctl(ev);

	if (!c || c->type != type)
		perf_die("protocol error: expected control message %u, got %u bytes",
			 type, ev->recv.len);
}

/* -------------------------------------------------------------- endpoint */

static void open_endpoint(struct pp *pp)
{
	cci_device_t *dev = pp->o.device ? perf_find_device(pp->o.device) : NULL;
	char *uri = NULL;

	pp->fd = -1;
	perf_check(cci_create_endpoint(dev, 0, &pp->ep, pp->o.blocking ? &pp->fd : NULL),
		   "cci_create_endpoint");
	perf_set_ep(pp->ep);
	perf_check(cci_get_opt(pp->ep, CCI_OPT_ENDPT_URI, &uri), "cci_get_opt(URI)");
	/* with --json, stdout carries only JSON lines */
	fprintf(pp->o.json ? stderr : stdout, "Opened %s\n", uri);
	fflush(stdout);
	if (pp->o.outfile)
		perf_write_uri(pp->o.outfile, uri);
	if (pp->wire && pp->o.server && cci_wire_put(pp->wire, "pingpong_uri", uri))
		perf_die("publishing the URI: %s", cci_wire_error(pp->wire));
	free(uri);
}

/* -L: rank 0 is the server, rank 1 the client of the URI rank 0 put. */
static void launched_roles(struct pp *pp)
{
	char why[512];

	if (cci_wire_init(&pp->wire, why, sizeof(why)))
		perf_die("wire-up: %s", why);
	if (cci_wire_size(pp->wire) != 2)
		perf_die("-L runs 2 ranks, not %d", cci_wire_size(pp->wire));
	pp->o.server = cci_wire_rank(pp->wire) == 0;
}

static void launched_meet(struct pp *pp)
{
	if (cci_wire_fence(pp->wire))
		perf_die("fence: %s", cci_wire_error(pp->wire));
	if (!pp->o.server && cci_wire_get(pp->wire, 0, "pingpong_uri", &pp->peer_uri))
		perf_die("the server's URI: %s", cci_wire_error(pp->wire));
	pp->o.uri = pp->peer_uri;
}

static void alloc_buffer(struct pp *pp, uint64_t len)
{
	void *p;

	pp->buf_len = len ? len : 1;
	if (posix_memalign(&p, 4096, pp->buf_len))
		perf_die("cannot allocate %" PRIu64 " bytes", pp->buf_len);
	pp->buf = p;
	fill(pp->buf, pp->buf_len, 0);
}

/* ---------------------------------------------------------------- server */

static void server_accept(struct pp *pp, struct pp_hello *h)
{
	for (;;) {
		cci_event_t *ev = wait_type(pp, CCI_EVENT_CONNECT_REQUEST);
		bool ok = ev->request.data_len == sizeof(*h);

		if (ok)
			memcpy(h, ev->request.data_ptr, sizeof(*h));
		ok = ok && h->magic == PP_HELLO_MAGIC && h->version == PP_VERSION &&
		     h->rma_max <= PP_MAX_RMA && h->extra_regs <= PP_MAX_EXTRA_REGS &&
		     (h->rma_op == 0 || h->rma_op == CCI_FLAG_WRITE ||
		      h->rma_op == CCI_FLAG_READ);
		perf_check(ok ? cci_accept(ev, pp) : cci_reject(ev),
			   ok ? "cci_accept" : "cci_reject");
		give_back(ev);
		if (!ok) {
			fprintf(stderr, "pingpong: rejected a malformed request\n");
			continue;
		}
		ev = wait_type(pp, CCI_EVENT_ACCEPT);
		perf_check(ev->accept.status, "accept");
		pp->conn = ev->accept.connection;
		give_back(ev);
		return;
	}
}

/* Echoes a ping.  With -V the echo carries the ping's bytes back, copied
 * into our buffer (a NO_COPY send must not point into a receive slot that
 * returns to the transport before the send completes). */
static void serve_ping(struct pp *pp, cci_event_t *ev)
{
	uint32_t len = ev->recv.len;

	if (len > pp->buf_len)
		perf_die("protocol error: %u-byte ping exceeds %" PRIu64, len, pp->buf_len);
	if (pp->o.verify) {
		if (pp->send_flags & CCI_FLAG_NO_COPY)
			wait_idle(pp); /* our buffer is still lent to the last send */
		memcpy(pp->buf, ev->recv.ptr, len);
	}
	/* Answer first, tidy up after: cci_return_event stays off the round
	 * trip, as in any application that minds its latency. */
	post_send(pp, pp->buf, len, pp->send_flags);
	give_back(ev);
}

/* Handles one message; false once the client said it is done. */
static bool serve_one(struct pp *pp, cci_event_t *ev)
{
	const struct pp_ctl *c = as_ctl(ev);

	if (!c) {
		serve_ping(pp, ev);
		return true;
	}
	uint32_t type = c->type, size = c->size;
	uint64_t seq = c->seq;

	give_back(ev);
	if (type == CTL_DONE) {
		send_ctl(pp, CTL_DONE_ACK, 0, 0);
		wait_idle(pp);
		return false;
	}
	if (type != CTL_RMA_DONE)
		perf_die("protocol error: unexpected control message %u", type);
	if (pp->o.verify && pp->o.rma_op == CCI_FLAG_WRITE) {
		if (size > pp->buf_len)
			perf_die("protocol error: RMA size %u", size);
		verify(pp->buf, size, seq, "RMA write target");
		send_ctl(pp, CTL_ACK, size, seq);
	}
	return true;
}

/* -R: n one-byte registrations before the one the benchmark uses, so
 * that its lookups happen among many. */
static void register_extra(struct pp *pp, uint32_t n)
{
	if (n == 0)
		return;
	pp->extra_mem = malloc(n);
	pp->extra_h = calloc(n, sizeof(*pp->extra_h));
	if (!pp->extra_mem || !pp->extra_h)
		perf_die("out of memory for %u registrations", n);
	for (; pp->n_extra < n; pp->n_extra++)
		perf_check(cci_rma_register(pp->ep, pp->extra_mem + pp->n_extra, 1,
				       CCI_FLAG_READ | CCI_FLAG_WRITE,
				       &pp->extra_h[pp->n_extra]), "cci_rma_register (-R)");
}

/* Adopts the client's mode and exposes the RMA buffer if it needs one. */
static void server_setup(struct pp *pp, const struct pp_hello *h)
{
	pp->o.rma_op = h->rma_op;
	pp->o.verify = h->flags & HF_VERIFY;
	pp->o.nocopy = h->flags & HF_NOCOPY;
	pp->send_flags = pp->o.nocopy ? CCI_FLAG_NO_COPY : 0;
	alloc_buffer(pp, h->rma_op && h->rma_max > pp->conn->max_send_size
			 ? h->rma_max : pp->conn->max_send_size);
	if (!h->rma_op)
		return;
	/* readers find a known pattern; writers are checked against theirs */
	fill(pp->buf, pp->buf_len, PP_SEED_READ);
	register_extra(pp, h->extra_regs);
	perf_check(cci_rma_register(pp->ep, pp->buf, pp->buf_len, (int)h->rma_op,
			       &pp->local_h), "cci_rma_register");
	send_ctl(pp, CTL_HANDLE, 0, 0);
}

static void run_server(struct pp *pp)
{
	struct pp_hello h;

	server_accept(pp, &h);
	server_setup(pp, &h);
	while (serve_one(pp, wait_recv(pp)))
		;
}

/* ---------------------------------------------------------------- client */

static void client_connect(struct pp *pp)
{
	struct pp_hello h = {
		.magic = PP_HELLO_MAGIC, .version = PP_VERSION,
		.rma_op = pp->o.rma_op, .rma_max = pp->o.rma_max,
		.flags = (pp->o.verify ? HF_VERIFY : 0) | (pp->o.nocopy ? HF_NOCOPY : 0),
		.extra_regs = pp->o.extra_regs,
	};
	struct timeval tv = { .tv_sec = (time_t)pp->o.timeout_s };

	perf_check(cci_connect(pp->ep, pp->o.uri, &h, sizeof(h), pp->o.attr, pp, 0,
			  tv.tv_sec ? &tv : NULL), "cci_connect");
	cci_event_t *ev = wait_type(pp, CCI_EVENT_CONNECT);

	perf_check(ev->connect.status, "connect");
	pp->conn = ev->connect.connection;
	give_back(ev);
	pp->send_flags = pp->o.nocopy ? CCI_FLAG_NO_COPY : 0;
}

/* RMA needs the server's handle (first message) and a local registration;
 * local use needs no access flags. */
static void client_rma_setup(struct pp *pp)
{
	cci_event_t *ev = wait_recv(pp);

	expect_ctl(ev, CTL_HANDLE);
	memcpy(&pp->remote_h, ((const struct pp_ctl *)ev->recv.ptr)->handle,
	       sizeof(pp->remote_h));
	give_back(ev);
	register_extra(pp, pp->o.extra_regs);
	perf_check(cci_rma_register(pp->ep, pp->buf, pp->o.rma_max, 0, &pp->local_h),
		   "cci_rma_register");
}

static void ping_once(struct pp *pp, uint32_t size, uint64_t seq)
{
	if (pp->o.verify) {
		if (pp->send_flags & CCI_FLAG_NO_COPY)
			wait_idle(pp); /* the buffer is lent until completion */
		fill(pp->buf, size, seq);
	}
	post_send(pp, pp->buf, size, pp->send_flags);
	/* The last echo goes back now that this ping has left (as the server
	 * does, see serve_ping). */
	if (pp->held)
		give_back(pp->held);

	cci_event_t *ev = wait_recv(pp);

	if (ev->recv.len != size)
		perf_die("echo of %u bytes for a %u-byte ping", ev->recv.len, size);
	if (pp->o.verify)
		verify(ev->recv.ptr, size, seq, "echo");
	pp->held = ev;
}

/* One RMA and its SEND event.  With -V a write waits for the server's
 * check (else the next write could land before the server looks), and a
 * read starts from a cleared buffer (else a read that moved nothing
 * would pass). */
static void rma_once(struct pp *pp, uint32_t size, uint64_t seq)
{
	struct pp_ctl msg = { .magic = PP_MAGIC, .type = CTL_RMA_DONE, .size = size, .seq = seq };
	bool wr = pp->o.rma_op == CCI_FLAG_WRITE;
	int rc;

	if (pp->o.verify && wr)
		fill(pp->buf, size, seq);
	else if (pp->o.verify)
		memset(pp->buf, 0, size);
	while ((rc = cci_rma(pp->conn, pp->o.nomsg ? NULL : &msg,
			     pp->o.nomsg ? 0 : sizeof(msg), pp->local_h, 0,
			     &pp->remote_h, 0, size, NULL, (int)pp->o.rma_op)) == CCI_ENOBUFS
	       && pp->inflight)
		handle_event(pp, must_event(pp));
	perf_check(rc, "cci_rma");
	pp->inflight++;
	wait_idle(pp);
	if (!pp->o.verify)
		return;
	if (!wr) {
		verify(pp->buf, size, PP_SEED_READ, "RMA read");
		return;
	}
	cci_event_t *ev = wait_recv(pp);

	expect_ctl(ev, CTL_ACK);
	give_back(ev);
}

/* CCI's scaling: halve the iterations for every doubling from 64 KiB on,
 * keeping at least a few so large sizes still average something. */
static uint32_t scaled(uint32_t n, uint64_t size)
{
	for (uint64_t s = 64 * 1024; s <= size && n > 16; s *= 2)
		n /= 2;
	return n;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Microseconds per round trip for one size.  The iterations are timed in
 * batches of PP_BATCH and the median batch is reported: on a shared
 * machine one preempted round trip would otherwise weigh on the mean of a
 * whole run (-A reports the plain mean instead).
 */
#define PP_BATCH 100
static double time_size(struct pp *pp, uint32_t size, uint32_t iters, uint32_t warmup)
{
	uint32_t nb = pp->o.mean || iters < 10 * PP_BATCH ? 0 : iters / PP_BATCH;
	uint64_t *batch = nb ? calloc(nb, sizeof(*batch)) : NULL;
	uint64_t t0 = perf_now_ns(), tb = 0;
	double us;

	for (uint32_t i = 0; i < warmup + iters; i++) {
		if (i == warmup)
			t0 = tb = perf_now_ns();
		else if (batch && i > warmup && (i - warmup) % PP_BATCH == 0 &&
		         (i - warmup) / PP_BATCH <= nb) {
			uint64_t t = perf_now_ns();
			batch[(i - warmup) / PP_BATCH - 1] = t - tb;
			tb = t;
		}
		if (pp->o.rma_op)
			rma_once(pp, size, i);
		else
			ping_once(pp, size, i);
	}
	/* when iters is a whole number of batches the loop ends before it
	 * records the last one, which would otherwise stay 0 and pull the
	 * median down */
	if (batch && iters == nb * PP_BATCH)
		batch[nb - 1] = perf_now_ns() - tb;
	us = (double)(perf_now_ns() - t0) / 1e3 / iters;
	if (pp->held)
		give_back(pp->held);
	pp->held = NULL;
	if (batch) {
		qsort(batch, nb, sizeof(*batch), cmp_u64);
		us = (double)batch[nb / 2] / 1e3 / PP_BATCH;
		free(batch);
	}
	wait_idle(pp);
	return us;
}

static void print_header(struct pp *pp, uint64_t max)
{
	if (pp->o.json)
		return;
	printf("# %s transport (device %s), %s connection, %s%s%s, sizes up to %" PRIu64
	       ", %u iterations (fewer from 64 KiB)\n",
	       pp->ep->device->transport, pp->ep->device->name, perf_attr_name(pp->o.attr),
	       perf_mode_name(pp->o.rma_op), pp->o.blocking ? ", blocking" : "",
	       pp->o.nocopy ? ", no-copy" : "", max, pp->o.iters);
	printf("# latency: %s\n", pp->o.mean || pp->o.iters < 10 * PP_BATCH
	       ? "mean of all round trips" : "median of batches of 100 round trips");
	printf("%8s %12s %16s\n", "Bytes",
	       pp->o.rma_op ? "Latency (round-trip)" : "Latency (one-way)", "Throughput");
}

static void print_row(struct pp *pp, uint32_t size, uint32_t iters, double lat)
{
	double bw = lat > 0 ? size / lat : 0;

	if (!pp->o.json) {
		printf("%8u %12.2lf us %12.2lf MB/s\n", size, lat, bw);
	} else {
		printf("{\"bytes\":%u,\"latency_us\":%.3f,\"throughput_MBps\":%.3f,"
		       "\"latency\":\"%s\",\"iters\":%u,\"transport\":\"%s\","
		       "\"device\":\"%s\",\"attribute\":\"%s\",\"mode\":\"%s\","
		       "\"blocking\":%s,\"nocopy\":%s}\n",
		       size, lat, bw, pp->o.rma_op ? "round-trip" : "one-way", iters,
		       pp->ep->device->transport, pp->ep->device->name,
		       perf_attr_name(pp->o.attr), perf_mode_name(pp->o.rma_op),
		       pp->o.blocking ? "true" : "false", pp->o.nocopy ? "true" : "false");
	}
	fflush(stdout);
}

/* Sizes 0 (messages) or 1 (RMA), then powers of two, then max itself if
 * it is not a power of two, so the largest size is always measured. */
static void client_sweep(struct pp *pp, uint64_t max)
{
	uint64_t size = pp->o.rma_op ? 1 : 0;

	print_header(pp, max);
	for (;;) {
		uint32_t iters = scaled(pp->o.iters, size);
		uint32_t warmup = scaled(pp->o.warmup, size);

		print_row(pp, (uint32_t)size, iters,
			  time_size(pp, (uint32_t)size, iters, warmup) /
			  (pp->o.rma_op ? 1.0 : 2.0));
		if (size == max)
			break;
		size = size ? size * 2 : 1;
		if (size > max)
			size = max;
	}
}

/* Tells the server we are done and waits for its answer; on UU either
 * message may be lost, so retry a few times then leave anyway. */
static void client_done(struct pp *pp)
{
	bool uu = pp->o.attr == CCI_CONN_ATTR_UU;

	for (int tries = 0;; tries++) {
		send_ctl(pp, CTL_DONE, 0, 0);
		cci_event_t *ev = uu ? try_recv(pp, 200000000ull) : wait_recv(pp);

		if (ev) {
			expect_ctl(ev, CTL_DONE_ACK);
			give_back(ev);
			break;
		}
		if (tries == 10) {
			fprintf(stderr, "pingpong: no answer to done; leaving\n");
			break;
		}
	}
	wait_idle(pp);
}

static void run_client(struct pp *pp)
{
	client_connect(pp);
	uint64_t max = pp->o.rma_op ? pp->o.rma_max : pp->conn->max_send_size;

	alloc_buffer(pp, max);
	if (pp->o.rma_op)
		client_rma_setup(pp);
	client_sweep(pp, max);
	client_done(pp);
}

/* --------------------------------------------------------------- options */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pingpong -s [-o uri_file] [-D device] [-b] [-t secs]\n"
		"       LAUNCHER -n 2 pingpong -L [client options...]\n"
		"       pingpong -h URI [-c ro|ru|uu] [-w|-r] [-m max] [-i iters] [-W warmup]\n"
		"                [-b] [-n] [-N] [-V] [-D device] [-t secs] [--json]\n"
		"  -s          server: accept one client, echo, exit when it is done\n"
		"  -o FILE     server: write the endpoint URI to FILE (atomically)\n"
		"  -h URI      client: connect to the server at URI\n"
		"  -L          started by a launcher: rank 0 serves, rank 1 connects\n"
		"  -c ATTR     connection: ro (default), ru or uu\n"
		"  -w / -r     RMA write / read instead of messages (latency is round-trip)\n"
		"  -m MAX      largest RMA size, k/m/g suffixes (default 4m)\n"
		"  -i ITERS    timed round trips per size (default 10000; halved per\n"
		"              doubling from 64 KiB)\n"
		"  -W WARMUP   untimed round trips before each size (default 100)\n"
		"  -b          block in poll() on the endpoint's OS handle\n"
		"  -n          send with CCI_FLAG_NO_COPY (both sides)\n"
		"  -N          RMA without a completion message\n"
		"  -R N        register N other one-byte regions on each side first\n"
		"              (RMA lookups among many registrations; default 0)\n"
		"  -V          check every payload (slower)\n"
		"  -A          report the mean round trip instead of the median of\n"
		"              batches of 100 (the default from 1000 iterations)\n"
		"  -D NAME     use device NAME instead of the default\n"
		"  -t SECS     give up after SECS without any event (default 30, 0: never)\n"
		"  --json      one JSON object per row on stdout (Opened goes to stderr)\n");
}

static void parse_one(struct pp_opts *o, int c, const char *arg)
{
	switch (c) {
	case 's': o->server = true; break;
	case 'h': o->uri = arg; break;
	case 'L': o->launched = true; break;
	case 'o': o->outfile = arg; break;
	case 'D': o->device = arg; break;
	case 'c': o->attr = perf_parse_attr(arg, true); break;
	case 'w': o->rma_op = CCI_FLAG_WRITE; break;
	case 'r': o->rma_op = CCI_FLAG_READ; break;
	case 'm': o->rma_max = perf_parse_size(arg); break;
	case 'i': o->iters = perf_parse_count(arg, 1, UINT32_MAX); break;
	case 'W': o->warmup = perf_parse_count(arg, 0, UINT32_MAX); break;
	case 'b': o->blocking = true; break;
	case 'n': o->nocopy = true; break;
	case 'N': o->nomsg = true; break;
	case 'R': o->extra_regs = perf_parse_count(arg, 0, PP_MAX_EXTRA_REGS); break;
	case 'A': o->mean = true; break;
	case 'V': o->verify = true; break;
	case 't': o->timeout_s = perf_parse_count(arg, 0, UINT32_MAX); break;
	case 'j': o->json = true; break;
	case 'H': usage(stdout); exit(EXIT_SUCCESS);
	default: usage(stderr); exit(EXIT_FAILURE);
	}
}

static void parse_opts(struct pp_opts *o, int argc, char **argv)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct pp_opts){ .rma_max = 4u << 20, .iters = 10000, .warmup = 100,
			       .timeout_s = 30 };
	while ((c = getopt_long(argc, argv, "sh:o:D:c:wrm:i:W:bnNR:AVt:L", longs, NULL)) != -1)
		parse_one(o, c, optarg);
	if (optind != argc || (o->launched ? o->server || o->uri : o->server == !!o->uri))
		perf_die("give either -s, -h URI or -L (--help for usage)");
	if (o->rma_op && o->attr == CCI_CONN_ATTR_UU)
		perf_die("RMA needs a reliable connection (-c ro or ru)");
	if (o->extra_regs && !o->rma_op)
		perf_die("-R needs -w or -r");
	if (o->rma_op && (o->rma_max == 0 || o->rma_max > PP_MAX_RMA))
		perf_die("-m must be between 1 and %llu", PP_MAX_RMA);
	if (o->verify && o->nomsg && o->rma_op == CCI_FLAG_WRITE)
		perf_die("-V with -w needs the completion message (drop -N)");
}

/* --------------------------------------------------------------- cleanup */

static void teardown(struct pp *pp)
{
	if (pp->conn)
		perf_check(cci_disconnect(pp->conn), "cci_disconnect");
	if (pp->local_h)
		perf_check(cci_rma_deregister(pp->ep, pp->local_h), "cci_rma_deregister");
	for (uint32_t i = 0; i < pp->n_extra; i++)
		perf_check(cci_rma_deregister(pp->ep, pp->extra_h[i]), "cci_rma_deregister");
	free(pp->extra_h);
	free(pp->extra_mem);
	perf_check(cci_destroy_endpoint(pp->ep), "cci_destroy_endpoint");
	pp->ep = NULL;
	perf_set_ep(NULL);
	perf_check(cci_finalize(), "cci_finalize");
	free(pp->buf);
}

int main(int argc, char **argv)
{
	static struct pp pp;

	perf_set_prog("pingpong");
	parse_opts(&pp.o, argc, argv);
	if (pp.o.launched)
		launched_roles(&pp);
	perf_check(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), "cci_init");
	open_endpoint(&pp);
	if (pp.o.launched)
		launched_meet(&pp);
	if (pp.o.server)
		run_server(&pp);
	else
		run_client(&pp);
	teardown(&pp);
	cci_wire_finalize(pp.wire);
	free(pp.peer_uri);
	return EXIT_SUCCESS;
}
