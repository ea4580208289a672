/*
 * op_pool.h - the send-descriptor pool of an endpoint: the objects with
 * which a transport describes a send, an RMA or a control message of its
 * own, and the budget the API puts on them.
 *
 * Budget.  The application's operations (cci_send, cci_rma) hold at most
 * `limit` descriptors at once (the endpoint's send_buf_count): past it
 * cci__op_pool_get(p, 0) returns NULL and the transport answers
 * CCI_ENOBUFS (after a progress pass that may free some, if it likes).
 * The transport's own control operations (handshakes, acks, the answer to
 * a peer's read) are outside the budget (ctl != 0): a peer's protocol must
 * not fail because the application filled the pool.
 *
 * Memory.  Objects are made on first need, or ahead of it
 * (cci__op_pool_prealloc), either by the pool (size bytes, zeroed) or by
 * the transport's grow callback (slabs of registered buffers: it hands
 * each new object to cci__op_pool_add and keeps the slabs), and live until
 * cci__op_pool_fini: a warm data path allocates nothing.  The pool touches
 * only the struct cci__op_link of each object (its first member when the
 * pool makes the objects; anywhere in those of a grow callback, found back
 * with offsetof); an object comes back from get as it was put, and the
 * transport clears what it must.
 *
 * Locking.  A spinlock inside the pool guards the free list and the
 * count; it is the innermost lock, so get and put may be called from any
 * thread under any lock of the transport's.  out and limit are atomic and
 * may be read without it (a heuristic: "is the pool running low?").
 *
 * Lifetime.  init when the endpoint is made; fini when no thread runs on
 * it any more.  fini gives each object the pool made to obj_free (what the
 * transport hung on it: a copy buffer), then frees it; objects of a grow
 * callback are the transport's to free, after fini.
 */
#ifndef CCI_COMMON_OP_POOL_H
#define CCI_COMMON_OP_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "spin.h"

/* In every object of a pool (see Memory above). */
struct cci__op_link {
	struct cci__op_link *next;     /* the free list, while the object is free */
	struct cci__op_link *all_next; /* every object the pool made, for fini */
	uint8_t ctl;                   /* taken outside the budget */
};

struct cci__op_pool {
	cci__spinlock_t lock;          /* free and out */
	struct cci__op_link *free;
	struct cci__op_link *all;      /* made by the pool itself */
	_Atomic uint32_t out;          /* the application's objects taken, not put back */
	_Atomic uint32_t limit;        /* at most this many of them */
	uint32_t made;                 /* objects the pool made itself, under lock */
	size_t size;                   /* of an object the pool makes */
	/* Make more objects and cci__op_pool_add them; CCI_SUCCESS or an
	 * error.  NULL: the pool callocs one object of size bytes. */
	int (*grow)(void *owner);
	void *owner;
	void (*obj_free)(struct cci__op_link *o); /* NULL: nothing hangs on objects */
};

/* The grow callback of a pool that never grows on the message path (its
 * slabs are added when the endpoint opens or a count is raised): get then
 * returns NULL when every object is out. */
int cci__op_pool_no_grow(void *owner);

/* size: of the transport's object, whose first member is a struct
 * cci__op_link when grow is NULL.  grow and obj_free may be NULL (see
 * above). */
void cci__op_pool_init(struct cci__op_pool *p, size_t size, uint32_t limit,
                       int (*grow)(void *owner), void *owner,
                       void (*obj_free)(struct cci__op_link *o));

/* Free every object the pool made (after obj_free); objects still out
 * are freed too: nothing may use them after. */
void cci__op_pool_fini(struct cci__op_pool *p);

/* An object: for the application's operation (ctl == 0; NULL past the
 * budget) or the transport's own (ctl != 0).  NULL also when memory runs
 * out (then nothing is counted). */
struct cci__op_link *cci__op_pool_get(struct cci__op_pool *p, int ctl);

/* Give back an object of get. */
void cci__op_pool_put(struct cci__op_pool *p, struct cci__op_link *o);

/* A new object for the free list, from a grow callback. */
void cci__op_pool_add(struct cci__op_pool *p, struct cci__op_link *o);

/* Make n objects of the pool's own now (not with grow); init (may be
 * NULL) readies each (a buffer of its own).  CCI_SUCCESS or CCI_ENOMEM
 * (what was made stays, for fini). */
int cci__op_pool_prealloc(struct cci__op_pool *p, uint32_t n,
                          int (*init)(struct cci__op_link *o));

/* A new send_buf_count: applies to the next get. */
static inline void cci__op_pool_set_limit(struct cci__op_pool *p, uint32_t limit)
{
	atomic_store_explicit(&p->limit, limit, memory_order_relaxed);
}

static inline uint32_t cci__op_pool_limit(const struct cci__op_pool *p)
{
	return atomic_load_explicit(&p->limit, memory_order_relaxed);
}

/* Objects the pool made itself (not those of a grow callback). */
uint32_t cci__op_pool_made(struct cci__op_pool *p);

/* The application's objects out now (a heuristic without the lock). */
static inline uint32_t cci__op_pool_out(const struct cci__op_pool *p)
{
	return atomic_load_explicit(&p->out, memory_order_relaxed);
}

#endif /* CCI_COMMON_OP_POOL_H */
