/*
 * conn_due.h - an endpoint's connections ordered by when their timers next
 * need a visit, so that a tick visits those due and nothing else: 10,000
 * idle connections cost a tick nothing, and 10,000 with a keepalive cost
 * it one visit each per quarter period, not one per tick.
 *
 * A binary min-heap of struct cci__due (one in each struct cci__conn_base)
 * keyed by its time; each entry keeps its place in the heap, so moving or
 * removing one costs O(log n).  Times only need to be early, never late:
 * what moves a connection's timers later (a message heard, a send done)
 * leaves its entry where it is, and the visit that comes too soon files it
 * again for the right time (conn_base.h, cci__conn_due_tick).  What moves
 * them earlier (a connect, a keepalive armed, a send timeout set) files it
 * at once (cci__due_set).
 *
 * Memory.  The heap never allocates while it runs: a connection reserves
 * its slot when it is made (cci__due_reserve, which may fail with
 * CCI_ENOMEM, the connection then not made) and gives it back when it is
 * freed (cci__due_unreserve, after cci__due_clear).  The heap's array is
 * the heap's, freed by cci__due_heap_fini.
 *
 * Locking.  The heap and every entry in it are guarded by one lock of the
 * plugin's, the one its tick holds (the lock over the connections'
 * timers); nothing here locks.
 */
#ifndef CCI_COMMON_CONN_DUE_H
#define CCI_COMMON_CONN_DUE_H

#include <stdint.h>

#define CCI__DUE_NEVER UINT64_MAX

struct cci__due {
	uint64_t at_ns; /* when it is due (cci__now_ns), while in the heap */
	uint32_t pos;   /* 1 + its index in the heap, 0 = not in it */
};

struct cci__due_heap {
	struct cci__due **v;
	uint32_t n;        /* entries in the heap */
	uint32_t reserved; /* slots reserved (n <= reserved <= cap) */
	uint32_t cap;
};

/* A slot for one more connection: CCI_SUCCESS or CCI_ENOMEM. */
int cci__due_reserve(struct cci__due_heap *h);
/* A connection's slot given back; its entry must be out of the heap. */
void cci__due_unreserve(struct cci__due_heap *h);
void cci__due_heap_fini(struct cci__due_heap *h);

/* d is due at at (CCI__DUE_NEVER: out of the heap), in the heap or not. */
void cci__due_set(struct cci__due_heap *h, struct cci__due *d, uint64_t at);
/* d is due no later than at: moved only if that is earlier. */
void cci__due_by(struct cci__due_heap *h, struct cci__due *d, uint64_t at);

static inline void cci__due_clear(struct cci__due_heap *h, struct cci__due *d)
{
	cci__due_set(h, d, CCI__DUE_NEVER);
}

/* The earliest entry if it is due by now, taken out of the heap; NULL
 * when none is. */
struct cci__due *cci__due_take(struct cci__due_heap *h, uint64_t now);

/* When the earliest entry is due, CCI__DUE_NEVER when the heap is empty. */
static inline uint64_t cci__due_first(const struct cci__due_heap *h)
{
	return h->n ? h->v[0]->at_ns : CCI__DUE_NEVER;
}

#endif /* CCI_COMMON_CONN_DUE_H */
