/*
 * t_death.c - a peer killed with SIGKILL while sends and RMA writes and
 * reads to it are in flight, as client and as server, with keepalive off
 * and at 1 s: every pending operation fails once within the keepalive
 * timeout plus F_SLACK_MS, another connection of the endpoint keeps
 * working, and rounds of this leave descriptors where they were and
 * private memory (resident, less shared mappings) that does not grow
 * with each dead peer (the median growth of a round: a pool that grows
 * once is not a leak).
 */
#include "fault.h"

#include "proto.h"
#include "server.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Seven rounds give six steps of memory to judge: over ofi, libfabric's
 * buffer pools grow in 2 MiB chunks while the dead peers of the last
 * OFI_PEER_IDLE_NS linger in the address vector, in the first two steps
 * or so and never after; a leak grows memory with every dead peer.  With
 * five rounds, two such chunks made the median of four steps 1 MiB. */
#define ROUNDS 7
#define LOCAL_LEN ((uint64_t)1024 * 1024 + 65536)
#define RSS_STEP_KB 256        /* allowed median RSS growth per dead peer */

struct death {
	uint32_t ka_us;         /* CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT, 0 = off */
};

/* What every round shares: the endpoint, its live connection, a local
 * registration, and the first round's descriptors and memory. */
struct dfix {
	cci_endpoint_t *ep;
	cci_connection_t *live;
	uint8_t *buf;
	cci_rma_handle_t *lh;
	unsigned bound_ms;
	uint32_t live_seq;
	int fds0;
	long rss[ROUNDS];           /* private: resident less shared mappings */
};

static void dfix_open(struct dfix *d)
{
	const struct death *a = h_current->arg;
	void *mem = NULL;

	d->ep = h_endpoint(h_setup(), NULL);
	if (a->ka_us)
		CHECK_RC(cci_set_opt(d->ep, CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT, &a->ka_us),
		         CCI_SUCCESS);
	d->bound_ms = a->ka_us / 1000 + F_SLACK_MS;
	REQUIRE(posix_memalign(&mem, 4096, LOCAL_LEN) == 0);
	d->buf = mem;
	memset(d->buf, 0x11, LOCAL_LEN);
	REQUIRE_RC(cci_rma_register(d->ep, d->buf, LOCAL_LEN, CCI_FLAG_READ | CCI_FLAG_WRITE,
	                            &d->lh), CCI_SUCCESS);
}

/* Descriptors (its peers' pipes counted), after up to 5 s for the library
 * to let go of the dead peers (it may keep a peer's address a moment for
 * a reconnect). */
static int settle(struct dfix *d, int r)
{
	uint64_t stop = h_now_ms() + 5000;
	int fds;

	do {
		EXPECT_QUIET(d->ep, 100);
		fds = h_count_fds() + 2 * r; /* each round closed the two pipes to its peer */
	} while (r > 0 && fds != d->fds0 && h_now_ms() < stop);
	return fds;
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* The median growth of RSS from one round to the next. */
static long median_step(const long *rss, int n)
{
	long steps[ROUNDS];

	for (int i = 1; i < n; i++)
		steps[i - 1] = rss[i] - rss[i - 1];
	qsort(steps, (size_t)(n - 1), sizeof(steps[0]), cmp_long);
	return n % 2 ? (steps[n / 2 - 1] + steps[n / 2]) / 2 : steps[(n - 1) / 2];
}

/* After a round: the live connection still carries a message, and nothing
 * grew with the dead peer. */
static void dfix_round_done(struct dfix *d, int r, const struct f_flight *f)
{
	uint8_t msg[64];
	long shared;
	int fds;

	proto_build(msg, sizeof(msg), 0, d->live_seq++, PROTO_DATA);
	CHECK_RC(cci_send(d->live, msg, sizeof(msg), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	fds = settle(d, r);
	/* Private memory: a leak grows it.  Shared mappings are left out: a
	 * provider may keep a dead peer's region mapped (and the pages written
	 * into it resident) while the peer's address lingers in the address
	 * vector, which ofi keeps OFI_PEER_IDLE_NS for a reconnect. */
	shared = h_rss_shared_kb();
	d->rss[r] = h_rss_kb() - shared;
	h_note("round %d: %u sends, %u writes, %u reads in flight (%u done before the kill); "
	       "first failure %llu ms after the kill (%s), all done at %llu ms; private RSS "
	       "%ld KiB (%ld KiB shared besides)", r, f->sends, f->writes, f->reads,
	       f->done_before, (unsigned long long)f->detect_ms, h_status_name(f->first_err),
	       (unsigned long long)f->all_ms, d->rss[r], shared);
	if (r == 0) {
		d->fds0 = fds;
		return;
	}
	CHECKF(fds == d->fds0, "%d descriptors open after round 0, %d after round %d",
	       d->fds0, fds, r);
	if (r == ROUNDS - 1) {
		long step = median_step(d->rss, ROUNDS);

		h_note("fds after round 0: %d, after round %d: %d (its peers' pipes counted); "
		       "private RSS %ld KiB, then %ld KiB, median growth per dead peer %ld KiB", d->fds0,
		       r, fds, d->rss[0], d->rss[r], step);
		CHECKF(!F_RSS_CHECKED || step <= RSS_STEP_KB, "private RSS grew by %ld KiB per dead "
		       "peer (median of %d)", step, ROUNDS - 1);
	}
}

static void dfix_close(struct dfix *d)
{
	CHECK_RC(cci_rma_deregister(d->ep, d->lh), CCI_SUCCESS);
	h_teardown(d->ep);
	free(d->buf);
}

static void killed_server(void)
{
	struct srv victims[ROUNDS], other;
	struct srv_opts vo = { .rma_len = LOCAL_LEN,
	                       .rma_flags = CCI_FLAG_READ | CCI_FLAG_WRITE };
	struct srv_opts oo = { 0 };
	struct srv_stats st;
	struct dfix d = { 0 };

	srv_start(&other, &oo);
	for (int r = 0; r < ROUNDS; r++)
		srv_start(&victims[r], &vo);
	dfix_open(&d);
	d.live = h_connect(d.ep, other.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	for (int r = 0; r < ROUNDS; r++) {
		cci_connection_t *c = h_connect(d.ep, victims[r].uri, CCI_CONN_ATTR_RO, NULL, 0,
		                                NULL);
		struct f_flight f;

		srv_freeze(&victims[r]);
		f_flight_kill(d.ep, c, d.lh, &victims[r].handle, victims[r].peer.pid, d.bound_ms,
		              &f);
		h_peer_kill(&victims[r].peer);
		CHECK_RC(cci_disconnect(c), CCI_SUCCESS);
		dfix_round_done(&d, r, &f);
	}
	srv_stop(&other, &st);
	CHECKF(st.recvs == ROUNDS && st.corrupt == 0 && st.order_errors == 0,
	       "the live server received %llu of %d messages", (unsigned long long)st.recvs,
	       ROUNDS);
	dfix_close(&d);
}

/* A client: connect to the URI it is sent with its RMA handle as the
 * request's payload, report 'c', then serve events until told to quit
 * ('q'; it reports how many messages it received) or to stop itself
 * ('z', acknowledged with 'k'). */
static void client_role(int rfd, int wfd, const void *arg)
{
	char uri[512];
	cci_endpoint_t *ep;
	cci_rma_handle_t *h = NULL;
	uint8_t *mem = calloc(1, LOCAL_LEN);
	uint32_t recvs = 0;
	int n;

	(void)arg;
	REQUIRE(mem != NULL);
	n = h_msg_recv(rfd, uri, sizeof(uri) - 1, 20000);
	REQUIRE(n > 0);
	uri[n] = '\0';
	ep = h_endpoint(h_setup(), NULL);
	REQUIRE_RC(cci_rma_register(ep, mem, LOCAL_LEN, CCI_FLAG_READ | CCI_FLAG_WRITE, &h),
	           CCI_SUCCESS);
	h_connect(ep, uri, CCI_CONN_ATTR_RO, h, sizeof(*h), NULL);
	h_msg_send(wfd, "c", 1);
	for (uint64_t stop = h_now_ms() + 40000; h_now_ms() < stop;) {
		cci_event_t *ev = NULL;
		char cmd = 'q';

		if (h_msg_ready(rfd) && (read(rfd, &cmd, 1) != 1 || cmd != 'z'))
			break;
		if (cmd == 'z') {
			h_msg_send(wfd, "k", 1);
			raise(SIGSTOP);
		}
		if (h_poll_event(ep, &ev, 50) != CCI_SUCCESS)
			continue;
		recvs += ev->type == CCI_EVENT_RECV;
		cci_return_event(ev);
	}
	h_msg_send(wfd, &recvs, sizeof(recvs));
	CHECK_RC(cci_rma_deregister(ep, h), CCI_SUCCESS);
	h_teardown(ep);
	free(mem);
}

/* Give the client our URI, accept its request, keep its handle. */
static cci_connection_t *accept_client(cci_endpoint_t *ep, struct h_peer *p,
                                       struct cci_rma_handle *rh)
{
	char *uri = h_uri(ep), ok = 0;
	cci_connection_t *c;
	cci_event_t *ev;

	h_msg_send(p->wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT_REQUEST, 20000);
	REQUIRE(ev != NULL);
	REQUIRE(ev->request.data_len == sizeof(*rh));
	memcpy(rh, ev->request.data_ptr, sizeof(*rh));
	CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
	cci_return_event(ev);
	ev = EXPECT_EVENT(ep, CCI_EVENT_ACCEPT, 10000);
	REQUIRE(ev && ev->accept.status == CCI_SUCCESS);
	c = ev->accept.connection;
	cci_return_event(ev);
	REQUIRE(h_msg_recv(p->rfd, &ok, 1, 10000) == 1 && ok == 'c');
	return c;
}

static void freeze_client(struct h_peer *p)
{
	char ack = 0;

	if (write(p->wfd, "z", 1) != 1)
		CHECKF(0, "the client's pipe is closed");
	CHECK(h_msg_recv(p->rfd, &ack, 1, 10000) == 1 && ack == 'k');
	h_wait_stopped(p->pid);
}

static void killed_client(void)
{
	struct h_peer victims[ROUNDS], other;
	struct cci_rma_handle rh;
	struct dfix d = { 0 };
	uint32_t recvs = 0;

	h_spawn(&other, client_role, NULL);
	for (int r = 0; r < ROUNDS; r++)
		h_spawn(&victims[r], client_role, NULL);
	dfix_open(&d);
	d.live = accept_client(d.ep, &other, &rh);
	for (int r = 0; r < ROUNDS; r++) {
		cci_connection_t *c = accept_client(d.ep, &victims[r], &rh);
		struct f_flight f;

		freeze_client(&victims[r]);
		f_flight_kill(d.ep, c, d.lh, &rh, victims[r].pid, d.bound_ms, &f);
		h_peer_kill(&victims[r]);
		CHECK_RC(cci_disconnect(c), CCI_SUCCESS);
		dfix_round_done(&d, r, &f);
	}
	CHECK(write(other.wfd, "q", 1) == 1);
	CHECK(h_msg_recv(other.rfd, &recvs, sizeof(recvs), 10000) == (int)sizeof(recvs));
	CHECKF(recvs == ROUNDS, "the live client received %u of %d messages", recvs, ROUNDS);
	h_peer_finish(&other, 10000);
	dfix_close(&d);
}

static const struct death ka_off = { 0 }, ka_1s = { 1000000 };

const struct h_test t_death_tests[] = {
	{ "a server killed with sends, rma writes and reads in flight fails each once "
	  "within the slack (keepalive off); the other connection works; no fd or RSS growth",
	  killed_server, H_NEEDS_DEVICE, 90, &ka_off },
	{ "a server killed with sends, rma writes and reads in flight fails each once "
	  "within 1 s keepalive + slack; the other connection works; no fd or RSS growth",
	  killed_server, H_NEEDS_DEVICE, 90, &ka_1s },
	{ "a client killed with sends, rma writes and reads in flight fails each once "
	  "within the slack (keepalive off); the other connection works; no fd or RSS growth",
	  killed_client, H_NEEDS_DEVICE, 90, &ka_off },
	{ "a client killed with sends, rma writes and reads in flight fails each once "
	  "within 1 s keepalive + slack; the other connection works; no fd or RSS growth",
	  killed_client, H_NEEDS_DEVICE, 90, &ka_1s },
};
const size_t t_death_count = sizeof(t_death_tests) / sizeof(t_death_tests[0]);
