/*
 * verbs_pool.c - registered memory: slabs of operations (each with a send
 * buffer) and of receive buffers (posted to the shared receive queue).
 * Nothing on the message path allocates: a slab is added when the
 * endpoint opens or when the application raises a buffer count.
 * sep->lock held by every caller.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

static size_t buf_size(const struct verbs_ep *sep)
{
	return ((size_t)VERBS_HDR_LEN + sep->mss + 63u) & ~(size_t)63u;
}

/* count objects of objsize and as many registered buffers. */
static struct verbs_slab *slab_new(struct verbs_ep *sep, uint32_t count, size_t objsize)
{
	struct verbs_slab *s = calloc(1, sizeof(*s));
	size_t bytes = buf_size(sep) * count;

	if (!s)
		return NULL;
	s->objs = calloc(count, objsize);
	if (!s->objs || posix_memalign((void **)&s->mem, 4096, bytes) != 0)
		goto err_free;
	s->mr = ibv_reg_mr(sep->pd, s->mem, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr) {
		VERBS_WARN("verbs: %s: cannot register %zu bytes of buffers: %s", sep->dev->hca,
		           bytes, strerror(errno));
		goto err_free;
	}
	return s;
err_free:
	free(s->mem);
	free(s->objs);
	free(s);
	return NULL;
}

void verbs_slabs_free(struct verbs_slab **head)
{
	while (*head) {
		struct verbs_slab *s = *head;

		*head = s->next;
		ibv_dereg_mr(s->mr);
		free(s->mem);
		free(s->objs);
		free(s);
	}
}

int verbs_ops_grow(struct verbs_ep *sep, uint32_t count)
{
	struct verbs_slab *s = slab_new(sep, count, sizeof(struct verbs_op));
	struct verbs_op *ops;

	if (!s)
		return CCI_ENOMEM;
	ops = s->objs;
	for (uint32_t i = 0; i < count; i++) {
		ops[i].buf = s->mem + buf_size(sep) * i;
		ops[i].lkey = s->mr->lkey;
		cci__op_pool_add(&sep->ops, &ops[i].link);
	}
	s->next = sep->op_slabs;
	sep->op_slabs = s;
	sep->op_total += count;
	return CCI_SUCCESS;
}

/* A free operation, its per-use fields cleared; a user one only within
 * send_buf_count, control ones from what user ones leave (VERBS_CTL_OPS
 * are theirs alone). */
struct verbs_op *verbs_op_get(struct verbs_ep *sep, int user)
{
	struct verbs_op *op = (struct verbs_op *)cci__op_pool_get(&sep->ops, !user);

	if (!op)
		return NULL;
	memset(&op->next, 0, offsetof(struct verbs_op, lkey) - offsetof(struct verbs_op, next));
	op->user = (uint8_t)(user != 0);
	return op;
}

void verbs_op_put(struct verbs_ep *sep, struct verbs_op *op)
{
	cci__op_pool_put(&sep->ops, &op->link);
}

int verbs_rx_post(struct verbs_ep *sep, struct verbs_rxbuf *rb)
{
	struct ibv_sge sge = { .addr = (uintptr_t)rb->data, .length = VERBS_HDR_LEN + sep->mss,
	                       .lkey = rb->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)rb, .sg_list = &sge, .num_sge = 1 }, *bad;
	int rc = ibv_post_srq_recv(sep->srq, &wr, &bad);

	if (rc != 0) {
		VERBS_WARN("verbs: %s: a receive buffer could not be posted: %s", sep->dev->hca,
		           strerror(rc));
		return cci__errno_status(rc);
	}
	return CCI_SUCCESS;
}

/* count more receive buffers, posted; within the shared queue's size. */
int verbs_rx_grow(struct verbs_ep *sep, uint32_t count)
{
	struct verbs_slab *s;
	struct verbs_rxbuf *rbs;
	int rc = CCI_SUCCESS;

	if (sep->rx_total + count > sep->srq_max)
		return CCI_ERANGE;
	s = slab_new(sep, count, sizeof(struct verbs_rxbuf));
	if (!s)
		return CCI_ENOMEM;
	s->next = sep->rx_slabs;
	sep->rx_slabs = s;
	rbs = s->objs;
	for (uint32_t i = 0; i < count && rc == CCI_SUCCESS; i++) {
		rbs[i].data = s->mem + buf_size(sep) * i;
		rbs[i].lkey = s->mr->lkey;
		rc = verbs_rx_post(sep, &rbs[i]);
		sep->rx_total += rc == CCI_SUCCESS;
	}
	return rc;
}
