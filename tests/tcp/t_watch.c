/*
 * t_watch.c - how an endpoint finds its readable sockets.  While the
 * application polls a few connections it reads each with recv and keeps
 * them out of its epoll set; with many it asks the set; while it computes
 * the progress thread sleeps on the set.  These tests cross every one of
 * those boundaries and check that no message is lost or stuck at any of
 * them.  Both endpoints live in this process; each has its own progress
 * thread.
 */
#include <stdlib.h>
#include <string.h>

#include "tcp_test.h"

#define WATCH_CONNS 6 /* above the plugin's 4 sockets polled by recv */

struct pairs {
	cci_endpoint_t *a, *b;
	cci_connection_t *ca[WATCH_CONNS], *cb[WATCH_CONNS];
	int n; /* open pairs: ca[i] at a is connected to cb[i] at b */
};

/* Two endpoints on 127.0.0.1 in p; returns b's URI (the caller frees it). */
static char *pairs_init(struct pairs *p)
{
	cci_device_t *dev = st_init("127.0.0.1");
	char *uri;

	CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
	p->a = st_endpoint(dev);
	p->b = st_endpoint(dev);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->b);
	uri = st_uri(p->b);
	CU_ASSERT_PTR_NOT_NULL_FATAL(uri);
	return uri;
}

/* Connect a to b once; both ends, or a failed assertion. */
static int pair_open(struct pairs *p, const char *uri)
{
	int i = p->n;
	cci_event_t *ev;

	CU_ASSERT_EQUAL_FATAL(cci_connect(p->a, uri, &i, sizeof(i), CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                      CCI_SUCCESS);
	p->cb[i] = st_accept(p->b, 5000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p->cb[i]);
	ev = st_wait(p->a, CCI_EVENT_CONNECT, 5000, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	CU_ASSERT_EQUAL_FATAL(ev->connect.status, CCI_SUCCESS);
	p->ca[i] = ev->connect.connection;
	cci_return_event(ev);
	p->n++;
	return 0;
}

/* One message from a on every open pair; each arrives at b exactly once,
 * on its own connection, while b polls. */
static void each_pair_delivers(struct pairs *p, int round)
{
	int seen[WATCH_CONNS] = { 0 }, got = 0;

	for (int i = 0; i < p->n; i++) {
		int v = round * 100 + i;
		CU_ASSERT_EQUAL(cci_send(p->ca[i], &v, sizeof(v), NULL, CCI_FLAG_SILENT), CCI_SUCCESS);
	}
	for (uint64_t stop = st_now_ms() + 5000; got < p->n && st_now_ms() < stop;) {
		cci_event_t *ev;
		int v, i;
		/* a polls too, as a sender must: its acks free its send buffers */
		if (cci_get_event(p->a, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		ev = st_wait(p->b, CCI_EVENT_RECV, 1, NULL);
		if (!ev)
			continue;
		CU_ASSERT_EQUAL(ev->recv.len, sizeof(v));
		memcpy(&v, ev->recv.ptr, sizeof(v));
		i = v - round * 100;
		CU_ASSERT_FATAL(i >= 0 && i < p->n);
		CU_ASSERT_PTR_EQUAL(ev->recv.connection, p->cb[i]);
		seen[i]++;
		got++;
		cci_return_event(ev);
	}
	for (int i = 0; i < p->n; i++)
		CU_ASSERT_EQUAL(seen[i], 1);
}

static void messages_flow_as_connections_come_and_go(void)
{
	struct pairs p = { 0 };
	char *uri = pairs_init(&p);

	/* Growing: each count from 1 to 6 crosses into the epoll set once. */
	for (int k = 0; k < WATCH_CONNS; k++) {
		pair_open(&p, uri);
		each_pair_delivers(&p, k);
	}
	/* Shrinking back below the limit: the sockets leave the set. */
	while (p.n > 2) {
		p.n--;
		CU_ASSERT_EQUAL(cci_disconnect(p.ca[p.n]), CCI_SUCCESS);
		CU_ASSERT_EQUAL(cci_disconnect(p.cb[p.n]), CCI_SUCCESS);
		each_pair_delivers(&p, 10 + p.n);
	}
	/* b computes (no call for 300 ms): its thread must take the sockets it
	 * had left out of the set, or a's reliable sends are never acked. */
	st_sleep_ms(50);
	for (int i = 0; i < p.n; i++)
		CU_ASSERT_EQUAL(cci_send(p.ca[i], "x", 1, (void *)(uintptr_t)(i + 1), 0), CCI_SUCCESS);
	for (int i = 0; i < p.n; i++) {
		uint64_t t0 = st_now_ms();
		cci_event_t *ev = st_wait(p.a, CCI_EVENT_SEND, 300, NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
		CU_ASSERT_EQUAL(ev->send.status, CCI_SUCCESS);
		CU_ASSERT(st_now_ms() - t0 < 300);
		cci_return_event(ev);
	}
	/* b polls again: the messages its thread read are there, and the
	 * sockets leave the set again without losing the next round. */
	for (int i = 0; i < p.n; i++) {
		cci_event_t *ev = st_wait(p.b, CCI_EVENT_RECV, 5000, NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
		CU_ASSERT_EQUAL(ev->recv.len, 1);
		cci_return_event(ev);
	}
	/* Rounds for a few ticks (10 ms each) of b polling: back to recv. */
	for (uint64_t r = 0, stop = st_now_ms() + 60; r < 5000 && st_now_ms() < stop; r++)
		each_pair_delivers(&p, 20 + (int)(r % 50));
	free(uri);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(p.a), CCI_SUCCESS);
	st_fini(p.b);
}

/* A sender that only calls cci_send (SILENT: no events to reap), and on
 * CCI_ENOBUFS just tries again: its own calls must read the acks that free
 * its send buffers, or it spins for ever.  The receiver polls. */
#define SPIN_MSGS 5000
static void a_sender_that_never_polls_still_moves(void)
{
	struct pairs p = { 0 };
	int got = 0, sent = 0, enobufs = 0;
	char *uri = pairs_init(&p);

	CU_ASSERT_EQUAL(cci_set_opt(p.a, CCI_OPT_ENDPT_SEND_BUF_COUNT, &(uint32_t){ 16 }),
	                CCI_SUCCESS);
	pair_open(&p, uri);
	for (uint64_t stop = st_now_ms() + 10000; got < SPIN_MSGS && st_now_ms() < stop;) {
		cci_event_t *ev;
		/* A burst until the buffers run out: 16 sends take microseconds,
		 * far less than any ack's way back, so CCI_ENOBUFS comes whatever
		 * the scheduling (one send per receive would let the acks keep up). */
		while (sent < SPIN_MSGS) {
			int rc = cci_send(p.ca[0], &sent, sizeof(sent), NULL, CCI_FLAG_SILENT);
			CU_ASSERT_FATAL(rc == CCI_SUCCESS || rc == CCI_ENOBUFS);
			if (rc == CCI_ENOBUFS) {
				enobufs++;
				break;
			}
			sent++;
		}
		while (cci_get_event(p.b, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_RECV) {
				int v;
				memcpy(&v, ev->recv.ptr, sizeof(v));
				CU_ASSERT_EQUAL(v, got);
				got++;
			}
			cci_return_event(ev);
		}
	}
	CU_ASSERT_EQUAL(got, SPIN_MSGS);
	CU_ASSERT(enobufs > 0); /* the send buffers did run out on the way */
	free(uri);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(p.a), CCI_SUCCESS);
	st_fini(p.b);
}

int st_add_watch_tests(void)
{
	CU_pSuite s = CU_add_suite_with_setup_and_teardown("socket watching", NULL, NULL, NULL,
	                                                   st_teardown);

	return !s || !CU_add_test(s, "messages flow as connections come and go and the "
	                             "application polls, computes and polls again",
	                          messages_flow_as_connections_come_and_go) ||
	       !CU_add_test(s, "a sender that never polls, spinning on CCI_ENOBUFS, gets all its "
	                       "messages through",
	                    a_sender_that_never_polls_still_moves);
}
