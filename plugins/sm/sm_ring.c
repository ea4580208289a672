/*
 * sm_ring.c - the shared-memory SPSC ring (see sm_ring.h for the layout
 * and the publication protocol).
 */
#include <string.h>

#include "sm_ring.h"

_Static_assert(sizeof(struct sm_rec) == SM_REC_HDR, "record header is 16 bytes");
_Static_assert(sizeof(struct sm_ring_ctl) == SM_RING_CTL_BYTES, "ring control is 3 lines");

/* The smallest power of two from SM_RING_MIN_SIZE up that holds need bytes. */
static uint64_t pow2_at_least(uint64_t need)
{
	uint64_t size = SM_RING_MIN_SIZE;

	while (size < need && size <= SM_RING_MAX_SIZE)
		size <<= 1;
	return size;
}

uint64_t sm_ring_size_for(uint32_t count, uint32_t max_len)
{
	uint64_t size = pow2_at_least(((uint64_t)count + 1) * sm_rec_size(max_len));
	uint64_t cap = pow2_at_least(SM_RING_MIN_RECS * sm_rec_size(max_len));

	if (cap < SM_RING_CACHE_SIZE)
		cap = SM_RING_CACHE_SIZE;
	if (size > cap)
		size = cap;
	return size > SM_RING_MAX_SIZE ? 0 : size;
}

uint64_t sm_ring_window_for(uint64_t size, uint32_t max_len)
{
	uint64_t window = pow2_at_least(4 * sm_rec_size(max_len));

	if (window < SM_RING_WINDOW)
		window = SM_RING_WINDOW;
	return window < size ? window : size;
}

void sm_ring_format(void *seg, uint64_t size, uint64_t window, uint32_t max_recs)
{
	struct sm_ring_ctl *ctl = seg;

	ctl->magic = SM_RING_MAGIC;
	ctl->version = SM_RING_VERSION;
	ctl->size = size;
	ctl->window = window;
	atomic_store_explicit(&ctl->hold, 0, memory_order_relaxed);
	ctl->max_recs = max_recs;
	ctl->inbox_bit = 0;
	atomic_store_explicit(&ctl->rel_recs, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->head, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->prod_waiting, 0, memory_order_relaxed);
	atomic_store_explicit(&ctl->tail, 0, memory_order_release);
}

int sm_ring_attach(struct sm_ring *r, void *seg, uint64_t seg_bytes)
{
	struct sm_ring_ctl *ctl = seg;
	uint64_t size, window;
	uint32_t bit;

	if (seg_bytes < SM_RING_CTL_BYTES || ctl->magic != SM_RING_MAGIC ||
	    ctl->version != SM_RING_VERSION)
		return -1;
	size = ctl->size;
	window = ctl->window;
	bit = ctl->inbox_bit; /* read once: the peer may change it meanwhile */
	if (size < SM_RING_MIN_SIZE || size > SM_RING_MAX_SIZE || (size & (size - 1)) != 0 ||
	    size > seg_bytes - SM_RING_CTL_BYTES)
		return -1;
	if (window < SM_LINE || window > size || (window & (window - 1)) != 0 ||
	    bit >= SM_INBOX_BITS)
		return -1;
	memset(r, 0, sizeof(*r));
	r->ctl = ctl;
	r->data = (char *)seg + SM_RING_CTL_BYTES;
	r->size = size;
	r->mask = size - 1;
	r->window = window;
	r->bit = bit;
	r->stop_tail = UINT64_MAX;
	r->head = atomic_load_explicit(&ctl->head, memory_order_acquire);
	r->tail_cache = r->read = r->tail = atomic_load_explicit(&ctl->tail, memory_order_acquire);
	r->clear = r->head;
	r->pub_recs = r->rel_cache = r->rel_recs = r->cons_recs =
		atomic_load_explicit(&ctl->rel_recs, memory_order_relaxed);
	r->max_recs = ctl->max_recs ? ctl->max_recs : UINT64_MAX;
	return 0;
}

static inline struct sm_rec *rec_at(const struct sm_ring *r, uint64_t pos)
{
	return (struct sm_rec *)(r->data + (pos & r->mask));
}

/* Is [r->head, r->head + need) free, and may one more record be lent?
 * Reloads the consumer's counters only when the cached ones say no. */
static int ring_has_room(struct sm_ring *r, uint64_t need)
{
	if (r->size - (r->head - r->tail_cache) >= need && r->pub_recs - r->rel_cache < r->max_recs)
		return 1;
	r->tail_cache = atomic_load_explicit(&r->ctl->tail, memory_order_acquire);
	r->rel_cache = atomic_load_explicit(&r->ctl->rel_recs, memory_order_relaxed);
	return r->size - (r->head - r->tail_cache) >= need && r->pub_recs - r->rel_cache < r->max_recs;
}

/* Lines the producer keeps cleared past the end of the last record, and
 * the most sm_ring_warm() clears. */
#define SM_CLEAR_AHEAD (4u * SM_LINE)
#define SM_WARM_MAX (64u * 1024u)

/* Is the line at pos free space (released by the consumer, per the
 * cached tail; the real tail is never behind it)? */
static inline int line_free(const struct sm_ring *r, uint64_t pos)
{
	return pos - r->size < r->tail_cache;
}

/* Clear the free lines from r->clear up to limit.  Stores leave in order
 * (x86-TSO; elsewhere the release stores of later stamps order them): the
 * consumer reaches a cleared line only through a stamp stored after it. */
static void ring_clear_to(struct sm_ring *r, uint64_t limit)
{
	for (; r->clear < limit && line_free(r, r->clear); r->clear += SM_LINE)
		atomic_store_explicit(&rec_at(r, r->clear)->stamp, 0, memory_order_relaxed);
}

/*
 * Publish the header of a record of size bytes at r->head.
 *
 * The consumer polls the stamp at next = head + size as soon as it has
 * this record, and that line holds what an earlier lap left there: old
 * payload could look like the stamp it waits for.  So the line's first
 * word must be 0 before this stamp is stored, unless the line is the
 * header of the oldest record the consumer still holds (ring full), whose
 * stamp is a lap old and never matches.  A few lines are cleared ahead of
 * head (r->clear) after each publish, off the consumer's critical path
 * and on lines the producer writes next anyway; a record that jumps past
 * them clears its next line first (usually a payload line of the last
 * lap, still in this cache).
 */
static void ring_publish(struct sm_ring *r, struct sm_rec *rec, uint64_t size)
{
	uint64_t pos = r->head, next = pos + size;

	if (next >= r->clear) {
		r->clear = next;
		if (line_free(r, next) ||
		    ((r->tail_cache = atomic_load_explicit(&r->ctl->tail, memory_order_acquire)),
		     line_free(r, next))) {
			atomic_store_explicit(&rec_at(r, next)->stamp, 0, memory_order_relaxed);
			r->clear = next + SM_LINE;
		}
	}
	atomic_store_explicit(&rec->stamp, sm_ring_stamp(pos), memory_order_release);
	r->head = next;
	atomic_store_explicit(&r->ctl->head, next, memory_order_relaxed);
	ring_clear_to(r, next + SM_LINE + SM_CLEAR_AHEAD);
	r->last_size = size;
}

void sm_ring_warm(struct sm_ring *r)
{
	uint64_t ahead = r->last_size < SM_WARM_MAX ? r->last_size : SM_WARM_MAX;

	ring_clear_to(r, r->head + SM_LINE + ahead);
}

struct sm_rec *sm_ring_reserve(struct sm_ring *r, uint32_t len)
{
	uint64_t need = sm_rec_size(len), off = r->head & r->mask, pad = 0;
	struct sm_rec *rec;

	if (need > r->size)
		return NULL;
	/* ctl->hold is read once a lap while the consumer keeps up.  A record
	 * larger than the window goes at offset 0 all the same. */
	if (off + need > r->size ||
	    (off + need > r->window && off != 0 &&
	     !atomic_load_explicit(&r->ctl->hold, memory_order_relaxed)))
		pad = r->size - off;
	if (!ring_has_room(r, pad + need))
		return NULL;
	if (pad) {
		rec = rec_at(r, r->head);
		rec->len = (uint32_t)(pad - SM_REC_HDR);
		rec->type = SM_REC_PAD;
		rec->released = 0;
		rec->aux = 0;
		ring_publish(r, rec, pad);
	}
	return rec_at(r, r->head);
}

void sm_ring_commit(struct sm_ring *r, struct sm_rec *rec, uint16_t type, uint32_t len,
                    uint32_t aux)
{
	rec->len = len;
	rec->type = type;
	rec->released = 0;
	rec->aux = aux;
	ring_publish(r, rec, sm_rec_size(len));
	r->pub_recs++;
}

/* Move tail over the released records and publish it. */
static int ring_advance_tail(struct sm_ring *r)
{
	uint64_t t = r->tail;

	uint64_t recs = 0;

	while (t < r->read) {
		struct sm_rec *rec = rec_at(r, t);
		uint64_t size = sm_rec_size(rec->len), room = r->size - (t & r->mask);
		if (!rec->released)
			break;
		if (size > room) /* only a corrupted length gets here */
			size = room;
		if (rec->type == SM_REC_PAD)
			r->pad_tail += size;
		else
			recs++;
		t += size;
	}
	if (t > r->read) /* only a corrupted length gets here */
		t = r->read;
	if (t == r->tail)
		return 0;
	r->tail = t;
	r->rel_recs += recs;
	/* rel_recs first: a producer that sees the new tail sees the count too. */
	atomic_store_explicit(&r->ctl->rel_recs, r->rel_recs, memory_order_relaxed);
	atomic_store_explicit(&r->ctl->tail, t, memory_order_release);
	return 1;
}

struct sm_rec *sm_ring_peek(struct sm_ring *r, int *bad)
{
	for (;;) {
		struct sm_rec *rec = rec_at(r, r->read);
		uint64_t off = r->read & r->mask, size;

		if (atomic_load_explicit(&rec->stamp, memory_order_acquire) !=
		    sm_ring_stamp(r->read))
			return NULL;
		size = sm_rec_size(rec->len);
		if (size > r->size - off) {
			*bad = 1;
			return NULL;
		}
		if (rec->type != SM_REC_PAD)
			return rec;
		rec->released = 1;
		r->read += size;
		r->pad_read += size;
		ring_advance_tail(r);
	}
}

void sm_ring_consume(struct sm_ring *r, struct sm_rec *rec)
{
	r->read += sm_rec_size(rec->len);
	r->cons_recs++;
}

static void ring_set_hold(struct sm_ring *r, int hold)
{
	r->hold = hold;
	r->stop_tail = UINT64_MAX;
	atomic_store_explicit(&r->ctl->hold, (uint32_t)hold, memory_order_relaxed);
}

/* Bytes of the records consumed and not released: what the application
 * holds back, less the PADs among them (an early wrap's runs to the end
 * of the ring).  0 if a corrupted length made the counts disagree. */
static uint64_t ring_held_back(const struct sm_ring *r)
{
	uint64_t span = r->read - r->tail, pads = r->pad_read - r->pad_tail;

	return pads < span ? span - pads : 0;
}

int sm_ring_may_consume(struct sm_ring *r, const struct sm_rec *rec)
{
	if (r->hold || r->window == r->size ||
	    ring_held_back(r) + sm_rec_size(rec->len) <= r->window / 2)
		return 1;
	if (r->tail != r->stop_tail) {
		r->stop_tail = r->tail;
		return 0;
	}
	ring_set_hold(r, 1);
	return 2;
}

int sm_ring_release(struct sm_ring *r, struct sm_rec *rec)
{
	rec->released = 1;
	if (rec != rec_at(r, r->tail) || !ring_advance_tail(r))
		return 0;
	if (r->hold && ring_held_back(r) <= r->window / 4)
		ring_set_hold(r, 0);
	return 1;
}
