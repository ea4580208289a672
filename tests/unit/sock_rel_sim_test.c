/*
 * sock_rel_sim_test.c - two sock_rel connections talking through an
 * in-memory channel that loses, duplicates, reorders and delays their
 * datagrams, deterministically from a seed (plugins/sock/sock_rel.h).
 * Each run delivers numbered messages and fails on any message lost,
 * delivered twice or (RO) out of order, on a receiver overrun, on a
 * deadlock, or when it needs more iterations than its bound.  Time is
 * simulated: the next event decides it, nothing reads the clock.
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
#define PPM 1000000u

enum { PK_DATA = 1, PK_ACK, PK_PROBE };

struct pkt {
	uint64_t at, order; /* arrival time, then sending order */
	int to, kind;
	unsigned flags;     /* SOCK_REL_RX_ACK_NOW */
	uint32_t seq;
	uint64_t payload;   /* the message number */
	struct sock_rel_ack ack;
};

struct chan_conf {
	uint32_t loss_ppm, dup_ppm, reorder_ppm;
	uint64_t delay_ns;   /* every datagram */
	uint64_t reorder_ns; /* on top, for a reordered one (later ones overtake it) */
};

struct end {
	struct sock_rel r;
	uint64_t to_send, pushed, completed;
	uint64_t delivered, expect;
	uint8_t *seen;
	uint32_t app_held;
	uint64_t misorder, twice, out_of_range, outside, done_misorder;
};

struct sim {
	struct pkt *heap;
	size_t n, cap;
	uint64_t order, rng, now, iter;
	struct chan_conf ch;
	struct end e[2];
	int ordered;
	uint64_t app_period, app_next; /* the receiving application returns buffers */
	uint64_t blackout_at_delivered, blackout_ns, blackout_from, blackout_to;
	uint64_t first_after_blackout;
	uint64_t pkts, dropped, duplicated, reordered;
};

static uint64_t sim_rand(struct sim *s)
{
	/* splitmix64 */
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int sim_chance(struct sim *s, uint32_t ppm)
{
	return sim_rand(s) % PPM < ppm;
}

static int pkt_before(const struct pkt *a, const struct pkt *b)
{
	return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static void heap_push(struct sim *s, struct pkt p)
{
	size_t i;

	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->heap = realloc(s->heap, s->cap * sizeof(*s->heap));
		CU_ASSERT_FATAL(s->heap != NULL);
	}
	p.order = s->order++;
	for (i = s->n++; i > 0 && pkt_before(&p, &s->heap[(i - 1) / 2]); i = (i - 1) / 2)
		s->heap[i] = s->heap[(i - 1) / 2];
	s->heap[i] = p;
}

static struct pkt heap_pop(struct sim *s)
{
	struct pkt top = s->heap[0], last = s->heap[--s->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= s->n)
			break;
		if (c + 1 < s->n && pkt_before(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!pkt_before(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (s->n)
		s->heap[i] = last;
	return top;
}

static void chan_send(struct sim *s, struct pkt p)
{
	s->pkts++;
	if ((s->now >= s->blackout_from && s->now < s->blackout_to) ||
	    sim_chance(s, s->ch.loss_ppm)) {
		s->dropped++;
		return;
	}
	p.at = s->now + s->ch.delay_ns;
	if (sim_chance(s, s->ch.reorder_ppm)) {
		p.at += s->ch.reorder_ns;
		s->reordered++;
	}
	heap_push(s, p);
	if (sim_chance(s, s->ch.dup_ppm)) {
		p.at = s->now + s->ch.delay_ns + sim_rand(s) % (s->ch.reorder_ns + 1);
		s->duplicated++;
		heap_push(s, p);
	}
}

/* Every frame carries the sender's ack of the other direction. */
static void send_frame(struct sim *s, int from, int kind, const struct sock_rel_send *snd)
{
	struct pkt p = { .to = 1 - from, .kind = kind };

	if (snd) {
		p.seq = sock_rel_seq_encode(snd->seq);
		p.payload = snd->handle;
		p.flags = snd->flags & SOCK_REL_SEND_ACK_NOW ? SOCK_REL_RX_ACK_NOW : 0;
	}

	sock_rel_ack_make(&s->e[from].r, &p.ack);
	chan_send(s, p);
}

static void end_pump(struct sim *s, int i)
{
	struct end *e = &s->e[i];
	struct sock_rel_send snd;
	uint64_t seq;

	sock_rel_tick(&e->r, s->now);
	while (sock_rel_tx_next(&e->r, s->now, &snd))
		send_frame(s, i, snd.kind == SOCK_REL_SEND_PROBE ? PK_PROBE : PK_DATA, &snd);
	while (e->pushed < e->to_send) {
		int rc = sock_rel_tx_push(&e->r, e->pushed, s->now, &seq);

		if (rc == CCI_ENOBUFS)
			break;
		if (rc == CCI_SUCCESS) {
			snd = (struct sock_rel_send){ .kind = SOCK_REL_SEND_NEW, .seq = seq,
				                      .handle = e->pushed };
			send_frame(s, i, PK_DATA, &snd);
		}
		e->pushed++;
	}
	if (sock_rel_ack_due(&e->r, s->now))
		send_frame(s, i, PK_ACK, NULL);
}

static void app_take(struct sim *s, struct end *e, uint64_t v)
{
	uint64_t n = (e == &s->e[0] ? &s->e[1] : &s->e[0])->to_send; /* the peer's messages */

	e->delivered++;
	if (s->blackout_to && s->now >= s->blackout_to && !s->first_after_blackout)
		s->first_after_blackout = s->now;
	if (v >= n) {
		e->out_of_range++;
		return;
	}
	if (s->ordered) {
		e->misorder += v != e->expect;
		e->expect = v + 1;
	}
	e->twice += e->seen[v];
	e->seen[v] = 1;
	if (s->app_period)
		e->app_held++;
	else
		sock_rel_rx_release(&e->r, 1);
}

static void end_receive(struct sim *s, const struct pkt *p)
{
	struct end *e = &s->e[p->to];
	uint64_t h;

	sock_rel_tx_ack(&e->r, &p->ack, s->now);
	while (sock_rel_tx_done(&e->r, &h))
		e->done_misorder += h != e->completed++;
	if (p->kind == PK_PROBE)
		sock_rel_rx_probe(&e->r);
	if (p->kind != PK_DATA)
		return;
	switch (sock_rel_rx(&e->r, p->seq, p->payload, p->flags, s->now)) {
	case SOCK_REL_RX_DELIVER:
		app_take(s, e, p->payload);
		while (s->ordered && sock_rel_rx_next(&e->r, &h))
			app_take(s, e, h);
		break;
	case SOCK_REL_RX_OUTSIDE:
		e->outside++;
		break;
	default:
		break;
	}
}

static int sim_done(const struct sim *s)
{
	for (int i = 0; i < 2; i++)
		if (s->e[i].completed != s->e[i].to_send || s->e[1 - i].delivered < s->e[i].to_send)
			return 0;
	return 1;
}

static uint64_t sim_next_event(const struct sim *s)
{
	uint64_t t = s->n ? s->heap[0].at : SOCK_REL_NEVER;

	for (int i = 0; i < 2; i++) {
		uint64_t ti = sock_rel_next_timer(&s->e[i].r);

		t = ti < t ? ti : t;
		if (s->app_period && s->e[i].app_held && s->app_next < t)
			t = s->app_next;
	}
	return t;
}

static void app_return(struct sim *s)
{
	if (!s->app_period || s->now < s->app_next)
		return;
	for (int i = 0; i < 2; i++) {
		sock_rel_rx_release(&s->e[i].r, s->e[i].app_held);
		s->e[i].app_held = 0;
	}
	s->app_next = s->now + s->app_period;
}

/* Run until every message is delivered and acknowledged: 0, or -1 on a
 * deadlock or past max_iter. */
static int sim_run(struct sim *s, uint64_t max_iter)
{
	for (s->iter = 0; !sim_done(s); s->iter++) {
		uint64_t t;

		if (s->iter > max_iter)
			return -1;
		if (s->blackout_ns && !s->blackout_to &&
		    s->e[1].delivered >= s->blackout_at_delivered) {
			s->blackout_from = s->now;
			s->blackout_to = s->now + s->blackout_ns;
		}
		end_pump(s, 0);
		end_pump(s, 1);
		t = sim_next_event(s);
		if (t == SOCK_REL_NEVER)
			return -1;
		if (t > s->now)
			s->now = t;
		while (s->n && s->heap[0].at <= s->now) {
			struct pkt p = heap_pop(s);

			end_receive(s, &p);
		}
		app_return(s);
	}
	return 0;
}

static struct sock_rel_conf sim_conf(uint64_t tx_isn, uint64_t rx_isn, int ordered)
{
	struct sock_rel_conf c;

	sock_rel_conf_default(&c);
	c.cap = 256;
	c.ordered = ordered;
	c.tx_isn = tx_isn;
	c.rx_isn = rx_isn;
	c.rx_bufs = c.peer_bufs = 128;
	c.rto_init_ns = 10 * MS;
	c.rto_min_ns = 1 * MS;
	c.rto_max_ns = 1000 * MS;
	c.ack_delay_ns = 100 * US;
	return c;
}

static const struct chan_conf lossy = {
	.loss_ppm = 50000, .dup_ppm = 10000, .reorder_ppm = 50000,
	.delay_ns = 20 * US, .reorder_ns = 200 * US,
};

static void sim_open(struct sim *s, struct sock_rel_conf ca, struct sock_rel_conf cb,
                     uint64_t n_ab, uint64_t n_ba, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->rng = seed;
	s->ch = lossy;
	s->ordered = ca.ordered;
	CU_ASSERT_EQUAL_FATAL(sock_rel_init(&s->e[0].r, &ca), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(sock_rel_init(&s->e[1].r, &cb), CCI_SUCCESS);
	s->e[0].to_send = n_ab;
	s->e[1].to_send = n_ba;
	s->e[0].seen = calloc(n_ba + 1, 1);
	s->e[1].seen = calloc(n_ab + 1, 1);
	CU_ASSERT_FATAL(s->e[0].seen && s->e[1].seen);
}

static void sim_check_and_close(struct sim *s, const char *what)
{
	for (int i = 0; i < 2; i++) {
		struct end *e = &s->e[i];

		CU_ASSERT_EQUAL(e->delivered, s->e[1 - i].to_send);
		CU_ASSERT_EQUAL(e->misorder, 0);
		CU_ASSERT_EQUAL(e->twice, 0);
		CU_ASSERT_EQUAL(e->out_of_range, 0);
		CU_ASSERT_EQUAL(e->outside, 0); /* never overrun */
		CU_ASSERT_EQUAL(e->done_misorder, 0);
		CU_ASSERT_EQUAL(e->r.stats.ack_forged, 0);
		for (uint64_t v = 0; v < s->e[1 - i].to_send; v++)
			if (!e->seen[v]) {
				CU_FAIL("a message was never delivered");
				break;
			}
	}
	printf("\n    %s: %llu+%llu msgs, %llu datagrams (%llu dropped, %llu duplicated, "
	       "%llu reordered), retransmissions %llu (%llu holes by sack, %llu tail probes, "
	       "%llu timeouts), %llu window probes, "
	       "duplicates suppressed %llu, %llu iterations, %.3f s simulated ",
	       what, (unsigned long long)s->e[0].to_send, (unsigned long long)s->e[1].to_send,
	       (unsigned long long)s->pkts, (unsigned long long)s->dropped,
	       (unsigned long long)s->duplicated, (unsigned long long)s->reordered,
	       (unsigned long long)(s->e[0].r.stats.tx_retx + s->e[1].r.stats.tx_retx),
	       (unsigned long long)(s->e[0].r.stats.tx_fast + s->e[1].r.stats.tx_fast),
	       (unsigned long long)(s->e[0].r.stats.tlp + s->e[1].r.stats.tlp),
	       (unsigned long long)(s->e[0].r.stats.rto + s->e[1].r.stats.rto),
	       (unsigned long long)(s->e[0].r.stats.probes + s->e[1].r.stats.probes),
	       (unsigned long long)(s->e[0].r.stats.rx_dup + s->e[1].r.stats.rx_dup),
	       (unsigned long long)s->iter, (double)s->now / 1e9);
	for (int i = 0; i < 2; i++) {
		sock_rel_fini(&s->e[i].r);
		free(s->e[i].seen);
	}
	free(s->heap);
}

#define N_MAIN 200000ull

static void ro_delivers_200k_in_order_exactly_once_through_loss(void)
{
	struct sim s;

	sim_open(&s, sim_conf(77, 5000, 1), sim_conf(5000, 77, 1), N_MAIN, 0, 1);
	s.app_period = 100 * US; /* the application returns its events in batches */
	CU_ASSERT_EQUAL(sim_run(&s, 20 * N_MAIN), 0);
	CU_ASSERT_TRUE(s.e[0].r.stats.tx_retx > 0);
	CU_ASSERT_TRUE(s.e[1].r.stats.rx_dup > 0);
	sim_check_and_close(&s, "RO one way");
}

static void ru_delivers_both_ways_exactly_once_through_loss(void)
{
	struct sim s;

	sim_open(&s, sim_conf(1, 2, 0), sim_conf(2, 1, 0), N_MAIN / 2, N_MAIN / 2, 2);
	CU_ASSERT_EQUAL(sim_run(&s, 20 * N_MAIN), 0);
	sim_check_and_close(&s, "RU both ways");
}

static void ro_both_ways_across_sequence_wraps(void)
{
	struct sim s;
	uint64_t a = UINT64_MAX - 5000, b = 0xffffffffull - 3000;

	sim_open(&s, sim_conf(a, b, 1), sim_conf(b, a, 1), 20000, 20000, 3);
	CU_ASSERT_EQUAL(sim_run(&s, 20 * 40000), 0);
	sim_check_and_close(&s, "RO both ways, wraps");
}

/* The application holds its events for 5 ms with 16 buffers: the window
 * closes and reopens again and again, and the sender never overruns it. */
static void a_slow_receiver_is_never_overrun(void)
{
	struct sim s;
	struct sock_rel_conf ca = sim_conf(10, 20, 1), cb = sim_conf(20, 10, 1);

	ca.peer_bufs = cb.rx_bufs = 16;
	sim_open(&s, ca, cb, 20000, 0, 4);
	s.app_period = 5 * MS;
	CU_ASSERT_EQUAL(sim_run(&s, 20 * 20000), 0);
	sim_check_and_close(&s, "RO slow receiver");
}

/* 2 s of 100% loss in the middle: the backoff is capped at 1 s, so the
 * stream resumes within about 1 s of the end, and completes. */
static void two_seconds_of_total_loss_are_recovered(void)
{
	struct sim s;

	sim_open(&s, sim_conf(10, 20, 1), sim_conf(20, 10, 1), 20000, 0, 5);
	s.blackout_at_delivered = 10000;
	s.blackout_ns = 2000 * MS;
	CU_ASSERT_EQUAL(sim_run(&s, 20 * 20000), 0);
	CU_ASSERT_TRUE(s.blackout_to > 0);
	CU_ASSERT_TRUE(s.first_after_blackout >= s.blackout_to);
	CU_ASSERT_TRUE(s.first_after_blackout <= s.blackout_to + 1100 * MS);
	CU_ASSERT_TRUE(s.e[0].r.stats.rto >= 5);
	sim_check_and_close(&s, "RO 2 s blackout");
}

/* The same seed gives the same run, datagram for datagram. */
static void a_seed_replays_the_same_run(void)
{
	uint64_t pkts[2], retx[2];

	for (int k = 0; k < 2; k++) {
		struct sim s;

		sim_open(&s, sim_conf(1, 2, 1), sim_conf(2, 1, 1), 5000, 5000, 42);
		CU_ASSERT_EQUAL(sim_run(&s, 200000), 0);
		pkts[k] = s.pkts;
		retx[k] = s.e[0].r.stats.tx_retx + s.e[1].r.stats.tx_retx;
		sim_check_and_close(&s, "replay");
	}
	CU_ASSERT_EQUAL(pkts[0], pkts[1]);
	CU_ASSERT_EQUAL(retx[0], retx[1]);
}

static const struct unit_test tests[] = {
	{ "RO: 200,000 messages through 5% loss, 1% duplication, 5% reordering arrive once, in order",
	  ro_delivers_200k_in_order_exactly_once_through_loss },
	{ "RU: 100,000 messages each way through the same channel arrive exactly once",
	  ru_delivers_both_ways_exactly_once_through_loss },
	{ "RO both ways with sequences crossing 2^32 and 2^64", ro_both_ways_across_sequence_wraps },
	{ "a slow receiver holding its buffers is never overrun", a_slow_receiver_is_never_overrun },
	{ "2 s of 100% loss mid-stream: resumes within the backoff ceiling and completes",
	  two_seconds_of_total_loss_are_recovered },
	{ "a seed replays the same run", a_seed_replays_the_same_run },
};

int main(void)
{
	return UNIT_RUN("sock reliability, simulated", tests);
}
