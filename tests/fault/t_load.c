/*
 * t_load.c - load and back-pressure: many client processes streaming
 * numbered messages into one server endpoint (each arrives once, in order
 * on RO), thousands of connect/disconnect cycles on one endpoint
 * (descriptors and RSS come back), and a receiver that holds every receive
 * buffer while the sender pushes (back-pressure, no loss, then all flows).
 *
 * The streaming test runs the reliability issue's figures, 64 clients of
 * 10000 messages each: on a 2-core machine 1 to 18 s a transport (ofi's
 * tcp the slowest).  Under AddressSanitizer or ThreadSanitizer ofi
 * streams about ten times slower (64 x 10000 took over 200 s there), so
 * sanitized builds send 1000 messages a client (18 to 22 s over ofi).
 * CCI_FAULT_CLIENTS and CCI_FAULT_MSGS set them, CCI_FAULT_CYCLES the
 * connection cycles (2000 by default).
 */
#include "fault.h"

#include "proto.h"
#include "server.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* The 64 x 10000; 64 x 1000 under AddressSanitizer; 16 x 1000
 * under ThreadSanitizer, where 64 instrumented processes starting
 * libfabric on two cores outlast the clients' connect timeout. */
#if F_TSAN
#define LOAD_CLIENTS 16
#else
#define LOAD_CLIENTS 64
#endif
#if F_SANITIZED
#define LOAD_MSGS 1000
#else
#define LOAD_MSGS 10000
#endif
#define LOAD_CYCLES 2000
/* The clients connect all at once while the others start (cci_init with
 * libfabric costs about 0.1 s of CPU a process): on two cores, ofi's tcp
 * (rxm) handshake, several round trips each waiting for CPU, took 2 to
 * 10 s per client here and past 10 s on a slower machine, where sock
 * took under 0.1 s.  This test is about delivery under load; the
 * connect timeouts have tests of their own. */
#define LOAD_CONNECT_S 60
#define LOAD_MAX_CLIENTS 256
#define RSS_SLACK_KB 1024

struct load_msg {
	uint32_t client, seq;
};

struct load_stats {
	uint64_t recvs, order_errors, dups, foreign, requests;
	uint32_t complete;        /* clients whose every message arrived */
	uint32_t short_client;    /* the first client that is not, and how far it got */
	uint32_t short_next;
	uint32_t pad;
};

struct load_arg {
	uint32_t clients, msgs;
};

struct load_srv {
	const struct load_arg *a;
	cci_endpoint_t *ep;
	uint32_t next[LOAD_MAX_CLIENTS];
	struct load_stats st;
};

static void load_request(struct load_srv *s, cci_event_t *ev)
{
	uint32_t id = UINT32_MAX;

	s->st.requests++;
	if (ev->request.data_len == sizeof(id))
		memcpy(&id, ev->request.data_ptr, sizeof(id));
	if (CHECKF(id < s->a->clients, "a connect request with client id %u", id))
		CHECK_RC(cci_accept(ev, (void *)(uintptr_t)(id + 1)), CCI_SUCCESS);
	else
		CHECK_RC(cci_reject(ev), CCI_SUCCESS);
}

static void load_recv(struct load_srv *s, cci_event_t *ev)
{
	uintptr_t ctx = (uintptr_t)ev->recv.connection->context;
	struct load_msg m;
	uint32_t id = (uint32_t)ctx - 1;

	s->st.recvs++;
	if (ev->recv.len != sizeof(m) || ctx == 0 || id >= s->a->clients) {
		s->st.foreign++;
		return;
	}
	memcpy(&m, ev->recv.ptr, sizeof(m));
	if (m.client != id)
		s->st.foreign++;
	else if (m.seq < s->next[id])
		s->st.dups++;
	else if (m.seq > s->next[id])
		s->st.order_errors++;
	if (m.client == id && m.seq >= s->next[id])
		s->next[id] = m.seq + 1;
	if (m.client == id && s->next[id] == s->a->msgs && m.seq + 1 == s->a->msgs)
		s->st.complete++;
}

/* The server: accept every client, check every message, report when all
 * arrived (or after 200 s). */
static void load_server_role(int rfd, int wfd, const void *arg)
{
	struct load_srv *s = calloc(1, sizeof(*s));
	uint64_t total, stop = h_now_ms() + 200000;
	char *uri;

	(void)rfd;
	REQUIRE(s != NULL);
	s->a = arg;
	total = (uint64_t)s->a->clients * s->a->msgs;
	s->ep = h_endpoint(h_setup(), NULL);
	uri = h_uri(s->ep);
	h_msg_send(wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	while (s->st.recvs < total && h_now_ms() < stop) {
		cci_event_t *ev = NULL;

		if (cci_get_event(s->ep, &ev) != CCI_SUCCESS) {
			sched_yield();
			continue;
		}
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			load_request(s, ev);
		else if (ev->type == CCI_EVENT_RECV)
			load_recv(s, ev);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	s->st.short_client = UINT32_MAX;
	for (uint32_t i = 0; i < s->a->clients; i++)
		if (s->next[i] != s->a->msgs) {
			s->st.short_client = i;
			s->st.short_next = s->next[i];
			break;
		}
	h_msg_send(wfd, &s->st, sizeof(s->st));
	EXPECT_QUIET(s->ep, 200);
	h_teardown(s->ep);
	free(s);
}

struct load_client {
	const struct load_arg *a;
	uint32_t id;
};

/* A client: connect with its id, send its numbered messages, wait for
 * every completion, disconnect and quit. */
static void load_client_role(int rfd, int wfd, const void *arg)
{
	const struct load_client *lc = arg;
	struct h_sendctr ctr;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	char uri[512];
	uint64_t t0, connect_ms;
	int n;

	h_role_prefix = "[client] ";
	n = h_msg_recv(rfd, uri, sizeof(uri) - 1, 60000);
	REQUIRE(n > 0);
	uri[n] = '\0';
	ep = h_endpoint(h_setup(), NULL);
	t0 = h_now_ms();
	c = h_connect_within(ep, uri, CCI_CONN_ATTR_RO, &lc->id, sizeof(lc->id), NULL,
	                     LOAD_CONNECT_S);
	connect_ms = h_now_ms() - t0;
	h_msg_send(wfd, &connect_ms, sizeof(connect_ms));
	h_sendctr_init(&ctr, 1);
	for (uint32_t i = 0; i < lc->a->msgs; i++) {
		struct load_msg m = { lc->id, i };

		int rc = h_send(ep, c, &m, sizeof(m), NULL, 0, &ctr);

		if (!CHECKF(rc == CCI_SUCCESS, "client %u: message %u refused: %s (%llu sends "
		            "completed)", lc->id, i, cci_strerror(ep, rc),
		            (unsigned long long)ctr.ok))
			break;
	}
	h_drain(ep, &ctr, lc->a->msgs, 120000);
	CHECKF(ctr.ok == lc->a->msgs && ctr.err == 0, "client %u: %llu of %u sends completed, "
	       "%llu failed", lc->id, (unsigned long long)ctr.ok, lc->a->msgs,
	       (unsigned long long)ctr.err);
	CHECK_RC(cci_disconnect(c), CCI_SUCCESS);
	h_sendctr_free(&ctr);
	h_teardown(ep);
}

static void many_clients(void)
{
	static struct load_client lcs[LOAD_MAX_CLIENTS];
	static struct h_peer peers[LOAD_MAX_CLIENTS];
	struct load_arg a = { (uint32_t)h_env_count("CCI_FAULT_CLIENTS", LOAD_CLIENTS),
	                      (uint32_t)h_env_count("CCI_FAULT_MSGS", LOAD_MSGS) };
	struct load_stats st;
	struct h_peer srv;
	char uri[512];
	uint64_t t0, slowest_connect = 0;
	uint32_t connected = 0;
	int n;

	if (a.clients > LOAD_MAX_CLIENTS)
		a.clients = LOAD_MAX_CLIENTS;
	h_spawn(&srv, load_server_role, &a);
	n = h_msg_recv(srv.rfd, uri, sizeof(uri), 60000);
	REQUIRE(n > 0);
	t0 = h_now_ms();
	for (uint32_t i = 0; i < a.clients; i++) {
		lcs[i] = (struct load_client){ &a, i };
		h_spawn(&peers[i], load_client_role, &lcs[i]);
		h_msg_send(peers[i].wfd, uri, (uint32_t)n);
	}
	memset(&st, 0, sizeof(st));
	CHECK(h_msg_recv(srv.rfd, &st, sizeof(st), 240000) == (int)sizeof(st));
	for (uint32_t i = 0; i < a.clients; i++) {
		uint64_t ms = 0;

		if (h_msg_recv(peers[i].rfd, &ms, sizeof(ms), 1000) == (int)sizeof(ms)) {
			connected++;
			slowest_connect = ms > slowest_connect ? ms : slowest_connect;
		}
	}
	CHECKF(st.recvs == (uint64_t)a.clients * a.msgs && st.complete == a.clients,
	       "the server received %llu of %u x %u messages; %u clients complete; "
	       "%llu connect requests, %u clients connected (slowest in %llu ms); the first "
	       "short one, client %d, stopped before message %u",
	       (unsigned long long)st.recvs, a.clients, a.msgs, st.complete,
	       (unsigned long long)st.requests, connected, (unsigned long long)slowest_connect,
	       st.short_client == UINT32_MAX ? -1 : (int)st.short_client, st.short_next);
	CHECKF(st.order_errors == 0 && st.dups == 0 && st.foreign == 0, "%llu out of order, "
	       "%llu twice, %llu foreign", (unsigned long long)st.order_errors,
	       (unsigned long long)st.dups, (unsigned long long)st.foreign);
	h_note("%u clients x %u messages: %llu received, each once and in order, in %llu ms; "
	       "the slowest connect took %llu ms", a.clients, a.msgs, (unsigned long long)st.recvs,
	       (unsigned long long)(h_now_ms() - t0), (unsigned long long)slowest_connect);
	for (uint32_t i = 0; i < a.clients; i++)
		h_peer_finish(&peers[i], 60000);
	h_peer_finish(&srv, 10000);
}

/* The server of connect_cycles, which never calls cci_disconnect (CCI
 * has no disconnect event: a server often cannot know), holds each
 * connection that left as its object alone: its descriptors come back to
 * where they were and its memory grows by at most this a cycle. */
#define CONN_OBJECT_KB 4

/* The server's report once its descriptors are down to fds0 (its tick
 * releases what a connection that left held), or, with fds0 < 0, once
 * they held still for 100 ms; after 5 s at most. */
static void server_settled(struct srv *s, int fds0, struct srv_stats *st)
{
	int last = -1;

	for (uint64_t stop = h_now_ms() + 5000;;) {
		srv_snapshot(s, st);
		if ((fds0 >= 0 ? st->fds <= fds0 : st->fds == last) || h_now_ms() >= stop)
			return;
		last = st->fds;
		h_sleep_ms(fds0 >= 0 ? 20 : 100);
	}
}

/* Connections that come and go leave descriptors and memory as they
 * were, on the client that disconnects and on the server that does not. */
static void connect_cycles(void)
{
	uint32_t cycles = (uint32_t)h_env_count("CCI_FAULT_CYCLES", LOAD_CYCLES);
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st, s0, s1;
	cci_endpoint_t *ep;
	uint8_t msg[64];
	int fds0 = 0, fds = 0;
	long rss0 = 0, rss = 0;
	uint64_t t0 = 0;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	for (uint32_t i = 0; i < 20 + cycles; i++) {
		cci_connection_t *c;

		if (i == 20) { /* warmed up: the start values */
			EXPECT_QUIET(ep, 200);
			fds0 = h_count_fds();
			rss0 = h_rss_kb();
			server_settled(&s, -1, &s0);
			t0 = h_now_ms();
		}
		c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
		proto_build(msg, sizeof(msg), 0, 0, PROTO_DATA);
		CHECK_RC(cci_send(c, msg, sizeof(msg), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
		CHECK_RC(cci_disconnect(c), CCI_SUCCESS);
	}
	t0 = h_now_ms() - t0;
	for (uint64_t stop = h_now_ms() + 5000; h_now_ms() < stop;) {
		EXPECT_QUIET(ep, 100);
		fds = h_count_fds();
		rss = h_rss_kb();
		if (fds == fds0 && (!F_RSS_CHECKED || rss - rss0 <= RSS_SLACK_KB))
			break;
	}
	h_note("%u connect, send, disconnect cycles in %llu ms: fds %d before, %d after; "
	       "RSS %ld KiB before, %ld KiB after", cycles, (unsigned long long)t0, fds0, fds,
	       rss0, rss);
	CHECKF(fds == fds0, "%d descriptors before %u cycles, %d after", fds0, cycles, fds);
	CHECKF(!F_RSS_CHECKED || rss - rss0 <= RSS_SLACK_KB, "RSS %ld KiB before %u cycles, "
	       "%ld KiB after", rss0, cycles, rss);
	server_settled(&s, s0.fds, &s1);
	h_note("the server, which disconnects none: fds %d before, %d after; RSS %lld KiB "
	       "before, %lld KiB after", (int)s0.fds, (int)s1.fds, (long long)s0.rss_kb,
	       (long long)s1.rss_kb);
	CHECKF(s1.fds == s0.fds, "the server held %d descriptors before %u cycles, %d after "
	       "(a connection its peer left keeps none)", (int)s0.fds, cycles, (int)s1.fds);
	CHECKF(!F_RSS_CHECKED ||
	               s1.rss_kb - s0.rss_kb <= (int64_t)cycles * CONN_OBJECT_KB + RSS_SLACK_KB,
	       "the server's RSS grew from %lld KiB to %lld KiB over %u cycles (more than the "
	       "connection objects' %d KiB each)", (long long)s0.rss_kb, (long long)s1.rss_kb,
	       cycles, CONN_OBJECT_KB);
	srv_stop(&s, &st);
	CHECKF(st.accepts == 20 + cycles && st.recvs == 20 + cycles && st.corrupt == 0,
	       "the server accepted %llu and received %llu of %u", (unsigned long long)st.accepts,
	       (unsigned long long)st.recvs, 20 + cycles);
	h_teardown(ep);
}

/* Push len-byte messages for up to ms or until n were accepted.  Returns
 * how many were accepted; counts CCI_ENOBUFS answers. */
static uint32_t push(cci_endpoint_t *ep, cci_connection_t *c, struct h_sendctr *ctr,
                     uint32_t from, uint32_t n, unsigned ms, uint64_t *enobufs)
{
	static uint8_t msg[1024];
	uint64_t stop = h_now_ms() + ms;
	uint32_t seq = from;

	while (seq < n && h_now_ms() < stop) {
		int rc;

		proto_build(msg, sizeof(msg), 0, seq, PROTO_DATA);
		rc = cci_send(c, msg, sizeof(msg), h_ctx(seq), 0);
		if (rc == CCI_SUCCESS) {
			seq++;
			continue;
		}
		CHECK_RC(rc, CCI_ENOBUFS);
		if (rc != CCI_ENOBUFS)
			break;
		(*enobufs)++;
		if (!h_pump(ep, ctr))
			sched_yield();
	}
	return seq;
}

static void held_receiver_back_pressure(void)
{
	const uint32_t n = 16000;
	struct srv s;
	struct srv_opts o = { .hold = 4096, .recv_buf_count = 64 };
	struct srv_stats st;
	struct h_sendctr ctr;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint64_t enobufs = 0;
	uint32_t sent;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	h_sendctr_init(&ctr, n);
	sent = push(ep, c, &ctr, 0, n, 3000, &enobufs);
	h_pump(ep, &ctr);
	h_note("with the receiver holding its events: %u of %u 1 KiB sends accepted, %llu "
	       "completed, %llu CCI_ENOBUFS answers", sent, n, (unsigned long long)ctr.ok,
	       (unsigned long long)enobufs);
	CHECKF(sent < n || ctr.ok < sent, "all %u sends were accepted and completed while "
	       "the receiver held every buffer: no back-pressure", n);
	CHECKF(ctr.err == 0, "%llu sends failed while the receiver held its events",
	       (unsigned long long)ctr.err);
	srv_cmd(&s, SRV_CMD_RELEASE, 0);
	sent = push(ep, c, &ctr, sent, n, 60000, &enobufs);
	h_drain(ep, &ctr, n, 60000);
	CHECKF(sent == n && ctr.ok == n && ctr.err == 0 && ctr.dup == 0, "after the release "
	       "%u of %u sends accepted, %llu completed, %llu failed", sent, n,
	       (unsigned long long)ctr.ok, (unsigned long long)ctr.err);
	srv_stop(&s, &st);
	CHECKF(st.recvs == n && st.order_errors == 0 && st.dups == 0 && st.corrupt == 0,
	       "the server received %llu of %u (%llu out of order, %llu twice, %llu corrupt)",
	       (unsigned long long)st.recvs, n, (unsigned long long)st.order_errors,
	       (unsigned long long)st.dups, (unsigned long long)st.corrupt);
	h_note("the receiver held at most %llu events and saw CCI_ENOBUFS %llu times",
	       (unsigned long long)st.max_held, (unsigned long long)st.enobufs);
	h_sendctr_free(&ctr);
	h_teardown(ep);
}

const struct h_test t_load_tests[] = {
	{ "a receiver holding every receive buffer pushes back on the sender without loss; "
	  "everything flows, once and in order, when it returns its events",
	  held_receiver_back_pressure, H_NEEDS_DEVICE, 120 },
	{ "connect, send, disconnect cycles on one endpoint bring descriptors and RSS back "
	  "to their start values, and so do the descriptors of a server that disconnects none, "
	  "whose memory grows by the connection objects alone", connect_cycles, H_NEEDS_DEVICE, 300 },
	{ "client processes streaming numbered messages into one server endpoint: each "
	  "arrives once and in order", many_clients, H_NEEDS_DEVICE, 300 },
};
const size_t t_load_count = sizeof(t_load_tests) / sizeof(t_load_tests[0]);
