/*
 * t_epdestroy.c - an endpoint destroyed while another thread is inside
 * cci_get_event() on another endpoint of the same process, which api/cci.h
 * allows (cci_destroy_endpoint() must not race only with calls on the
 * endpoint it frees).  The destroyed endpoint is connected to the polled
 * one and has messages in flight to it, so the polled endpoint handles
 * the teardown's traffic while it goes on.  The poller either spins on
 * cci_get_event() or sleeps in poll() on its OS handle between calls.
 *
 * CCI_THREADS_CYCLES sets the endpoints created and destroyed (20).
 */
#include "threads.h"

#include "proto.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MSGS 100u                /* sent by each endpoint before it goes */
#define RUN_MS 60000u             /* for the cycles */
#define TAIL_MS 30000u            /* then for the last endpoint */

struct polled {
	cci_endpoint_t *ep;
	cci_os_handle_t fd;
	int blocking;                /* poll() the OS handle between calls */
	uint32_t cycles;             /* the last one's endpoint stays */
	uint64_t deadline;           /* the cycles' (the poller's is TAIL_MS later) */
	atomic_int stop;
	atomic_uint accepted;        /* connections accepted so far */
	atomic_uint last_recvs;      /* messages of the last cycle */

	/* The poller's, read once it has been joined. */
	uint32_t *next;              /* per cycle: the next seq expected */
	uint64_t requests, recvs, corrupt, order_errors, foreign, keepalives;
};

static void on_event(struct polled *p, cci_event_t *ev)
{
	uint32_t cycle = UINT32_MAX;
	struct proto_hdr h;
	uintptr_t c;

	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		p->requests++;
		if (ev->request.data_len == sizeof(cycle))
			memcpy(&cycle, ev->request.data_ptr, sizeof(cycle));
		if (CHECKF(cycle <= p->cycles, "a connect request for cycle %u", cycle))
			CHECK_RC(cci_accept(ev, h_ctx(cycle)), CCI_SUCCESS);
		else
			CHECK_RC(cci_reject(ev), CCI_SUCCESS);
		break;
	case CCI_EVENT_ACCEPT:
		if (CHECK_RC(ev->accept.status, CCI_SUCCESS))
			atomic_fetch_add(&p->accepted, 1);
		break;
	case CCI_EVENT_RECV:
		c = (uintptr_t)ev->recv.connection->context - 1;
		if (proto_parse(ev->recv.ptr, ev->recv.len, &h) != 1 || c > p->cycles ||
		    h.stream != 0 || h.seq >= MSGS) {
			p->corrupt++;
			break;
		}
		p->recvs++;
		/* What arrives of a destroyed endpoint's RO stream is a prefix:
		 * no gap, nothing twice. */
		if (h.seq != p->next[c])
			p->order_errors++;
		p->next[c] = h.seq + 1;
		if (c == p->cycles)
			atomic_fetch_add(&p->last_recvs, 1);
		break;
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		p->keepalives++;
		break;
	default:
		p->foreign++;
	}
}

static void *poller(void *arg)
{
	struct polled *p = arg;

	while (!atomic_load(&p->stop) && h_now_ms() < p->deadline + TAIL_MS) {
		cci_event_t *ev = NULL;

		if (p->blocking) {
			struct pollfd pfd = { .fd = p->fd, .events = POLLIN };

			poll(&pfd, 1, 20);
		}
		while (cci_get_event(p->ep, &ev) == CCI_SUCCESS) {
			on_event(p, ev);
			cci_return_event(ev);
		}
		if (!p->blocking)
			sched_yield();
	}
	return NULL;
}

/* Open an endpoint, connect it to p's for cycle, post up to n messages
 * (all of them, waiting for completions, when wait is set). */
static cci_endpoint_t *client(struct polled *p, cci_device_t *dev, const char *uri,
                              uint32_t cycle, int wait)
{
	cci_endpoint_t *ep = h_endpoint(dev, NULL);
	cci_connection_t *c;
	cci_event_t *ev;
	struct h_sendctr ctr;
	uint8_t buf[PROTO_HDR + 64];

	REQUIRE_RC(cci_connect(ep, uri, &cycle, sizeof(cycle), CCI_CONN_ATTR_RO, NULL, 0,
			       NULL), CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 10000);
	REQUIRE(ev != NULL);
	REQUIRE_RC(ev->connect.status, CCI_SUCCESS);
	c = ev->connect.connection;
	cci_return_event(ev);
	h_sendctr_init(&ctr, MSGS);
	for (uint32_t seq = 0; seq < MSGS; seq++) {
		uint32_t len = PROTO_HDR + seq % 64;
		int rc;

		if (len > c->max_send_size)
			len = c->max_send_size;
		proto_build(buf, len, 0, seq, PROTO_DATA);
		if (wait) {
			if (!CHECK_RC(h_send(ep, c, buf, len, h_ctx(seq), 0, &ctr), CCI_SUCCESS))
				break;
			continue;
		}
		/* Posted only, in order: a refused one ends the stream so
		 * that what arrives stays a prefix. */
		rc = cci_send(c, buf, len, h_ctx(seq), 0);
		if (rc != CCI_SUCCESS) {
			CHECK_RC2(rc, CCI_SUCCESS, CCI_ENOBUFS);
			break;
		}
	}
	if (wait) {
		h_drain(ep, &ctr, MSGS, 10000);
		CHECKF(ctr.ok == MSGS && !ctr.err && !ctr.dup, "last endpoint: %llu of %u "
		       "sends completed", (unsigned long long)ctr.ok, MSGS);
	}
	h_sendctr_free(&ctr);
	(void)p;
	return ep;
}

static void destroy_while_polled(void)
{
	struct polled *p = calloc(1, sizeof(*p));
	cci_device_t *dev;
	pthread_t th;
	char *uri;
	uint32_t k;
	uint64_t end;

	REQUIRE(p != NULL);
	p->blocking = h_current->arg != NULL;
	p->cycles = (uint32_t)h_env_count("CCI_THREADS_CYCLES", 20);
	p->next = calloc(p->cycles + 1, sizeof(*p->next));
	REQUIRE(p->next != NULL);
	dev = h_setup();
	p->ep = h_endpoint(dev, p->blocking ? &p->fd : NULL);
	uri = h_uri(p->ep);
	p->deadline = h_now_ms() + RUN_MS;
	REQUIRE(pthread_create(&th, NULL, poller, p) == 0);

	for (k = 0; k < p->cycles && h_now_ms() < p->deadline; k++) {
		cci_endpoint_t *ep = client(p, dev, uri, k, 0);

		/* The poller is in cci_get_event() (or in poll() between
		 * calls) on p->ep while this one goes, its messages in
		 * flight. */
		CHECK_RC(cci_destroy_endpoint(ep), CCI_SUCCESS);
	}
	CHECKF(k == p->cycles, "%u of %u endpoints created and destroyed", k, p->cycles);

	/* The polled endpoint still serves a newcomer completely. */
	{
		cci_endpoint_t *ep = client(p, dev, uri, p->cycles, 1);

		end = h_now_ms() + 10000;
		while (atomic_load(&p->last_recvs) < MSGS && h_now_ms() < end)
			h_sleep_ms(1);
		CHECK_RC(cci_destroy_endpoint(ep), CCI_SUCCESS);
	}
	atomic_store(&p->stop, 1);
	pthread_join(th, NULL);

	CHECKF(atomic_load(&p->last_recvs) == MSGS, "the endpoint after %u destroyed "
	       "peers: %u of %u messages arrived", p->cycles, atomic_load(&p->last_recvs),
	       MSGS);
	CHECKF(p->requests == p->cycles + 1 && atomic_load(&p->accepted) == p->cycles + 1,
	       "%llu connect requests, %u accepted, of %u", (unsigned long long)p->requests,
	       atomic_load(&p->accepted), p->cycles + 1);
	CHECKF(!p->corrupt && !p->order_errors && !p->foreign,
	       "%llu corrupt messages, %llu out of order or twice, %llu unexpected events",
	       (unsigned long long)p->corrupt, (unsigned long long)p->order_errors,
	       (unsigned long long)p->foreign);
	h_note("%llu messages arrived, %llu keepalive timeouts",
	       (unsigned long long)p->recvs, (unsigned long long)p->keepalives);
	free(uri);
	free(p->next);
	h_teardown(p->ep);
	free(p);
}

static const int blocking = 1;

const struct h_test t_epdestroy_tests[] = {
	{ "endpoints with messages in flight are destroyed while another thread "
	  "spins in cci_get_event() on their peer endpoint: it sees intact prefixes "
	  "and keeps working", destroy_while_polled, H_NEEDS_DEVICE, 120, NULL },
	{ "endpoints with messages in flight are destroyed while another thread "
	  "waits in poll() on their peer endpoint's OS handle: it sees intact "
	  "prefixes and keeps working", destroy_while_polled, H_NEEDS_DEVICE, 120,
	  &blocking },
};
const size_t t_epdestroy_count = sizeof(t_epdestroy_tests) / sizeof(t_epdestroy_tests[0]);
