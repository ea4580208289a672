/*
 * sm_poll.c - which receive rings progress reads, in time proportional
 * to the rings with something for it, not to the connections open.
 *
 * A poll reads:
 *  - the hot rings (at most SM_HOT): those that brought records within
 *    the last SM_HOT_IDLE polls, read directly.  Their bits stay set in
 *    the inbox (sep->keep), so their senders find them set and pay no
 *    locked operation, and a stream or a ping-pong costs what it cost
 *    before the inbox: a look at the ring's next stamp.  The words
 *    holding kept bits are compared with keep at every poll (another
 *    ring's bit there is never flagged in the summary);
 *  - the inbox (sm_inbox.h): what its top word flags, taken level by
 *    level; the rings found go on the pending list;
 *  - what the tick's sweep found (sep->found), likewise;
 *  - the pending list: rings taken from the inbox and not drained yet,
 *    read at every poll until a read leaves nothing behind (a batch of
 *    SM_RX_BATCH records, the half-window rule, an event queue that has
 *    no room, or a peer waiting for space that only returned events can
 *    give keep a ring there).  A ring that brought records there becomes
 *    hot if a slot is free.
 * Between taking bits and reading the rings they name there is a seq_cst
 * fence: the receiver's half of the argument in sm_inbox.h.
 *
 * The sweep (sm_poll_sweep, from the tick) is the fallback for an inbox a
 * peer wrote into: every peer maps it read-write, and one that clears
 * bits (or dies between two of its marks, leaving a word non-zero with
 * no summary bit) would hide records.  It looks at the next stamp of
 * SM_SWEEP_RINGS rings a tick, whatever the inbox says, and flags the
 * rings with a record in sep->found; progress takes those with their
 * inbox words and summary word, which repairs a word left stuck.  So a
 * record is never lost, at worst delayed by rings / SM_SWEEP_RINGS ticks.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sm.h"

#define SM_RX_BATCH 64 /* records taken from one ring per poll */

/* Take what the peer published; rx_lock held.  Returns records handled;
 * *left_p: it stopped with a record it could not take now (or at the
 * batch limit). */
static int rx_drain(struct sm_ep *sep, struct sm_conn *sc, int *left_p)
{
	int n;

	*left_p = 1;
	for (n = 0; n < SM_RX_BATCH; n++) {
		int bad = 0;
		struct sm_rec *rec = sm_ring_peek(&sc->rx, &bad);
		if (!rec) {
			if (bad)
				sm_rx_fault(sc);
			*left_p = 0;
			break;
		}
		if (!(rec->type == SM_REC_MSG ? sm_rx_post(sep, sc, rec) : sm_rma_on_record(sc, rec)))
			break;
	}
	return n;
}

/* After a drain that found nothing more: the peer waits for space
 * (prod_waiting) that only returning events of this ring can give (RECV
 * events are an open connection's only holds besides its own). */
static int rx_starved(struct sm_conn *sc)
{
	return cci__conn_holds(&sc->life) > 1 && sm_ring_blocked(&sc->rx, sc->sep->mss) &&
	       atomic_load_explicit(&sc->rx.ctl->prod_waiting, memory_order_relaxed);
}

/* Read sc's ring.  *stay_p: read it again at the next poll (records
 * left, or starved); *starved_p |= starved. */
static int rx_look(struct sm_ep *sep, struct sm_conn *sc, int *stay_p, int *starved_p)
{
	int left, starved, n = rx_drain(sep, sc, &left);

	if (sc->rx.read != atomic_load_explicit(&sc->rx_read_pub, memory_order_relaxed))
		atomic_store_explicit(&sc->rx_read_pub, sc->rx.read, memory_order_relaxed);
	starved = rx_starved(sc);
	*starved_p |= starved;
	*stay_p = left || starved;
	return n;
}

/* sc (pending) brought records: read it directly from now on, its bit
 * kept set in the inbox. */
static void hot_add(struct sm_ep *sep, struct sm_conn *sc)
{
	uint32_t i = sep->nhot++, w = sc->rx.bit >> 6;
	uint64_t m = 1ull << (sc->rx.bit & 63u);

	sm_pend_unlink(sep, sc);
	sep->hot[i] = sc;
	sep->hot_last[i] = sep->polls;
	sc->rx_hot = (int)i;
	sep->keep[w] |= m;
	if (!(atomic_load_explicit(&sep->inbox->bits[w], memory_order_relaxed) & m))
		atomic_fetch_or_explicit(&sep->inbox->bits[w], m, memory_order_relaxed);
}

/* The hot rings, from the last (a ring dropped takes the last's slot). */
static int poll_hot(struct sm_ep *sep, int *starved_p)
{
	int got = 0, stay;

	for (uint32_t i = sep->nhot; i-- > 0;) {
		struct sm_conn *sc = sep->hot[i];
		int n = rx_look(sep, sc, &stay, starved_p);
		if (n)
			sep->hot_last[i] = sep->polls;
		got += n;
		if (sc->rx_dead)
			sm_conn_hot_drop(sep, i); /* sm_poll_rx fences */
	}
	return got;
}

/* One hot ring a poll is checked for idleness: 1 if one was dropped. */
static int hot_idle(struct sm_ep *sep)
{
	uint32_t i;

	if (sep->hot_next >= sep->nhot)
		sep->hot_next = 0;
	i = sep->hot_next++;
	if (sep->polls - sep->hot_last[i] < SM_HOT_IDLE)
		return 0;
	sm_conn_hot_drop(sep, i);
	return 1;
}

/* Does the inbox flag a ring that is not hot? */
static int inbox_flagged(struct sm_ep *sep)
{
	if (atomic_load_explicit(&sep->inbox->top, memory_order_relaxed))
		return 1;
	for (uint32_t i = 0; i < sep->nhot; i++) {
		uint32_t w = sep->hot[i]->rx.bit >> 6;
		if (atomic_load_explicit(&sep->inbox->bits[w], memory_order_relaxed) & ~sep->keep[w])
			return 1;
	}
	return 0;
}

static void inbox_take(struct sm_ep *sep)
{
	sm_inbox_scan(sep->inbox, sep->keep, sm_conn_found, sep);
	for (uint32_t i = 0; i < sep->nhot; i++) {
		uint32_t w = sep->hot[i]->rx.bit >> 6;
		uint64_t taken = sm_inbox_take_word(sep->inbox, w, sep->keep[w]);
		if (taken)
			sm_conn_found(sep, w, taken);
	}
}

/* Rings the sweep found: pending, and their inbox words and summary word
 * taken, in case a peer left them set with nothing above (sm_inbox.h). */
static void sweep_found(void *arg, uint32_t w, uint64_t taken)
{
	struct sm_ep *sep = arg;
	uint64_t t;

	sm_conn_found(sep, w, taken);
	sm_inbox_take_summary(sep->inbox, w >> 6, sep->keep, sm_conn_found, sep);
	t = sm_inbox_take_word(sep->inbox, w, sep->keep[w]);
	if (t)
		sm_conn_found(sep, w, t);
}

static int poll_pending(struct sm_ep *sep, int *starved_p)
{
	int got = 0, stay;

	for (struct sm_conn *sc = sep->pend, *next; sc; sc = next) {
		int n = rx_look(sep, sc, &stay, starved_p);
		next = sc->pend_next;
		got += n;
		if (n && !sc->rx_dead && sep->nhot < SM_HOT)
			hot_add(sep, sc);
		else if (!stay || sc->rx_dead)
			sm_pend_unlink(sep, sc);
	}
	return got;
}

int sm_poll_rx(struct sm_ep *sep, int *got_p)
{
	int got = 0, starved = 0, taken = 0;

	assert(cci__spin_held(&sep->rx_lock));
	sep->polls++;
	if (sep->nhot) {
		uint32_t nhot = sep->nhot;
		got = poll_hot(sep, &starved);
		taken = sep->nhot != nhot; /* a dead ring dropped: its word taken */
		if (sep->nhot)
			taken |= hot_idle(sep);
	}
	if (inbox_flagged(sep)) {
		inbox_take(sep);
		taken = 1;
	}
	if (atomic_load_explicit(&sep->found->top, memory_order_relaxed)) {
		sm_inbox_scan(sep->found, NULL, sweep_found, sep);
		taken = 1;
	}
	if (taken)
		sm_fence(); /* bits taken, then rings read */
	if (sep->pend)
		got += poll_pending(sep, &starved);
	*got_p = got;
	return (got == 0 && starved) ? CCI_ENOBUFS : CCI_SUCCESS;
}

/* A record (or garbage) at sc's read position? */
static int ring_ready(struct sm_conn *sc)
{
	int bad = 0;

	return !sc->rx_dead && (sm_ring_peek(&sc->rx, &bad) != NULL || bad);
}

int sm_poll_pending(struct sm_ep *sep)
{
	int pending;

	sm_rx_lock(sep);
	pending = inbox_flagged(sep) ||
	          atomic_load_explicit(&sep->found->top, memory_order_relaxed) != 0;
	for (uint32_t i = 0; i < sep->nhot && !pending; i++)
		pending = ring_ready(sep->hot[i]);
	for (struct sm_conn *sc = sep->pend; sc && !pending; sc = sc->pend_next)
		pending = ring_ready(sc);
	cci__spin_unlock(&sep->rx_lock);
	return pending;
}

int sm_poll_sweep(struct sm_ep *sep)
{
	uint32_t n = sep->rx_cap < SM_SWEEP_RINGS ? sep->rx_cap : SM_SWEEP_RINGS;
	int found = 0;

	assert(cci__mutex_held(&sep->lock));
	for (uint32_t k = 0; k < n; k++) {
		uint32_t bit = sep->sweep_at < sep->rx_cap ? sep->sweep_at : 0;
		struct sm_conn *sc = sep->rx_bits[bit];
		sep->sweep_at = bit + 1;
		/* A hint only: the stamp at the read position the last drain left. */
		if (sc && sm_ring_ready_at(&sc->rx,
		                           atomic_load_explicit(&sc->rx_read_pub, memory_order_relaxed))) {
			sm_inbox_mark(sep->found, bit);
			found = 1;
		}
	}
	return found;
}
