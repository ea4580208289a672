/*
 * sm_inbox.h - an endpoint's inbox: which of its receive rings may hold
 * records it has not seen, as a bitmap of three levels in shared memory.
 *
 * Every receive ring of an endpoint has a bit, its index written by the
 * receiver in the ring's header (sm_ring_ctl.inbox_bit).  A sender that
 * published a record sets its ring's bit in the receiver's inbox, and the
 * receiver finds the rings with something for it by following the set
 * bits down from one word: a poll costs the same with one ring or 10,000.
 *
 *   top          bit j: summary[j] may be non-zero
 *   summary[j]   bit i: bits[64 j + i] may be non-zero
 *   bits[w]      bit b: ring 64 w + b may hold records
 *
 * Marking (the sender, after its record's stamp and a seq_cst fence):
 * set the ring's bit; only the sender that turned the word from 0 sets
 * its summary bit, and only the one that turned the summary word from 0
 * sets the top bit.  A bit found set already is left alone: a set bit
 * means the receiver will look at the ring (see below), and a load is
 * cheaper than a locked operation on a line the receiver reads.
 *
 * Taking (the receiver): exchange top with 0, then each flagged summary
 * word, then each flagged word of bits, always a level before the one
 * below it, then a seq_cst fence, then read the rings taken.  Why no
 * record can be missed:
 *  - A bit taken, then the ring read: the sender stores its stamp, fences,
 *    then reads or sets the bit; the receiver takes the bit, fences, then
 *    reads the stamp.  With a fence on each side (Dekker), either the
 *    receiver's read sees the stamp, or the sender's bit operation comes
 *    after the take in the word's order, sees the bit clear and sets it
 *    again, to be taken at a later poll.
 *  - The levels: a word of bits is non-zero only while its summary bit is
 *    set or about to be set by the sender that turned it from 0, since
 *    the receiver clears the summary bit before it takes the word (a
 *    sender that finds the word non-zero after the summary was taken
 *    finds it so only because the receiver has not taken it yet, and will
 *    in this same scan).  Likewise for top and the summary words.
 *
 * Rings the receiver reads directly at every poll (sm_ep.c: those busy a
 * moment ago) keep their bit set: their senders then find it set and pay
 * no locked operation, and the receiver compares those words with what it
 * keeps (keep[w]) instead of taking them; a word with a kept bit is never
 * turned from 0, so nothing below it relies on its summary bit.
 *
 * Every peer of the endpoint maps the inbox read-write and can write
 * anything there: a bit set for nothing costs a look at a ring (an index
 * without a ring is ignored), a bit cleared by someone else delays a
 * record until the receiver's sweep (sm_loop.c).  No index read from the
 * inbox or a ring header reaches memory outside the arrays: a ring's
 * index is checked against SM_INBOX_BITS when it is attached, and the
 * words are walked by position, not by what they hold.
 *
 * The same structure, in private memory, carries the endpoint's own
 * requests (a flush of queued sends, a ring to warm, a ring the sweep
 * found): the same functions serve both.
 */
#ifndef CCI_SM_INBOX_H
#define CCI_SM_INBOX_H

#include <stdatomic.h>
#include <stdint.h>

#include "sm_ring.h"

#define SM_INBOX_WORDS (SM_INBOX_BITS / 64u)    /* words of bits: 1024 */
#define SM_INBOX_SUMMARY (SM_INBOX_WORDS / 64u) /* summary words: 16, one bit each in top */

struct sm_inbox {
	_Atomic uint64_t top;
	char pad0[SM_LINE - 8];
	_Atomic uint64_t summary[SM_INBOX_SUMMARY];
	_Atomic uint64_t bits[SM_INBOX_WORDS];
};

_Static_assert(SM_INBOX_SUMMARY <= 64, "one top word");

/*
 * Set the bit of ring bit (< SM_INBOX_BITS), with the levels above it.
 * The caller's records must be published and a seq_cst fence passed.
 * Returns 1 if a locked operation was made (the caller fences again
 * before it reads anything the receiver may write after taking).
 */
static inline int sm_inbox_mark(struct sm_inbox *in, uint32_t bit)
{
	uint64_t m = 1ull << (bit & 63u);
	_Atomic uint64_t *w = &in->bits[bit >> 6];

	if (atomic_load_explicit(w, memory_order_relaxed) & m)
		return 0;
	if (atomic_fetch_or_explicit(w, m, memory_order_seq_cst) != 0)
		return 1;
	if (atomic_fetch_or_explicit(&in->summary[bit >> 12], 1ull << ((bit >> 6) & 63u),
	                             memory_order_seq_cst) != 0)
		return 1;
	atomic_fetch_or_explicit(&in->top, 1ull << (bit >> 12), memory_order_seq_cst);
	return 1;
}

/* Take the bits of word w that keep does not hold: the bits taken. */
static inline uint64_t sm_inbox_take_word(struct sm_inbox *in, uint32_t w, uint64_t keep)
{
	uint64_t v = atomic_load_explicit(&in->bits[w], memory_order_relaxed);

	if (!(v & ~keep))
		return 0;
	return atomic_fetch_and_explicit(&in->bits[w], keep, memory_order_seq_cst) & ~keep;
}

/* What a scan found: the bits taken in word w (ring indexes 64 w + b). */
typedef void sm_inbox_found_fn(void *arg, uint32_t w, uint64_t taken);

/* Take summary word j and the words it flags (keep: per word, the bits
 * left set; NULL for none). */
static inline void sm_inbox_take_summary(struct sm_inbox *in, uint32_t j, const uint64_t *keep,
                                         sm_inbox_found_fn *fn, void *arg)
{
	uint64_t s = atomic_load_explicit(&in->summary[j], memory_order_relaxed);

	if (s)
		s = atomic_exchange_explicit(&in->summary[j], 0, memory_order_seq_cst);
	while (s) {
		uint32_t w = j * 64u + (uint32_t)__builtin_ctzll(s);
		uint64_t taken = sm_inbox_take_word(in, w, keep ? keep[w] : 0);
		s &= s - 1;
		if (taken)
			fn(arg, w, taken);
	}
}

/* Take everything top flags.  The caller fences (seq_cst) before it
 * reads the rings found. */
static inline void sm_inbox_scan(struct sm_inbox *in, const uint64_t *keep,
                                 sm_inbox_found_fn *fn, void *arg)
{
	uint64_t t = atomic_load_explicit(&in->top, memory_order_relaxed);

	if (t)
		t = atomic_exchange_explicit(&in->top, 0, memory_order_seq_cst);
	for (; t; t &= t - 1)
		sm_inbox_take_summary(in, (uint32_t)__builtin_ctzll(t) % SM_INBOX_SUMMARY, keep, fn,
		                      arg);
}

#endif /* CCI_SM_INBOX_H */
