/*
 * t_progress.c - who moves an endpoint: with progress = manual (an ini
 * key of every transport) creating it starts no thread, and its timers
 * still run, from the application's calls alone; with progress = auto
 * the same count sees the transport's thread.
 */
#include "tests.h"
#include "server.h"

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
	srv_stop(&s, NULL);
	h_teardown(ep);
}

const struct h_test t_progress_tests[] = {
	{ "progress = manual starts no thread and a connect still times out from "
	  "cci_get_event; progress = auto starts one",
	  manual_means_no_thread_and_timers_still_fire, H_NEEDS_DEVICE, 0 },
};
const size_t t_progress_count = sizeof(t_progress_tests) / sizeof(t_progress_tests[0]);
