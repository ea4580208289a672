/*
 * verbs_rx.c - the receive side: an application message goes to the
 * application as a RECV event that points into its receive buffer (no
 * copy); the buffer goes back to the shared receive queue when the event
 * is returned, which is when its credit goes back to the sender.  The
 * application holds at most recv_buf_count events (sep->lend,
 * plugins/common/lender.h); a message for which no event could be had
 * then is held, in arrival order, and delivered when one comes back or
 * by the next progress.  sep->lock held throughout.
 */
#include "verbs.h"

static void held_push(struct verbs_ep *sep, struct verbs_rxbuf *rb)
{
	CCI__FIFO_PUSH(&sep->held, &sep->held_tail, rb, next);
}

/* Lend rb to the application: CCI_SUCCESS, CCI_ENOBUFS (it holds all it
 * may) or CCI_ENOMEM (no event).  Counted once posted: the event cannot
 * be collected back before, collect takes sep->lock. */
static int lend(struct verbs_ep *sep, struct verbs_rxbuf *rb)
{
	int rc;

	if (!cci__lender_can_take(&sep->lend))
		return CCI_ENOBUFS;
	rc = verbs_core->post_recv(rb->vc->conn, rb->data + VERBS_HDR_LEN, rb->len, rb);
	if (rc == CCI_SUCCESS) {
		rb->lent = 1;
		cci__lender_take(&sep->lend);
	}
	return rc;
}

void verbs_rx_deliver(struct verbs_ep *sep, struct verbs_conn *vc, struct verbs_rxbuf *rb,
                      uint32_t len)
{
	rb->vc = vc;
	rb->len = len;
	vc->refs++;
	if (sep->held || lend(sep, rb) != CCI_SUCCESS)
		held_push(sep, rb);
}

/* Give rb back to the shared receive queue and drop its connection. */
static struct verbs_conn *rx_recycle(struct verbs_ep *sep, struct verbs_rxbuf *rb)
{
	struct verbs_conn *vc = rb->vc;

	rb->vc = NULL;
	if (vc)
		vc->refs--;
	if (!sep->closing)
		verbs_rx_post(sep, rb);
	return vc;
}

void verbs_held_drain(struct verbs_ep *sep)
{
	while (sep->held) {
		struct verbs_rxbuf *rb = sep->held;

		if (rb->vc->conn && rb->vc->step == VERBS_STEP_OPEN && lend(sep, rb) != CCI_SUCCESS)
			return;
		CCI__FIFO_SHIFT(&sep->held, &sep->held_tail, next);
		if (!rb->lent) /* its connection is gone: the message goes with it */
			rx_recycle(sep, rb);
	}
}

void verbs_held_drop(struct verbs_ep *sep, struct verbs_conn *vc)
{
	struct verbs_rxbuf **pp = &sep->held, *last = NULL;

	while (*pp) {
		struct verbs_rxbuf *rb = *pp;

		if (rb->vc == vc) {
			*pp = rb->next;
			rx_recycle(sep, rb);
			continue;
		}
		last = rb;
		pp = &rb->next;
	}
	sep->held_tail = last;
}

/* The events the application returned (verbs_recv_returned): repost
 * their buffers, give their credits back, then deliver what was held. */
void verbs_rx_collect(struct verbs_ep *sep)
{
	for (struct cci__lent *b = cci__lender_collect(&sep->lend), *next; b; b = next) {
		struct verbs_rxbuf *rb = (struct verbs_rxbuf *)((char *)b -
		                                                 offsetof(struct verbs_rxbuf, back));
		struct verbs_conn *vc;

		next = b->next;
		rb->lent = 0;
		vc = rx_recycle(sep, rb);
		if (!vc)
			continue;
		if (vc->step == VERBS_STEP_OPEN)
			cci__credit_returned(&vc->cr);
		verbs_credit_flush(vc);
		verbs_txq_flush(vc);
	}
	verbs_held_drain(sep);
}
