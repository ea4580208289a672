/*
 * sock_rel.h - the reliability of one RO or RU connection over datagrams,
 * for the UDP transport (sock://): sequence numbers, a sliding window with
 * selective acks, retransmission with an RTT estimate and backoff,
 * congestion and flow control, duplicate suppression and in-order
 * delivery.  A state machine only: it does no I/O, reads no clock and
 * allocates only in sock_rel_init().  The caller sends what it is told to
 * send, feeds in what arrives, and passes the time (monotonic ns) into
 * every call that needs it.
 *
 * One struct sock_rel serves both directions of one connection: the sender
 * side (our messages, the peer's acks) and the receiver side (the peer's
 * messages, the acks we owe).  It is not thread-safe: the caller holds the
 * connection's lock around every call.
 *
 * Sequence numbers are 64-bit and start at a value each side picks at
 * random per incarnation (the handshake carries it).  On the wire they
 * travel truncated to 32 bits (sock_rel_seq_encode) and are widened
 * against the window (sock_rel_seq_widen); that is exact while sender and
 * receiver are less than 2^31 messages apart, which the window (at most
 * SOCK_REL_CAP_MAX) guarantees for live datagrams.
 *
 * Ownership.  The module never touches message bytes.  A message is named
 * by a handle, an opaque 64-bit value of the caller (a pointer or an
 * index), which the module stores and hands back:
 *  - Sender: a handle given to sock_rel_tx_push() stays the caller's
 *    buffer, but the caller must keep it alive and unchanged, since the
 *    module may ask for it to be sent again, until sock_rel_tx_done()
 *    returns it (the peer acknowledged it) or sock_rel_tx_abort() returns
 *    it (teardown).
 *  - Receiver: a handle given to sock_rel_rx() that comes back as
 *    SOCK_REL_RX_DELIVER is the caller's to deliver at once; one that comes
 *    back as SOCK_REL_RX_HELD (RO, arrived early) is kept by the module
 *    until sock_rel_rx_next() returns it in order, or sock_rel_rx_abort()
 *    at teardown; DUP and OUTSIDE are not kept (the caller recycles the
 *    buffer).
 *  - Each message the receiver accepts (delivered or held) uses one of the
 *    receive buffers granted to the peer; the caller gives them back with
 *    sock_rel_rx_release() when the application returns its events.  The
 *    window the receiver advertises is exactly what it has granted, so a
 *    well-behaved peer never sends a message without a buffer waiting.
 *
 * Inputs from the wire are untrusted: an ack for data never sent, a
 * selective ack beyond what was sent or an absurd window is ignored and
 * counted (stats.ack_forged); a message outside the receive window is
 * dropped and counted (rx_outside), one already received is a duplicate
 * (rx_dup).  Who may send on a connection (addresses, incarnation ids) is
 * the transport's check, before these calls.
 *
 * The per-message work (a push with the window open, an in-order arrival,
 * an ack) is O(1) amortised, without allocation or division.
 */
#ifndef CCI_SOCK_REL_H
#define CCI_SOCK_REL_H

#include <stdint.h>

#define SOCK_REL_CAP_MIN 64u
#define SOCK_REL_CAP_MAX 65536u
#define SOCK_REL_NEVER UINT64_MAX /* "no timer" in sock_rel_next_timer() */
#define SOCK_REL_DUPTHRESH 3u     /* later messages acked before a hole is lost */

/* Parameters of one connection; sock_rel_conf_default() fills sane ones. */
struct sock_rel_conf {
	uint32_t cap;           /* window slots each way: a power of two, 64..65536 */
	int ordered;            /* receive side: 1 RO (in order), 0 RU (as it comes) */
	uint64_t tx_isn;        /* sequence of our first message */
	uint64_t rx_isn;        /* sequence of the peer's first message */
	uint32_t rx_bufs;       /* receive buffers granted to the peer at the start */
	uint32_t peer_bufs;     /* what the peer granted us (its handshake) */
	uint32_t cwnd_init;     /* congestion window at the start, messages */
	uint32_t cwnd_max;      /* its ceiling (at most cap) */
	uint64_t rto_init_ns;   /* retransmission timeout before any RTT sample */
	uint64_t rto_min_ns;
	uint64_t rto_max_ns;    /* the ceiling of the exponential backoff */
	uint64_t clock_ns;      /* timer granularity G of RFC 6298 */
	uint64_t ack_delay_ns;  /* longest wait of a delayed ack */
	uint32_t ack_every;     /* ack at once after this many in-order messages */
	int tail_probe;         /* 1: a tail-loss probe before the timeout (RFC 8985) */
};

/* What one ack says, as it travels (the wire codec packs these fields). */
struct sock_rel_ack {
	uint32_t cum;  /* truncated sequence of the first message not yet received */
	uint32_t wnd;  /* the receiver takes sequences below cum + wnd */
	uint64_t sack; /* bit i: message cum + 1 + i was received */
};

/* What sock_rel_tx_next() asks the caller to send. */
enum sock_rel_send_kind {
	SOCK_REL_SEND_NEW = 1, /* a message's first transmission */
	SOCK_REL_SEND_RETX,    /* a retransmission */
	SOCK_REL_SEND_PROBE    /* no message: a frame asking for an ack at once */
};

/* A flag of struct sock_rel_send: the frame asks the peer to ack at once
 * (the wire's ACK_NOW; the peer passes SOCK_REL_RX_ACK_NOW). */
#define SOCK_REL_SEND_ACK_NOW 0x1u

struct sock_rel_send {
	int kind;        /* enum sock_rel_send_kind */
	unsigned flags;  /* SOCK_REL_SEND_ACK_NOW or 0 */
	uint64_t seq;    /* 64-bit sequence (not for a probe) */
	uint64_t handle; /* the caller's handle (not for a probe) */
};

/* What sock_rel_rx() decided about an arriving message. */
enum sock_rel_rx_result {
	SOCK_REL_RX_DELIVER = 1, /* new and deliverable now: deliver it */
	SOCK_REL_RX_HELD,        /* RO, early: kept until sock_rel_rx_next() */
	SOCK_REL_RX_DUP,         /* received before: drop it */
	SOCK_REL_RX_OUTSIDE      /* beyond the granted window (or out of order with
	                          * no memory to hold it): drop it */
};

/* A flag of sock_rel_rx(): the sender asked for an ack at once. */
#define SOCK_REL_RX_ACK_NOW 0x1u

struct sock_rel_stats {
	uint64_t tx_new;       /* first transmissions */
	uint64_t tx_retx;      /* retransmissions, all causes */
	uint64_t tx_fast;      /* holes marked lost by selective acks */
	uint64_t rto;          /* retransmission timeouts */
	uint64_t tlp;          /* tail-loss probes */
	uint64_t probes;       /* zero-window probes */
	uint64_t ack_forged;   /* acks ignored: data never sent, absurd window */
	uint64_t ack_old;      /* acks older than what we know (reordered) */
	uint64_t rx_delivered; /* messages handed out (DELIVER and rx_next) */
	uint64_t rx_held;      /* RO messages that arrived early */
	uint64_t rx_dup;       /* duplicates dropped */
	uint64_t rx_outside;   /* messages beyond the window dropped */
	uint64_t rx_nomem;     /* out of order, dropped: no memory to hold them */
	uint64_t acks_made;    /* acks filled by sock_rel_ack_make() */
};

struct sock_rel_tx_slot; /* private to sock_rel.c */

struct sock_rel {
	struct sock_rel_conf conf;
	uint64_t mask; /* cap - 1 */

	/* Sender.  done <= una <= max <= nxt: [done, una) acked, not yet
	 * collected by sock_rel_tx_done(); [una, max) sent, unacked; [max,
	 * nxt) queued, never sent. */
	struct sock_rel_tx_slot *tx; /* [snd_done, snd_nxt) at seq & (tx_size - 1) */
	uint32_t tx_size;     /* 0 until the first push, then doubling as a
	                       * burst needs, up to cap (sock_rel.c) */
	uint64_t snd_done, snd_una, snd_max, snd_nxt;
	uint64_t peer_right;  /* the peer takes sequences below this */
	uint32_t sacked;      /* slots in [una, max) the peer holds */
	uint32_t lost;        /* slots in [una, max) marked for retransmission */
	uint64_t retx_scan;   /* no lost slot below this */
	uint32_t cwnd, ssthresh, cwnd_acc;
	int recovering;       /* a loss event is being repaired ... */
	uint64_t recover;     /* ... until una reaches this */
	uint64_t srtt, rttvar, rto; /* ns; srtt 0 = no sample yet */
	uint32_t backoff;     /* consecutive timeouts without a fresh sample */
	uint64_t rto_at;      /* retransmission timer, or SOCK_REL_NEVER */
	int tlp_armed;        /* rto_at is the tail-loss probe, the timeout comes after */
	int tlp_used;         /* one probe until the cumulative ack moves */
	int tlp_due;
	uint64_t tlp_seq;
	uint64_t persist_at;  /* zero-window probe timer, or SOCK_REL_NEVER */
	uint32_t persist_backoff;
	int probe_due;

	/* Receiver.  deliver <= nxt < right: [deliver, nxt) received in order
	 * but still held (RO) for sock_rel_rx_next(); present bits mark what
	 * arrived in [nxt, nxt + cap). */
	uint64_t *rx_handle;  /* RO: cap handles; NULL until a message comes out
	                       * of order (sock_rel.c: rx_arrays) */
	uint64_t *rx_present; /* cap bits; NULL likewise */
	uint64_t rcv_deliver, rcv_nxt;
	uint64_t rcv_right;   /* sequences below this have a buffer granted */
	uint32_t rx_early;    /* messages held beyond rcv_nxt */
	uint32_t ack_pending; /* in-order messages since the last ack */
	uint32_t wnd_sent;    /* the window of the last ack made */
	int ack_now;
	uint64_t ack_at;      /* delayed-ack timer, or SOCK_REL_NEVER */

	struct sock_rel_stats stats;
};

/* ---- sequence numbers on the wire ---- */

static inline uint32_t sock_rel_seq_encode(uint64_t seq)
{
	return (uint32_t)seq;
}

/* The 64-bit sequence nearest to ref whose low 32 bits are wire (within
 * -2^31 .. 2^31 - 1 of ref, modulo 2^64). */
static inline uint64_t sock_rel_seq_widen(uint64_t ref, uint32_t wire)
{
	return ref + (uint64_t)(int64_t)(int32_t)(wire - (uint32_t)ref);
}

/* a < b in sequence space (modulo 2^64). */
static inline int sock_rel_seq_lt(uint64_t a, uint64_t b)
{
	return (int64_t)(a - b) < 0;
}

/* ---- lifetime ---- */

void sock_rel_conf_default(struct sock_rel_conf *c);

/* Set r up for conf (copied): CCI_SUCCESS, or CCI_EINVAL for a cap that
 * is not a power of two in range.  Allocates nothing: the send ring comes
 * with the first push and grows with the largest burst (16 slots to cap),
 * the receive side's arrays with the first message out of order, so an
 * idle connection that carried only request and reply holds 512 bytes. */
int sock_rel_init(struct sock_rel *r, const struct sock_rel_conf *conf);

/* Free the window's memory.  Handles still inside are forgotten: collect them first
 * with sock_rel_tx_abort() and sock_rel_rx_abort(). */
void sock_rel_fini(struct sock_rel *r);

/* ---- sender ---- */

/*
 * Give the module the next message (in the order of the connection).
 * CCI_SUCCESS: it is sequenced as *seq_p and must be sent now (the window
 * was open); CCI_EAGAIN: it is sequenced as *seq_p and queued,
 * sock_rel_tx_next() hands it out when the window opens; CCI_ENOBUFS: the
 * window is full of unacknowledged messages, it was not taken; CCI_ENOMEM:
 * no memory to grow the send ring, it was not taken.
 */
int sock_rel_tx_push(struct sock_rel *r, uint64_t handle, uint64_t now, uint64_t *seq_p);

/* What to send now, retransmissions first: 1 with *s filled (the module
 * counts it as sent at now), 0 when nothing may go.  Call until 0 after
 * acks, timers and pushes that returned CCI_EAGAIN. */
int sock_rel_tx_next(struct sock_rel *r, uint64_t now, struct sock_rel_send *s);

/* An ack from the peer (alone or riding on its data).  Returns the number
 * of our messages it newly acknowledged; their handles come out of
 * sock_rel_tx_done().  A forged or stale ack changes nothing but stats. */
uint32_t sock_rel_tx_ack(struct sock_rel *r, const struct sock_rel_ack *a, uint64_t now);

/* Next acknowledged message, in sequence order: 1 with *handle_p, or 0. */
int sock_rel_tx_done(struct sock_rel *r, uint64_t *handle_p);

/* Teardown: every handle not yet returned by sock_rel_tx_done(), acked or
 * not, in sequence order: 1 with *handle_p, or 0 when none is left. */
int sock_rel_tx_abort(struct sock_rel *r, uint64_t *handle_p);

/* Messages pushed and not yet acknowledged (sent or queued). */
static inline uint64_t sock_rel_tx_pending(const struct sock_rel *r)
{
	return r->snd_nxt - r->snd_una;
}

/* ---- receiver ---- */

/*
 * A message arrived with wire sequence seq and the caller's buffer handle;
 * flags SOCK_REL_RX_ACK_NOW or 0.  Returns an enum sock_rel_rx_result.
 * After SOCK_REL_RX_DELIVER on an RO connection, drain sock_rel_rx_next():
 * this message may have filled a gap.
 */
int sock_rel_rx(struct sock_rel *r, uint32_t seq, uint64_t handle, unsigned flags, uint64_t now);

/* RO: the next held message that is now in order: 1 with *handle_p, or 0. */
int sock_rel_rx_next(struct sock_rel *r, uint64_t *handle_p);

/* The caller has n more receive buffers for this peer (the application
 * returned events).  A window that reopens from almost closed is
 * announced at once. */
void sock_rel_rx_release(struct sock_rel *r, uint32_t n);

/* The peer asked for an ack at once (a probe, a blocking send). */
void sock_rel_rx_probe(struct sock_rel *r);

/* Teardown: every handle held (RO), in sequence order: 1 or 0. */
int sock_rel_rx_abort(struct sock_rel *r, uint64_t *handle_p);

/* Must a lone ack go out now?  (When a frame goes anyway, ride on it.) */
static inline int sock_rel_ack_due(const struct sock_rel *r, uint64_t now)
{
	return r->ack_now || r->ack_at <= now;
}

/* Fill the ack to send now (alone or on a frame) and reset the ack
 * timers: the peer will know what this ack says. */
void sock_rel_ack_make(struct sock_rel *r, struct sock_rel_ack *a);

/* ---- timers ---- */

/* When sock_rel_tick() has work next (SOCK_REL_NEVER: no timer). */
uint64_t sock_rel_next_timer(const struct sock_rel *r);

/* Run the timers due at now: a tail-loss probe (resend the newest message,
 * asking for an ack at once: after 2 SRTT + ack_delay_ns without an ack,
 * once until the cumulative ack moves), a retransmission timeout (back
 * off, resend from the oldest), a zero-window probe.  Then drain sock_rel_tx_next()
 * and check sock_rel_ack_due(). */
void sock_rel_tick(struct sock_rel *r, uint64_t now);

#endif /* CCI_SOCK_REL_H */
