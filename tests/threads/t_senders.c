/*
 * t_senders.c - four threads send numbered messages on one connection, or
 * on each of three, while one thread polls both endpoints (the sending
 * one for completions, the receiving one for the messages) and another
 * creates, uses and disconnects connections on the sending endpoint in a
 * loop.  The poller checks that every send completes once, that every
 * message arrives once and intact, and on RO in per-sender order.
 *
 * The conformance suite's t_threads.c covers two senders on one
 * connection with a peer process; here every side is in this process and
 * connections come and go under the senders' feet.  CCI_THREADS_MSGS sets
 * the messages per sender and connection (300), CCI_THREADS_CYCLES the
 * connections created and disconnected meanwhile (40).
 */
#include "threads.h"

#include "proto.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define SENDERS 4u
#define MAX_CONNS 3u
#define CHURN_TAG 0xC4u          /* connect payload of a churned connection */
#define RUN_MS 60000u

/* The context of churned connections and of their sends. */
static char churn_marker;
#define CHURN_CTX ((void *)&churn_marker)

struct shared {
	cci_endpoint_t *ep;          /* sends */
	cci_endpoint_t *rep;         /* receives */
	char *uri;                   /* of rep */
	cci_connection_t *conns[MAX_CONNS];
	uint32_t nconn, per, cycles;
	cci_conn_attribute_t attr;
	uint64_t deadline;

	atomic_uint senders_done;
	atomic_uint sent;            /* sends accepted, all senders */
	atomic_int churn_done;
	/* A churned connection's CONNECT, from the poller to the churner:
	 * churn_conn is written before churn_state turns 1 (or 2: failed). */
	_Atomic(cci_connection_t *) churn_conn;
	atomic_int churn_state;

	/* The poller's, read once it has been joined. */
	uint8_t *completed;          /* per send context */
	uint8_t *arrived;            /* per (connection, sender, seq) */
	uint32_t next[MAX_CONNS][SENDERS];
	uint64_t completions, failed, bad_ctx, dup_completions;
	uint64_t recvs, dups, corrupt, order_errors, foreign;
	uint64_t requests, churn_recvs;
};

struct sender {
	struct shared *sh;
	uint16_t id;
	uint32_t sent;
	int last_rc;
};

static uint32_t msg_len(const cci_connection_t *c, uint32_t seq, uint16_t stream)
{
	uint32_t len = PROTO_HDR + (seq * 7 + stream) % 48;

	return len > c->max_send_size ? c->max_send_size : len;
}

static uint64_t send_index(const struct shared *sh, uint16_t id, uint32_t c, uint32_t seq)
{
	return ((uint64_t)id * sh->nconn + c) * sh->per + seq;
}

static void *sender(void *arg)
{
	struct sender *t = arg;
	struct shared *sh = t->sh;
	uint8_t buf[PROTO_HDR + 48];

	t->last_rc = CCI_SUCCESS;
	for (uint32_t seq = 0; seq < sh->per && t->last_rc == CCI_SUCCESS; seq++) {
		for (uint32_t c = 0; c < sh->nconn && t->last_rc == CCI_SUCCESS; c++) {
			uint32_t len = msg_len(sh->conns[c], seq, t->id);
			int rc;

			proto_build(buf, len, t->id, seq, PROTO_DATA);
			do {
				rc = cci_send(sh->conns[c], buf, len,
					      h_ctx(send_index(sh, t->id, c, seq)), 0);
				if (rc == CCI_ENOBUFS)
					sched_yield();
			} while (rc == CCI_ENOBUFS && h_now_ms() < sh->deadline);
			if (rc == CCI_SUCCESS) {
				t->sent++;
				atomic_fetch_add(&sh->sent, 1);
			} else {
				t->last_rc = rc;
			}
		}
	}
	atomic_fetch_add(&sh->senders_done, 1);
	return NULL;
}

/* Connect, send one message, disconnect, cycles times. */
static void *churner(void *arg)
{
	struct shared *sh = arg;
	uint8_t buf[PROTO_HDR];
	uint32_t tag = CHURN_TAG;
	uint32_t k;

	for (k = 0; k < sh->cycles && h_now_ms() < sh->deadline; k++) {
		cci_connection_t *c;
		int rc, state;

		atomic_store(&sh->churn_state, 0);
		if (!CHECK_RC(cci_connect(sh->ep, sh->uri, &tag, sizeof(tag), sh->attr,
					  CHURN_CTX, 0, NULL), CCI_SUCCESS))
			break;
		while ((state = atomic_load(&sh->churn_state)) == 0 &&
		       h_now_ms() < sh->deadline)
			sched_yield();
		if (!CHECKF(state == 1, "churned connection %u: %s", k,
			    state ? "connect failed" : "no CONNECT event in time"))
			break;
		c = atomic_load(&sh->churn_conn);
		proto_build(buf, PROTO_HDR, PROTO_SERVER_STREAM, k, PROTO_DATA);
		rc = cci_send(c, buf, PROTO_HDR, CHURN_CTX, 0);
		CHECK_RC2(rc, CCI_SUCCESS, CCI_ENOBUFS);
		CHECK_RC(cci_disconnect(c), CCI_SUCCESS);
	}
	CHECKF(k == sh->cycles, "%u of %u connections created and disconnected", k,
	       sh->cycles);
	atomic_store(&sh->churn_done, 1);
	return NULL;
}

static void on_send_side(struct shared *sh, cci_event_t *ev)
{
	uint64_t total = (uint64_t)SENDERS * sh->nconn * sh->per;

	if (ev->type == CCI_EVENT_SEND) {
		uint64_t i = (uintptr_t)ev->send.context - 1;

		if (ev->send.context == CHURN_CTX)
			return;         /* may complete or be dropped by the disconnect */
		sh->completions++;
		if (ev->send.status != CCI_SUCCESS)
			sh->failed++;
		if (i >= total)
			sh->bad_ctx++;
		else if (sh->completed[i]++)
			sh->dup_completions++;
	} else if (ev->type == CCI_EVENT_CONNECT && ev->connect.context == CHURN_CTX) {
		int ok = ev->connect.status == CCI_SUCCESS;

		atomic_store(&sh->churn_conn, ok ? ev->connect.connection : NULL);
		atomic_store(&sh->churn_state, ok ? 1 : 2);
	} else {
		sh->foreign++;
	}
}

static void on_recv(struct shared *sh, cci_event_t *ev)
{
	const void *ctx = ev->recv.connection->context;
	uintptr_t c = (uintptr_t)ctx - 1;
	struct proto_hdr h;
	uint64_t bit;

	if (proto_parse(ev->recv.ptr, ev->recv.len, &h) != 1) {
		sh->corrupt++;
		return;
	}
	if (ctx == CHURN_CTX) {
		sh->churn_recvs++;
		return;
	}
	if (c >= sh->nconn || h.stream >= SENDERS || h.seq >= sh->per) {
		sh->corrupt++;
		return;
	}
	sh->recvs++;
	bit = send_index(sh, h.stream, (uint32_t)c, h.seq);
	if (sh->arrived[bit]++)
		sh->dups++;
	if (sh->attr == CCI_CONN_ATTR_RO && h.seq != sh->next[c][h.stream])
		sh->order_errors++;
	sh->next[c][h.stream] = h.seq + 1;
}

static void on_recv_side(struct shared *sh, cci_event_t *ev)
{
	uint32_t tag = 0;

	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		sh->requests++;
		if (ev->request.data_len == sizeof(tag))
			memcpy(&tag, ev->request.data_ptr, sizeof(tag));
		if (CHECKF(tag == CHURN_TAG, "a connect request tagged %u", tag))
			CHECK_RC(cci_accept(ev, CHURN_CTX), CCI_SUCCESS);
		else
			CHECK_RC(cci_reject(ev), CCI_SUCCESS);
		break;
	case CCI_EVENT_ACCEPT:
		if (ev->accept.status != CCI_SUCCESS)
			sh->foreign++;
		break;
	case CCI_EVENT_RECV:
		on_recv(sh, ev);
		break;
	default:
		sh->foreign++;
	}
}

static void *poller(void *arg)
{
	struct shared *sh = arg;

	while (h_now_ms() < sh->deadline) {
		cci_event_t *ev = NULL;
		int got = 0;

		if (cci_get_event(sh->ep, &ev) == CCI_SUCCESS) {
			on_send_side(sh, ev);
			cci_return_event(ev);
			got = 1;
		}
		if (cci_get_event(sh->rep, &ev) == CCI_SUCCESS) {
			on_recv_side(sh, ev);
			cci_return_event(ev);
			got = 1;
		}
		if (got)
			continue;
		if (atomic_load(&sh->senders_done) == SENDERS && atomic_load(&sh->churn_done) &&
		    sh->completions >= atomic_load(&sh->sent) &&
		    sh->recvs >= atomic_load(&sh->sent))
			break;
		sched_yield();
	}
	return NULL;
}

static void senders_poller_churn(void)
{
	const uintptr_t *arg = h_current->arg;
	struct shared *sh = calloc(1, sizeof(*sh));
	struct sender snd[SENDERS];
	pthread_t th[SENDERS + 2];
	uint64_t total;
	cci_device_t *dev;

	REQUIRE(sh != NULL);
	sh->nconn = (uint32_t)arg[0];
	sh->attr = (cci_conn_attribute_t)arg[1];
	sh->per = (uint32_t)h_env_count("CCI_THREADS_MSGS", 300);
	sh->cycles = (uint32_t)h_env_count("CCI_THREADS_CYCLES", 40);
	total = (uint64_t)SENDERS * sh->nconn * sh->per;
	sh->completed = calloc(total, 1);
	sh->arrived = calloc(total, 1);
	REQUIRE(sh->completed && sh->arrived);
	dev = h_setup();
	sh->rep = h_endpoint(dev, NULL);
	sh->ep = h_endpoint(dev, NULL);
	sh->uri = h_uri(sh->rep);
	for (uint32_t c = 0; c < sh->nconn; c++)
		sh->conns[c] = th_connect_local(sh->ep, sh->rep, sh->uri, c, sh->attr,
						h_ctx(c));

	sh->deadline = h_now_ms() + RUN_MS;
	REQUIRE(pthread_create(&th[SENDERS], NULL, poller, sh) == 0);
	REQUIRE(pthread_create(&th[SENDERS + 1], NULL, churner, sh) == 0);
	for (uint16_t i = 0; i < SENDERS; i++) {
		snd[i] = (struct sender){ .sh = sh, .id = i };
		REQUIRE(pthread_create(&th[i], NULL, sender, &snd[i]) == 0);
	}
	for (unsigned i = 0; i < SENDERS + 2; i++)
		pthread_join(th[i], NULL);

	for (unsigned i = 0; i < SENDERS; i++)
		CHECKF(snd[i].sent == sh->nconn * sh->per, "sender %u: %u of %u sent (last %s)",
		       i, snd[i].sent, sh->nconn * sh->per, h_status_name(snd[i].last_rc));
	CHECKF(sh->completions == total && !sh->failed && !sh->bad_ctx && !sh->dup_completions,
	       "%llu of %llu completions, %llu failed, %llu unknown, %llu twice",
	       (unsigned long long)sh->completions, (unsigned long long)total,
	       (unsigned long long)sh->failed, (unsigned long long)sh->bad_ctx,
	       (unsigned long long)sh->dup_completions);
	CHECKF(sh->recvs == total && !sh->dups && !sh->corrupt,
	       "%llu of %llu messages arrived, %llu twice, %llu corrupt",
	       (unsigned long long)sh->recvs, (unsigned long long)total,
	       (unsigned long long)sh->dups, (unsigned long long)sh->corrupt);
	if (sh->attr == CCI_CONN_ATTR_RO)
		CHECKF(!sh->order_errors, "%llu messages out of per-sender order",
		       (unsigned long long)sh->order_errors);
	CHECKF(sh->requests == sh->cycles && sh->churn_recvs <= sh->cycles && !sh->foreign,
	       "%llu connect requests for %u churned connections, %llu of their "
	       "messages, %llu unexpected events", (unsigned long long)sh->requests,
	       sh->cycles, (unsigned long long)sh->churn_recvs,
	       (unsigned long long)sh->foreign);
	h_note("%llu messages, %llu churned connections' messages arrived",
	       (unsigned long long)sh->recvs, (unsigned long long)sh->churn_recvs);

	CHECK_RC(cci_destroy_endpoint(sh->rep), CCI_SUCCESS);
	h_teardown(sh->ep);
	free(sh->uri);
	free(sh->completed);
	free(sh->arrived);
	free(sh);
}

static const uintptr_t one_ro[] = { 1, CCI_CONN_ATTR_RO };
static const uintptr_t three_ro[] = { 3, CCI_CONN_ATTR_RO };
static const uintptr_t three_ru[] = { 3, CCI_CONN_ATTR_RU };

const struct h_test t_senders_tests[] = {
	{ "four threads send on one RO connection while one polls and one churns "
	  "connections: each message completes once and arrives once, in per-sender "
	  "order", senders_poller_churn, H_NEEDS_DEVICE, 120, one_ro },
	{ "four threads send on each of three RO connections while one polls and one "
	  "churns connections: each message completes once and arrives once, in "
	  "per-sender order", senders_poller_churn, H_NEEDS_DEVICE, 120, three_ro },
	{ "four threads send on each of three RU connections while one polls and one "
	  "churns connections: each message completes once and arrives once",
	  senders_poller_churn, H_NEEDS_DEVICE, 120, three_ru },
};
const size_t t_senders_count = sizeof(t_senders_tests) / sizeof(t_senders_tests[0]);
