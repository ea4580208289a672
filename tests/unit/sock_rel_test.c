/*
 * sock_rel_test.c - unit tests of the reliability of sock:// connections
 * (plugins/sock/sock_rel.h): sequence widening, the RTT estimate and
 * its backoff, selective acks, congestion and flow windows, duplicate and
 * forged input, delivery order; then simulations of two connections
 * through a lossy, duplicating, reordering channel.  Time is simulated:
 * nothing here reads the clock.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "sock_rel.h"
#include "unit_run.h"

#define US 1000ull
#define MS 1000000ull
#define ISN 1000ull

static struct sock_rel_conf conf_with(uint32_t cwnd, uint32_t peer_bufs)
{
	struct sock_rel_conf c;

	sock_rel_conf_default(&c);
	c.tx_isn = ISN;
	c.rx_isn = ISN;
	c.cwnd_init = cwnd;
	c.peer_bufs = peer_bufs;
	c.rto_min_ns = 1 * MS;
	c.rto_max_ns = 1000 * MS;
	c.tail_probe = 0; /* the tests of the timeout proper; see the tail-probe test */
	return c;
}

static void open_rel(struct sock_rel *r, const struct sock_rel_conf *c)
{
	CU_ASSERT_EQUAL_FATAL(sock_rel_init(r, c), CCI_SUCCESS);
}

static struct sock_rel_ack ack_of(uint64_t cum, uint32_t wnd, uint64_t sack)
{
	return (struct sock_rel_ack){ .cum = sock_rel_seq_encode(cum), .wnd = wnd, .sack = sack };
}

/* Push n messages with handles first.., expecting each to go at once. */
static void push_sent(struct sock_rel *r, uint64_t first, int n, uint64_t now)
{
	uint64_t seq;

	for (int i = 0; i < n; i++)
		CU_ASSERT_EQUAL(sock_rel_tx_push(r, first + (uint64_t)i, now, &seq), CCI_SUCCESS);
}

static int drain_sends(struct sock_rel *r, uint64_t now, struct sock_rel_send *out, int max)
{
	int n = 0;
	struct sock_rel_send s;

	while (sock_rel_tx_next(r, now, &s)) {
		if (n < max)
			out[n] = s;
		n++;
	}
	return n;
}

/* ---- sequence numbers ---- */

static void widening_recovers_sequences_across_32_and_64_bit_wraps(void)
{
	static const uint64_t refs[] = { 0, 5, 0xfffffff0ull, 0x100000005ull, UINT64_MAX - 5,
		                         0x7fffffffull, 0x123456789abcdefull };
	static const int64_t deltas[] = { 0, 1, -1, 20, -20, 65535, -65536, 0x7fffffff,
		                          -0x7fffffff - 1 };

	CU_ASSERT_EQUAL(sock_rel_seq_widen(0xfffffff0ull, 0x10), 0x100000010ull);
	CU_ASSERT_EQUAL(sock_rel_seq_widen(0x100000005ull, 0xfffffff0u), 0xfffffff0ull);
	CU_ASSERT_EQUAL(sock_rel_seq_widen(UINT64_MAX - 5, 3), 3);
	CU_ASSERT_EQUAL(sock_rel_seq_widen(5, 0xfffffffeu), UINT64_MAX - 1);
	for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++)
		for (size_t j = 0; j < sizeof(deltas) / sizeof(deltas[0]); j++) {
			uint64_t seq = refs[i] + (uint64_t)deltas[j];

			CU_ASSERT_EQUAL(sock_rel_seq_widen(refs[i], sock_rel_seq_encode(seq)), seq);
		}
	CU_ASSERT_TRUE(sock_rel_seq_lt(UINT64_MAX, 0));
	CU_ASSERT_FALSE(sock_rel_seq_lt(0, UINT64_MAX));
	CU_ASSERT_TRUE(sock_rel_seq_lt(0xffffffffull, 0x100000000ull));
}

/* A connection whose sequences cross 2^32 and 2^64 delivers in order. */
static void streams_cross_the_32_and_64_bit_boundaries(void)
{
	static const uint64_t isns[] = { 0xffffffffull - 100, UINT64_MAX - 100 };

	for (size_t k = 0; k < 2; k++) {
		struct sock_rel_conf c = conf_with(64, 256);
		struct sock_rel a, b;
		struct sock_rel_send s;
		struct sock_rel_ack ack;
		uint64_t seq, h, expect = 0, done = 0;

		c.tx_isn = c.rx_isn = isns[k];
		c.rx_bufs = 256;
		open_rel(&a, &c);
		open_rel(&b, &c);
		for (uint64_t i = 0; i < 1000; i++) {
			int rc = sock_rel_tx_push(&a, i, 0, &seq);

			CU_ASSERT_EQUAL(seq, isns[k] + i);
			if (rc == CCI_SUCCESS) {
				s.seq = seq;
				s.handle = i;
			} else {
				CU_ASSERT_TRUE(sock_rel_tx_next(&a, 0, &s));
			}
			CU_ASSERT_EQUAL(sock_rel_rx(&b, sock_rel_seq_encode(s.seq), s.handle, 0, 0),
			                SOCK_REL_RX_DELIVER);
			CU_ASSERT_EQUAL(s.handle, expect++);
			sock_rel_rx_release(&b, 1);
			sock_rel_ack_make(&b, &ack);
			CU_ASSERT_EQUAL(sock_rel_tx_ack(&a, &ack, 10 * US), 1);
			while (sock_rel_tx_done(&a, &h))
				CU_ASSERT_EQUAL(h, done++);
		}
		CU_ASSERT_EQUAL(done, 1000);
		CU_ASSERT_EQUAL(a.stats.ack_forged, 0);
		sock_rel_fini(&a);
		sock_rel_fini(&b);
	}
}

/* ---- RTT, timeout, backoff ---- */

static void rtt_estimate_follows_rfc6298(void)
{
	struct sock_rel_conf c = conf_with(4, 64);
	struct sock_rel r;
	struct sock_rel_ack a;

	c.rto_init_ns = 200 * MS;
	open_rel(&r, &c);
	CU_ASSERT_EQUAL(r.rto, 200 * MS);
	push_sent(&r, 0, 1, 0);
	CU_ASSERT_EQUAL(sock_rel_next_timer(&r), 200 * MS);
	a = ack_of(ISN + 1, 64, 0);
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &a, 10 * MS), 1);
	/* First sample R = 10 ms: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4 RTTVAR. */
	CU_ASSERT_EQUAL(r.srtt, 10 * MS);
	CU_ASSERT_EQUAL(r.rttvar, 5 * MS);
	CU_ASSERT_EQUAL(r.rto, 30 * MS);
	CU_ASSERT_EQUAL(sock_rel_next_timer(&r), SOCK_REL_NEVER);
	/* Second sample R = 20 ms: RTTVAR = 3/4 5 + 1/4 10, SRTT = 7/8 10 + 1/8 20. */
	push_sent(&r, 1, 1, 10 * MS);
	a = ack_of(ISN + 2, 64, 0);
	sock_rel_tx_ack(&r, &a, 30 * MS);
	CU_ASSERT_EQUAL(r.rttvar, 6250 * US);
	CU_ASSERT_EQUAL(r.srtt, 11250 * US);
	CU_ASSERT_EQUAL(r.rto, 36250 * US);
	sock_rel_fini(&r);
}

/* Prime an estimate of RTO = 30 ms (one sample of 10 ms). */
static void prime_rto(struct sock_rel *r, uint64_t *now)
{
	struct sock_rel_ack a;

	push_sent(r, 100, 1, *now);
	a = ack_of(r->snd_max, 64, 0);
	sock_rel_tx_ack(r, &a, *now + 10 * MS);
	*now += 10 * MS;
	CU_ASSERT_EQUAL(r->rto, 30 * MS);
}

static void timeouts_back_off_twice_each_time_up_to_the_ceiling(void)
{
	static const uint64_t want[] = { 60, 120, 240, 480, 960, 1000, 1000 };
	struct sock_rel_conf c = conf_with(4, 64);
	struct sock_rel r;
	struct sock_rel_send s;
	uint64_t now = 0;

	open_rel(&r, &c);
	prime_rto(&r, &now);
	push_sent(&r, 0, 1, now);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint64_t due = sock_rel_next_timer(&r);

		sock_rel_tick(&r, due - 1);
		CU_ASSERT_EQUAL(r.stats.rto, i);
		CU_ASSERT_FALSE(sock_rel_tx_next(&r, due - 1, &s));
		now = due;
		sock_rel_tick(&r, now);
		CU_ASSERT_EQUAL(r.stats.rto, i + 1);
		CU_ASSERT_EQUAL(r.rto, want[i] * MS);
		CU_ASSERT_EQUAL(r.cwnd, 1);
		CU_ASSERT_TRUE_FATAL(sock_rel_tx_next(&r, now, &s));
		CU_ASSERT_EQUAL(s.kind, SOCK_REL_SEND_RETX);
		CU_ASSERT_EQUAL(s.seq, ISN + 1);
		CU_ASSERT_EQUAL(sock_rel_next_timer(&r), now + want[i] * MS);
	}
	sock_rel_fini(&r);
}

static void karn_no_sample_from_a_retransmitted_message(void)
{
	struct sock_rel_conf c = conf_with(4, 64);
	struct sock_rel r;
	struct sock_rel_send s;
	struct sock_rel_ack a;
	uint64_t now = 0, srtt;

	open_rel(&r, &c);
	prime_rto(&r, &now);
	srtt = r.srtt;
	push_sent(&r, 0, 1, now);
	now += 30 * MS;
	sock_rel_tick(&r, now);
	CU_ASSERT_TRUE(sock_rel_tx_next(&r, now, &s));
	CU_ASSERT_EQUAL(r.rto, 60 * MS);
	/* The ack of the retransmitted message is ambiguous: no sample, the
	 * backed-off timeout stays. */
	a = ack_of(ISN + 2, 64, 0);
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &a, now + 1 * MS), 1);
	CU_ASSERT_EQUAL(r.srtt, srtt);
	CU_ASSERT_EQUAL(r.rto, 60 * MS);
	CU_ASSERT_EQUAL(r.backoff, 1);
	/* A fresh message's ack is a sample again, and ends the backoff. */
	now += 2 * MS;
	push_sent(&r, 1, 1, now);
	a = ack_of(ISN + 3, 64, 0);
	sock_rel_tx_ack(&r, &a, now + 10 * MS);
	CU_ASSERT_EQUAL(r.backoff, 0);
	CU_ASSERT_EQUAL(r.srtt, 10 * MS);
	CU_ASSERT_TRUE(r.rto < 60 * MS);
	sock_rel_fini(&r);
}

static void a_tail_probe_goes_before_the_timeout_without_backoff(void)
{
	struct sock_rel_conf c = conf_with(4, 64);
	struct sock_rel r;
	struct sock_rel_send s;
	uint64_t now = 0, t;

	c.tail_probe = 1;
	c.ack_delay_ns = MS;
	open_rel(&r, &c);
	prime_rto(&r, &now);
	push_sent(&r, 0, 2, now);
	t = sock_rel_next_timer(&r);
	CU_ASSERT_EQUAL(t, now + 2 * 10 * MS + MS); /* 2 SRTT + the peer's ack delay */
	sock_rel_tick(&r, t);
	CU_ASSERT_TRUE_FATAL(sock_rel_tx_next(&r, t, &s));
	CU_ASSERT_EQUAL(s.kind, SOCK_REL_SEND_RETX);
	CU_ASSERT_EQUAL(s.seq, ISN + 2); /* the newest */
	CU_ASSERT_EQUAL(s.flags, SOCK_REL_SEND_ACK_NOW);
	CU_ASSERT_FALSE(sock_rel_tx_next(&r, t, &s));
	CU_ASSERT_EQUAL(r.stats.tlp, 1);
	CU_ASSERT_EQUAL(r.stats.rto, 0);
	CU_ASSERT_EQUAL(r.rto, 30 * MS);
	/* No answer: the timeout proper, one RTO later. */
	CU_ASSERT_EQUAL(sock_rel_next_timer(&r), t + 30 * MS);
	sock_rel_tick(&r, t + 30 * MS);
	CU_ASSERT_EQUAL(r.stats.rto, 1);
	CU_ASSERT_EQUAL(r.stats.tlp, 1);
	sock_rel_fini(&r);
}

/* ---- selective acks ---- */

static void selective_acks_retransmit_exactly_the_holes(void)
{
	struct sock_rel_conf c = conf_with(64, 64);
	struct sock_rel r;
	struct sock_rel_send out[32];
	struct sock_rel_ack a;
	uint64_t sack = 0, h, n = 0;

	open_rel(&r, &c);
	push_sent(&r, 0, 20, 0);
	/* Received: all of 0..19 but 3, 7 and 8.  cum = 3, bit i = 4 + i. */
	for (int off = 4; off < 20; off++)
		if (off != 7 && off != 8)
			sack |= 1ull << (off - 4);
	a = ack_of(ISN + 3, 64, sack);
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &a, 1 * MS), 3);
	CU_ASSERT_EQUAL_FATAL(drain_sends(&r, 1 * MS, out, 32), 3);
	CU_ASSERT_EQUAL(out[0].kind, SOCK_REL_SEND_RETX);
	CU_ASSERT_EQUAL(out[0].seq, ISN + 3);
	CU_ASSERT_EQUAL(out[0].handle, 3);
	CU_ASSERT_EQUAL(out[1].seq, ISN + 7);
	CU_ASSERT_EQUAL(out[2].seq, ISN + 8);
	CU_ASSERT_EQUAL(r.stats.tx_fast, 3);
	/* The same ack again marks nothing more. */
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &a, 1 * MS), 0);
	CU_ASSERT_EQUAL(drain_sends(&r, 1 * MS, out, 32), 0);
	a = ack_of(ISN + 20, 64, 0);
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &a, 2 * MS), 17);
	while (sock_rel_tx_done(&r, &h))
		CU_ASSERT_EQUAL(h, n++);
	CU_ASSERT_EQUAL(n, 20);
	CU_ASSERT_EQUAL(r.stats.tx_retx, 3);
	sock_rel_fini(&r);
}

static void a_hole_overtaken_by_fewer_than_three_waits(void)
{
	struct sock_rel_conf c = conf_with(64, 64);
	struct sock_rel r;
	struct sock_rel_send out[4];
	struct sock_rel_ack a;

	open_rel(&r, &c);
	push_sent(&r, 0, 20, 0);
	a = ack_of(ISN + 17, 64, 0x3); /* 18 and 19 overtook 17 */
	sock_rel_tx_ack(&r, &a, 1 * MS);
	CU_ASSERT_EQUAL(drain_sends(&r, 1 * MS, out, 4), 0);
	CU_ASSERT_EQUAL(r.stats.tx_fast, 0);
	sock_rel_fini(&r);
}

/* A retransmission that is lost again is found by later messages being
 * acked past it, without waiting for the timer. */
static void a_lost_retransmission_is_found_by_later_acks(void)
{
	struct sock_rel_conf c = conf_with(64, 64);
	struct sock_rel r;
	struct sock_rel_send out[8];
	struct sock_rel_ack a;

	open_rel(&r, &c);
	push_sent(&r, 0, 8, 0);
	a = ack_of(ISN, 64, 0x7f); /* 0 lost, 1..7 held */
	sock_rel_tx_ack(&r, &a, 1 * MS);
	CU_ASSERT_EQUAL_FATAL(drain_sends(&r, 1 * MS, out, 8), 1);
	CU_ASSERT_EQUAL(out[0].seq, ISN);
	push_sent(&r, 8, 3, 2 * MS);
	/* 8, 9, 10 (sent after the retransmission) are acked, 0 still not. */
	a = ack_of(ISN, 64, 0x3ff);
	sock_rel_tx_ack(&r, &a, 3 * MS);
	CU_ASSERT_EQUAL_FATAL(drain_sends(&r, 3 * MS, out, 8), 1);
	CU_ASSERT_EQUAL(out[0].kind, SOCK_REL_SEND_RETX);
	CU_ASSERT_EQUAL(out[0].seq, ISN);
	CU_ASSERT_EQUAL(r.stats.rto, 0);
	sock_rel_fini(&r);
}

/* ---- windows ---- */

static void congestion_window_grows_halves_once_per_window_and_is_one_after_timeout(void)
{
	struct sock_rel_conf c = conf_with(4, 256);
	struct sock_rel r;
	struct sock_rel_send out[64];
	struct sock_rel_ack a;
	uint64_t now = 0;

	c.rx_bufs = 256;
	open_rel(&r, &c);
	push_sent(&r, 0, 4, now);
	a = ack_of(ISN + 4, 256, 0);
	sock_rel_tx_ack(&r, &a, now += MS);
	CU_ASSERT_EQUAL(r.cwnd, 8); /* slow start: +1 per message acked */
	push_sent(&r, 4, 8, now);
	a = ack_of(ISN + 12, 256, 0);
	sock_rel_tx_ack(&r, &a, now += MS);
	CU_ASSERT_EQUAL(r.cwnd, 16);
	push_sent(&r, 12, 16, now);
	/* 12 lost, 13..27 held: a loss event halves the window of 16. */
	a = ack_of(ISN + 12, 256, 0x7fff);
	sock_rel_tx_ack(&r, &a, now += MS);
	CU_ASSERT_EQUAL(r.cwnd, 8);
	CU_ASSERT_EQUAL(r.ssthresh, 8);
	CU_ASSERT_EQUAL(drain_sends(&r, now, out, 64), 1);
	/* More data, a second loss in the same window: no second halving. */
	for (int i = 0; i < 5; i++) {
		uint64_t seq;

		sock_rel_tx_push(&r, 28 + (uint64_t)i, now, &seq);
	}
	drain_sends(&r, now, out, 64);
	a = ack_of(ISN + 12, 256, 0x7fff | (0x1eull << 15)); /* 28 lost; 29..32 held */
	sock_rel_tx_ack(&r, &a, now += MS);
	/* 28, and 12 again: 29..32 left after its retransmission and overtook it. */
	CU_ASSERT_EQUAL(r.stats.tx_fast, 3);
	CU_ASSERT_EQUAL(r.cwnd, 8);
	/* A timeout: window of one. */
	sock_rel_tick(&r, sock_rel_next_timer(&r));
	CU_ASSERT_EQUAL(r.cwnd, 1);
	CU_ASSERT_EQUAL(r.stats.rto, 1);
	sock_rel_fini(&r);
}

/* A model receiver that grants buffers slowly; every send must respect
 * both windows at the moment it is handed out. */
static void sends_never_exceed_the_congestion_or_the_peer_window(void)
{
	struct sock_rel_conf c = conf_with(2, 10);
	struct sock_rel r;
	struct sock_rel_send s;
	uint64_t seq, now = 0, right = ISN + 10, acked = ISN, h;
	uint32_t pushed = 0, violations = 0, sends = 0;
	unsigned rng = 7;

	open_rel(&r, &c);
	while (pushed < 300 || sock_rel_tx_pending(&r)) {
		for (int i = 0; i < 8 && pushed < 300; i++) {
			uint32_t pipe = (uint32_t)(r.snd_max - r.snd_una) - r.sacked - r.lost;
			int rc = sock_rel_tx_push(&r, pushed, now, &seq);

			pushed += rc != CCI_ENOBUFS;
			if (rc == CCI_SUCCESS) { /* to be sent at once */
				sends++;
				violations += pipe >= r.cwnd || !sock_rel_seq_lt(seq, right);
			}
		}
		for (;;) {
			uint32_t pipe = (uint32_t)(r.snd_max - r.snd_una) - r.sacked - r.lost;
			uint32_t cwnd = r.cwnd;

			if (!sock_rel_tx_next(&r, now, &s))
				break;
			sends++;
			violations += pipe >= cwnd;
			violations += s.kind == SOCK_REL_SEND_NEW && !sock_rel_seq_lt(s.seq, right);
		}
		/* The peer took everything sent; it grants 0..3 more buffers. */
		rng = rng * 1103515245u + 12345u;
		right += (rng >> 16) % 4;
		acked = r.snd_max;
		struct sock_rel_ack a = ack_of(acked, (uint32_t)(right - acked), 0);
		now += MS;
		sock_rel_tx_ack(&r, &a, now);
		sock_rel_tick(&r, now);
		while (sock_rel_tx_done(&r, &h))
			;
		CU_ASSERT_FATAL(now < 100000 * MS);
	}
	CU_ASSERT_EQUAL(violations, 0);
	CU_ASSERT_TRUE(sends >= 300);
	sock_rel_fini(&r);
}

static void a_closed_window_is_probed_with_backoff_until_it_opens(void)
{
	struct sock_rel_conf c = conf_with(8, 2);
	struct sock_rel r;
	struct sock_rel_send out[8];
	struct sock_rel_ack a;
	uint64_t seq, now = 0, t1, t2;

	open_rel(&r, &c);
	push_sent(&r, 0, 2, now);
	for (int i = 2; i < 5; i++)
		CU_ASSERT_EQUAL(sock_rel_tx_push(&r, (uint64_t)i, now, &seq), CCI_EAGAIN);
	a = ack_of(ISN + 2, 0, 0); /* all taken, no buffer left */
	sock_rel_tx_ack(&r, &a, now += 10 * MS);
	CU_ASSERT_EQUAL(drain_sends(&r, now, out, 8), 0);
	t1 = sock_rel_next_timer(&r);
	CU_ASSERT_EQUAL(t1, now + r.rto);
	sock_rel_tick(&r, t1);
	CU_ASSERT_EQUAL_FATAL(drain_sends(&r, t1, out, 8), 1);
	CU_ASSERT_EQUAL(out[0].kind, SOCK_REL_SEND_PROBE);
	t2 = sock_rel_next_timer(&r);
	CU_ASSERT_EQUAL(t2 - t1, 2 * r.rto); /* backed off */
	sock_rel_tick(&r, t2);
	CU_ASSERT_EQUAL(drain_sends(&r, t2, out, 8), 1);
	CU_ASSERT_EQUAL(r.stats.probes, 2);
	/* The probe's answer opens the window: the queued three go. */
	a = ack_of(ISN + 2, 3, 0);
	sock_rel_tx_ack(&r, &a, t2 + MS);
	CU_ASSERT_EQUAL_FATAL(drain_sends(&r, t2 + MS, out, 8), 3);
	CU_ASSERT_EQUAL(out[0].kind, SOCK_REL_SEND_NEW);
	CU_ASSERT_EQUAL(out[0].seq, ISN + 2);
	CU_ASSERT_EQUAL(out[2].seq, ISN + 4);
	CU_ASSERT_EQUAL(r.persist_at, SOCK_REL_NEVER);
	sock_rel_fini(&r);
}

static void the_receiver_grants_only_its_buffers_and_announces_them(void)
{
	struct sock_rel_conf c = conf_with(8, 8);
	struct sock_rel r;
	struct sock_rel_ack a;

	c.rx_bufs = 4;
	open_rel(&r, &c);
	for (uint32_t i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + i), i, 0, 0), SOCK_REL_RX_DELIVER);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 4), 4, 0, 0), SOCK_REL_RX_OUTSIDE);
	CU_ASSERT_EQUAL(r.stats.rx_outside, 1);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 0));
	sock_rel_ack_make(&r, &a);
	CU_ASSERT_EQUAL(a.cum, (uint32_t)(ISN + 4));
	CU_ASSERT_EQUAL(a.wnd, 0);
	CU_ASSERT_FALSE(sock_rel_ack_due(&r, 0));
	/* Two events come back: the closed window reopens at once. */
	sock_rel_rx_release(&r, 2);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 0));
	sock_rel_ack_make(&r, &a);
	CU_ASSERT_EQUAL(a.wnd, 2);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 4), 4, 0, 0), SOCK_REL_RX_DELIVER);
	sock_rel_fini(&r);
}

/* ---- hostile or stale input ---- */

static void duplicates_and_far_sequences_are_dropped_and_counted(void)
{
	struct sock_rel_conf c = conf_with(8, 8);
	struct sock_rel r;
	struct sock_rel_ack a;

	open_rel(&r, &c);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)ISN, 0, 0, 0), SOCK_REL_RX_DELIVER);
	sock_rel_ack_make(&r, &a);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)ISN, 0, 0, 0), SOCK_REL_RX_DUP);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 0)); /* the sender missed our ack */
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 5), 5, 0, 0), SOCK_REL_RX_HELD);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 5), 5, 0, 0), SOCK_REL_RX_DUP);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN - 1000000), 9, 0, 0), SOCK_REL_RX_DUP);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 0x7fffffff), 9, 0, 0), SOCK_REL_RX_OUTSIDE);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 64), 9, 0, 0), SOCK_REL_RX_OUTSIDE);
	CU_ASSERT_EQUAL(r.stats.rx_dup, 3);
	CU_ASSERT_EQUAL(r.stats.rx_outside, 2);
	CU_ASSERT_EQUAL(r.stats.rx_delivered, 1);
	CU_ASSERT_EQUAL(r.rcv_nxt, ISN + 1);
	sock_rel_fini(&r);
}

static void forged_acks_change_nothing(void)
{
	struct sock_rel_conf c = conf_with(8, 8);
	struct sock_rel r, before;
	struct sock_rel_ack bad[] = {
		ack_of(ISN + 6, 8, 0),          /* acks a message never sent */
		ack_of(ISN + 0x40000000ull, 8, 0),
		ack_of(ISN, 8, 1ull << 10),     /* selectively acks one never sent */
		ack_of(ISN + 5, 8, 1),
		ack_of(ISN + 2, 0x80000000u, 0) /* an absurd window */
	};
	uint64_t h;

	open_rel(&r, &c);
	push_sent(&r, 0, 5, 0);
	before = r;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &bad[i], MS), 0);
		CU_ASSERT_EQUAL(r.snd_una, before.snd_una);
		CU_ASSERT_EQUAL(r.peer_right, before.peer_right);
		CU_ASSERT_EQUAL(r.sacked, 0);
		CU_ASSERT_EQUAL(r.lost, 0);
		CU_ASSERT_EQUAL(r.cwnd, before.cwnd);
		CU_ASSERT_EQUAL(r.srtt, 0);
	}
	CU_ASSERT_EQUAL(r.stats.ack_forged, 5);
	CU_ASSERT_FALSE(sock_rel_tx_done(&r, &h));
	/* The real ack still works. */
	struct sock_rel_ack good = ack_of(ISN + 5, 8, 0);
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &good, MS), 5);
	/* and an older one, arriving late, is only stale. */
	struct sock_rel_ack old = ack_of(ISN + 2, 8, 0);
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &old, 2 * MS), 0);
	CU_ASSERT_EQUAL(r.stats.ack_old, 1);
	CU_ASSERT_EQUAL(r.snd_una, ISN + 5);
	sock_rel_fini(&r);
}

/* ---- delivery ---- */

static void ordered_connections_hold_early_messages_and_deliver_in_order(void)
{
	struct sock_rel_conf c = conf_with(8, 8);
	struct sock_rel r;
	uint64_t h, got[8];
	int n = 0;

	open_rel(&r, &c);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 2), 2, 0, 0), SOCK_REL_RX_HELD);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 1), 1, 0, 0), SOCK_REL_RX_HELD);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 4), 4, 0, 0), SOCK_REL_RX_HELD);
	CU_ASSERT_FALSE(sock_rel_rx_next(&r, &h));
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)ISN, 0, 0, 0), SOCK_REL_RX_DELIVER);
	got[n++] = 0;
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 0)); /* a gap closed */
	/* 3 arrives before the caller drained 1 and 2: it waits behind them. */
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 3), 3, 0, 0), SOCK_REL_RX_HELD);
	while (n < 8 && sock_rel_rx_next(&r, &h))
		got[n++] = h;
	CU_ASSERT_EQUAL_FATAL(n, 5);
	for (int i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(got[i], (uint64_t)i);
	CU_ASSERT_EQUAL(r.stats.rx_delivered, 5);
	/* Teardown hands back what is still held, gaps or not. */
	sock_rel_rx(&r, (uint32_t)(ISN + 7), 7, 0, 0);
	sock_rel_rx(&r, (uint32_t)(ISN + 9), 9, 0, 0);
	CU_ASSERT_TRUE(sock_rel_rx_abort(&r, &h));
	CU_ASSERT_EQUAL(h, 7);
	CU_ASSERT_TRUE(sock_rel_rx_abort(&r, &h));
	CU_ASSERT_EQUAL(h, 9);
	CU_ASSERT_FALSE(sock_rel_rx_abort(&r, &h));
	sock_rel_fini(&r);
}

static void unordered_connections_deliver_on_arrival_exactly_once(void)
{
	static const int order[] = { 2, 1, 4, 2, 0, 4, 3, 1, 0, 5 };
	struct sock_rel_conf c = conf_with(8, 8);
	struct sock_rel r;
	int seen[6] = { 0 }, dups = 0;

	c.ordered = 0;
	open_rel(&r, &c);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		int rc = sock_rel_rx(&r, (uint32_t)(ISN + (uint64_t)order[i]), (uint64_t)order[i], 0, 0);

		if (rc == SOCK_REL_RX_DELIVER)
			seen[order[i]]++;
		else
			dups += rc == SOCK_REL_RX_DUP;
	}
	for (int i = 0; i < 6; i++)
		CU_ASSERT_EQUAL(seen[i], 1);
	CU_ASSERT_EQUAL(dups, 4);
	CU_ASSERT_EQUAL(r.rcv_nxt, ISN + 6);
	sock_rel_fini(&r);
}

/* The send ring starts small and doubles with the burst: messages queued
 * across the wrap of a small ring keep their order and handles when it
 * grows, up to the window and no further; a connection that only ever
 * received in order makes no receive arrays. */
static void the_send_ring_grows_with_the_burst_keeping_order(void)
{
	struct sock_rel_conf c = conf_with(256, 256);
	struct sock_rel r;
	struct sock_rel_ack a;
	uint64_t seq, h, next = 0;

	c.cap = 64;
	open_rel(&r, &c);
	CU_ASSERT_EQUAL(r.tx_size, 0);
	CU_ASSERT_PTR_NULL(r.rx_present);
	push_sent(&r, 0, 10, 0);
	CU_ASSERT_EQUAL(r.tx_size, 16);
	/* 6 acked and collected: the next pushes wrap the 16-slot ring. */
	a = ack_of(ISN + 6, 256, 0);
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &a, 1 * MS), 6);
	while (sock_rel_tx_done(&r, &h))
		CU_ASSERT_EQUAL(h, next++);
	push_sent(&r, 10, 12, 2 * MS); /* 16 held: full */
	CU_ASSERT_EQUAL(r.tx_size, 16);
	push_sent(&r, 22, 20, 3 * MS); /* grows to 32, then 64 */
	CU_ASSERT_EQUAL(r.tx_size, 64);
	push_sent(&r, 42, 28, 4 * MS); /* 64 held: the window */
	CU_ASSERT_EQUAL(sock_rel_tx_push(&r, 99, 4 * MS, &seq), CCI_ENOBUFS);
	CU_ASSERT_EQUAL(r.tx_size, 64);
	a = ack_of(ISN + 70, 256, 0);
	CU_ASSERT_EQUAL(sock_rel_tx_ack(&r, &a, 5 * MS), 64);
	while (sock_rel_tx_done(&r, &h))
		CU_ASSERT_EQUAL(h, next++);
	CU_ASSERT_EQUAL(next, 70);
	/* In order, the receiver hands each message out and keeps none. */
	for (uint64_t i = 0; i < 40; i++)
		CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + i), i, 0, 0), SOCK_REL_RX_DELIVER);
	CU_ASSERT_PTR_NULL(r.rx_present);
	CU_ASSERT_PTR_NULL(r.rx_handle);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 41), 41, 0, 0), SOCK_REL_RX_HELD);
	CU_ASSERT_PTR_NOT_NULL(r.rx_present);
	CU_ASSERT_EQUAL(sock_rel_rx(&r, (uint32_t)(ISN + 40), 40, 0, 0), SOCK_REL_RX_DELIVER);
	CU_ASSERT_TRUE(sock_rel_rx_next(&r, &h));
	CU_ASSERT_EQUAL(h, 41);
	sock_rel_fini(&r);
}

static void acks_are_delayed_unless_a_gap_a_duplicate_or_n_messages(void)
{
	struct sock_rel_conf c = conf_with(8, 8);
	struct sock_rel r;
	struct sock_rel_ack a;

	c.ack_every = 4;
	c.ack_delay_ns = MS;
	open_rel(&r, &c);
	CU_ASSERT_EQUAL(sock_rel_next_timer(&r), SOCK_REL_NEVER);
	sock_rel_rx(&r, (uint32_t)ISN, 0, 0, 10 * MS);
	CU_ASSERT_FALSE(sock_rel_ack_due(&r, 10 * MS));
	CU_ASSERT_EQUAL(sock_rel_next_timer(&r), 11 * MS);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 11 * MS));
	sock_rel_ack_make(&r, &a);
	for (uint32_t i = 1; i < 4; i++) {
		sock_rel_rx(&r, (uint32_t)(ISN + i), i, 0, 12 * MS);
		CU_ASSERT_FALSE(sock_rel_ack_due(&r, 12 * MS));
	}
	sock_rel_rx(&r, (uint32_t)(ISN + 4), 4, 0, 12 * MS);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 12 * MS)); /* the fourth */
	sock_rel_ack_make(&r, &a);
	sock_rel_rx(&r, (uint32_t)(ISN + 6), 6, 0, 13 * MS);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 13 * MS)); /* a gap */
	sock_rel_ack_make(&r, &a);
	CU_ASSERT_EQUAL(a.sack, 1);
	sock_rel_rx(&r, (uint32_t)(ISN + 6), 6, 0, 13 * MS);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 13 * MS)); /* a duplicate */
	sock_rel_ack_make(&r, &a);
	sock_rel_rx(&r, (uint32_t)(ISN + 5), 5, SOCK_REL_RX_ACK_NOW, 14 * MS);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 14 * MS));
	sock_rel_ack_make(&r, &a);
	sock_rel_rx_probe(&r);
	CU_ASSERT_TRUE(sock_rel_ack_due(&r, 14 * MS));
	sock_rel_fini(&r);
}

static void bad_configurations_are_refused(void)
{
	struct sock_rel_conf c = conf_with(8, 8);
	struct sock_rel r;

	c.cap = 100;
	CU_ASSERT_EQUAL(sock_rel_init(&r, &c), CCI_EINVAL);
	c.cap = 32;
	CU_ASSERT_EQUAL(sock_rel_init(&r, &c), CCI_EINVAL);
	c.cap = 1u << 17;
	CU_ASSERT_EQUAL(sock_rel_init(&r, &c), CCI_EINVAL);
	c.cap = 64;
	c.cwnd_init = 0;
	CU_ASSERT_EQUAL(sock_rel_init(&r, &c), CCI_EINVAL);
}

static const struct unit_test tests[] = {
	{ "32-bit wire sequences widen back across 2^32 and 2^64",
	  widening_recovers_sequences_across_32_and_64_bit_wraps },
	{ "a stream whose sequences cross 2^32 and 2^64 is delivered in order",
	  streams_cross_the_32_and_64_bit_boundaries },
	{ "the RTT estimate and the timeout follow RFC 6298", rtt_estimate_follows_rfc6298 },
	{ "timeouts double the RTO each time, up to the ceiling",
	  timeouts_back_off_twice_each_time_up_to_the_ceiling },
	{ "Karn: no RTT sample from a retransmitted message, backoff kept until a fresh one",
	  karn_no_sample_from_a_retransmitted_message },
	{ "a tail-loss probe resends the newest message before the timeout, without backoff",
	  a_tail_probe_goes_before_the_timeout_without_backoff },
	{ "selective acks retransmit exactly the holes, once",
	  selective_acks_retransmit_exactly_the_holes },
	{ "a hole overtaken by fewer than three messages waits",
	  a_hole_overtaken_by_fewer_than_three_waits },
	{ "a lost retransmission is found by later acks, before the timer",
	  a_lost_retransmission_is_found_by_later_acks },
	{ "cwnd: slow start, halved once per window on loss, one after a timeout",
	  congestion_window_grows_halves_once_per_window_and_is_one_after_timeout },
	{ "no send exceeds the congestion window or the peer's window",
	  sends_never_exceed_the_congestion_or_the_peer_window },
	{ "a closed peer window is probed with backoff until it opens",
	  a_closed_window_is_probed_with_backoff_until_it_opens },
	{ "the receiver grants only its buffers and announces a reopened window",
	  the_receiver_grants_only_its_buffers_and_announces_them },
	{ "duplicates and far sequences are dropped and counted, never delivered",
	  duplicates_and_far_sequences_are_dropped_and_counted },
	{ "forged acks (unsent data, absurd window) change nothing but a counter",
	  forged_acks_change_nothing },
	{ "RO holds early messages and delivers in order",
	  ordered_connections_hold_early_messages_and_deliver_in_order },
	{ "RU delivers on arrival, exactly once", unordered_connections_deliver_on_arrival_exactly_once },
	{ "the send ring grows with the burst, keeping order; in-order receiving makes no arrays",
	  the_send_ring_grows_with_the_burst_keeping_order },
	{ "acks are delayed unless a gap, a duplicate, a request or every n messages",
	  acks_are_delayed_unless_a_gap_a_duplicate_or_n_messages },
	{ "bad configurations are refused", bad_configurations_are_refused },
};

int main(void)
{
	return UNIT_RUN("sock reliability", tests);
}
