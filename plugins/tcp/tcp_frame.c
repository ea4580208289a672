/*
 * tcp_frame.c - turning a queued op into its frames, one at a time: a
 * message is one MSG frame; an RMA write is WR_DATA fragments and a WR_END
 * that carries the completion message; a read is an RD_REQ, later its
 * completion message; the target's answer to a read is RD_DATA fragments
 * and an RD_END.  Called with the connection's tx_lock held.
 */

#include "tcp.h"

/* Should the peer acknowledge this frame at once? */
static int want_ack_now(const struct tcp_op *op)
{
	struct tcp_ep *sep = op->tc->sep;

	if (op->flags & CCI_FLAG_BLOCKING)
		return 1;
	/* Running out of send buffers: completions free them. */
	uint32_t out = cci__op_pool_out(&sep->ops);
	uint32_t limit = cci__op_pool_limit(&sep->ops);

	return limit > 0 && out * 2 >= limit;
}

static void frame_payload(struct tcp_op *op, const struct iovec *iov, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (iov[i].iov_len > 0)
			op->piov[op->piovcnt++] = iov[i];
}

static void frame_data(struct tcp_op *op, char *addr, uint64_t len)
{
	op->piov[0].iov_base = addr;
	op->piov[0].iov_len = len;
	op->piovcnt = 1;
	op->frame_data = len;
}

/* The next fragment of a read answer, checked again against the target's
 * registration (it may have been dropped since the request). */
static int rdresp_fragment(struct tcp_op *op, struct tcp_hdr *h, struct tcp_sub *s,
                           uint64_t frag)
{
	void *addr = NULL;
	int rc;

	rc = tcp_core->rma_lookup(op->tc->sep->ep, op->key, op->roff + op->done, frag,
	                          CCI_FLAG_READ, &addr);
	if (rc != CCI_SUCCESS) {
		op->status = rc;
		return 0;
	}
	h->type = TCP_F_RD_DATA;
	s->off = op->done;
	frame_data(op, addr, frag);
	return 1;
}

/* Fill h, s and the payload of op's current frame. */
static void frame_fill(struct tcp_op *op, struct tcp_hdr *h, struct tcp_sub *s)
{
	uint64_t frag = op->total - op->done < TCP_FRAG_LEN ? op->total - op->done : TCP_FRAG_LEN;

	switch (op->kind) {
	case TCP_OP_READ:
		if (!op->msg_phase) {
			h->type = TCP_F_RD_REQ;
			s->key = op->key;
			s->off = op->roff;
			s->len = op->total;
			break;
		}
		h->flags = TCP_FL_ACK_NOW; /* the completion message of a read */
		/* fall through */
	case TCP_OP_MSG:
		h->type = TCP_F_MSG;
		h->seq = op->seq;
		frame_payload(op, op->uiov, op->uiovcnt);
		break;
	case TCP_OP_WRITE:
		if (op->done < op->total) {
			h->type = TCP_F_WR_DATA;
			s->key = op->key;
			s->off = op->roff + op->done;
			frame_data(op, op->laddr + op->done, frag);
			break;
		}
		h->type = TCP_F_WR_END;
		h->seq = op->seq;
		h->flags = TCP_FL_ACK_NOW; /* the initiator waits for this ack */
		frame_payload(op, op->uiov, op->uiovcnt);
		break;
	default: /* TCP_OP_RDRESP */
		if (op->status == CCI_SUCCESS && op->done < op->total &&
		    rdresp_fragment(op, h, s, frag))
			break;
		h->type = TCP_F_RD_END;
		s->status = (uint32_t)op->status;
		break;
	}
}

void tcp_op_prepare(struct tcp_op *op)
{
	struct tcp_conn *tc = op->tc;
	struct tcp_hdr h = { 0 };
	struct tcp_sub s = { .op = op->op_id };
	uint64_t payload = 0;
	uint32_t sub;

	op->piovcnt = 0;
	op->frame_data = 0;
	frame_fill(op, &h, &s);
	if (h.type == TCP_F_MSG && want_ack_now(op))
		h.flags |= TCP_FL_ACK_NOW;
	for (uint32_t i = 0; i < op->piovcnt; i++)
		payload += op->piov[i].iov_len;
	sub = tcp_sub_len(h.type);
	h.len = (uint32_t)(sub + payload);
	h.ack = tcp_ack_take(tc);
	tcp_hdr_encode(op->hdr, &h);
	if (sub)
		tcp_sub_encode(op->hdr + TCP_HDR_LEN, h.type, &s);
	op->hdr_len = TCP_HDR_LEN + sub;
	op->frame_len = op->hdr_len + payload;
	op->frame_off = 0;
	op->prepared = 1;
}

/*
 * The whole frame of a message that fits TCP_LINEAR_MAX, header and bytes,
 * written to b for a single send(); returns its length.  op stays
 * unprepared: tcp_op_prepare builds the same frame (same seq and flags) if
 * the socket does not take it all.  *ack is the acknowledgement it carries.
 */
uint32_t tcp_msg_linear(struct tcp_op *op, const struct iovec *iov, uint32_t iovcnt,
                        uint8_t *b, uint64_t *ack)
{
	struct tcp_hdr h = { .type = TCP_F_MSG, .len = op->len, .seq = op->seq };

	if (want_ack_now(op))
		h.flags = TCP_FL_ACK_NOW;
	h.ack = tcp_ack_take(op->tc);
	*ack = h.ack;
	tcp_hdr_encode(b, &h);
	return TCP_HDR_LEN + (uint32_t)cci__iov_gather(b + TCP_HDR_LEN, iov, iovcnt);
}

int tcp_op_frame_done(struct tcp_op *op)
{
	uint8_t type = op->hdr[1];

	op->prepared = 0;
	if (type == TCP_F_WR_DATA || type == TCP_F_RD_DATA) {
		op->done += op->frame_data;
		return 0;
	}
	return 1;
}
