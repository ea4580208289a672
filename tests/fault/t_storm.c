/*
 * t_storm.c - any number of concurrent connects: one client endpoint
 * opens thousands of connections to one server endpoint, keeping up to a
 * window of them outstanding, as a runtime wiring up to a server does.
 * A full listen backlog or an accept loop that falls behind means wait,
 * never a failure, a stall or a wrong event; every connection then works.
 * Then each gets a keepalive and the server freezes: every one of the
 * 2,000 raises its KEEPALIVE_TIMEDOUT once, on time (the tick visits the
 * connections whose timers are due, plugins/common/conn_due.h: none may
 * be forgotten).
 */
#include "fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define STORM_CONNS 2000u
#define STORM_WINDOW 256u
#define STORM_TIMEOUT_S 60 /* each connect's; the whole storm must end well before */
#define STORM_RUN_MS 100000u
#define STORM_KA_US 1000000u /* the keepalive set on every connection */
#define STORM_KA_LATE_MS 15000u /* how late past it the last event may come (loaded, sanitized) */

/* Each process opens at least a descriptor per connection: make room,
 * as a server that expects thousands of peers does. */
static void raise_fd_limit(rlim_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = want <= rl.rlim_max ? want : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/* The server: accept every request, echo every message, until the pipe
 * says stop; then report how many connections it accepted. */
static void storm_server(int rfd, int wfd, const void *arg)
{
	uint64_t accepts = 0, deadline = h_now_ms() + STORM_RUN_MS + 20000;
	cci_endpoint_t *ep;
	cci_event_t *ev;
	char *uri;

	(void)arg;
	raise_fd_limit(4 * STORM_CONNS + 256);
	ep = h_endpoint(h_setup(), NULL);
	uri = h_uri(ep);
	h_msg_send(wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	while (!h_msg_ready(rfd) && h_now_ms() < deadline) {
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST) {
			CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
		} else if (ev->type == CCI_EVENT_ACCEPT) {
			CHECK_RC(ev->accept.status, CCI_SUCCESS);
			accepts += ev->accept.status == CCI_SUCCESS;
		} else if (ev->type == CCI_EVENT_RECV) {
			CHECK_RC(cci_send(ev->recv.connection, ev->recv.ptr, ev->recv.len, NULL,
			                  CCI_FLAG_SILENT), CCI_SUCCESS);
		}
		cci_return_event(ev);
	}
	h_msg_send(wfd, &accepts, sizeof(accepts));
	h_teardown(ep);
}

struct storm {
	cci_endpoint_t *ep;
	cci_connection_t **conns;
	uint32_t issued, opened, failed, outstanding;
	int first_fail;
};

static void storm_take(struct storm *s, cci_event_t *ev)
{
	uintptr_t i = (uintptr_t)ev->connect.context;

	if (!CHECKF(ev->type == CCI_EVENT_CONNECT, "a %s event during the storm",
	            cci_event_type_str(ev->type))) {
		cci_return_event(ev);
		return;
	}
	s->outstanding--;
	if (ev->connect.status == CCI_SUCCESS && CHECK(i < STORM_CONNS && !s->conns[i])) {
		s->conns[i] = ev->connect.connection;
		s->opened++;
	} else if (ev->connect.status != CCI_SUCCESS) {
		if (!s->failed++)
			s->first_fail = ev->connect.status;
	}
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

/* Open STORM_CONNS connections, at most STORM_WINDOW outstanding. */
static void storm_run(struct storm *s, const char *uri)
{
	struct timeval tv = { .tv_sec = STORM_TIMEOUT_S };
	uint64_t deadline = h_now_ms() + STORM_RUN_MS;
	cci_event_t *ev;

	while (s->opened + s->failed < STORM_CONNS && h_now_ms() < deadline) {
		while (s->issued < STORM_CONNS && s->outstanding < STORM_WINDOW) {
			int rc = cci_connect(s->ep, uri, NULL, 0, CCI_CONN_ATTR_RO,
			                     (void *)(uintptr_t)s->issued, 0, &tv);

			if (!CHECK_RC(rc, CCI_SUCCESS))
				return;
			s->issued++;
			s->outstanding++;
		}
		if (cci_get_event(s->ep, &ev) == CCI_SUCCESS)
			storm_take(s, ev);
	}
}

/* A message on a connection comes back from the echoing server. */
static void storm_echo(struct storm *s, uint32_t i)
{
	uint32_t tag = i;
	cci_event_t *ev;

	if (!s->conns[i])
		return;
	CHECK_RC(cci_send(s->conns[i], &tag, sizeof(tag), NULL, CCI_FLAG_SILENT), CCI_SUCCESS);
	ev = EXPECT_EVENT(s->ep, CCI_EVENT_RECV, 10000);
	if (!ev)
		return;
	CHECKF(ev->recv.connection == s->conns[i] && ev->recv.len == sizeof(tag) &&
	       memcmp(ev->recv.ptr, &tag, sizeof(tag)) == 0,
	       "the echo on connection %u came back wrong", i);
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

/* Every connection's keepalive expires once while the server is frozen:
 * STORM_CONNS events, one per connection, none before the period. */
static void storm_keepalive(struct storm *s, const struct h_peer *peer)
{
	uint32_t ka = STORM_KA_US, fired = 0, twice = 0, early = 0;
	uint8_t *seen = calloc(STORM_CONNS, 1);
	uint64_t t0 = h_now_ms(), deadline, last = 0;
	cci_event_t *ev;

	REQUIRE(seen != NULL);
	for (uint32_t i = 0; i < STORM_CONNS; i++)
		if (s->conns[i])
			CHECK_RC(cci_set_opt(s->conns[i], CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &ka),
			         CCI_SUCCESS);
	kill(peer->pid, SIGSTOP);
	deadline = t0 + STORM_KA_US / 1000 + STORM_KA_LATE_MS;
	while (fired < s->opened && h_now_ms() < deadline) {
		uintptr_t i;
		if (cci_get_event(s->ep, &ev) != CCI_SUCCESS)
			continue;
		if (CHECKF(ev->type == CCI_EVENT_KEEPALIVE_TIMEDOUT, "a %s event while the server "
		           "was frozen", cci_event_type_str(ev->type))) {
			i = (uintptr_t)ev->keepalive.connection->context;
			fired++;
			last = h_now_ms();
			early += last < t0 + STORM_KA_US / 1000;
			if (i < STORM_CONNS)
				twice += seen[i]++ != 0;
		}
		cci_return_event(ev);
	}
	kill(peer->pid, SIGCONT);
	h_note("keepalive %u ms on %u connections, server frozen: %u KEEPALIVE_TIMEDOUT, the "
	       "last %llu ms after the set", STORM_KA_US / 1000, s->opened, fired,
	       (unsigned long long)(last ? last - t0 : 0));
	CHECKF(fired == s->opened, "%u of %u connections raised KEEPALIVE_TIMEDOUT", fired,
	       s->opened);
	CHECKF(twice == 0 && early == 0, "%u raised it twice, %u before the period", twice,
	       early);
	EXPECT_QUIET(s->ep, 100); /* disarmed: no second one */
	free(seen);
}

static void connect_storm(void)
{
	struct storm s = { 0 };
	struct h_peer peer;
	char uri[512];
	uint64_t t0, ms, accepts = 0;

	h_spawn(&peer, storm_server, NULL);
	REQUIRE(h_msg_recv(peer.rfd, uri, sizeof(uri), 10000) > 0);
	raise_fd_limit(4 * STORM_CONNS + 256);
	s.ep = h_endpoint(h_setup(), NULL);
	s.conns = calloc(STORM_CONNS, sizeof(*s.conns));
	REQUIRE(s.conns != NULL);
	t0 = h_now_ms();
	storm_run(&s, uri);
	ms = h_now_ms() - t0;
	h_note("%u connects, %u outstanding at most: %u opened, %u failed in %llu ms "
	       "(%.0f/s)", STORM_CONNS, STORM_WINDOW, s.opened, s.failed,
	       (unsigned long long)ms, ms ? s.opened * 1000.0 / (double)ms : 0.0);
	CHECKF(s.opened == STORM_CONNS, "%u of %u connects succeeded, %u failed (the first "
	       "with %s), %u outstanding when the storm was given up", s.opened, STORM_CONNS,
	       s.failed, h_status_name(s.first_fail), s.outstanding);
	storm_echo(&s, 0);
	storm_echo(&s, STORM_CONNS / 2);
	storm_echo(&s, STORM_CONNS - 1);
	EXPECT_QUIET(s.ep, 100);
	if (s.opened == STORM_CONNS)
		storm_keepalive(&s, &peer);
	h_msg_send(peer.wfd, "q", 1);
	if (CHECKF(h_msg_recv(peer.rfd, &accepts, sizeof(accepts), 20000) == (int)sizeof(accepts),
	           "the server did not say how many connections it accepted"))
		CHECKF(accepts == s.opened, "the server accepted %llu connections, the client "
		       "opened %u", (unsigned long long)accepts, s.opened);
	h_peer_finish(&peer, 30000);
	free(s.conns);
	h_teardown(s.ep);
}

const struct h_test t_storm_tests[] = {
	{ "2,000 connects from one endpoint to one server, 256 outstanding at a time, all "
	  "succeed and every connection carries messages; with the server frozen, each raises "
	  "its keepalive once", connect_storm, H_NEEDS_DEVICE, 150 },
};
const size_t t_storm_count = sizeof(t_storm_tests) / sizeof(t_storm_tests[0]);
