/*
 * conn_life.h - how long a transport's connection object lives.
 *
 * The core's cci_connection is released at cci_disconnect (or when the
 * endpoint closes), but the transport's object behind it may be needed
 * after that: a RECV event the application still holds points into its
 * receive buffers, a send in flight completes against it, a control
 * message names it.  One rule for every transport: the object counts its
 * holds.  It starts with one, the connection's own (dropped when it is
 * taken out of service: disconnected, or the endpoint closes); whatever
 * may outlive that takes a hold first (cci__conn_hold) and drops it when
 * done (cci__conn_drop).  The drop that returns 1 was the last: nothing
 * refers to the object any more, and that caller frees it, at once or,
 * when it may not take the locks the free needs, by pushing it on the
 * endpoint's graves (cci__conn_graves_push), which the transport's
 * progress side empties (cci__conn_graves_take) and frees.
 *
 * Until then the endpoint keeps the object on a list of its own (the
 * connections out of service but still held), so that an endpoint that
 * closes with RECV events still out frees them all: after the endpoint's
 * threads stopped, whatever is left on that list is freed whatever its
 * holds (the application may not use those events any more).
 *
 * Holds are atomic and may be taken and dropped from any thread, without
 * a lock; a hold may only be taken on an object already held (by the
 * caller, or by a table it reads under the lock that guards it).  The
 * graves are a stack with one consumer that takes it whole: no ABA.
 */
#ifndef CCI_COMMON_CONN_LIFE_H
#define CCI_COMMON_CONN_LIFE_H

#include <stdatomic.h>
#include <stdint.h>

struct cci__conn_life {
	_Atomic uint32_t holds;
	struct cci__conn_life *next_grave; /* on the graves, once the last hold went */
};

struct cci__conn_graves {
	_Atomic(struct cci__conn_life *) top;
};

/* A new object: held once, by the connection itself. */
static inline void cci__conn_life_init(struct cci__conn_life *l)
{
	atomic_init(&l->holds, 1);
	l->next_grave = NULL;
}

static inline void cci__conn_hold(struct cci__conn_life *l)
{
	atomic_fetch_add_explicit(&l->holds, 1, memory_order_relaxed);
}

/* 1 when this was the last hold: the caller frees the object (or pushes
 * it on the graves).  Acquire-release, so that whoever frees it sees every
 * write made before any drop. */
static inline int cci__conn_drop(struct cci__conn_life *l)
{
	return atomic_fetch_sub_explicit(&l->holds, 1, memory_order_acq_rel) == 1;
}

static inline uint32_t cci__conn_holds(struct cci__conn_life *l)
{
	return atomic_load_explicit(&l->holds, memory_order_relaxed);
}

static inline void cci__conn_graves_init(struct cci__conn_graves *g)
{
	atomic_init(&g->top, NULL);
}

/* After the last drop, from any thread: l is not touched afterwards. */
static inline void cci__conn_graves_push(struct cci__conn_graves *g, struct cci__conn_life *l)
{
	struct cci__conn_life *top = atomic_load_explicit(&g->top, memory_order_relaxed);

	do
		l->next_grave = top;
	while (!atomic_compare_exchange_weak_explicit(&g->top, &top, l, memory_order_release,
	                                              memory_order_relaxed));
}

/* The whole stack (linked by next_grave), or NULL; one consumer only. */
static inline struct cci__conn_life *cci__conn_graves_take(struct cci__conn_graves *g)
{
	return atomic_exchange_explicit(&g->top, NULL, memory_order_acquire);
}

#endif /* CCI_COMMON_CONN_LIFE_H */
