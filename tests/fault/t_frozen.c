/*
 * t_frozen.c - a peer stopped with SIGSTOP.  Frozen past the keepalive
 * timeout, the connection raises KEEPALIVE_TIMEDOUT once and stays open;
 * frozen for less, nothing is raised.  Either way, once the peer runs
 * again (SIGCONT) every message sent meanwhile arrives, once and in order.
 */
#include "fault.h"

#include "proto.h"
#include "server.h"

#include <sched.h>
#include <signal.h>
#include <string.h>

#define BEFORE 10u          /* messages before the freeze */
#define DURING 20u          /* messages sent to the frozen peer */

struct freeze {
	uint32_t ka_us;     /* CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT */
	unsigned stop_ms;   /* how long the peer stays stopped */
};

/* Pump for ms, counting KEEPALIVE_TIMEDOUT events of c; *first gets the
 * time of the first after t0. */
static unsigned count_keepalives(cci_endpoint_t *ep, cci_connection_t *c, struct h_sendctr *ctr,
                                 unsigned ms, uint64_t t0, uint64_t *first)
{
	unsigned n = 0;

	for (uint64_t stop = h_now_ms() + ms; h_now_ms() < stop;) {
		cci_event_t *ev = NULL;

		if (cci_get_event(ep, &ev) != CCI_SUCCESS) {
			sched_yield();
			continue;
		}
		if (ev->type == CCI_EVENT_KEEPALIVE_TIMEDOUT) {
			CHECK(ev->keepalive.connection == c);
			if (!n++)
				*first = h_now_ms() - t0;
			CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
		} else {
			h_sendctr_event(ctr, ev);
		}
	}
	return n;
}

static void frozen_peer(void)
{
	const struct freeze *z = h_current->arg;
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct h_sendctr ctr;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint8_t msg[64];
	uint64_t t0, first = 0;
	unsigned ka_ms = z->ka_us / 1000, n;
	int past = z->stop_ms > ka_ms;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT, &z->ka_us), CCI_SUCCESS);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	for (uint32_t i = 0; i < BEFORE; i++) {
		proto_build(msg, sizeof(msg), 0, i, PROTO_DATA);
		CHECK_RC(cci_send(c, msg, sizeof(msg), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	}
	h_sendctr_init(&ctr, DURING);
	srv_freeze(&s);
	t0 = h_now_ms();
	for (uint32_t i = 0; i < DURING; i++) {
		proto_build(msg, sizeof(msg), 0, BEFORE + i, PROTO_DATA);
		CHECK_RC(h_send(ep, c, msg, sizeof(msg), h_ctx(i), 0, &ctr), CCI_SUCCESS);
	}
	n = count_keepalives(ep, c, &ctr, z->stop_ms, t0, &first);
	kill(s.peer.pid, SIGCONT);
	n += count_keepalives(ep, c, &ctr, past ? 1500 : ka_ms + 500, t0, &first);
	if (past) {
		CHECKF(n == 1, "%u KEEPALIVE_TIMEDOUT events for a peer frozen %u ms with a "
		       "%u ms keepalive", n, z->stop_ms, ka_ms);
		CHECKF(first >= ka_ms * 9 / 10 && first <= ka_ms + F_SLACK_MS, "KEEPALIVE_TIMEDOUT "
		       "%llu ms after the freeze, keepalive %u ms", (unsigned long long)first, ka_ms);
		h_note("KEEPALIVE_TIMEDOUT %llu ms after the freeze (keepalive %u ms)",
		       (unsigned long long)first, ka_ms);
	} else {
		CHECKF(n == 0, "KEEPALIVE_TIMEDOUT for a peer frozen %u ms with a %u ms keepalive",
		       z->stop_ms, ka_ms);
	}
	h_drain(ep, &ctr, DURING, 10000);
	CHECKF(ctr.ok == DURING && ctr.err == 0 && ctr.dup == 0, "of %u sends to the frozen "
	       "peer %llu completed, %llu failed, %llu twice", DURING,
	       (unsigned long long)ctr.ok, (unsigned long long)ctr.err,
	       (unsigned long long)ctr.dup);
	srv_stop(&s, &st);
	CHECKF(st.recvs == BEFORE + DURING && st.order_errors == 0 && st.dups == 0 &&
	       st.corrupt == 0, "the server received %llu of %u messages (%llu out of order, "
	       "%llu twice)", (unsigned long long)st.recvs, BEFORE + DURING,
	       (unsigned long long)st.order_errors, (unsigned long long)st.dups);
	h_sendctr_free(&ctr);
	h_teardown(ep);
}

static const struct freeze past_ka = { 1000000, 2500 }, within_ka = { 2000000, 500 };

const struct h_test t_frozen_tests[] = {
	{ "a peer frozen 2.5 s with a 1 s keepalive raises KEEPALIVE_TIMEDOUT once; after "
	  "SIGCONT every message sent meanwhile arrives once, in order", frozen_peer,
	  H_NEEDS_DEVICE, 40, &past_ka },
	{ "a peer frozen 0.5 s with a 2 s keepalive raises nothing; after SIGCONT every "
	  "message sent meanwhile arrives once, in order", frozen_peer, H_NEEDS_DEVICE, 40,
	  &within_ka },
};
const size_t t_frozen_count = sizeof(t_frozen_tests) / sizeof(t_frozen_tests[0]);
