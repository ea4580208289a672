/*
 * ofi_rx.c - the receive path: a receive buffer holding an application
 * message (handed over by progress, ofi_loop.c) becomes a RECV event
 * pointing into the buffer.  A buffer lent as a RECV event is posted
 * again when the event is returned, and its credit goes back to the
 * sender then.
 *
 * RO order does not rely on the provider: each message carries the
 * connection's sequence number and one that arrives early waits on the
 * connection's held list (bounded by the credits we granted).  The same
 * list keeps messages that arrive before the CONNECT event.  The
 * application never holds more than recv_buf_count RECV events (the
 * endpoint's lender, plugins/common/lender.h, counts them under cq_lock):
 * beyond that, messages wait in order in the endpoint's backlog, and
 * cci_get_event returns CCI_ENOBUFS.  A returned event's buffer is posted
 * again by the next progress (ofi_rx_collect).
 */
#include "ofi.h"

/* The buffers the application gave back are posted again; cq_lock held. */
void ofi_rx_collect(struct ofi_ep *sep)
{
	assert(cci__spin_held(&sep->cq_lock));
	for (struct cci__lent *b = cci__lender_collect(&sep->lend), *next; b; b = next) {
		next = b->next;
		ofi_rx_repost(sep, (struct ofi_rxbuf *)((char *)b - offsetof(struct ofi_rxbuf, lent)));
	}
}

/* Counted before it is posted: the application may return it at once. */
static void post_recv(struct ofi_ep *sep, struct ofi_conn *oc, struct ofi_rxbuf *rb)
{
	cci__lender_take(&sep->lend);
	if (ofi_core->post_recv(oc->conn, rb->data + rb->off, rb->len, rb) != CCI_SUCCESS) {
		cci__lender_return(&sep->lend, &rb->lent); /* the loss is logged */
		ofi_conn_unref(oc);
	}
}

/* Hand rb (holding a reference on oc) to the application, or to the
 * backlog when it holds all it may; oc->lock and cq_lock held. */
static void deliver(struct ofi_ep *sep, struct ofi_conn *oc, struct ofi_rxbuf *rb)
{
	assert(cci__mutex_held(&oc->lock));
	assert(cci__spin_held(&sep->cq_lock));
	if (sep->backlog || !cci__lender_can_take(&sep->lend)) {
		CCI__FIFO_PUSH(&sep->backlog, &sep->backlog_tail, rb, next);
		return;
	}
	post_recv(sep, oc, rb);
}

/* cq_lock held. */
void ofi_backlog_drain(struct ofi_ep *sep)
{
	assert(cci__spin_held(&sep->cq_lock));
	while (sep->backlog && cci__lender_can_take(&sep->lend)) {
		struct ofi_rxbuf *rb = sep->backlog;
		struct ofi_conn *oc = rb->oc;
		int live;

		CCI__FIFO_SHIFT(&sep->backlog, &sep->backlog_tail, next);
		pthread_mutex_lock(&oc->lock);
		live = oc->conn && ofi_conn_state(oc) != CCI__CONN_CLOSED;
		if (live)
			post_recv(sep, oc, rb);
		pthread_mutex_unlock(&oc->lock);
		if (!live) {
			ofi_rx_repost(sep, rb);
			ofi_conn_unref(oc);
		}
	}
}

/* Deliver what the held list allows, also what arrived before the
 * connection opened; oc->lock and cq_lock held. */
void ofi_held_drain(struct ofi_conn *oc)
{
	assert(cci__mutex_held(&oc->lock));
	assert(cci__spin_held(&oc->sep->cq_lock));
	while (oc->held && (oc->attr != CCI_CONN_ATTR_RO || oc->held->seq == oc->rx_next)) {
		struct ofi_rxbuf *rb = oc->held;
		oc->held = rb->next;
		deliver(oc->sep, oc, rb);
		if (oc->attr == CCI_CONN_ATTR_RO)
			oc->rx_next++;
	}
}

/* Sorted by sequence number (wrapping). */
static void held_insert(struct ofi_conn *oc, struct ofi_rxbuf *rb)
{
	struct ofi_rxbuf **pp = &oc->held;

	while (*pp && (int32_t)((*pp)->seq - rb->seq) < 0)
		pp = &(*pp)->next;
	rb->next = *pp;
	*pp = rb;
}

/* oc->lock held (and cq_lock). */
void ofi_held_free(struct ofi_conn *oc)
{
	assert(cci__mutex_held(&oc->lock));
	assert(cci__spin_held(&oc->sep->cq_lock));
	for (struct ofi_rxbuf *rb; CCI__SLIST_POP(&oc->held, rb, next);) {
		ofi_rx_repost(oc->sep, rb);
		ofi_conn_unref(oc);
	}
}

/* An application message in rb for oc, with its header fields: 1 when it
 * is taken (delivered or held), 0 when it was dropped (the connection is
 * closing, or it is too long).  oc->lock and cq_lock held. */
int ofi_rx_msg(struct ofi_ep *sep, struct ofi_conn *oc, struct ofi_rxbuf *rb,
               const struct ofi_hdr *h, uint32_t len)
{
	assert(cci__mutex_held(&oc->lock));
	assert(cci__spin_held(&sep->cq_lock));
	if (ofi_conn_state(oc) == CCI__CONN_CLOSED || !oc->conn || len > sep->mss) {
		ofi_rx_repost(sep, rb);
		return 0;
	}
	rb->len = len;
	rb->seq = h->seq;
	rb->oc = oc;
	ofi_conn_ref(oc);
	if (ofi_conn_state(oc) == CCI__CONN_CONNECTING ||
	    (oc->attr == CCI_CONN_ATTR_RO && h->seq != oc->rx_next)) {
		held_insert(oc, rb);
	} else {
		deliver(sep, oc, rb);
		if (oc->attr == CCI_CONN_ATTR_RO) {
			oc->rx_next++;
			ofi_held_drain(oc);
		}
	}
	return 1;
}
