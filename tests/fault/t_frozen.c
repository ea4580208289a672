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
#include <stdlib.h>
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

/* ---- the send timeout ------------------------------------------------------ */

#define ST_TIMEOUT_MS 1000u
#define ST_SENDS_MAX 20000u
#define ST_FILL_MS 500u
#define ST_LEN_MAX 65536u

struct st_run {
	struct h_sendctr ctr;
	uint64_t first_fail_ms;  /* since the freeze */
	uint32_t sent;
};

/* Send to the frozen peer until the library refuses (CCI_ENOBUFS) or
 * ST_FILL_MS pass, taking completions as they come. */
static void st_fill(cci_endpoint_t *ep, cci_connection_t *c, struct st_run *r, uint64_t t0)
{
	uint32_t len = c->max_send_size < ST_LEN_MAX ? c->max_send_size : ST_LEN_MAX;
	uint8_t *msg = malloc(len);

	REQUIRE(msg != NULL);
	while (r->sent < ST_SENDS_MAX && h_now_ms() < t0 + ST_FILL_MS) {
		int rc;

		proto_build(msg, len, 0, r->sent, PROTO_DATA);
		rc = cci_send(c, msg, len, h_ctx(r->sent), 0);
		if (rc == CCI_ENOBUFS || !CHECK_RC(rc, CCI_SUCCESS))
			break;
		r->sent++;
		h_pump(ep, &r->ctr);
	}
	free(msg);
}

/* Take completions until every send has one, noting when the first
 * failure came. */
static void st_drain(cci_endpoint_t *ep, struct st_run *r, uint64_t t0, unsigned ms)
{
	for (uint64_t stop = h_now_ms() + ms; r->ctr.ok + r->ctr.err < r->sent &&
	     h_now_ms() < stop;) {
		uint64_t err = r->ctr.err;
		cci_event_t *ev;

		if (cci_get_event(ep, &ev) != CCI_SUCCESS) {
			sched_yield();
			continue;
		}
		h_sendctr_event(&r->ctr, ev);
		if (!err && r->ctr.err)
			r->first_fail_ms = h_now_ms() - t0;
	}
}

/* A send after the break: refused at once, or completed as failed. */
static void st_after_break(cci_endpoint_t *ep, cci_connection_t *c)
{
	uint8_t msg[64];
	int rc;

	proto_build(msg, sizeof(msg), 0, ST_SENDS_MAX, PROTO_DATA);
	rc = cci_send(c, msg, sizeof(msg), NULL, 0);
	if (rc == CCI_SUCCESS) {
		cci_event_t *ev = EXPECT_EVENT(ep, CCI_EVENT_SEND, 5000);

		if (ev) {
			rc = ev->send.status;
			CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
		}
	}
	CHECKF(rc == CCI_ERR_DISCONNECTED || rc == CCI_ETIMEDOUT, "a send on the connection the "
	       "send timeout broke gave %s", h_status_name(rc));
}

static void send_timeout_statuses(void)
{
	const uint32_t to_us = ST_TIMEOUT_MS * 1000;
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct st_run r = { .sent = 0 };
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint64_t t0;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &to_us), CCI_SUCCESS);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	h_sendctr_init(&r.ctr, ST_SENDS_MAX);
	srv_freeze(&s);
	t0 = h_now_ms();
	st_fill(ep, c, &r, t0);
	st_drain(ep, &r, t0, ST_FILL_MS + ST_TIMEOUT_MS + F_SLACK_MS);
	h_note("%u sends to a frozen peer: %llu delivered, %llu failed, the first failure (%s) "
	       "%llu ms after the freeze", r.sent, (unsigned long long)r.ctr.ok,
	       (unsigned long long)r.ctr.err, h_status_name(r.ctr.first_err),
	       (unsigned long long)r.first_fail_ms);
	CHECKF(r.ctr.ok + r.ctr.err == r.sent && r.ctr.dup == 0 && r.ctr.foreign == 0,
	       "of %u sends %llu completed, %llu failed, %llu twice", r.sent,
	       (unsigned long long)r.ctr.ok, (unsigned long long)r.ctr.err,
	       (unsigned long long)r.ctr.dup);
	if (CHECKF(r.ctr.err > 0, "no send failed in the 1 s send timeout")) {
		CHECKF(r.ctr.first_err == CCI_ETIMEDOUT, "the first send to time out completed "
		       "with %s", h_status_name(r.ctr.first_err));
		CHECKF(r.first_fail_ms >= ST_TIMEOUT_MS * 9 / 10 &&
		       r.first_fail_ms <= ST_FILL_MS + ST_TIMEOUT_MS + F_SLACK_MS,
		       "the first failure came %llu ms after the freeze, send timeout %u ms",
		       (unsigned long long)r.first_fail_ms, ST_TIMEOUT_MS);
	}
	for (uint32_t i = 0; i < r.sent; i++) {
		int seen = r.ctr.status_seen[i] - 1;

		if (!CHECKF(seen == CCI_SUCCESS || seen == CCI_ETIMEDOUT ||
		            seen == CCI_ERR_DISCONNECTED, "send %u completed with %s", i,
		            h_status_name(seen)))
			break;
	}
	st_after_break(ep, c);
	kill(s.peer.pid, SIGCONT);
	srv_stop(&s, &st);
	CHECKF(st.order_errors == 0 && st.dups == 0 && st.corrupt == 0, "the server received "
	       "%llu messages, %llu out of order, %llu twice, %llu corrupt",
	       (unsigned long long)st.recvs, (unsigned long long)st.order_errors,
	       (unsigned long long)st.dups, (unsigned long long)st.corrupt);
	h_sendctr_free(&r.ctr);
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
	{ "a send a frozen peer cannot take within the 1 s send timeout fails with "
	  "CCI_ETIMEDOUT, the connection's later sends with CCI_ETIMEDOUT or "
	  "CCI_ERR_DISCONNECTED", send_timeout_statuses, H_NEEDS_DEVICE, 40 },
};
const size_t t_frozen_count = sizeof(t_frozen_tests) / sizeof(t_frozen_tests[0]);
