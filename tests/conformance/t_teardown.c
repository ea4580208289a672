/*
 * t_teardown.c - how connections end and fail: disconnect, a destroyed or
 * killed peer, keepalive, send timeout, and destroying an endpoint (or
 * finalizing) with work outstanding.
 */
#include "tests.h"

#include "proto.h"
#include "server.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

struct tfix {
	struct srv s;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint8_t buf[64];
	uint32_t seq;
};

static void tfix_open(struct tfix *t, const struct srv_opts *o)
{
	memset(t, 0, sizeof(*t));
	srv_start(&t->s, o);
	t->ep = h_endpoint(h_setup(), NULL);
	t->c = h_connect(t->ep, t->s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
}

/*
 * Keep sending one message every 10 ms for up to ms until a send fails,
 * from the call or in its SEND event.  Returns that status (CCI_SUCCESS if
 * none failed).
 */
static int send_until_failure(struct tfix *t, unsigned ms, struct h_sendctr *ctr)
{
	uint64_t stop = h_now_ms() + ms;

	while (h_now_ms() < stop) {
		int rc;

		proto_build(t->buf, sizeof(t->buf), 0, t->seq, PROTO_DATA);
		rc = cci_send(t->c, t->buf, sizeof(t->buf), h_ctx(t->seq), 0);
		if (rc == CCI_SUCCESS)
			t->seq++;
		else if (rc != CCI_ENOBUFS)
			return rc;
		h_sleep_ms(10);
		h_pump(t->ep, ctr);
		if (ctr->err)
			return ctr->first_err;
	}
	return CCI_SUCCESS;
}

static void peer_gone_fails_sends(char cmd, const char *what)
{
	struct tfix t;
	struct srv_opts o = { 0 };
	struct h_sendctr ctr;
	int rc;

	tfix_open(&t, &o);
	h_sendctr_init(&ctr, 1000);
	srv_cmd(&t.s, cmd, 0);
	rc = send_until_failure(&t, 5000, &ctr);
	CHECKF(rc == CCI_ERR_DISCONNECTED, "after the server's %s, sends ended with %s",
	       what, h_status_name(rc));
	rc = cci_send(t.c, t.buf, sizeof(t.buf), h_ctx(999), 0);
	if (rc == CCI_SUCCESS) {
		h_drain(t.ep, &ctr, t.seq + 1, 5000);
		CHECK(ctr.status_seen[999] == CCI_ERR_DISCONNECTED + 1);
	} else {
		CHECK_RC(rc, CCI_ERR_DISCONNECTED);
	}
	srv_stop_and_teardown(&t.s, NULL, t.ep);
	h_sendctr_free(&ctr);
}

static void server_disconnect_fails_client_sends(void)
{
	peer_gone_fails_sends(SRV_CMD_DISCONNECT, "cci_disconnect");
}

static void server_destroy_fails_client_sends(void)
{
	peer_gone_fails_sends(SRV_CMD_DESTROY, "cci_destroy_endpoint");
}

static void killed_peer_fails_sends_once_each(void)
{
	struct tfix t;
	struct srv other;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct h_sendctr ctr;
	cci_connection_t *c2;
	int rc;

	srv_start(&other, &o);
	tfix_open(&t, &o);
	c2 = h_connect(t.ep, other.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	h_sendctr_init(&ctr, 1u << 16);
	kill(t.s.peer.pid, SIGSTOP);
	for (uint64_t stop = h_now_ms() + 1000; t.seq < 200 && h_now_ms() < stop;) {
		if (cci_send(t.c, t.buf, sizeof(t.buf), h_ctx(t.seq), 0) == CCI_SUCCESS)
			t.seq++;
		else
			break;
	}
	h_peer_kill(&t.s.peer);
	rc = send_until_failure(&t, 5000, &ctr);
	CHECKF(rc == CCI_ERR_DISCONNECTED, "sends to a killed peer ended with %s",
	       h_status_name(rc));
	h_drain(t.ep, &ctr, t.seq, 10000);
	CHECKF(ctr.ok + ctr.err == t.seq && ctr.dup == 0 && ctr.foreign == 0,
	       "%u sends: %llu completed, %llu failed, %llu twice", t.seq,
	       (unsigned long long)ctr.ok, (unsigned long long)ctr.err,
	       (unsigned long long)ctr.dup);
	/* the endpoint still works: the other connection, and a new one */
	proto_build(t.buf, sizeof(t.buf), 0, 0, PROTO_DATA);
	CHECK_RC(cci_send(c2, t.buf, sizeof(t.buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	t.c = h_connect(t.ep, other.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	CHECK_RC(cci_send(t.c, t.buf, sizeof(t.buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	srv_stop_and_teardown(&other, &st, t.ep);
	CHECK(st.recvs == 2 && st.corrupt == 0);
	h_sendctr_free(&ctr);
}

/* A client process: connect to the URI it is sent, report, then idle. */
static void idle_client_role(int rfd, int wfd, const void *arg)
{
	char uri[512];
	cci_endpoint_t *ep;
	int n;

	(void)arg;
	n = h_msg_recv(rfd, uri, sizeof(uri) - 1, 10000);
	REQUIRE(n > 0);
	uri[n] = '\0';
	ep = h_endpoint(h_setup(), NULL);
	h_connect(ep, uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	h_msg_send(wfd, "c", 1);
	for (uint64_t stop = h_now_ms() + 20000; h_now_ms() < stop;) {
		cci_event_t *ev = NULL;

		if (h_poll_event(ep, &ev, 100) == CCI_SUCCESS)
			cci_return_event(ev);
		if (h_msg_ready(rfd))
			break;
	}
	h_teardown(ep);
}

static void killed_client_fails_server_sends(void)
{
	struct h_peer cl;
	struct tfix t;
	struct h_sendctr ctr;
	cci_event_t *ev;
	char *uri, ok = 0;
	int rc;

	memset(&t, 0, sizeof(t));
	h_spawn(&cl, idle_client_role, NULL);
	t.ep = h_endpoint(h_setup(), NULL);
	uri = h_uri(t.ep);
	h_msg_send(cl.wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	ev = EXPECT_EVENT(t.ep, CCI_EVENT_CONNECT_REQUEST, 10000);
	REQUIRE(ev != NULL);
	CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
	cci_return_event(ev);
	ev = EXPECT_EVENT(t.ep, CCI_EVENT_ACCEPT, 10000);
	REQUIRE(ev && ev->accept.status == CCI_SUCCESS);
	t.c = ev->accept.connection;
	cci_return_event(ev);
	CHECK(h_msg_recv(cl.rfd, &ok, 1, 10000) == 1 && ok == 'c');
	h_peer_kill(&cl);
	h_sendctr_init(&ctr, 1000);
	rc = send_until_failure(&t, 5000, &ctr);
	CHECKF(rc == CCI_ERR_DISCONNECTED, "the server's sends to a killed client ended "
	       "with %s", h_status_name(rc));
	h_sendctr_free(&ctr);
	h_teardown(t.ep);
}

static void reconnect_after_local_disconnect(void)
{
	struct tfix t;
	struct srv_opts o = { 0 };
	struct srv_stats st;

	tfix_open(&t, &o);
	CHECK_RC(cci_disconnect(t.c), CCI_SUCCESS);
	t.c = h_connect(t.ep, t.s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	proto_build(t.buf, sizeof(t.buf), 0, 0, PROTO_DATA);
	CHECK_RC(cci_send(t.c, t.buf, sizeof(t.buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	srv_stop_and_teardown(&t.s, &st, t.ep);
	CHECK(st.accepts == 2 && st.recvs == 1);
}

static void disconnect_drops_work_in_flight(void)
{
	struct tfix t;
	struct srv_opts o = { 0 };
	struct h_sendctr ctr;
	uint32_t to = 30000000;
	uint64_t quiet;

	tfix_open(&t, &o);
	CHECK_RC(cci_set_opt(t.c, CCI_OPT_CONN_SEND_TIMEOUT, &to), CCI_SUCCESS);
	h_sendctr_init(&ctr, 1u << 20);
	kill(t.s.peer.pid, SIGSTOP);
	for (uint64_t stop = h_now_ms() + 5000; h_now_ms() < stop && t.seq < (1u << 20);) {
		if (cci_send(t.c, t.buf, sizeof(t.buf), h_ctx(t.seq), 0) != CCI_SUCCESS)
			break;
		t.seq++;
	}
	for (quiet = h_now_ms() + 200; h_now_ms() < quiet;)
		if (h_pump(t.ep, &ctr))
			quiet = h_now_ms() + 200;
	CHECKF(ctr.ok + ctr.err < t.seq, "no send was left in flight (%u sent)", t.seq);
	CHECK_RC(cci_disconnect(t.c), CCI_SUCCESS);
	EXPECT_QUIET(t.ep, 500); /* dropped without events */
	h_peer_kill(&t.s.peer);
	h_sendctr_free(&ctr);
	h_teardown(t.ep);
}

static void connection_cycles_leak_no_fds(void)
{
	struct tfix t;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	int before;

	tfix_open(&t, &o);
	CHECK_RC(cci_disconnect(t.c), CCI_SUCCESS);
	before = h_count_fds();
	for (uint32_t i = 0; i < 100; i++) {
		t.c = h_connect(t.ep, t.s.uri, (cci_conn_attribute_t)(i % 3), NULL, 0, NULL);
		proto_build(t.buf, sizeof(t.buf), 0, 0, PROTO_DATA);
		CHECK_RC(cci_send(t.c, t.buf, sizeof(t.buf), NULL, CCI_FLAG_BLOCKING),
		         CCI_SUCCESS);
		CHECK_RC(cci_disconnect(t.c), CCI_SUCCESS);
	}
	EXPECT_QUIET(t.ep, 200);
	CHECKF(h_count_fds() == before, "%d descriptors open before 100 connections "
	       "came and went, %d after", before, h_count_fds());
	srv_stop_and_teardown(&t.s, &st, t.ep);
	CHECK(st.accepts == 101 && st.corrupt == 0);
	CHECKF(st.recvs >= 67 && st.recvs <= 100, "the server received %llu of 100",
	       (unsigned long long)st.recvs);
}

static void frozen_peer_raises_keepalive_once(void)
{
	struct tfix t;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	uint32_t ka = 300000;
	cci_event_t *ev;
	uint64_t t0;

	tfix_open(&t, &o);
	CHECK_RC(cci_set_opt(t.c, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &ka), CCI_SUCCESS);
	kill(t.s.peer.pid, SIGSTOP);
	t0 = h_now_ms();
	ev = EXPECT_EVENT(t.ep, CCI_EVENT_KEEPALIVE_TIMEDOUT, 5000);
	if (ev) {
		CHECKF(h_now_ms() - t0 >= 250, "keepalive fired after %llu ms, set 300 ms",
		       (unsigned long long)(h_now_ms() - t0));
		CHECK(ev->keepalive.connection == t.c);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	EXPECT_QUIET(t.ep, 1500); /* the timer is disarmed */
	kill(t.s.peer.pid, SIGCONT);
	proto_build(t.buf, sizeof(t.buf), 0, 0, PROTO_DATA);
	CHECK_RC(cci_send(t.c, t.buf, sizeof(t.buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	srv_stop_and_teardown(&t.s, &st, t.ep);
	CHECK(st.recvs == 1);
}

/* Three keepalive periods of an idle connection: the peer answers every
 * probe.  1 s rather than the frozen test's 300 ms: on a loaded 2-core
 * machine a process can go unscheduled for a good part of 300 ms, and
 * that is the machine's silence, not the library's. */
static void live_idle_peer_raises_no_keepalive(void)
{
	struct tfix t;
	struct srv_opts o = { 0 };
	uint32_t ka = 1000000;

	tfix_open(&t, &o);
	CHECK_RC(cci_set_opt(t.c, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &ka), CCI_SUCCESS);
	EXPECT_QUIET(t.ep, 3000);
	srv_stop_and_teardown(&t.s, NULL, t.ep);
}

/* Every send after the first failed one failed too. */
static void check_failures_are_final(const struct h_sendctr *ctr, uint32_t n)
{
	uint32_t first = n, bad = 0;

	for (uint32_t i = 0; i < n; i++)
		if (ctr->status_seen[i] > 1 && first == n)
			first = i;
	for (uint32_t i = first; i < n; i++)
		if (ctr->status_seen[i] == CCI_SUCCESS + 1)
			bad++;
	CHECKF(bad == 0, "%u sends issued after send %u failed still succeeded", bad, first);
}

static void send_timeout_breaks_the_connection(void)
{
	struct tfix t;
	struct srv_opts o = { 0 };
	struct h_sendctr ctr;
	uint32_t to = 300000;
	int rc = CCI_SUCCESS;
	uint64_t t0;

	tfix_open(&t, &o);
	CHECK_RC(cci_set_opt(t.c, CCI_OPT_CONN_SEND_TIMEOUT, &to), CCI_SUCCESS);
	kill(t.s.peer.pid, SIGSTOP);
	t0 = h_now_ms();
	h_sendctr_init(&ctr, 1u << 20);
	for (uint64_t stop = h_now_ms() + 10000; !ctr.err && h_now_ms() < stop &&
	     t.seq < (1u << 20) - 8;) {
		rc = cci_send(t.c, t.buf, sizeof(t.buf), h_ctx(t.seq), 0);
		if (rc == CCI_SUCCESS)
			t.seq++;
		else if (rc != CCI_ENOBUFS)
			break;
		if (!h_pump(t.ep, &ctr) && rc == CCI_ENOBUFS)
			sched_yield();
	}
	CHECKF(ctr.err > 0 || rc == CCI_ERR_DISCONNECTED, "no send failed within 10 s "
	       "(%u accepted, %llu completed, last call %s)", t.seq,
	       (unsigned long long)ctr.ok, h_status_name(rc));
	CHECKF(h_now_ms() - t0 >= 250, "a send failed %llu ms after the peer stopped, "
	       "with a 300 ms send timeout", (unsigned long long)(h_now_ms() - t0));
	if (ctr.err)
		CHECK_RC2(ctr.first_err, CCI_ETIMEDOUT, CCI_ERR_DISCONNECTED);
	for (int i = 0; i < 5; i++) {
		rc = cci_send(t.c, t.buf, sizeof(t.buf), h_ctx(t.seq), 0);
		if (rc == CCI_SUCCESS)
			t.seq++;
		else
			CHECK_RC2(rc, CCI_ERR_DISCONNECTED, CCI_ETIMEDOUT);
	}
	h_drain(t.ep, &ctr, t.seq, 5000);
	CHECKF(ctr.ok + ctr.err == t.seq && ctr.dup == 0, "%u sends: %llu completions, "
	       "%llu twice", t.seq, (unsigned long long)(ctr.ok + ctr.err),
	       (unsigned long long)ctr.dup);
	check_failures_are_final(&ctr, t.seq);
	h_peer_kill(&t.s.peer);
	h_sendctr_free(&ctr);
	h_teardown(t.ep);
}

/* Hold n RECV events sent by the server. */
static void hold_recvs(struct tfix *t, cci_event_t **held, uint32_t n)
{
	uint32_t k = 0;

	srv_cmd(&t->s, SRV_CMD_SEND, n);
	for (uint64_t stop = h_now_ms() + 5000; k < n && h_now_ms() < stop;) {
		cci_event_t *ev = NULL;

		if (h_poll_event(t->ep, &ev, 100) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_RECV)
			held[k++] = ev;
		else
			cci_return_event(ev);
	}
	CHECK(k == n);
}

static void teardown_with_work_outstanding(int destroy)
{
	struct tfix t;
	struct srv_opts o = { .rma_len = 4 * 1024 * 1024, .rma_flags = CCI_FLAG_WRITE };
	cci_rma_handle_t *lh = NULL;
	cci_event_t *held[4];
	uint8_t *big = calloc(1, 1024 * 1024);

	REQUIRE(big != NULL);
	tfix_open(&t, &o);
	hold_recvs(&t, held, 4);
	REQUIRE_RC(cci_rma_register(t.ep, big, 1024 * 1024, 0, &lh), CCI_SUCCESS);
	kill(t.s.peer.pid, SIGSTOP);
	for (uint32_t i = 0; i < 100; i++)
		CHECK_RC2(cci_send(t.c, big, 64, h_ctx(i), i % 2 ? CCI_FLAG_NO_COPY : 0),
		          CCI_SUCCESS, CCI_ENOBUFS);
	for (uint32_t i = 0; i < 4; i++)
		CHECK_RC2(cci_rma(t.c, "done", 4, lh, 0, &t.s.handle, i * 1024 * 1024,
		                  1024 * 1024, h_ctx(200 + i), CCI_FLAG_WRITE),
		          CCI_SUCCESS, CCI_ENOBUFS);
	if (destroy)
		CHECK_RC(cci_destroy_endpoint(t.ep), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	memset(big, 0xAB, 1024 * 1024); /* the library must be done with it */
	free(big);
	h_peer_kill(&t.s.peer);
}

static void destroy_with_work_outstanding(void)
{
	teardown_with_work_outstanding(1);
}

static void finalize_with_work_outstanding(void)
{
	teardown_with_work_outstanding(0);
}

const struct h_test t_teardown_tests[] = {
	{ "after the server's cci_disconnect, the client's sends fail with CCI_ERR_DISCONNECTED",
	  server_disconnect_fails_client_sends, H_NEEDS_DEVICE, 0 },
	{ "after the server destroys its endpoint, the client's sends fail with "
	  "CCI_ERR_DISCONNECTED", server_destroy_fails_client_sends, H_NEEDS_DEVICE, 0 },
	{ "a peer killed with SIGKILL fails sends, each pending send completes once, "
	  "other and new connections still work", killed_peer_fails_sends_once_each,
	  H_NEEDS_DEVICE, 30 },
	{ "a client killed with SIGKILL fails the server's sends with CCI_ERR_DISCONNECTED",
	  killed_client_fails_server_sends, H_NEEDS_DEVICE, 0 },
	{ "after cci_disconnect the client connects again to the same server",
	  reconnect_after_local_disconnect, H_NEEDS_DEVICE, 0 },
	{ "cci_disconnect drops sends still in flight without events",
	  disconnect_drops_work_in_flight, H_NEEDS_DEVICE, 0 },
	{ "100 connect, send, disconnect cycles leak no file descriptor",
	  connection_cycles_leak_no_fds, H_NEEDS_DEVICE, 30 },
	{ "a frozen peer raises KEEPALIVE_TIMEDOUT once and the connection stays open",
	  frozen_peer_raises_keepalive_once, H_NEEDS_DEVICE, 0 },
	{ "a live idle peer raises no KEEPALIVE_TIMEDOUT", live_idle_peer_raises_no_keepalive,
	  H_NEEDS_DEVICE, 0 },
	{ "a send timeout with a frozen peer fails that send and every later one",
	  send_timeout_breaks_the_connection, H_NEEDS_DEVICE, 30 },
	{ "cci_destroy_endpoint with sends, rma and held events outstanding succeeds",
	  destroy_with_work_outstanding, H_NEEDS_DEVICE, 0 },
	{ "cci_finalize with an endpoint, sends, rma and held events outstanding succeeds",
	  finalize_with_work_outstanding, H_NEEDS_DEVICE, 0 },
};
const size_t t_teardown_count = sizeof(t_teardown_tests) / sizeof(t_teardown_tests[0]);
