/*
 * t_threads.c - concurrency: one endpoint used from several threads at
 * once (senders with a separate poller, pollers sharing the events), and
 * several client processes feeding one server.
 */
#include "tests.h"

#include "proto.h"
#include "server.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define PER_THREAD 5000u

struct tshared {
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint64_t deadline;
	atomic_uint senders_done;
	atomic_uint completions;
	atomic_uint failures;
	atomic_uint recvs;
	atomic_uint dups;
	atomic_uint bad;
	uint8_t seen[2 * PER_THREAD];
};

struct tsender {
	struct tshared *sh;
	uint16_t id;
	uint32_t sent;
	int last_rc;
};

static void *sender(void *arg)
{
	struct tsender *t = arg;
	uint8_t buf[80];

	t->last_rc = CCI_SUCCESS;
	while (t->sent < PER_THREAD && h_now_ms() < t->sh->deadline) {
		uint32_t len = PROTO_HDR + (t->sent % 64);
		int rc;

		proto_build(buf, len, t->id, t->sent, PROTO_DATA);
		rc = cci_send(t->sh->c, buf, len, h_ctx(t->id * PER_THREAD + t->sent), 0);
		if (rc == CCI_SUCCESS)
			t->sent++;
		else if (rc == CCI_ENOBUFS)
			sched_yield();
		else {
			t->last_rc = rc;
			break;
		}
	}
	atomic_fetch_add(&t->sh->senders_done, 1);
	return NULL;
}

static void note_completion(struct tshared *sh, cci_event_t *ev)
{
	uintptr_t i = (uintptr_t)ev->send.context - 1;

	atomic_fetch_add(&sh->completions, 1);
	if (ev->send.status != CCI_SUCCESS)
		atomic_fetch_add(&sh->failures, 1);
	if (i >= 2 * PER_THREAD)
		atomic_fetch_add(&sh->bad, 1);
	else if (sh->seen[i]++)
		atomic_fetch_add(&sh->dups, 1);
}

static void *send_poller(void *arg)
{
	struct tshared *sh = arg;

	while (h_now_ms() < sh->deadline) {
		cci_event_t *ev = NULL;
		int rc = cci_get_event(sh->ep, &ev);

		if (rc == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_SEND)
				note_completion(sh, ev);
			else
				atomic_fetch_add(&sh->bad, 1);
			cci_return_event(ev);
			continue;
		}
		if (atomic_load(&sh->senders_done) == 2 &&
		    atomic_load(&sh->completions) >= 2 * PER_THREAD)
			break;
		sched_yield();
	}
	return NULL;
}

static void two_senders_one_poller(cci_conn_attribute_t attr)
{
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct tshared *sh = calloc(1, sizeof(*sh));
	struct tsender snd[2];
	pthread_t th[3];

	REQUIRE(sh != NULL);
	srv_start(&s, &o);
	sh->ep = h_endpoint(h_setup(), NULL);
	sh->c = h_connect(sh->ep, s.uri, attr, NULL, 0, NULL);
	sh->deadline = h_now_ms() + 20000;
	REQUIRE(pthread_create(&th[2], NULL, send_poller, sh) == 0);
	for (uint16_t i = 0; i < 2; i++) {
		snd[i] = (struct tsender){ .sh = sh, .id = i };
		REQUIRE(pthread_create(&th[i], NULL, sender, &snd[i]) == 0);
	}
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++)
		CHECKF(snd[i].sent == PER_THREAD, "thread %d sent %u of %u (last %s)", i,
		       snd[i].sent, PER_THREAD, h_status_name(snd[i].last_rc));
	CHECKF(atomic_load(&sh->completions) == 2 * PER_THREAD && !atomic_load(&sh->dups) &&
	       !atomic_load(&sh->bad) && !atomic_load(&sh->failures),
	       "%u completions, %u duplicates, %u failed, %u unexpected",
	       atomic_load(&sh->completions), atomic_load(&sh->dups),
	       atomic_load(&sh->failures), atomic_load(&sh->bad));
	srv_stop_and_teardown(&s, &st, sh->ep);
	CHECK(st.enobufs == 0);
	CHECKF(st.recvs == 2 * PER_THREAD && st.dups == 0 && st.corrupt == 0,
	       "server: %llu received, %llu duplicates, %llu corrupt",
	       (unsigned long long)st.recvs, (unsigned long long)st.dups,
	       (unsigned long long)st.corrupt);
	if (attr == CCI_CONN_ATTR_RO)
		CHECKF(st.order_errors == 0, "%llu messages out of per-thread order",
		       (unsigned long long)st.order_errors);
	free(sh);
}

static void ro_two_senders(void)
{
	two_senders_one_poller(CCI_CONN_ATTR_RO);
}

static void ru_two_senders(void)
{
	two_senders_one_poller(CCI_CONN_ATTR_RU);
}

#define FROM_SERVER 4000u

static void *recv_poller(void *arg)
{
	struct tshared *sh = arg;

	while (h_now_ms() < sh->deadline && atomic_load(&sh->recvs) < FROM_SERVER) {
		cci_event_t *ev = NULL;
		struct proto_hdr h;

		if (cci_get_event(sh->ep, &ev) != CCI_SUCCESS) {
			sched_yield();
			continue;
		}
		if (ev->type == CCI_EVENT_RECV &&
		    proto_parse(ev->recv.ptr, ev->recv.len, &h) == 1 && h.seq < FROM_SERVER) {
			if (atomic_fetch_add((atomic_uchar *)&sh->seen[h.seq], 1))
				atomic_fetch_add(&sh->dups, 1);
			atomic_fetch_add(&sh->recvs, 1);
		} else {
			atomic_fetch_add(&sh->bad, 1);
		}
		cci_return_event(ev);
	}
	return NULL;
}

static void two_pollers_share_events(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	struct tshared *sh = calloc(1, sizeof(*sh));
	pthread_t th[2];

	REQUIRE(sh != NULL);
	srv_start(&s, &o);
	sh->ep = h_endpoint(h_setup(), NULL);
	sh->c = h_connect(sh->ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	sh->deadline = h_now_ms() + 15000;
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&th[i], NULL, recv_poller, sh) == 0);
	srv_cmd(&s, SRV_CMD_SEND, FROM_SERVER);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECKF(atomic_load(&sh->recvs) == FROM_SERVER && !atomic_load(&sh->dups) &&
	       !atomic_load(&sh->bad), "%u of %u received, %u duplicates, %u unexpected",
	       atomic_load(&sh->recvs), FROM_SERVER, atomic_load(&sh->dups),
	       atomic_load(&sh->bad));
	srv_stop_and_teardown(&s, NULL, sh->ep);
	free(sh);
}

/* A client process: connect to the server, send n messages on its stream. */
struct client_arg {
	char uri[512];
	uint16_t stream;
	uint32_t n;
};

static void client_role(int rfd, int wfd, const void *arg)
{
	const struct client_arg *a = arg;
	struct h_sendctr ctr;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint8_t buf[256];

	(void)rfd;
	(void)wfd;
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, a->uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	h_sendctr_init(&ctr, a->n);
	for (uint32_t seq = 0; seq < a->n; seq++) {
		uint32_t len = PROTO_HDR + (seq * 7 + a->stream) % 200;

		if (len > c->max_send_size)
			len = c->max_send_size;
		proto_build(buf, len, a->stream, seq, PROTO_DATA);
		if (!CHECK_RC(h_send(ep, c, buf, len, h_ctx(seq), 0, &ctr), CCI_SUCCESS))
			break;
	}
	h_drain(ep, &ctr, a->n, 10000);
	CHECKF(ctr.ok == a->n && ctr.err == 0 && ctr.dup == 0, "client %u: %llu of %u "
	       "sends completed", a->stream, (unsigned long long)ctr.ok, a->n);
	h_sendctr_free(&ctr);
	h_teardown(ep);
}

static void three_client_processes_one_server(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct client_arg a[3];
	struct h_peer cl[3];

	srv_start(&s, &o);
	for (uint16_t i = 0; i < 3; i++) {
		a[i] = (struct client_arg){ .stream = i, .n = 3000 };
		memcpy(a[i].uri, s.uri, sizeof(a[i].uri));
		h_spawn(&cl[i], client_role, &a[i]);
	}
	for (int i = 0; i < 3; i++)
		h_peer_finish(&cl[i], 25000);
	srv_stop(&s, &st);
	CHECKF(st.accepts == 3 && st.recvs == 9000, "server: %llu connections, %llu of "
	       "9000 messages", (unsigned long long)st.accepts,
	       (unsigned long long)st.recvs);
	CHECK(st.order_errors == 0 && st.dups == 0 && st.corrupt == 0 && st.bad_conn == 0);
}

const struct h_test t_threads_tests[] = {
	{ "two threads send on one RO connection while a third polls: each message "
	  "arrives once, in per-thread order", ro_two_senders, H_NEEDS_DEVICE, 30 },
	{ "two threads send on one RU connection while a third polls: each message "
	  "arrives once", ru_two_senders, H_NEEDS_DEVICE, 30 },
	{ "two threads polling one endpoint receive each of 4000 messages once",
	  two_pollers_share_events, H_NEEDS_DEVICE, 30 },
	{ "three client processes send 3000 messages each to one server: all arrive "
	  "once, in order per connection", three_client_processes_one_server,
	  H_NEEDS_DEVICE, 30 },
};
const size_t t_threads_count = sizeof(t_threads_tests) / sizeof(t_threads_tests[0]);
