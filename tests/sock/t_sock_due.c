/*
 * t_sock_due.c - the tick visits only the connections whose timers are
 * due (the endpoint's due heap): among 1,000 idle connections, each timer
 * set on one still acts, on time, and nothing happens to the others.
 *
 * Two connections go through a relay that then drops everything (a peer
 * gone silent without a word, as a frozen or unplugged one): one with a
 * keepalive, which must raise one KEEPALIVE_TIMEDOUT; one with a send
 * timeout only, which must fail its send with CCI_ETIMEDOUT.  Both
 * timeouts are set once the connection is open, when nothing else would
 * have the tick visit it.  A third, straight to a peer that answers, has
 * a keepalive that must stay quiet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sock_test.h"

#define DUE_IDLE 1000u
#define DUE_KA_US 300000u   /* the keepalives' period */
#define DUE_SEND_US 300000u /* the send timeout */
#define DUE_PROBE_LATE_MS 50u /* how late a loaded machine's tick may send a probe */
#define DUE_LATE_MS 3000u   /* later than this, a timer was not acted on: a
                             * tick ran 10 ms late 300 times over */

struct due_run {
	struct sk_pair p;
	cci_connection_t *ka, *to, *live; /* client side */
	uint32_t connected, accepted;
	uint64_t ka_ms, to_ms;            /* when each came, 0 until then */
	int ka_events, live_events, other_events, to_status;
};

/* A relay that loses nothing until its blackout. */
static const struct lossy_relay_conf clean = { .seed = 1 };

static void client_event(struct due_run *r, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_CONNECT:
		CU_ASSERT_EQUAL(ev->connect.status, CCI_SUCCESS);
		if (ev->connect.status != CCI_SUCCESS)
			break;
		r->connected++;
		if (ev->connect.context == (void *)&r->to)
			r->to = ev->connect.connection;
		else if (ev->connect.context == (void *)&r->live)
			r->live = ev->connect.connection;
		break;
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		if (ev->keepalive.connection == r->p.cc) {
			r->ka_events++;
			r->ka_ms = sk_now_ms();
		} else if (ev->keepalive.connection == r->live) {
			r->live_events++;
		} else {
			r->other_events++;
		}
		break;
	case CCI_EVENT_SEND:
		if (ev->send.connection == r->to) {
			r->to_status = ev->send.status;
			r->to_ms = sk_now_ms();
		} else {
			r->other_events++;
		}
		break;
	default:
		r->other_events++;
		break;
	}
}

static void poll_both(struct due_run *r)
{
	cci_event_t *ev;

	if (cci_get_event(r->p.srv, &ev) == CCI_SUCCESS) {
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
		if (ev->type == CCI_EVENT_ACCEPT && ev->accept.status == CCI_SUCCESS)
			r->accepted++;
		cci_return_event(ev);
	}
	if (cci_get_event(r->p.cli, &ev) == CCI_SUCCESS) {
		client_event(r, ev);
		cci_return_event(ev);
	}
}

/* The idle connections, the one with a send timeout (through the relay)
 * and the live one; all open, or a failed assertion. */
static int due_connect(struct due_run *r)
{
	struct timeval tv = { 20, 0 };
	char direct[64], relayed[64];
	uint64_t stop = sk_now_ms() + 20000;

	snprintf(direct, sizeof(direct), "sock://127.0.0.1:%u", r->p.srv_port);
	snprintf(relayed, sizeof(relayed), "sock://127.0.0.1:%u",
	         lossy_relay_port(r->p.relay, LOSSY_A));
	CU_ASSERT_EQUAL(cci_connect(r->p.cli, relayed, NULL, 0, CCI_CONN_ATTR_RO, &r->to, 0, &tv),
	                CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_connect(r->p.cli, direct, NULL, 0, CCI_CONN_ATTR_RO, &r->live, 0, &tv),
	                CCI_SUCCESS);
	for (uint32_t i = 0; i < DUE_IDLE; i++)
		if (cci_connect(r->p.cli, direct, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &tv) !=
		    CCI_SUCCESS) {
			CU_FAIL("cci_connect of an idle connection failed");
			return -1;
		}
	while ((r->connected < DUE_IDLE + 2 || r->accepted < DUE_IDLE + 2) && sk_now_ms() < stop)
		poll_both(r);
	CU_ASSERT_EQUAL(r->connected, DUE_IDLE + 2);
	CU_ASSERT_EQUAL(r->accepted, DUE_IDLE + 2);
	CU_ASSERT(r->to && r->live);
	return r->connected == DUE_IDLE + 2 && r->to && r->live ? 0 : -1;
}

void t_due_timers_among_idle(void)
{
	struct due_run r;
	uint32_t ka = DUE_KA_US, to = DUE_SEND_US;
	uint64_t dark, sent, stop;

	memset(&r, 0, sizeof(r));
	if (sk_pair_open(&r.p, CCI_CONN_ATTR_RO, &clean, NULL) != 0 || due_connect(&r) != 0) {
		sk_pair_close(&r.p);
		return;
	}
	CU_ASSERT_EQUAL(cci_set_opt(r.p.cc, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &ka), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_set_opt(r.live, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &ka), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_set_opt(r.to, CCI_OPT_CONN_SEND_TIMEOUT, &to), CCI_SUCCESS);
	lossy_relay_blackout(r.p.relay, 1); /* for good */
	dark = sk_now_ms();
	CU_ASSERT_EQUAL(cci_send(r.to, "x", 1, NULL, 0), CCI_SUCCESS);
	sent = sk_now_ms();
	/* Both timers act, then a keepalive period more shows that the live
	 * connection's stays quiet and the silent one's fired once. */
	stop = dark + 10000;
	while ((!r.ka_ms || !r.to_ms) && sk_now_ms() < stop)
		poll_both(&r);
	stop = sk_now_ms() + DUE_KA_US / 1000;
	while (sk_now_ms() < stop)
		poll_both(&r);
	printf("KEEPALIVE_TIMEDOUT %lld ms after the blackout, the send failed %lld ms after it "
	       "was made ", r.ka_ms ? (long long)(r.ka_ms - dark) : -1LL,
	       r.to_ms ? (long long)(r.to_ms - sent) : -1LL);
	CU_ASSERT_EQUAL(r.ka_events, 1);
	/* Heard until a probe, which a loaded machine may send a little late. */
	CU_ASSERT(r.ka_ms + DUE_PROBE_LATE_MS >= dark + (DUE_KA_US * 3 / 4) / 1000);
	CU_ASSERT(r.ka_ms && r.ka_ms <= dark + DUE_LATE_MS);
	CU_ASSERT_EQUAL(r.to_status, CCI_ETIMEDOUT);
	CU_ASSERT(r.to_ms >= sent + DUE_SEND_US / 1000 - 10);
	CU_ASSERT(r.to_ms && r.to_ms <= sent + DUE_LATE_MS);
	CU_ASSERT_EQUAL(r.live_events, 0);
	CU_ASSERT_EQUAL(r.other_events, 0);
	sk_pair_close(&r.p);
}
