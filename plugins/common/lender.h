/*
 * lender.h - what RECV events lend: the receive buffers of an endpoint
 * that are out (lent to the application with a RECV event, or being
 * filled for one) and not back yet, within the endpoint's recv_buf_count.
 *
 * The receive side owns the count: under its own lock it takes a buffer
 * out (cci__lender_take, 0 when recv_buf_count are out: the endpoint is
 * starved and reads no more until one comes back) and collects what came
 * back (cci__lender_collect: the whole list, the count lowered by its
 * length).  Any thread gives a buffer back (cci__lender_return, from the
 * transport's recv_returned) without a lock: a stack with one consumer
 * that takes it whole, so no ABA.  The limit may change from any thread
 * (cci_set_opt); a lower one holds the next take back until enough came
 * back.  Only the receive side writes the count, but any thread may read
 * it (relaxed) for a hint, as a progress() that did not get the receive
 * side's lock and still says whether the application holds everything
 * (cci__lender_available).  Where the buffers live, their sizes and their free lists are the
 * transport's: it embeds a struct cci__lent in each (any member) and
 * finds the buffer again with container_of arithmetic.
 */
#ifndef CCI_COMMON_LENDER_H
#define CCI_COMMON_LENDER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct cci__lent {
	struct cci__lent *next; /* on the stack of returned buffers */
};

struct cci__lender {
	_Atomic(struct cci__lent *) back; /* returned, not collected yet */
	_Atomic uint32_t out;             /* written by the receive side: out and not collected */
	_Atomic uint32_t limit;           /* recv_buf_count */
};

static inline void cci__lender_init(struct cci__lender *l, uint32_t limit)
{
	atomic_init(&l->back, NULL);
	atomic_init(&l->out, 0);
	atomic_init(&l->limit, limit);
}

static inline void cci__lender_set_limit(struct cci__lender *l, uint32_t limit)
{
	atomic_store_explicit(&l->limit, limit, memory_order_relaxed);
}

static inline uint32_t cci__lender_limit(const struct cci__lender *l)
{
	return atomic_load_explicit(&l->limit, memory_order_relaxed);
}

static inline uint32_t cci__lender_out(const struct cci__lender *l)
{
	return atomic_load_explicit(&l->out, memory_order_relaxed);
}

/* Receive side: may one more go out? */
static inline int cci__lender_can_take(const struct cci__lender *l)
{
	return cci__lender_out(l) < cci__lender_limit(l);
}

/* Receive side: one more goes out, if it may (1), else 0 (starved). */
static inline int cci__lender_take(struct cci__lender *l)
{
	if (!cci__lender_can_take(l))
		return 0;
	atomic_store_explicit(&l->out, cci__lender_out(l) + 1, memory_order_relaxed);
	return 1;
}

/* Any thread: b comes back.  Release: what the application wrote to the
 * buffer before is seen by the receive side that collects it. */
static inline void cci__lender_return(struct cci__lender *l, struct cci__lent *b)
{
	struct cci__lent *head = atomic_load_explicit(&l->back, memory_order_relaxed);

	do
		b->next = head;
	while (!atomic_compare_exchange_weak_explicit(&l->back, &head, b, memory_order_release,
	                                              memory_order_relaxed));
}

/* Any thread: has something come back that is not collected yet? */
static inline int cci__lender_returned(const struct cci__lender *l)
{
	return atomic_load_explicit(&l->back, memory_order_relaxed) != NULL;
}

/* Receive side: everything that came back, most recent first, no longer
 * counted as out. */
static inline struct cci__lent *cci__lender_collect(struct cci__lender *l)
{
	struct cci__lent *list = atomic_exchange_explicit(&l->back, NULL, memory_order_acquire);
	uint32_t n = 0;

	for (struct cci__lent *b = list; b; b = b->next)
		n++;
	atomic_store_explicit(&l->out, cci__lender_out(l) - n, memory_order_relaxed);
	return list;
}

/* Could a take succeed once what came back is collected?  (Receive side;
 * any other thread gets a hint.) */
static inline int cci__lender_available(const struct cci__lender *l)
{
	return cci__lender_can_take(l) || cci__lender_returned(l);
}

#endif /* CCI_COMMON_LENDER_H */
