/*
 * conn_due.c - see conn_due.h.
 */
#include <assert.h>
#include <stdlib.h>

#include "cci.h"
#include "conn_due.h"
#include "grow.h"

int cci__due_reserve(struct cci__due_heap *h)
{
	if (cci__grow(&h->v, h->reserved, &h->cap, 64, sizeof(*h->v)) != CCI_SUCCESS)
		return CCI_ENOMEM;
	h->reserved++;
	return CCI_SUCCESS;
}

void cci__due_unreserve(struct cci__due_heap *h)
{
	assert(h->reserved > h->n);
	h->reserved--;
}

void cci__due_heap_fini(struct cci__due_heap *h)
{
	free(h->v);
	*h = (struct cci__due_heap){ 0 };
}

static void place(struct cci__due_heap *h, uint32_t i, struct cci__due *d)
{
	h->v[i] = d;
	d->pos = i + 1;
}

/* Move the entry at i up while it is earlier than its parent. */
static void sift_up(struct cci__due_heap *h, uint32_t i)
{
	struct cci__due *d = h->v[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (h->v[parent]->at_ns <= d->at_ns)
			break;
		place(h, i, h->v[parent]);
		i = parent;
	}
	place(h, i, d);
}

/* Move the entry at i down while a child is earlier. */
static void sift_down(struct cci__due_heap *h, uint32_t i)
{
	struct cci__due *d = h->v[i];

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1]->at_ns < h->v[c]->at_ns)
			c++;
		if (d->at_ns <= h->v[c]->at_ns)
			break;
		place(h, i, h->v[c]);
		i = c;
	}
	place(h, i, d);
}

static void remove_at(struct cci__due_heap *h, uint32_t i)
{
	struct cci__due *last = h->v[--h->n];

	h->v[i]->pos = 0;
	if (i == h->n)
		return;
	place(h, i, last);
	sift_down(h, i);
	sift_up(h, last->pos - 1);
}

void cci__due_set(struct cci__due_heap *h, struct cci__due *d, uint64_t at)
{
	if (at == CCI__DUE_NEVER) {
		if (d->pos)
			remove_at(h, d->pos - 1);
		return;
	}
	if (!d->pos) {
		/* Every connection that can be here reserved its slot. */
		assert(h->n < h->reserved);
		d->at_ns = at;
		place(h, h->n++, d);
		sift_up(h, h->n - 1);
		return;
	}
	if (at < d->at_ns) {
		d->at_ns = at;
		sift_up(h, d->pos - 1);
	} else if (at > d->at_ns) {
		d->at_ns = at;
		sift_down(h, d->pos - 1);
	}
}

void cci__due_by(struct cci__due_heap *h, struct cci__due *d, uint64_t at)
{
	if (!d->pos || at < d->at_ns)
		cci__due_set(h, d, at);
}

struct cci__due *cci__due_take(struct cci__due_heap *h, uint64_t now)
{
	struct cci__due *d;

	if (!h->n || h->v[0]->at_ns > now)
		return NULL;
	d = h->v[0];
	remove_at(h, 0);
	return d;
}
