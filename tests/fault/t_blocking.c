/*
 * t_blocking.c - the OS handle never sleeps through an event.  Both sides
 * of a ping-pong run CCI 2's blocking loop: sleep in epoll on the
 * endpoint's OS handle, then cci_get_event until CCI_EAGAIN (that call
 * arms the handle), then sleep again.  A sleep that times out while
 * cci_get_event has an event to hand out is a wake-up the handle missed;
 * the test counts them, and there must be none.
 */
#include "fault.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>

#define PING_LEN 8u
#define SLEEP_MS 1000     /* one sleep; a missed wake-up costs this much */
#define ROUNDS_DEFAULT 50000ul
#define ROUNDS_SANITIZED 10000ul
#define RUN_MS_MAX 40000u /* the rounds stop here, well within the test's limit */

struct sleeper {
	cci_endpoint_t *ep;
	int epfd;
	uint64_t sleeps, missed;
	uint32_t recvs;              /* RECV events not yet consumed */
	cci_connection_t *conn;      /* of the last RECV or CONNECT */
};

static void sleeper_open(struct sleeper *s)
{
	struct epoll_event ev = { .events = EPOLLIN };
	cci_os_handle_t fd = -1;

	memset(s, 0, sizeof(*s));
	s->ep = h_endpoint(h_setup(), &fd);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(s->epfd >= 0 && epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) == 0);
}

/* One event of the loop: RECVs and CONNECTs are noted, requests accepted,
 * everything else (SEND completions) checked and returned. */
static void sleeper_take(struct sleeper *s, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_RECV:
		CHECK(ev->recv.len == PING_LEN);
		s->conn = ev->recv.connection;
		s->recvs++;
		break;
	case CCI_EVENT_CONNECT_REQUEST:
		CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
		break;
	case CCI_EVENT_ACCEPT:
	case CCI_EVENT_CONNECT:
		CHECK_RC(ev->connect.status, CCI_SUCCESS);
		s->conn = ev->connect.connection;
		break;
	case CCI_EVENT_SEND:
		CHECK_RC(ev->send.status, CCI_SUCCESS);
		break;
	default:
		CHECKF(0, "unexpected %s", cci_event_type_str(ev->type));
	}
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

/* cci_get_event until CCI_EAGAIN; returns the events taken. */
static unsigned sleeper_drain(struct sleeper *s)
{
	cci_event_t *ev;
	unsigned n = 0;
	int rc;

	while ((rc = cci_get_event(s->ep, &ev)) == CCI_SUCCESS) {
		sleeper_take(s, ev);
		n++;
	}
	CHECK_RC(rc, CCI_EAGAIN);
	return n;
}

/* Sleep once on the handle, then drain.  A sleep that timed out with an
 * event waiting is a missed wake-up. */
static void sleeper_wait(struct sleeper *s)
{
	struct epoll_event ev;
	int n = epoll_wait(s->epfd, &ev, 1, SLEEP_MS);

	s->sleeps++;
	if (sleeper_drain(s) > 0 && n == 0)
		s->missed++;
}

/* Wait (sleeping) until a RECV came or the deadline passed. */
static int sleeper_recv(struct sleeper *s, uint64_t deadline)
{
	while (s->recvs == 0 && h_now_ms() < deadline)
		sleeper_wait(s);
	if (s->recvs == 0)
		return 0;
	s->recvs--;
	return 1;
}

static void sleeper_close(struct sleeper *s, const char *who)
{
	CHECKF(s->missed == 0, "%s: the OS handle slept through an event %llu time(s) in "
	       "%llu sleeps", who, (unsigned long long)s->missed,
	       (unsigned long long)s->sleeps);
	close(s->epfd);
	h_teardown(s->ep);
}

/* The peer: echo every ping until the pipe says stop (or closes). */
static void echo_role(int rfd, int wfd, const void *arg)
{
	struct sleeper s;
	char *uri;
	uint64_t deadline = h_now_ms() + RUN_MS_MAX + 10000;

	(void)arg;
	sleeper_open(&s);
	uri = h_uri(s.ep);
	h_msg_send(wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	while (!h_msg_ready(rfd) && h_now_ms() < deadline) {
		if (!sleeper_recv(&s, h_now_ms() + 100))
			continue;
		uint8_t pong[PING_LEN] = { 'p' };
		CHECK_RC(cci_send(s.conn, pong, sizeof(pong), NULL, 0), CCI_SUCCESS);
	}
	sleeper_close(&s, "the echoing peer");
}

static void blocking_pingpong(void)
{
	unsigned long rounds = h_env_count("CCI_FAULT_BLOCKING_ROUNDS",
	                                   F_SANITIZED ? ROUNDS_SANITIZED : ROUNDS_DEFAULT);
	struct h_peer peer;
	struct sleeper s;
	cci_connection_t *c;
	char uri[512];
	uint64_t t0, deadline;
	unsigned long done = 0;

	h_spawn(&peer, echo_role, NULL);
	REQUIRE(h_msg_recv(peer.rfd, uri, sizeof(uri), 10000) > 0);
	sleeper_open(&s);
	c = h_connect(s.ep, uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	t0 = h_now_ms();
	deadline = t0 + RUN_MS_MAX;
	while (done < rounds && h_now_ms() < deadline) {
		uint8_t ping[PING_LEN] = { 'i' };

		if (!CHECK_RC(cci_send(c, ping, sizeof(ping), NULL, 0), CCI_SUCCESS))
			break;
		if (!CHECKF(sleeper_recv(&s, h_now_ms() + 10000), "no answer to ping %lu", done))
			break;
		done++;
	}
	h_note("%lu blocking round trips in %llu ms, %llu sleeps", done,
	       (unsigned long long)(h_now_ms() - t0), (unsigned long long)s.sleeps);
	CHECKF(done == rounds || h_now_ms() >= deadline, "stopped after %lu of %lu round trips",
	       done, rounds);
	h_msg_send(peer.wfd, "q", 1);
	h_peer_finish(&peer, 10000);
	sleeper_close(&s, "the pinging side");
}

const struct h_test t_blocking_tests[] = {
	{ "a ping-pong whose sides both sleep on the OS handle and drain cci_get_event never "
	  "sleeps through an event", blocking_pingpong, H_NEEDS_DEVICE, 90 },
};
const size_t t_blocking_count = sizeof(t_blocking_tests) / sizeof(t_blocking_tests[0]);
