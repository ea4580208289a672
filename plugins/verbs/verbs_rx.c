/*
 * verbs_rx.c - the receive side: an application message goes to the
 * application as a RECV event that points into its receive buffer (no
 * copy); the buffer goes back to the shared receive queue when the event
 * is returned, which is when its credit goes back to the sender.  A
 * message for which no event could be had is held, in arrival order, and
 * delivered by the next progress.  sep->lock held throughout.
 */
#include "verbs.h"

static void held_push(struct verbs_ep *sep, struct verbs_rxbuf *rb)
{
	CCI__FIFO_PUSH(&sep->held, &sep->held_tail, rb, next);
}

/* Lend rb to the application: CCI_SUCCESS or CCI_ENOMEM (no event). */
static int lend(struct verbs_ep *sep, struct verbs_rxbuf *rb)
{
	int rc = verbs_core->post_recv(rb->vc->conn, rb->data + VERBS_HDR_LEN, rb->len, rb);

	if (rc == CCI_SUCCESS) {
		rb->lent = 1;
		sep->rx_lent++;
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

/* The application returned rb's event: repost it; its connection, whose
 * credit is now owed to the peer, or NULL. */
struct verbs_conn *verbs_rx_returned(struct verbs_ep *sep, struct verbs_rxbuf *rb)
{
	struct verbs_conn *vc;

	if (!rb->lent)
		return NULL;
	rb->lent = 0;
	sep->rx_lent--;
	vc = rx_recycle(sep, rb);
	if (vc && vc->step == VERBS_STEP_OPEN)
		cci__credit_returned(&vc->cr);
	return vc;
}
