/*
 * op_pool.c - see op_pool.h.
 */
#include <stdlib.h>

#include "cci.h"
#include "op_pool.h"

void cci__op_pool_init(struct cci__op_pool *p, size_t size, uint32_t limit,
                       int (*grow)(void *owner), void *owner,
                       void (*obj_free)(struct cci__op_link *o))
{
	cci__spin_init(&p->lock);
	p->free = p->all = NULL;
	p->made = 0;
	atomic_init(&p->out, 0);
	atomic_init(&p->limit, limit);
	p->size = size;
	p->grow = grow;
	p->owner = owner;
	p->obj_free = obj_free;
}

int cci__op_pool_no_grow(void *owner)
{
	(void)owner;
	return CCI_ENOBUFS;
}

void cci__op_pool_fini(struct cci__op_pool *p)
{
	for (struct cci__op_link *o = p->all, *next; o; o = next) {
		next = o->all_next;
		if (p->obj_free)
			p->obj_free(o);
		free(o);
	}
	p->all = p->free = NULL;
	p->made = 0;
}

uint32_t cci__op_pool_made(struct cci__op_pool *p)
{
	uint32_t n;

	cci__spin_lock(&p->lock);
	n = p->made;
	cci__spin_unlock(&p->lock);
	return n;
}

/* out changes only under the lock: a plain store, no second atomic
 * operation on the send path. */
static void out_add(struct cci__op_pool *p, int d)
{
	uint32_t n = atomic_load_explicit(&p->out, memory_order_relaxed);

	atomic_store_explicit(&p->out, n + (uint32_t)d, memory_order_relaxed);
}

/* A new object of the pool's own, on its list of every one. */
static struct cci__op_link *obj_new(struct cci__op_pool *p)
{
	struct cci__op_link *o = calloc(1, p->size);

	if (o) {
		cci__spin_lock(&p->lock);
		o->all_next = p->all;
		p->all = o;
		p->made++;
		cci__spin_unlock(&p->lock);
	}
	return o;
}

/* The free list ran dry: the transport's slabs, or one of the pool's. */
static struct cci__op_link *make(struct cci__op_pool *p)
{
	struct cci__op_link *o;

	if (!p->grow)
		return obj_new(p);
	do {
		/* Another thread may take what grew before we do: grow again. */
		if (p->grow(p->owner) != CCI_SUCCESS)
			return NULL;
		cci__spin_lock(&p->lock);
		o = p->free;
		if (o)
			p->free = o->next;
		cci__spin_unlock(&p->lock);
	} while (!o);
	return o;
}

struct cci__op_link *cci__op_pool_get(struct cci__op_pool *p, int ctl)
{
	struct cci__op_link *o;

	cci__spin_lock(&p->lock);
	if (!ctl && atomic_load_explicit(&p->out, memory_order_relaxed) >=
	            atomic_load_explicit(&p->limit, memory_order_relaxed)) {
		cci__spin_unlock(&p->lock);
		return NULL;
	}
	o = p->free;
	if (o)
		p->free = o->next;
	if (!ctl)
		out_add(p, 1); /* counted now: a racing get sees the budget taken */
	cci__spin_unlock(&p->lock);
	/* The pool grows only while it warms up. */
	if (!o && !(o = make(p))) {
		if (!ctl) {
			cci__spin_lock(&p->lock);
			out_add(p, -1);
			cci__spin_unlock(&p->lock);
		}
		return NULL;
	}
	o->ctl = ctl != 0;
	return o;
}

void cci__op_pool_put(struct cci__op_pool *p, struct cci__op_link *o)
{
	cci__spin_lock(&p->lock);
	o->next = p->free;
	p->free = o;
	if (!o->ctl)
		out_add(p, -1);
	cci__spin_unlock(&p->lock);
}

void cci__op_pool_add(struct cci__op_pool *p, struct cci__op_link *o)
{
	cci__spin_lock(&p->lock);
	o->next = p->free;
	p->free = o;
	cci__spin_unlock(&p->lock);
}

int cci__op_pool_prealloc(struct cci__op_pool *p, uint32_t n,
                          int (*init)(struct cci__op_link *o))
{
	for (uint32_t i = 0; i < n; i++) {
		struct cci__op_link *o = obj_new(p);

		if (!o || (init && init(o) != CCI_SUCCESS))
			return CCI_ENOMEM;
		cci__op_pool_add(p, o);
	}
	return CCI_SUCCESS;
}
