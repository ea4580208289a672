/*
 * tcp_pool.c - the endpoint's memory: ops (a send, an RMA, or the answer
 * to a peer's RMA), the buffers that hold copies of message bytes, and
 * the receive buffers lent with RECV events.  Everything is made on first
 * need and kept until the endpoint dies, so a warm data path never calls
 * malloc.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tcp.h"

/* What hangs on an op: its small copy buffer. */
static void op_free_buf(struct cci__op_link *o)
{
	free(((struct tcp_op *)o)->buf);
}

void tcp_pool_init(struct tcp_ep *sep)
{
	cci__op_pool_init(&sep->ops, sizeof(struct tcp_op), TCP_SEND_COUNT_DEFAULT, NULL, NULL,
	                  op_free_buf);
}

/* An op for the application (ctl 0: within send_buf_count) or for the
 * answer to a peer's RMA (ctl 1), its per-use fields cleared. */
struct tcp_op *tcp_op_get(struct tcp_ep *sep, int ctl)
{
	struct tcp_op *op = (struct tcp_op *)cci__op_pool_get(&sep->ops, ctl);

	if (op)
		memset(&op->next, 0, offsetof(struct tcp_op, rma_pos) - offsetof(struct tcp_op, next));
	return op;
}

static int op_buf_init(struct cci__op_link *o)
{
	struct tcp_op *op = (struct tcp_op *)o;

	op->buf = malloc(TCP_COPY_SMALL);
	return op->buf ? CCI_SUCCESS : CCI_ENOMEM;
}

/* Make n ops (with their small copy buffers) now, so that a warm-up of
 * the data path allocates nothing for the usual number in flight. */
int tcp_ops_prealloc(struct tcp_ep *sep, uint32_t n)
{
	return cci__op_pool_prealloc(&sep->ops, n, op_buf_init);
}

void tcp_op_put(struct tcp_ep *sep, struct tcp_op *op)
{
	tcp_op_copy_release(op);
	cci__op_pool_put(&sep->ops, &op->link);
}

/* Free every buffer of the list all (linked by all_next). */
static void bufs_free(struct tcp_buf *all)
{
	for (struct tcp_buf *next; all; all = next) {
		next = all->all_next;
		free(all);
	}
}

/* Free every op, copy buffer and receive buffer of the endpoint, which
 * dies: no thread runs on it, and nothing reads the lists after. */
void tcp_pool_fini(struct tcp_ep *sep)
{
	cci__op_pool_fini(&sep->ops);
	bufs_free(sep->cb_all);
	bufs_free(sep->rb_all);
}

void tcp_op_copy_free(struct tcp_op *op)
{
	struct tcp_ep *sep = op->tc->sep;
	struct tcp_buf *cb = (struct tcp_buf *)op->big - 1;

	atomic_fetch_sub_explicit(&sep->copy_queued, op->big_len, memory_order_relaxed);
	op->big = NULL;
	op->big_len = 0;
	cci__spin_lock(&sep->copy_lock);
	cb->next = sep->cb_free;
	sep->cb_free = cb;
	cci__spin_unlock(&sep->copy_lock);
}

/* Room for a len-byte copy: the op's own small buffer, or a big one from
 * the endpoint's cache (the most recently returned, still in cache). */
static char *op_copy_space(struct tcp_op *op, uint32_t len)
{
	struct tcp_ep *sep = op->tc->sep;
	struct tcp_buf *cb;

	if (len <= TCP_COPY_SMALL) {
		if (!op->buf && !(op->buf = malloc(TCP_COPY_SMALL)))
			return NULL;
		return op->buf;
	}
	cci__spin_lock(&sep->copy_lock);
	CCI__SLIST_POP(&sep->cb_free, cb, next);
	cci__spin_unlock(&sep->copy_lock);
	if (!cb) {
		cb = malloc(sizeof(*cb) + sep->mss);
		if (!cb)
			return NULL;
		cci__spin_lock(&sep->copy_lock);
		cb->all_next = sep->cb_all;
		sep->cb_all = cb;
		cci__spin_unlock(&sep->copy_lock);
	}
	op->big = (char *)(cb + 1);
	op->big_len = len;
	atomic_fetch_add_explicit(&sep->copy_queued, len, memory_order_relaxed);
	return op->big;
}

int tcp_op_copy_in(struct tcp_op *op, const struct iovec *iov, uint32_t iovcnt, uint32_t len)
{
	char *dst;

	op->len = len;
	op->uiovcnt = 0;
	if (len == 0)
		return CCI_SUCCESS;
	dst = op_copy_space(op, len);
	if (!dst)
		return CCI_ENOMEM;
	cci__iov_gather(dst, iov, iovcnt);
	op->uiov[0].iov_base = dst;
	op->uiov[0].iov_len = len;
	op->uiovcnt = 1;
	return CCI_SUCCESS;
}

/*
 * Receive buffers are taken only by the receive side (sep->lock held),
 * from its private list, within recv_buf_count out at once (the lender:
 * one being filled or lent with a RECV event); they come back from any
 * thread through the lender and join the list when the receive side
 * collects them.
 */
static void rb_collect(struct tcp_ep *sep)
{
	assert(cci__mutex_held(&sep->lock));
	for (struct cci__lent *b = cci__lender_collect(&sep->lend), *next; b; b = next) {
		struct tcp_buf *rb = (struct tcp_buf *)b;

		next = b->next;
		rb->next = sep->rb_free;
		sep->rb_free = rb;
	}
}

struct tcp_buf *tcp_rb_get(struct tcp_ep *sep)
{
	struct tcp_buf *rb;

	if (!sep->rb_free || !cci__lender_can_take(&sep->lend))
		rb_collect(sep);
	if (!cci__lender_can_take(&sep->lend))
		return NULL;
	rb = sep->rb_free;
	if (rb) {
		sep->rb_free = rb->next;
	} else {
		/* Made on first need and kept: no malloc once warm. */
		rb = malloc(sizeof(*rb) + sep->mss);
		if (!rb)
			return NULL;
		rb->all_next = sep->rb_all;
		sep->rb_all = rb;
		sep->rb_count++;
	}
	cci__lender_take(&sep->lend);
	return rb;
}

void tcp_rb_put(struct tcp_ep *sep, struct tcp_buf *rb)
{
	cci__lender_return(&sep->lend, &rb->lent);
	if (atomic_load_explicit(&sep->rx_starved, memory_order_relaxed))
		tcp_loop_cmd(sep, TCP_CMD_RX);
}

/* Could tcp_rb_get() succeed now?  sep->lock held. */
int tcp_rb_available(struct tcp_ep *sep)
{
	assert(cci__mutex_held(&sep->lock));
	return cci__lender_available(&sep->lend);
}

void tcp_recv_returned(cci__evt_t *evt)
{
	tcp_rb_put(tcp_ep_of(evt->ep), evt->rx_buf);
}
