/*
 * t_sock_relay.c - sock connections through the lossy relay
 * (tests/common/lossy_relay.h): loss, duplication, reordering, a blackout
 * that is recovered from and one that outlasts the timeouts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sock_test.h"

#define MSG_MAX 8192u
#define STREAM_MS 400000u /* the longest a stream test may run */

static const struct lossy_relay_conf lossy = {
	.seed = 0x5eed, .loss_ppm = 50000, .dup_ppm = 10000, .reorder_ppm = 50000,
	.reorder_us = 300,
};

struct stream {
	struct sk_pair *p;
	uint32_t n, sent, recvd, next, min;
	int ordered;
	uint8_t *seen, *done;   /* per message: receptions, completions */
	uint64_t ok, err, dups, corrupt, keepalives;
	uint64_t early;          /* unordered: delivered before an earlier message */
	uint32_t top;            /* unordered: the highest message number seen + 1 */
	int first_err, send_rc;
};

static uint32_t msg_count(uint32_t dflt)
{
	const char *e = getenv("SOCK_TEST_MSGS");

	return e && atoi(e) > 0 ? (uint32_t)atoi(e) : dflt;
}

static void stream_init(struct stream *s, struct sk_pair *p, uint32_t n, int ordered,
                        uint32_t min)
{
	memset(s, 0, sizeof(*s));
	s->p = p;
	s->n = n;
	s->ordered = ordered;
	s->min = min;
	s->seen = calloc(n, 1);
	s->done = calloc(n, 1);
	s->send_rc = CCI_SUCCESS;
}

static void stream_free(struct stream *s)
{
	free(s->seen);
	free(s->done);
}

/* Send until the window of sends is full (CCI_ENOBUFS), at most burst. */
static void stream_send(struct stream *s, uint32_t burst)
{
	static uint8_t buf[MSG_MAX];

	while (s->sent < s->n && burst--) {
		uint32_t len = sk_msg_len(s->sent, s->min, MSG_MAX);
		int rc;

		sk_msg_fill(s->sent, buf, len);
		rc = cci_send(s->p->cc, buf, len, (void *)(uintptr_t)(s->sent + 1), 0);
		if (rc == CCI_ENOBUFS)
			return;
		if (rc != CCI_SUCCESS) {
			s->send_rc = rc;
			return;
		}
		s->sent++;
	}
}

static void on_recv(struct stream *s, const cci_event_t *ev)
{
	uint32_t seq = s->next;

	if (!s->ordered) {
		if (ev->recv.len < 4)
			seq = UINT32_MAX;
		else
			memcpy(&seq, ev->recv.ptr, 4);
	}
	if (seq >= s->n || !sk_msg_check(seq, ev->recv.ptr, ev->recv.len, s->min, MSG_MAX)) {
		s->corrupt++;
		return;
	}
	if (s->seen[seq]++)
		s->dups++;
	if (!s->ordered && seq + 1 < s->top)
		s->early++;
	if (seq + 1 > s->top)
		s->top = seq + 1;
	s->next++;
	s->recvd++;
}

static void on_send(struct stream *s, const cci_event_t *ev)
{
	uint32_t seq = (uint32_t)(uintptr_t)ev->send.context - 1;

	if (seq < s->n)
		s->done[seq]++;
	if (ev->send.status == CCI_SUCCESS) {
		s->ok++;
	} else if (!s->err++) {
		s->first_err = ev->send.status;
	}
}

/* One pass over both endpoints; returns the events handled. */
static int stream_poll(struct stream *s)
{
	cci_event_t *ev;
	int n = 0;

	for (int i = 0; i < 64 && cci_get_event(s->p->cli, &ev) == CCI_SUCCESS; i++, n++) {
		if (ev->type == CCI_EVENT_SEND)
			on_send(s, ev);
		else if (ev->type == CCI_EVENT_KEEPALIVE_TIMEDOUT)
			s->keepalives++;
		cci_return_event(ev);
	}
	for (int i = 0; i < 64 && cci_get_event(s->p->srv, &ev) == CCI_SUCCESS; i++, n++) {
		if (ev->type == CCI_EVENT_RECV)
			on_recv(s, ev);
		cci_return_event(ev);
	}
	return n;
}

static void relay_report(const char *what, struct sk_pair *p, uint64_t ms, const struct stream *s)
{
	struct lossy_relay_stats st;

	lossy_relay_get_stats(p->relay, &st);
	printf("\n    %s: %u messages in %llu ms; relay A->B %llu received, %llu dropped, %llu "
	       "duplicated, %llu reordered, %llu in blackout; B->A %llu received, %llu dropped ",
	       what, s ? s->recvd : 0, (unsigned long long)ms,
	       (unsigned long long)st.received[0], (unsigned long long)st.dropped[0],
	       (unsigned long long)st.duplicated[0], (unsigned long long)st.reordered[0],
	       (unsigned long long)st.blackout[0], (unsigned long long)st.received[1],
	       (unsigned long long)st.dropped[1]);
}

static void stream_check(struct stream *s)
{
	CU_ASSERT_EQUAL(s->send_rc, CCI_SUCCESS);
	CU_ASSERT_EQUAL(s->recvd, s->n);
	CU_ASSERT_EQUAL(s->dups, 0);
	CU_ASSERT_EQUAL(s->corrupt, 0);
	CU_ASSERT_EQUAL(s->ok, s->n);
	CU_ASSERT_EQUAL(s->err, 0);
	for (uint32_t i = 0; i < s->n; i++)
		if (s->seen[i] != 1 || s->done[i] != 1) {
			CU_FAIL("a message was not received, or not completed, exactly once");
			break;
		}
}

static void reliable_stream(cci_conn_attribute_t attr, uint32_t min)
{
	struct sk_pair p;
	struct stream s;
	uint32_t to = 60000000;
	uint64_t t0;

	if (sk_pair_open(&p, attr, &lossy, NULL) != 0) {
		sk_pair_close(&p);
		return;
	}
	cci_set_opt(p.cc, CCI_OPT_CONN_SEND_TIMEOUT, &to);
	stream_init(&s, &p, msg_count(1000000), attr == CCI_CONN_ATTR_RO, min);
	t0 = sk_now_ms();
	while ((s.recvd < s.n || s.ok + s.err < s.sent) && s.send_rc == CCI_SUCCESS &&
	       sk_now_ms() - t0 < STREAM_MS) {
		stream_send(&s, 256);
		stream_poll(&s);
	}
	relay_report(attr == CCI_CONN_ATTR_RO ? "RO" : "RU", &p, sk_now_ms() - t0, &s);
	stream_check(&s);
	if (attr == CCI_CONN_ATTR_RU) {
		/* Behind a loss, RU hands out what came instead of waiting. */
		printf("%llu delivered ahead of an earlier one ", (unsigned long long)s.early);
		CU_ASSERT(s.early > 0);
	}
	stream_free(&s);
	sk_pair_close(&p);
}

void t_relay_ro_stream(void)
{
	reliable_stream(CCI_CONN_ATTR_RO, 1);
}

void t_relay_ru_stream(void)
{
	reliable_stream(CCI_CONN_ATTR_RU, 4);
}

void t_relay_uu_no_dups(void)
{
	struct sk_pair p;
	struct stream s;
	uint64_t t0, quiet;
	struct lossy_relay_stats st;

	if (sk_pair_open(&p, CCI_CONN_ATTR_UU, &lossy, NULL) != 0) {
		sk_pair_close(&p);
		return;
	}
	stream_init(&s, &p, 20000, 0, 4);
	t0 = sk_now_ms();
	while (s.sent < s.n && s.send_rc == CCI_SUCCESS && sk_now_ms() - t0 < 60000) {
		stream_send(&s, 16);
		stream_poll(&s);
	}
	for (quiet = sk_now_ms() + 500; sk_now_ms() < quiet;)
		if (stream_poll(&s))
			quiet = sk_now_ms() + 500;
	relay_report("UU", &p, sk_now_ms() - t0, &s);
	lossy_relay_get_stats(p.relay, &st);
	CU_ASSERT(st.duplicated[0] > 0);
	CU_ASSERT_EQUAL(s.send_rc, CCI_SUCCESS);
	CU_ASSERT_EQUAL(s.sent, s.n);
	CU_ASSERT_EQUAL(s.ok, s.n);
	CU_ASSERT_EQUAL(s.dups, 0);
	CU_ASSERT_EQUAL(s.corrupt, 0);
	CU_ASSERT(s.recvd > 0 && s.recvd <= s.n);
	stream_free(&s);
	sk_pair_close(&p);
}

/* ---- RMA ------------------------------------------------------------------ */

#define RMA_LEN (4u << 20)

/* Wait for the completion message of write k at the server and the SEND
 * event at the client; 0 when both came and the data matched. */
static int rma_wait(struct sk_pair *p, const uint8_t *src, const uint8_t *dst, int k)
{
	uint64_t stop = sk_now_ms() + 60000;
	int got_msg = 0, got_send = 0, intact = 0;
	cci_event_t *ev;

	while ((!got_msg || !got_send) && sk_now_ms() < stop) {
		if (cci_get_event(p->cli, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_SEND) {
				CU_ASSERT_EQUAL(ev->send.status, CCI_SUCCESS);
				CU_ASSERT_EQUAL((int)(uintptr_t)ev->send.context, k + 1);
				got_send = 1;
			}
			cci_return_event(ev);
		}
		if (cci_get_event(p->srv, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_RECV) {
				/* The data must be in place when the message arrives. */
				intact = ev->recv.len == 4 && memcmp(ev->recv.ptr, &k, 4) == 0 &&
				         sk_fnv(dst, RMA_LEN) == sk_fnv(src, RMA_LEN);
				got_msg = 1;
			}
			cci_return_event(ev);
		}
	}
	CU_ASSERT(got_msg && got_send);
	CU_ASSERT(intact);
	return got_msg && got_send && intact ? 0 : -1;
}

void t_relay_rma_write_4m(void)
{
	struct sk_pair p;
	uint8_t *src = malloc(RMA_LEN), *dst = calloc(1, RMA_LEN);
	cci_rma_handle_t *lh = NULL, *rh = NULL;
	uint32_t to = 60000000;
	uint64_t t0;

	if (!src || !dst || sk_pair_open(&p, CCI_CONN_ATTR_RO, &lossy, NULL) != 0)
		goto out;
	cci_set_opt(p.cc, CCI_OPT_CONN_SEND_TIMEOUT, &to);
	CU_ASSERT_EQUAL(cci_rma_register(p.cli, src, RMA_LEN, CCI_FLAG_READ, &lh), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_rma_register(p.srv, dst, RMA_LEN, CCI_FLAG_WRITE, &rh), CCI_SUCCESS);
	t0 = sk_now_ms();
	for (int k = 0; lh && rh && k < 4; k++) {
		for (uint32_t i = 0; i < RMA_LEN; i++)
			src[i] = (uint8_t)(i * 7u + (uint32_t)k * 13u + (i >> 12));
		CU_ASSERT_EQUAL(cci_rma(p.cc, &k, 4, lh, 0, rh, 0, RMA_LEN, (void *)(uintptr_t)(k + 1),
		                        CCI_FLAG_WRITE), CCI_SUCCESS);
		if (rma_wait(&p, src, dst, k) != 0)
			break;
	}
	relay_report("RMA 4 x 4 MiB", &p, sk_now_ms() - t0, NULL);
out:
	sk_pair_close(&p);
	free(src);
	free(dst);
}

/* ---- blackouts ------------------------------------------------------------ */

void t_relay_blackout_recovers(void)
{
	struct sk_pair p;
	struct stream s;
	uint32_t to = 30000000;
	uint64_t t0, dark = 0;
	int phase = 0;

	if (sk_pair_open(&p, CCI_CONN_ATTR_RO, &lossy, NULL) != 0) {
		sk_pair_close(&p);
		return;
	}
	cci_set_opt(p.cc, CCI_OPT_CONN_SEND_TIMEOUT, &to);
	cci_set_opt(p.sc, CCI_OPT_CONN_SEND_TIMEOUT, &to);
	stream_init(&s, &p, 20000, 1, 1);
	t0 = sk_now_ms();
	while ((s.recvd < s.n || s.ok + s.err < s.sent) && s.send_rc == CCI_SUCCESS &&
	       sk_now_ms() - t0 < 120000) {
		if (phase == 0 && s.recvd >= s.n / 2) {
			lossy_relay_blackout(p.relay, 1);
			dark = sk_now_ms();
			phase = 1;
		} else if (phase == 1 && sk_now_ms() - dark >= 2000) {
			lossy_relay_blackout(p.relay, 0);
			phase = 2;
		}
		stream_send(&s, 256);
		stream_poll(&s);
	}
	relay_report("RO with a 2 s blackout", &p, sk_now_ms() - t0, &s);
	CU_ASSERT_EQUAL(phase, 2);
	stream_check(&s);
	stream_free(&s);
	sk_pair_close(&p);
}

void t_relay_blackout_keepalive(void)
{
	struct sk_pair p;
	struct stream s;
	uint32_t ka = 1000000, to = 2500000;
	uint64_t t0, dark = 0;
	int rc;

	if (sk_pair_open(&p, CCI_CONN_ATTR_RO, &lossy, NULL) != 0) {
		sk_pair_close(&p);
		return;
	}
	CU_ASSERT_EQUAL(cci_set_opt(p.cc, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &ka), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_set_opt(p.cc, CCI_OPT_CONN_SEND_TIMEOUT, &to), CCI_SUCCESS);
	stream_init(&s, &p, 5000, 1, 1);
	t0 = sk_now_ms();
	while ((!dark || s.ok + s.err < s.sent || s.keepalives == 0) &&
	       sk_now_ms() - t0 < 30000) {
		if (!dark && s.recvd >= 1000) {
			lossy_relay_blackout(p.relay, 1); /* for good */
			dark = sk_now_ms();
		}
		if (s.send_rc == CCI_SUCCESS)
			stream_send(&s, 64);
		stream_poll(&s);
	}
	relay_report("RO into a lasting blackout", &p, sk_now_ms() - t0, &s);
	printf("%llu sends ok, %llu failed (first %d) ", (unsigned long long)s.ok,
	       (unsigned long long)s.err, s.first_err);
	CU_ASSERT(dark != 0);
	CU_ASSERT_EQUAL(s.keepalives, 1);
	CU_ASSERT(s.err > 0);
	CU_ASSERT(s.first_err == CCI_ETIMEDOUT || s.first_err == CCI_ERR_DISCONNECTED);
	CU_ASSERT_EQUAL(s.ok + s.err, s.sent);
	for (uint32_t i = 0; i < s.sent; i++)
		if (s.done[i] != 1) {
			CU_FAIL("a pending send did not complete exactly once");
			break;
		}
	rc = cci_send(p.cc, "x", 1, NULL, 0);
	CU_ASSERT_EQUAL(rc, CCI_ERR_DISCONNECTED);
	stream_free(&s);
	sk_pair_close(&p);
}
