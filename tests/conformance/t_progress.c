/*
 * t_progress.c - who moves an endpoint: with progress = manual (an ini
 * key of every transport) creating it starts no thread, and its timers
 * still run, from the application's calls alone; with progress = auto
 * the same count sees the transport's thread.  A receiver that sleeps on
 * its armed OS handle between events (as CCI 2's blocking programs do)
 * takes a long stream whole, each message once and in order, and the
 * sender sees every send complete.
 */
#include "tests.h"
#include "server.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_MSGS 3000u

/* A connect to a server that holds the request (another process) times
 * out after 300 ms: the timer fires from cci_get_event alone when no
 * thread of the transport's runs. */
static void expect_connect_timeout(cci_endpoint_t *ep, const char *uri)
{
	struct timeval tv = { .tv_usec = 300000 };
	cci_event_t *ev;

	REQUIRE_RC(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, h_ctx(1), 0, &tv), CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 8000);
	if (ev) {
		CHECK_RC(ev->connect.status, CCI_ETIMEDOUT);
		CHECK(ev->connect.connection == NULL && ev->connect.context == h_ctx(1));
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
}

static void manual_means_no_thread_and_timers_still_fire(void)
{
	cci_device_t *dev = h_setup();
	int manual = h_device_manual(dev), before, after;
	struct srv_opts o = { .action = SRV_IGNORE };
	struct srv s;
	cci_endpoint_t *ep;

	srv_start(&s, &o); /* its process first: it counts no thread of ours */
	before = h_count_threads();
	REQUIRE(before > 0);
	ep = h_endpoint(dev, NULL);
	after = h_count_threads();
	if (manual)
		CHECKF(after == before, "progress = manual: %d threads before the endpoint, %d after",
		       before, after);
	else
		CHECKF(after > before, "progress = auto: no thread started (%d before and after)",
		       before);
	expect_connect_timeout(ep, s.uri);
	if (manual)
		CHECKF(h_count_threads() == before, "progress = manual: %d threads after a connect, "
		       "%d before the endpoint", h_count_threads(), before);
	srv_stop_and_teardown(&s, NULL, ep);
}

struct sleeper_result {
	uint32_t next;          /* messages received in order */
	uint32_t out_of_order;
};

/* The receiver: accept, then take every message, arming the OS handle
 * and sleeping on it whenever no event is ready (30 s at most). */
static void sleeper_role(int rfd, int wfd, const void *arg)
{
	struct sleeper_result r = { 0, 0 };
	uint64_t stop = h_now_ms() + 30000;
	cci_os_handle_t fd = -1;
	cci_endpoint_t *ep;
	char *uri;

	(void)rfd;
	(void)arg;
	h_role_prefix = "[receiver] ";
	ep = h_endpoint(h_setup(), &fd);
	REQUIRE(fd >= 0);
	uri = h_uri(ep);
	h_msg_send(wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	while (r.next < STREAM_MSGS && h_now_ms() < stop) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		cci_event_t *ev = NULL;
		uint32_t seq;

		if (cci_get_event(ep, &ev) != CCI_SUCCESS) {
			int rc = cci_arm_os_handle(ep, 0);

			if (CHECK_RC2(rc, CCI_SUCCESS, CCI_EAGAIN) && rc == CCI_SUCCESS)
				poll(&pfd, 1, 200); /* CCI_EAGAIN: an event came meanwhile */
			continue;
		}
		if (ev->type == CCI_EVENT_CONNECT_REQUEST) {
			CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
		} else if (ev->type == CCI_EVENT_RECV && ev->recv.len == sizeof(seq)) {
			memcpy(&seq, ev->recv.ptr, sizeof(seq));
			if (seq == r.next)
				r.next++;
			else
				r.out_of_order++;
		}
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	h_msg_send(wfd, &r, sizeof(r));
	h_teardown(ep);
}

static void sleeping_receiver_takes_a_long_stream(void)
{
	struct sleeper_result r = { 0, 0 };
	struct h_sendctr ctr;
	struct h_peer peer;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	char uri[512];
	int n;

	h_spawn(&peer, sleeper_role, NULL);
	n = h_msg_recv(peer.rfd, uri, sizeof(uri) - 1, 30000);
	REQUIRE(n > 0);
	uri[n] = '\0';
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	h_sendctr_init(&ctr, STREAM_MSGS);
	for (uint32_t i = 0; i < STREAM_MSGS; i++) {
		int rc = h_send(ep, c, &i, sizeof(i), h_ctx(i), 0, &ctr);

		if (!CHECKF(rc == CCI_SUCCESS, "message %u of %u refused: %s (the receiver arms "
		            "its handle and sleeps between events)", i, STREAM_MSGS,
		            cci_strerror(ep, rc)))
			break;
	}
	h_drain(ep, &ctr, STREAM_MSGS, 30000);
	CHECKF(ctr.ok == STREAM_MSGS, "%llu of %u sends completed, %llu failed",
	       (unsigned long long)ctr.ok, STREAM_MSGS, (unsigned long long)ctr.err);
	CHECK(h_msg_recv(peer.rfd, &r, sizeof(r), 40000) == (int)sizeof(r));
	CHECKF(r.next == STREAM_MSGS && r.out_of_order == 0, "the receiver took %u of %u "
	       "messages in order, %u out of order", r.next, STREAM_MSGS, r.out_of_order);
	CHECK_RC(cci_disconnect(c), CCI_SUCCESS);
	h_sendctr_free(&ctr);
	h_teardown(ep);
	h_peer_finish(&peer, 20000);
}

const struct h_test t_progress_tests[] = {
	{ "progress = manual starts no thread and a connect still times out from "
	  "cci_get_event; progress = auto starts one",
	  manual_means_no_thread_and_timers_still_fire, H_NEEDS_DEVICE, 0 },
	{ "a receiver that arms its OS handle and sleeps on it between events takes 3000 "
	  "RO messages, each once and in order",
	  sleeping_receiver_takes_a_long_stream, H_NEEDS_DEVICE, 0 },
};
const size_t t_progress_count = sizeof(t_progress_tests) / sizeof(t_progress_tests[0]);
