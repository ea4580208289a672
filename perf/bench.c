/*
 * bench.c - endpoint set-up, bounded waits, the streaming client loop and
 * the counting server shared by bandwidth and msgrate.  See bench.h.
 *
 * Every CCI call is checked; a failure prints cci_strerror() and exits
 * non-zero, and so does a wait that sees no event for the -t timeout (a
 * dead or stuck peer), so a benchmark never hangs a script.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/* --------------------------------------------------------------- options */

bool bench_parse_common(struct bench *b, int c, const char *arg)
{
	switch (c) {
	case 's': b->server = true; break;
	case 'h': b->uri = arg; break;
	case 'o': b->outfile = arg; break;
	case 'D': b->device = arg; break;
	case 'c': b->attr = perf_parse_attr(arg, false); break;
	case 'b': b->blocking = true; break;
	case 't': b->timeout_s = perf_parse_count(arg, 0, 86400); break;
	case 'j': b->json = true; break;
	default: return false;
	}
	return true;
}

void bench_check_common(const struct bench *b, int optind, int argc)
{
	if (optind != argc || b->server == !!b->uri)
		perf_die("give either -s or -h URI (--help for usage)");
}

/* ---------------------------------------------------------------- events */

bool bench_poll(struct bench *b, cci_event_t **ev)
{
	int rc = cci_get_event(b->ep, ev);

	if (rc == CCI_SUCCESS)
		return true;
	if (rc != CCI_EAGAIN)
		perf_check(rc, "cci_get_event");
	return false;
}

/* The clock is read once per 1024 empty polls so that spinning costs no
 * more than cci_get_event itself. */
cci_event_t *bench_wait(struct bench *b)
{
	uint64_t limit = (uint64_t)(b->timeout_s * 1e9), deadline = 0;
	unsigned spins = 0;
	cci_event_t *ev = NULL;

	if (b->blocking && limit)
		deadline = perf_now_ns() + limit;
	while (!bench_poll(b, &ev)) {
		if (b->blocking) {
			if (!perf_block_on_fd(b->ep, b->fd, deadline))
				break;
			continue;
		}
		if (++spins % 1024 || !limit)
			continue;
		if (!deadline)
			deadline = perf_now_ns() + limit;
		else if (perf_now_ns() > deadline)
			break;
	}
	if (ev)
		return ev;
	perf_die("no event for %.0f s: the peer is gone or stuck", b->timeout_s);
}

void bench_return(cci_event_t *ev)
{
	perf_check(cci_return_event(ev), "cci_return_event");
}

static uint32_t conn_index(cci_connection_t *c)
{
	return (uint32_t)(uintptr_t)c->context;
}

/* Completions, a RECV to keep for later, and what nobody waits for. */
static void handle_event(struct bench *b, cci_event_t *ev)
{
	uint32_t i;

	switch (ev->type) {
	case CCI_EVENT_SEND:
		perf_check(ev->send.status, "send completion");
		i = (uint32_t)(uintptr_t)ev->send.context;
		if (i >= BENCH_MAX_CONNS || !b->inflight[i])
			perf_die("SEND event with nothing in flight");
		b->inflight[i]--;
		b->inflight_total--;
		break;
	case CCI_EVENT_RECV:
		if (b->stash)
			perf_die("protocol error: two control messages pending");
		b->stash = ev;
		return;
	case CCI_EVENT_CONNECT_REQUEST:
		perf_check(cci_reject(ev), "cci_reject"); /* one client at a time */
		break;
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		fprintf(stderr, "%s: keepalive timed out\n", b->prog);
		break;
	default:
		perf_die("unexpected event %s", cci_event_type_str(ev->type));
	}
	bench_return(ev);
}

static cci_event_t *wait_recv(struct bench *b)
{
	while (!b->stash)
		handle_event(b, bench_wait(b));
	cci_event_t *ev = b->stash;

	b->stash = NULL;
	return ev;
}

void bench_wait_idle(struct bench *b)
{
	while (b->inflight_total)
		handle_event(b, bench_wait(b));
}

/* The control message in ev, or NULL for a data payload (whose bytes
 * count up by one and so never start with the magic). */
static const struct bench_ctl *as_ctl(cci_event_t *ev)
{
	return perf_ctl_payload(ev, sizeof(struct bench_ctl), BENCH_MAGIC);
}

static uint64_t expect_ctl(cci_event_t *ev, uint32_t type)
{
	const struct bench_ctl *c = as_ctl(ev);

	if (!c || c->type != type)
		perf_die("protocol error: expected control message %u, got %u bytes",
			 type, ev->recv.len);
	uint64_t count = c->count;

	bench_return(ev);
	return count;
}

/* One send or RMA on connection i; the context carries i back. */
static int post_one(struct bench *b, uint32_t i, uint32_t rma_op, const void *p,
		    uint64_t size)
{
	void *ctx = (void *)(uintptr_t)i;
	int rc;

	if (rma_op)
		rc = cci_rma(b->conns[i], NULL, 0, b->local_h, 0, &b->remote_h, 0,
			     size, ctx, (int)rma_op);
	else
		rc = cci_send(b->conns[i], p, (uint32_t)size, ctx,
			      b->nocopy ? CCI_FLAG_NO_COPY : 0);
	if (rc == CCI_SUCCESS) {
		b->inflight[i]++;
		b->inflight_total++;
	}
	return rc;
}

static void send_ctl(struct bench *b, uint32_t i, uint32_t type, uint64_t count)
{
	struct bench_ctl c = { .magic = BENCH_MAGIC, .type = type, .count = count };
	int rc;

	if (type == BCTL_HANDLE)
		memcpy(c.handle, b->local_h, sizeof(c.handle));
	/* the copy flag matters: c lives on the stack */
	while ((rc = cci_send(b->conns[i], &c, sizeof(c), (void *)(uintptr_t)i, 0))
	       == CCI_ENOBUFS && b->inflight_total)
		handle_event(b, bench_wait(b));
	perf_check(rc, "cci_send (control)");
	b->inflight[i]++;
	b->inflight_total++;
}

/* -------------------------------------------------------------- endpoint */

void bench_open(struct bench *b)
{
	char *uri = NULL;

	perf_check(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), "cci_init");
	cci_device_t *dev = b->device ? perf_find_device(b->device) : NULL;

	b->fd = -1;
	perf_check(cci_create_endpoint(dev, 0, &b->ep, b->blocking ? &b->fd : NULL),
		   "cci_create_endpoint");
	perf_set_ep(b->ep);
	perf_check(cci_get_opt(b->ep, CCI_OPT_ENDPT_URI, &uri), "cci_get_opt(URI)");
	/* with --json, stdout carries only JSON lines */
	fprintf(b->json ? stderr : stdout, "Opened %s\n", uri);
	fflush(stdout);
	if (b->outfile)
		perf_write_uri(b->outfile, uri);
	free(uri);
}

void bench_alloc(struct bench *b, uint64_t len)
{
	void *p;

	b->buf_len = len ? len : 1;
	if (posix_memalign(&p, 4096, b->buf_len))
		perf_die("cannot allocate %" PRIu64 " bytes", b->buf_len);
	b->buf = p;
	/* bytes count up by one: never the control magic */
	for (uint64_t i = 0; i < b->buf_len; i++)
		b->buf[i] = (unsigned char)i;
}

void bench_close(struct bench *b)
{
	for (uint32_t i = 0; i < b->nconns; i++)
		if (b->conns[i])
			perf_check(cci_disconnect(b->conns[i]), "cci_disconnect");
	if (b->local_h)
		perf_check(cci_rma_deregister(b->ep, b->local_h), "cci_rma_deregister");
	perf_check(cci_destroy_endpoint(b->ep), "cci_destroy_endpoint");
	b->ep = NULL;
	perf_set_ep(NULL);
	perf_check(cci_finalize(), "cci_finalize");
	free(b->buf);
	b->buf = NULL;
}

/* ---------------------------------------------------------------- client */

void bench_connect(struct bench *b, uint32_t rma_op, uint64_t rma_max)
{
	struct bench_hello h = { .magic = BENCH_HELLO_MAGIC, .version = BENCH_VERSION,
				 .rma_op = rma_op, .nconns = b->nconns, .rma_max = rma_max };
	struct timeval tv = { .tv_sec = (time_t)b->timeout_s };
	uint32_t up = 0;

	for (uint32_t i = 0; i < b->nconns; i++) {
		h.index = i;
		perf_check(cci_connect(b->ep, b->uri, &h, sizeof(h), b->attr,
					(void *)(uintptr_t)i, 0, tv.tv_sec ? &tv : NULL),
			   "cci_connect");
	}
	while (up < b->nconns) {
		cci_event_t *ev = bench_wait(b);

		if (ev->type != CCI_EVENT_CONNECT) {
			handle_event(b, ev);
			continue;
		}
		perf_check(ev->connect.status, "connect");
		b->conns[(uintptr_t)ev->connect.context] = ev->connect.connection;
		up++;
		bench_return(ev);
	}
	if (!rma_op)
		return;
	cci_event_t *ev = wait_recv(b);
	const struct bench_ctl *c = as_ctl(ev);

	if (!c || c->type != BCTL_HANDLE)
		perf_die("protocol error: expected the server's RMA handle");
	memcpy(&b->remote_h, c->handle, sizeof(b->remote_h));
	bench_return(ev);
	/* local use of a registration needs no access flags */
	perf_check(cci_rma_register(b->ep, b->buf, rma_max, 0, &b->local_h),
		   "cci_rma_register");
}

/* Posts on every connection whose window has room until all are full,
 * the count is reached or the transport says ENOBUFS; returns how many. */
static uint64_t post_burst(struct bench *b, uint32_t k, uint32_t window, uint32_t rma_op,
			   uint64_t size, uint64_t left, uint32_t *next)
{
	uint64_t posted = 0;
	uint32_t c = *next, full = 0;

	while (posted < left && full < k) {
		if (b->inflight[c] >= window) {
			full++;
		} else {
			int rc = post_one(b, c, rma_op, b->buf, size);

			if (rc == CCI_ENOBUFS)
				break;
			perf_check(rc, rma_op ? "cci_rma" : "cci_send");
			posted++;
			full = 0;
		}
		c = c + 1 == k ? 0 : c + 1;
	}
	*next = c;
	return posted;
}

uint64_t bench_end_stream(struct bench *b, uint64_t n, uint64_t t0)
{
	b->sent_total += n;
	send_ctl(b, 0, BCTL_END, b->sent_total);
	uint64_t got = expect_ctl(wait_recv(b), BCTL_ACK);

	/* the server counts every data message once: more is a duplicate */
	if (got != b->sent_total)
		perf_die("protocol error: server acknowledged %" PRIu64 " of %" PRIu64
			 " messages", got, b->sent_total);
	return perf_now_ns() - t0;
}

uint64_t bench_stream(struct bench *b, uint32_t k, uint32_t window, uint32_t rma_op,
		      uint64_t size, uint64_t n)
{
	uint64_t t0 = perf_now_ns(), posted = 0;
	uint32_t next = 0;
	cci_event_t *ev;

	if (size > b->buf_len || k > b->nconns || !k)
		perf_die("internal error: size %" PRIu64 " or %u connections", size, k);
	while (posted < n) {
		uint64_t p = post_burst(b, k, window, rma_op, size, n - posted, &next);

		posted += p;
		/* nothing could go out: only a completion frees room */
		if (!p)
			handle_event(b, bench_wait(b));
		while (bench_poll(b, &ev))
			handle_event(b, ev);
	}
	bench_wait_idle(b);
	return bench_end_stream(b, rma_op ? 0 : n, t0);
}

void bench_done(struct bench *b)
{
	send_ctl(b, 0, BCTL_DONE, 0);
	expect_ctl(wait_recv(b), BCTL_DONE_ACK);
	bench_wait_idle(b);
}

/* ---------------------------------------------------------------- server */

struct server {
	struct bench_hello first; /* every connection must agree with it */
	uint32_t requests;
	uint64_t received;        /* data messages on all connections */
	uint64_t want;            /* END's count, UINT64_MAX: none pending */
	uint32_t ack_conn;
	bool done;
};

static bool hello_ok(struct server *s, const struct bench_hello *h)
{
	if (h->magic != BENCH_HELLO_MAGIC || h->version != BENCH_VERSION ||
	    h->rma_max > BENCH_MAX_RMA || !h->nconns || h->nconns > BENCH_MAX_CONNS ||
	    h->index >= h->nconns ||
	    (h->rma_op && h->rma_op != CCI_FLAG_WRITE && h->rma_op != CCI_FLAG_READ))
		return false;
	if (!s->requests)
		return true;
	return h->rma_op == s->first.rma_op && h->nconns == s->first.nconns &&
	       h->rma_max == s->first.rma_max;
}

static void serve_request(struct bench *b, struct server *s, cci_event_t *ev)
{
	struct bench_hello h;
	bool ok = ev->request.data_len == sizeof(h) && s->requests < BENCH_MAX_CONNS;

	if (ok) {
		memcpy(&h, ev->request.data_ptr, sizeof(h));
		ok = hello_ok(s, &h) && s->requests < h.nconns;
	}
	if (!ok) {
		fprintf(stderr, "%s: rejected a malformed or extra request\n", b->prog);
		perf_check(cci_reject(ev), "cci_reject");
		return;
	}
	if (!s->requests++)
		s->first = h;
	perf_check(cci_accept(ev, (void *)(uintptr_t)h.index), "cci_accept");
}

/* The first connection up exposes the RMA buffer (on connection 0, where
 * the client waits for it). */
static void serve_accept(struct bench *b, struct server *s, cci_event_t *ev)
{
	perf_check(ev->accept.status, "accept");
	uint32_t i = (uint32_t)(uintptr_t)ev->accept.context;

	if (b->conns[i])
		perf_die("protocol error: connection %u twice", i);
	b->conns[i] = ev->accept.connection;
	if (i + 1 > b->nconns)
		b->nconns = i + 1;
	if (i != 0 || !s->first.rma_op)
		return;
	bench_alloc(b, s->first.rma_max);
	perf_check(cci_rma_register(b->ep, b->buf, b->buf_len, (int)s->first.rma_op,
				     &b->local_h), "cci_rma_register");
	send_ctl(b, 0, BCTL_HANDLE, 0);
}

static void serve_recv(struct bench *b, struct server *s, cci_event_t *ev)
{
	const struct bench_ctl *c = as_ctl(ev);
	uint32_t i = conn_index(ev->recv.connection);

	if (!c) {
		s->received++;
	} else if (c->type == BCTL_END) {
		s->want = c->count;
		s->ack_conn = i;
	} else if (c->type == BCTL_DONE) {
		s->done = true;
		send_ctl(b, i, BCTL_DONE_ACK, 0);
	} else {
		perf_die("protocol error: unexpected control message %u", c->type);
	}
	bench_return(ev);
}

void bench_serve(struct bench *b)
{
	struct server s = { .want = UINT64_MAX };

	while (!s.done || b->inflight_total) {
		cci_event_t *ev = bench_wait(b);

		switch (ev->type) {
		case CCI_EVENT_CONNECT_REQUEST:
			serve_request(b, &s, ev);
			bench_return(ev);
			break;
		case CCI_EVENT_ACCEPT:
			serve_accept(b, &s, ev);
			bench_return(ev);
			break;
		case CCI_EVENT_RECV:
			serve_recv(b, &s, ev);
			break;
		default:
			handle_event(b, ev);
			break;
		}
		/* on RU an END may overtake data: answer once all is in */
		if (s.want != UINT64_MAX && s.received >= s.want) {
			send_ctl(b, s.ack_conn, BCTL_ACK, s.received);
			s.want = UINT64_MAX;
		}
	}
	/* the server's own count, for a script to check against the client */
	if (b->json)
		printf("{\"benchmark\":\"%s\",\"role\":\"server\",\"received\":%" PRIu64 "}\n",
		       b->prog, s.received);
	else
		printf("Received %" PRIu64 " data messages\n", s.received);
	fflush(stdout);
}
