/*
 * t_connfail.c - connects that cannot succeed end with a CONNECT event
 * carrying a clear status within the connect timeout (plus F_SLACK_MS), or
 * with a clear status from cci_connect itself; never with a hang.
 */
#include "fault.h"

#include "server.h"

#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define CONNECT_TIMEOUT_MS 1000u

/* A failed connect's status must say why: refused, timed out, no such
 * address, or the peer went away. */
static int clear_failure(int st)
{
	return st == CCI_ECONNREFUSED || st == CCI_ETIMEDOUT || st == CCI_EADDRNOTAVAIL ||
	       st == CCI_ERR_DISCONNECTED || st == CCI_EINVAL;
}

/* Connect to uri with a 1 s timeout; the attempt must fail clearly, in
 * time.  Returns the status; *ms the time it took. */
static int connect_fails(cci_endpoint_t *ep, const char *uri, uint64_t *ms)
{
	struct timeval tv = { .tv_sec = CONNECT_TIMEOUT_MS / 1000,
	                      .tv_usec = (CONNECT_TIMEOUT_MS % 1000) * 1000 };
	uint64_t t0 = h_now_ms();
	cci_event_t *ev;
	int rc, st;

	rc = cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, (void *)uri, 0, &tv);
	if (rc != CCI_SUCCESS) {
		*ms = h_now_ms() - t0;
		CHECKF(clear_failure(rc), "cci_connect(%s) returned %s", uri, h_status_name(rc));
		return rc;
	}
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, CONNECT_TIMEOUT_MS + F_SLACK_MS);
	*ms = h_now_ms() - t0;
	if (!CHECKF(ev != NULL, "no CONNECT event for %s within %u ms", uri,
	            CONNECT_TIMEOUT_MS + F_SLACK_MS))
		return CCI_ERROR;
	st = ev->connect.status;
	CHECKF(st != CCI_SUCCESS, "the connect to %s succeeded", uri);
	CHECKF(clear_failure(st), "the connect to %s failed with %s", uri, h_status_name(st));
	CHECK(ev->connect.context == uri);
	CHECK(st != CCI_SUCCESS ? ev->connect.connection == NULL : 1);
	if (st == CCI_SUCCESS)
		CHECK_RC(cci_disconnect(ev->connect.connection), CCI_SUCCESS);
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	return st;
}

static void report(const char *what, const char *uri, int st, uint64_t ms)
{
	h_note("%s (%s): %s after %llu ms", what, uri, h_status_name(st),
	       (unsigned long long)ms);
}

static void destroyed_endpoint(void)
{
	cci_device_t *dev = h_setup();
	cci_endpoint_t *gone = h_endpoint(dev, NULL), *ep = h_endpoint(dev, NULL);
	char *uri = h_uri(gone);
	uint64_t ms;
	int st;

	CHECK_RC(cci_destroy_endpoint(gone), CCI_SUCCESS);
	st = connect_fails(ep, uri, &ms);
	report("an endpoint destroyed in a live process", uri, st, ms);
	free(uri);
	h_teardown(ep);
}

/* A server that does not answer: killed (arg 1) or frozen (arg 0), in both
 * cases between two library calls (docs/reliability.md). */
static void silent_process(void)
{
	const int killed = *(const int *)h_current->arg;
	struct srv s;
	struct srv_opts o = { 0 };
	cci_endpoint_t *ep;
	uint64_t ms;
	int st;

	srv_start(&s, &o);
	srv_freeze(&s);
	/* Opened while the server still holds its address: one opened after
	 * the kill could be given that address (a port the kernel freed)
	 * and would connect to itself. */
	ep = h_endpoint(h_setup(), NULL);
	if (killed)
		h_peer_kill(&s.peer);
	st = connect_fails(ep, s.uri, &ms);
	if (!killed) {
		CHECKF(st == CCI_ETIMEDOUT, "a connect to a frozen process ended with %s",
		       h_status_name(st));
		CHECKF(ms >= CONNECT_TIMEOUT_MS * 9 / 10, "the 1 s connect timeout fired after "
		       "%llu ms", (unsigned long long)ms);
	}
	report(killed ? "the endpoint of a killed process" : "a frozen process (1 s timeout)",
	       s.uri, st, ms);
	h_peer_kill(&s.peer);
	h_teardown(ep);
}

/* Addresses of this transport that name nobody or nothing: made from the
 * endpoint's own URI by keeping its scheme (and ofi's provider). */
static int bogus_uris(const char *own, char out[][160], int max)
{
	const char *tails[] = { "", "%%%", "127.0.0.1:1", "[::1]:1", "/nonexistent/1/0",
	                        "fi_shm://999999999:0:0", "0x00", "x/y/z/w" };
	const char *p = strstr(own, "://");
	int n = 0, plen;

	if (!p)
		return 0;
	plen = (int)(p - own) + 3;
	if (strncmp(own, "ofi://", 6) == 0) { /* keep the provider */
		const char *slash = strchr(own + 6, '/');
		plen = slash ? (int)(slash - own) + 1 : plen;
	}
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]) && n < max; i++)
		snprintf(out[n++], 160, "%.*s%s", plen, own, tails[i]);
	return n;
}

static void bogus_addresses(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	char *own = h_uri(ep), uris[8][160];
	int n = bogus_uris(own, uris, 8);

	REQUIRE(n > 0);
	for (int i = 0; i < n; i++) {
		uint64_t ms;
		int st = connect_fails(ep, uris[i], &ms);

		report("a bogus address", uris[i], st, ms);
	}
	free(own);
	h_teardown(ep);
}

/* A failure the transport can know of at once: nobody is there. */
static int refusal(int st)
{
	return st == CCI_ECONNREFUSED || st == CCI_ETIMEDOUT;
}

/* A server that exited (cci_finalize, then exit) or was killed (arg 1). */
static void gone_server(struct srv *s, int killed)
{
	struct srv_opts o = { 0 };

	srv_start(s, &o);
	if (killed)
		h_peer_kill(&s->peer);
	else
		srv_stop(s, NULL);
}

/* CCI 2's pingpong retries a connect that failed: twenty connects to a
 * server that exited, each with a 1 s timeout, each answered in time. */
static void exited_server_retries(void)
{
	struct srv s;
	cci_endpoint_t *ep;
	uint64_t ms, worst = 0;
	int st = CCI_SUCCESS;

	gone_server(&s, 0);
	ep = h_endpoint(h_setup(), NULL);
	for (int i = 0; i < 20; i++) {
		st = connect_fails(ep, s.uri, &ms);
		CHECKF(refusal(st), "connect %d of 20 to an exited server gave %s", i + 1,
		       h_status_name(st));
		worst = ms > worst ? ms : worst;
	}
	h_note("20 connects to an exited server (%s): %s, the slowest after %llu ms", s.uri,
	       h_status_name(st), (unsigned long long)worst);
	h_teardown(ep);
}

/* With no connect timeout, a transport that can know nobody is there says
 * so at once (F_SLACK_MS): an exited server (arg 0) or a killed one (1). */
static void nobody_answers_without_timeout(void)
{
	const int killed = *(const int *)h_current->arg;
	struct srv s;
	cci_endpoint_t *ep;
	cci_event_t *ev;
	uint64_t t0;
	int rc;

	gone_server(&s, killed);
	ep = h_endpoint(h_setup(), NULL);
	t0 = h_now_ms();
	rc = cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	if (rc == CCI_SUCCESS) {
		ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, F_SLACK_MS);
		rc = CCI_ERROR; /* no event: reported as such below */
		if (CHECKF(ev != NULL, "no CONNECT event within %u ms for a connect without "
		           "timeout to %s", F_SLACK_MS, s.uri)) {
			rc = ev->connect.status;
			CHECK(ev->connect.connection == NULL);
			CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
		}
	}
	CHECKF(rc == CCI_ECONNREFUSED, "a connect without timeout to the endpoint of %s "
	       "process gave %s", killed ? "a killed" : "an exited", h_status_name(rc));
	h_note("a connect without timeout to %s: %s after %llu ms", s.uri, h_status_name(rc),
	       (unsigned long long)(h_now_ms() - t0));
	h_teardown(ep);
}

const struct h_test t_connfail_tests[] = {
	{ "a connect to an endpoint destroyed in a live process fails with a clear status "
	  "within the timeout", destroyed_endpoint, H_NEEDS_DEVICE, 30 },
	{ "a connect to the endpoint of a killed process fails with a clear status within "
	  "the timeout", silent_process, H_NEEDS_DEVICE, 30, &(const int){ 1 } },
	{ "a connect to a frozen process fails with CCI_ETIMEDOUT at its 1 s timeout",
	  silent_process, H_NEEDS_DEVICE, 30, &(const int){ 0 } },
	{ "connects to bogus addresses of the transport fail with a clear status within the "
	  "timeout", bogus_addresses, H_NEEDS_DEVICE, 60 },
	{ "twenty connects in a row to a server that exited each fail with CCI_ECONNREFUSED "
	  "or CCI_ETIMEDOUT within the 1 s timeout", exited_server_retries, H_NEEDS_DEVICE, 60 },
	{ "a connect without timeout to a server that exited is refused at once",
	  nobody_answers_without_timeout, H_NEEDS_DEVICE, 30, &(const int){ 0 } },
	{ "a connect without timeout to a server that was killed is refused at once",
	  nobody_answers_without_timeout, H_NEEDS_DEVICE, 30, &(const int){ 1 } },
};
const size_t t_connfail_count = sizeof(t_connfail_tests) / sizeof(t_connfail_tests[0]);
