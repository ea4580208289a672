/*
 * sock_rel.c - see sock_rel.h.
 *
 * The sender follows RFC 6298 for the timer (SRTT/RTTVAR, Karn's rule,
 * backoff), RFC 6675 for the pipe (in flight = sent - selectively acked -
 * marked lost) and NewReno for the window (slow start, halve once per
 * window on a loss, 1 on a timeout), counted in messages.  A hole is lost
 * when SOCK_REL_DUPTHRESH messages sent after its last transmission were
 * selectively acked, which also catches a lost retransmission without
 * waiting for the timer.
 */
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "sock_rel.h"

#define SLOT_SACKED 0x1u /* the peer holds it (it never drops what it took) */
#define SLOT_LOST 0x2u   /* to be retransmitted */
#define SLOT_RETX 0x4u   /* sent more than once: no RTT sample (Karn) */

/* The send ring's first size: a request and its reply need a slot or two,
 * a burst doubles it up to the window (cap). */
#define TX_RING_FIRST 16u

struct sock_rel_tx_slot {
	uint64_t handle;
	uint64_t sent_ns; /* last transmission */
	uint64_t mark;    /* snd_max just after its last transmission */
	uint32_t flags;
};

void sock_rel_conf_default(struct sock_rel_conf *c)
{
	*c = (struct sock_rel_conf){
		.cap = 256,
		.ordered = 1,
		.rx_bufs = 64,
		.peer_bufs = 64,
		.cwnd_init = 16,
		.cwnd_max = 256,
		.rto_init_ns = 200000000ull, /* 200 ms */
		.rto_min_ns = 20000000ull,   /* 20 ms */
		.rto_max_ns = 1000000000ull, /* 1 s: a long outage ends within 1 s */
		.clock_ns = 1000000ull,
		.ack_delay_ns = 1000000ull,
		.ack_every = 8,
		.tail_probe = 1,
	};
}

static uint64_t seq_min(uint64_t a, uint64_t b)
{
	return sock_rel_seq_lt(a, b) ? a : b;
}

static uint64_t u64_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

int sock_rel_init(struct sock_rel *r, const struct sock_rel_conf *conf)
{
	uint32_t cap = conf->cap;

	if (cap < SOCK_REL_CAP_MIN || cap > SOCK_REL_CAP_MAX || (cap & (cap - 1)) ||
	    conf->cwnd_init == 0 || conf->rto_min_ns == 0 || conf->rto_max_ns < conf->rto_min_ns ||
	    conf->ack_every == 0)
		return CCI_EINVAL;
	memset(r, 0, sizeof(*r));
	r->conf = *conf;
	if (r->conf.cwnd_max == 0 || r->conf.cwnd_max > cap)
		r->conf.cwnd_max = cap;
	r->mask = cap - 1;
	r->snd_done = r->snd_una = r->snd_max = r->snd_nxt = conf->tx_isn;
	r->retx_scan = conf->tx_isn;
	r->peer_right = conf->tx_isn + u64_min(conf->peer_bufs, SOCK_REL_CAP_MAX);
	r->cwnd = conf->cwnd_init < r->conf.cwnd_max ? conf->cwnd_init : r->conf.cwnd_max;
	r->ssthresh = r->conf.cwnd_max;
	r->rto = conf->rto_init_ns;
	r->rto_at = r->persist_at = r->ack_at = SOCK_REL_NEVER;
	r->rcv_deliver = r->rcv_nxt = conf->rx_isn;
	r->rcv_right = conf->rx_isn + conf->rx_bufs;
	return CCI_SUCCESS;
}

void sock_rel_fini(struct sock_rel *r)
{
	free(r->tx);
	free(r->rx_handle);
	free(r->rx_present);
	r->tx = NULL;
	r->tx_size = 0;
	r->rx_handle = NULL;
	r->rx_present = NULL;
}

/* ------------------------------------------------------------------------ */
/* Sender                                                                    */
/* ------------------------------------------------------------------------ */

/* seq lies in [snd_done, snd_nxt), so the ring exists. */
static struct sock_rel_tx_slot *tx_slot(const struct sock_rel *r, uint64_t seq)
{
	return &r->tx[seq & (r->tx_size - 1)];
}

/* Room for one more message: double the ring (the messages in it move to
 * their places in the larger one), up to the window. */
static int tx_ring_grow(struct sock_rel *r)
{
	uint32_t size = r->tx_size ? r->tx_size * 2 : TX_RING_FIRST;
	struct sock_rel_tx_slot *tx;

	if (r->tx_size > r->mask)
		return CCI_ENOBUFS;
	tx = calloc(size, sizeof(*tx));
	if (!tx)
		return CCI_ENOMEM;
	for (uint64_t seq = r->snd_done; seq != r->snd_nxt; seq++)
		tx[seq & (size - 1)] = *tx_slot(r, seq);
	free(r->tx);
	r->tx = tx;
	r->tx_size = size;
	return CCI_SUCCESS;
}

/* Messages in flight: sent, neither acked nor known lost. */
static uint32_t tx_pipe(const struct sock_rel *r)
{
	return (uint32_t)(r->snd_max - r->snd_una) - r->sacked - r->lost;
}

static uint64_t persist_interval(const struct sock_rel *r)
{
	uint64_t t = r->rto;

	for (uint32_t i = 0; i < r->persist_backoff && t < r->conf.rto_max_ns; i++)
		t <<= 1;
	return u64_min(t, r->conf.rto_max_ns);
}

/* The probe timer runs while messages wait for a window the peer closed
 * and nothing in flight would bring an ack. */
static void persist_update(struct sock_rel *r, uint64_t now)
{
	int closed = r->snd_nxt != r->snd_max && !sock_rel_seq_lt(r->snd_max, r->peer_right) &&
	             r->snd_una == r->snd_max;

	if (!closed) {
		r->persist_at = SOCK_REL_NEVER;
		r->persist_backoff = 0;
	} else if (r->persist_at == SOCK_REL_NEVER) {
		r->persist_at = now + persist_interval(r);
	}
}

/* Start the retransmission timer: first the tail-loss probe when an RTT
 * is known (an ack lost from a small window then costs 2 RTTs, not an
 * RTO), then the timeout. */
static void rto_arm(struct sock_rel *r, uint64_t now)
{
	uint64_t pto = (r->srtt << 1) + r->conf.ack_delay_ns;

	r->tlp_armed = r->conf.tail_probe && r->srtt && !r->tlp_used && pto < r->rto;
	r->rto_at = now + (r->tlp_armed ? pto : r->rto);
}

static void tx_sent(struct sock_rel *r, struct sock_rel_tx_slot *s, uint64_t now)
{
	s->sent_ns = now;
	s->mark = r->snd_max;
	if (r->rto_at == SOCK_REL_NEVER)
		rto_arm(r, now);
}

static int tx_may_send_new(const struct sock_rel *r)
{
	return r->snd_max != r->snd_nxt && tx_pipe(r) < r->cwnd &&
	       sock_rel_seq_lt(r->snd_max, r->peer_right);
}

int sock_rel_tx_push(struct sock_rel *r, uint64_t handle, uint64_t now, uint64_t *seq_p)
{
	uint64_t seq = r->snd_nxt;
	struct sock_rel_tx_slot *s;

	if (r->snd_nxt - r->snd_done >= r->tx_size) {
		int rc = tx_ring_grow(r);
		if (rc != CCI_SUCCESS)
			return rc;
	}
	s = tx_slot(r, seq);
	s->handle = handle;
	s->flags = 0;
	r->snd_nxt++;
	*seq_p = seq;
	if (r->snd_max == seq && r->lost == 0 && tx_may_send_new(r)) {
		r->snd_max++;
		tx_sent(r, s, now);
		r->stats.tx_new++;
		return CCI_SUCCESS;
	}
	persist_update(r, now);
	return CCI_EAGAIN;
}

static void tx_fill(struct sock_rel_send *out, int kind, uint64_t seq, uint64_t handle)
{
	out->kind = kind;
	out->flags = 0;
	out->seq = seq;
	out->handle = handle;
}

/* The tail-loss probe goes whatever the window: one message. */
static int tx_tail_probe(struct sock_rel *r, uint64_t now, struct sock_rel_send *out)
{
	struct sock_rel_tx_slot *s;

	r->tlp_due = 0;
	if (sock_rel_seq_lt(r->tlp_seq, r->snd_una))
		return sock_rel_tx_next(r, now, out);
	s = tx_slot(r, r->tlp_seq);
	if (s->flags & SLOT_SACKED)
		return sock_rel_tx_next(r, now, out);
	if (s->flags & SLOT_LOST) {
		r->lost--;
		s->flags &= ~SLOT_LOST;
	}
	s->flags |= SLOT_RETX;
	tx_sent(r, s, now);
	r->stats.tx_retx++;
	tx_fill(out, SOCK_REL_SEND_RETX, r->tlp_seq, s->handle);
	out->flags = SOCK_REL_SEND_ACK_NOW;
	return 1;
}

int sock_rel_tx_next(struct sock_rel *r, uint64_t now, struct sock_rel_send *out)
{
	struct sock_rel_tx_slot *s;
	uint64_t seq;

	if (r->probe_due) {
		r->probe_due = 0;
		r->stats.probes++;
		tx_fill(out, SOCK_REL_SEND_PROBE, r->snd_max, 0);
		return 1;
	}
	if (r->tlp_due)
		return tx_tail_probe(r, now, out);
	if (tx_pipe(r) >= r->cwnd)
		return 0;
	if (r->lost) {
		/* Lost slots lie in [retx_scan, snd_max): the scan only moves on. */
		while (!(tx_slot(r, r->retx_scan)->flags & SLOT_LOST))
			r->retx_scan++;
		seq = r->retx_scan++;
		s = tx_slot(r, seq);
		s->flags = (s->flags & ~SLOT_LOST) | SLOT_RETX;
		r->lost--;
		tx_sent(r, s, now);
		r->stats.tx_retx++;
		tx_fill(out, SOCK_REL_SEND_RETX, seq, s->handle);
		return 1;
	}
	if (!tx_may_send_new(r))
		return 0;
	seq = r->snd_max++;
	s = tx_slot(r, seq);
	tx_sent(r, s, now);
	r->stats.tx_new++;
	tx_fill(out, SOCK_REL_SEND_NEW, seq, s->handle);
	return 1;
}

/* RFC 6298 section 2, with shifts for the gains 1/8 and 1/4. */
static void rtt_sample(struct sock_rel *r, uint64_t rtt)
{
	uint64_t var;

	if (rtt == 0)
		rtt = 1;
	if (r->srtt == 0) {
		r->srtt = rtt;
		r->rttvar = rtt >> 1;
	} else {
		uint64_t d = r->srtt > rtt ? r->srtt - rtt : rtt - r->srtt;

		r->rttvar = r->rttvar - (r->rttvar >> 2) + (d >> 2);
		r->srtt = r->srtt - (r->srtt >> 3) + (rtt >> 3);
	}
	var = r->rttvar << 2;
	r->rto = r->srtt + (var > r->conf.clock_ns ? var : r->conf.clock_ns);
	if (r->rto < r->conf.rto_min_ns)
		r->rto = r->conf.rto_min_ns;
	if (r->rto > r->conf.rto_max_ns)
		r->rto = r->conf.rto_max_ns;
	r->backoff = 0;
}

/* What one ack taught the sender. */
struct ack_view {
	uint64_t cum;
	uint32_t delivered;  /* messages newly known to be at the peer */
	uint64_t sample_ns;  /* latest send time of a fresh one among them, or 0 */
	int have_sample;
};

static void ack_newly_held(struct sock_rel *r, struct sock_rel_tx_slot *s, struct ack_view *v)
{
	v->delivered++;
	if (!(s->flags & SLOT_RETX) && (!v->have_sample || s->sent_ns > v->sample_ns)) {
		v->sample_ns = s->sent_ns;
		v->have_sample = 1;
	}
	if (s->flags & SLOT_LOST) {
		s->flags &= ~SLOT_LOST;
		r->lost--;
	}
}

/* Slide snd_una to cum: these messages are done. */
static uint32_t ack_cumulative(struct sock_rel *r, struct ack_view *v)
{
	uint32_t n = (uint32_t)(v->cum - r->snd_una);

	for (uint64_t seq = r->snd_una; seq != v->cum; seq++) {
		struct sock_rel_tx_slot *s = tx_slot(r, seq);

		if (s->flags & SLOT_SACKED)
			r->sacked--;
		else
			ack_newly_held(r, s, v);
		s->flags = 0;
	}
	r->snd_una = v->cum;
	if (sock_rel_seq_lt(r->retx_scan, r->snd_una))
		r->retx_scan = r->snd_una;
	return n;
}

static void ack_selective(struct sock_rel *r, uint64_t sack, struct ack_view *v)
{
	while (sack) {
		int i = __builtin_ctzll(sack);
		struct sock_rel_tx_slot *s = tx_slot(r, v->cum + 1 + (uint64_t)i);

		sack &= sack - 1;
		if (s->flags & SLOT_SACKED)
			continue;
		s->flags |= SLOT_SACKED;
		r->sacked++;
		ack_newly_held(r, s, v);
	}
}

/* Selectively acked messages at or after seq, among those of this ack. */
static int sacked_from(uint64_t sack, uint64_t cum, uint64_t seq)
{
	int64_t p = (int64_t)(seq - (cum + 1));

	if (p <= 0)
		return __builtin_popcountll(sack);
	if (p >= 64)
		return 0;
	return __builtin_popcountll(sack >> p);
}

static int hole_check(struct sock_rel *r, uint64_t sack, uint64_t cum, uint64_t seq)
{
	struct sock_rel_tx_slot *s = tx_slot(r, seq);

	if (s->flags & (SLOT_SACKED | SLOT_LOST))
		return 0;
	if (sacked_from(sack, cum, s->mark) < (int)SOCK_REL_DUPTHRESH)
		return 0;
	s->flags |= SLOT_LOST;
	r->lost++;
	r->stats.tx_fast++;
	if (sock_rel_seq_lt(seq, r->retx_scan))
		r->retx_scan = seq;
	return 1;
}

/* Mark the holes below the highest selective ack that enough later
 * messages overtook; returns 1 when one was newly marked. */
static int ack_mark_holes(struct sock_rel *r, uint64_t sack, uint64_t cum)
{
	int hi, lost;
	uint64_t holes;

	if (!sack)
		return 0;
	hi = 63 - __builtin_clzll(sack);
	lost = hole_check(r, sack, cum, cum);
	holes = ~sack & ((1ull << hi) - 1);
	while (holes) {
		int i = __builtin_ctzll(holes);

		holes &= holes - 1;
		lost |= hole_check(r, sack, cum, cum + 1 + (uint64_t)i);
	}
	return lost;
}

/* NewReno on message counts: halve once per window of data, grow in slow
 * start or by one message a window, never while a loss is repaired. */
/* RFC 5681: after a loss, half the data outstanding, at least 2. */
static uint32_t ssthresh_after_loss(const struct sock_rel *r)
{
	uint32_t flight = (uint32_t)(r->snd_max - r->snd_una);

	return flight / 2 > 2 ? flight / 2 : 2;
}

static void cwnd_update(struct sock_rel *r, uint32_t delivered, int loss)
{
	if (r->recovering && !sock_rel_seq_lt(r->snd_una, r->recover))
		r->recovering = 0;
	if (loss && !r->recovering) {
		r->ssthresh = ssthresh_after_loss(r);
		r->cwnd = r->ssthresh;
		r->cwnd_acc = 0;
		r->recovering = 1;
		r->recover = r->snd_max;
		return;
	}
	if (r->recovering == 1 || delivered == 0)
		return;
	if (r->cwnd < r->ssthresh) {
		r->cwnd += delivered;
	} else {
		r->cwnd_acc += delivered;
		if (r->cwnd_acc >= r->cwnd) {
			r->cwnd_acc -= r->cwnd;
			r->cwnd++;
		}
	}
	if (r->cwnd > r->conf.cwnd_max)
		r->cwnd = r->conf.cwnd_max;
}

/* Is the ack possible at all?  It may not cover unsent data. */
static int ack_valid(const struct sock_rel *r, const struct sock_rel_ack *a, uint64_t cum)
{
	if (sock_rel_seq_lt(r->snd_max, cum) || a->wnd > SOCK_REL_CAP_MAX)
		return 0;
	if (a->sack && !sock_rel_seq_lt(cum + 64 - (uint64_t)__builtin_clzll(a->sack), r->snd_max))
		return 0;
	return 1;
}

uint32_t sock_rel_tx_ack(struct sock_rel *r, const struct sock_rel_ack *a, uint64_t now)
{
	struct ack_view v = { .cum = sock_rel_seq_widen(r->snd_una, a->cum) };
	uint64_t right = v.cum + a->wnd;
	uint32_t n;
	int loss;

	if (!ack_valid(r, a, v.cum)) {
		r->stats.ack_forged++;
		return 0;
	}
	/* The peer's right edge never moves back: keep the furthest. */
	if (sock_rel_seq_lt(r->peer_right, right))
		r->peer_right = right;
	if (sock_rel_seq_lt(v.cum, r->snd_una)) {
		r->stats.ack_old++;
		persist_update(r, now);
		return 0;
	}
	n = ack_cumulative(r, &v);
	ack_selective(r, a->sack, &v);
	loss = ack_mark_holes(r, a->sack, v.cum);
	if (v.have_sample)
		rtt_sample(r, now - v.sample_ns);
	cwnd_update(r, v.delivered, loss);
	if (n) {
		r->tlp_used = 0;
		r->rto_at = SOCK_REL_NEVER;
		if (r->snd_una != r->snd_max)
			rto_arm(r, now);
	}
	persist_update(r, now);
	return n;
}

int sock_rel_tx_done(struct sock_rel *r, uint64_t *handle_p)
{
	if (r->snd_done == r->snd_una)
		return 0;
	*handle_p = tx_slot(r, r->snd_done++)->handle;
	return 1;
}

int sock_rel_tx_abort(struct sock_rel *r, uint64_t *handle_p)
{
	/* The connection is over: nothing more is sent or counted. */
	r->rto_at = r->persist_at = SOCK_REL_NEVER;
	r->probe_due = r->tlp_due = 0;
	if (r->snd_done == r->snd_nxt)
		return 0;
	*handle_p = tx_slot(r, r->snd_done++)->handle;
	if (sock_rel_seq_lt(r->snd_una, r->snd_done)) {
		r->snd_una = r->snd_done;
		r->sacked = r->lost = 0;
	}
	if (sock_rel_seq_lt(r->snd_max, r->snd_done))
		r->snd_max = r->snd_done;
	r->retx_scan = r->snd_una;
	return 1;
}

/* The probe timer fired: resend the newest message the peer does not hold
 * (its ack, or the selective acks it triggers, tell what is missing); the
 * timeout proper follows one RTO later. */
static void tx_tail_timer(struct sock_rel *r, uint64_t now)
{
	uint64_t seq = r->snd_max - 1;

	while (seq != r->snd_una && (tx_slot(r, seq)->flags & SLOT_SACKED))
		seq--;
	r->tlp_armed = 0;
	r->tlp_used = 1;
	r->tlp_due = 1;
	r->tlp_seq = seq;
	r->stats.tlp++;
	r->rto_at = now + r->rto;
}

/* A timeout: every message in flight that the peer does not hold is
 * resent, from the oldest, with a window of one (RFC 5681 section 3.1). */
static void tx_timeout(struct sock_rel *r, uint64_t now)
{
	if (r->snd_una == r->snd_max) {
		r->rto_at = SOCK_REL_NEVER;
		return;
	}
	r->stats.rto++;
	r->tlp_armed = 0;
	r->ssthresh = ssthresh_after_loss(r);
	r->cwnd = 1;
	r->cwnd_acc = 0;
	r->recovering = 2; /* slow start, but no second halving for this window */
	r->recover = r->snd_max;
	for (uint64_t seq = r->snd_una; seq != r->snd_max; seq++) {
		struct sock_rel_tx_slot *s = tx_slot(r, seq);

		if (!(s->flags & (SLOT_SACKED | SLOT_LOST))) {
			s->flags |= SLOT_LOST;
			r->lost++;
		}
	}
	r->retx_scan = r->snd_una;
	r->backoff++;
	r->rto = u64_min(r->rto << 1, r->conf.rto_max_ns);
	r->rto_at = now + r->rto;
}

/* ------------------------------------------------------------------------ */
/* Receiver                                                                  */
/* ------------------------------------------------------------------------ */

static int rx_is_present(const struct sock_rel *r, uint64_t seq)
{
	uint64_t i = seq & r->mask;

	return (r->rx_present[i >> 6] >> (i & 63)) & 1;
}

static void rx_set_present(struct sock_rel *r, uint64_t seq, int on)
{
	uint64_t i = seq & r->mask, bit = 1ull << (i & 63);

	if (on)
		r->rx_present[i >> 6] |= bit;
	else
		r->rx_present[i >> 6] &= ~bit;
}

/* Sequences below this are taken: a buffer is granted, a slot is free. */
static uint64_t rx_limit(const struct sock_rel *r)
{
	return seq_min(r->rcv_right, r->rcv_deliver + r->mask + 1);
}

/* rcv_nxt moved to seq + 1: pass over what had arrived early.  Returns
 * how many early messages are now in order. */
static uint32_t rx_advance(struct sock_rel *r)
{
	uint32_t n = 0;

	while (r->rx_early && rx_is_present(r, r->rcv_nxt)) {
		rx_set_present(r, r->rcv_nxt, 0);
		r->rx_early--;
		r->rcv_nxt++;
		n++;
	}
	if (!r->conf.ordered)
		r->rcv_deliver = r->rcv_nxt;
	return n;
}

static void rx_ack_in_order(struct sock_rel *r, uint64_t now)
{
	if (++r->ack_pending >= r->conf.ack_every)
		r->ack_now = 1;
	else if (r->ack_at == SOCK_REL_NEVER)
		r->ack_at = now + r->conf.ack_delay_ns;
}

/* The receive side's arrays, made at the first message out of order: in
 * order, a message is handed out as it comes and needs none. */
static int rx_arrays(struct sock_rel *r)
{
	uint32_t cap = (uint32_t)r->mask + 1;

	if (r->rx_present)
		return 0;
	r->rx_present = calloc(cap / 64, sizeof(*r->rx_present));
	if (r->conf.ordered)
		r->rx_handle = calloc(cap, sizeof(*r->rx_handle));
	if (r->rx_present && (r->rx_handle || !r->conf.ordered))
		return 0;
	free(r->rx_present);
	free(r->rx_handle);
	r->rx_present = NULL;
	r->rx_handle = NULL;
	return -1;
}

/* A message after a gap: RU delivers it, RO keeps it.  Either way the
 * sender hears of the gap at once.  Without memory to note it, it is
 * dropped as if lost: the sender sends it again. */
static int rx_take_early(struct sock_rel *r, uint64_t seq, uint64_t handle)
{
	r->ack_now = 1;
	if (rx_arrays(r) != 0) {
		r->stats.rx_nomem++;
		return SOCK_REL_RX_OUTSIDE;
	}
	if (rx_is_present(r, seq)) {
		r->stats.rx_dup++;
		return SOCK_REL_RX_DUP;
	}
	rx_set_present(r, seq, 1);
	r->rx_early++;
	if (!r->conf.ordered) {
		r->stats.rx_delivered++;
		return SOCK_REL_RX_DELIVER;
	}
	r->rx_handle[seq & r->mask] = handle;
	r->stats.rx_held++;
	return SOCK_REL_RX_HELD;
}

int sock_rel_rx(struct sock_rel *r, uint32_t wire, uint64_t handle, unsigned flags, uint64_t now)
{
	uint64_t seq = sock_rel_seq_widen(r->rcv_nxt, wire);

	if (flags & SOCK_REL_RX_ACK_NOW)
		r->ack_now = 1;
	if (sock_rel_seq_lt(seq, r->rcv_nxt)) {
		r->stats.rx_dup++;
		r->ack_now = 1; /* our last ack may have been lost */
		return SOCK_REL_RX_DUP;
	}
	if (!sock_rel_seq_lt(seq, rx_limit(r))) {
		r->stats.rx_outside++;
		r->ack_now = 1; /* tell the peer the window again */
		return SOCK_REL_RX_OUTSIDE;
	}
	if (seq != r->rcv_nxt)
		return rx_take_early(r, seq, handle);
	r->rcv_nxt++;
	if (rx_advance(r))
		r->ack_now = 1; /* a gap closed: the sender waits to hear it */
	else
		rx_ack_in_order(r, now);
	if (r->conf.ordered && r->rcv_deliver != seq) {
		/* In order, but earlier ones still wait for rx_next. */
		r->rx_handle[seq & r->mask] = handle;
		r->stats.rx_held++;
		return SOCK_REL_RX_HELD;
	}
	if (r->conf.ordered)
		r->rcv_deliver = seq + 1;
	r->stats.rx_delivered++;
	return SOCK_REL_RX_DELIVER;
}

int sock_rel_rx_next(struct sock_rel *r, uint64_t *handle_p)
{
	if (r->rcv_deliver == r->rcv_nxt)
		return 0;
	*handle_p = r->rx_handle[r->rcv_deliver++ & r->mask];
	r->stats.rx_delivered++;
	return 1;
}

static uint32_t rx_window(const struct sock_rel *r)
{
	return (uint32_t)(rx_limit(r) - r->rcv_nxt);
}

void sock_rel_rx_release(struct sock_rel *r, uint32_t n)
{
	uint32_t low = (r->conf.rx_bufs < r->mask + 1 ? r->conf.rx_bufs : r->mask + 1) / 4;

	r->rcv_right += n;
	/* The peer may be waiting on a window it saw (nearly) closed. */
	if (r->wnd_sent <= low && rx_window(r) > r->wnd_sent)
		r->ack_now = 1;
}

void sock_rel_rx_probe(struct sock_rel *r)
{
	r->ack_now = 1;
}

int sock_rel_rx_abort(struct sock_rel *r, uint64_t *handle_p)
{
	if (!r->conf.ordered)
		return 0;
	if (sock_rel_rx_next(r, handle_p))
		return 1;
	/* Early ones, skipping the gaps before them; the stream is over. */
	while (r->rx_early) {
		uint64_t seq = ++r->rcv_nxt;

		r->rcv_deliver = r->rcv_nxt;
		if (rx_is_present(r, seq)) {
			rx_set_present(r, seq, 0);
			r->rx_early--;
			r->rcv_nxt = r->rcv_deliver = seq + 1;
			*handle_p = r->rx_handle[seq & r->mask];
			return 1;
		}
	}
	return 0;
}

/* Bit i: cum + 1 + i arrived; read from the ring of present bits. */
static uint64_t rx_sack(const struct sock_rel *r)
{
	uint64_t words = (r->mask + 1) >> 6;
	uint64_t p = (r->rcv_nxt + 1) & r->mask, w = p >> 6, off = p & 63;
	uint64_t v;

	if (!r->rx_early)
		return 0;
	v = r->rx_present[w] >> off;
	if (off)
		v |= r->rx_present[(w + 1) & (words - 1)] << (64 - off);
	return v;
}

void sock_rel_ack_make(struct sock_rel *r, struct sock_rel_ack *a)
{
	a->cum = sock_rel_seq_encode(r->rcv_nxt);
	a->wnd = rx_window(r);
	a->sack = rx_sack(r);
	r->wnd_sent = a->wnd;
	r->ack_pending = 0;
	r->ack_now = 0;
	r->ack_at = SOCK_REL_NEVER;
	r->stats.acks_made++;
}

/* ------------------------------------------------------------------------ */
/* Timers                                                                    */
/* ------------------------------------------------------------------------ */

uint64_t sock_rel_next_timer(const struct sock_rel *r)
{
	if (r->ack_now || r->probe_due || r->tlp_due)
		return 0;
	return u64_min(u64_min(r->rto_at, r->persist_at), r->ack_at);
}

void sock_rel_tick(struct sock_rel *r, uint64_t now)
{
	if (r->rto_at <= now && r->tlp_armed)
		tx_tail_timer(r, now);
	else if (r->rto_at <= now)
		tx_timeout(r, now);
	if (r->persist_at <= now) {
		r->probe_due = 1;
		r->persist_backoff++;
		r->persist_at = now + persist_interval(r);
	}
}
