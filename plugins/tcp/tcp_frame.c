/*
 * tcp_frame.c - turning a queued op into its frames, one at a time: a
 * message is one MSG frame; an RMA is RMA frames, one emulated-RMA record
 * each (plugins/common/emu_rma.h says which: a write's WR_DATA fragments
 * and WR_END with the completion message, a read's RD_REQ, the target's
 * RD_DATA and DONE), and a read's completion message a MSG frame after its
 * DONE.  Called with the connection's tx_lock held.
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

static void frame_data(struct tcp_op *op, void *addr, uint64_t len)
{
	op->piov[0].iov_base = addr;
	op->piov[0].iov_len = len;
	op->piovcnt = 1;
	op->frame_data = len;
}

/* Fill h, r (an RMA frame's record) and the payload of op's current frame:
 * a message, or a read's completion message after its DONE, else RMA. */
static void frame_fill(struct tcp_op *op, struct tcp_hdr *h, struct cci__emu_rma_rec *r)
{
	uint64_t dlen;
	void *data;

	if (op->kind == TCP_OP_MSG ||
	    (op->kind == TCP_OP_READ && op->rma.phase == CCI__EMU_RMA_OVER)) {
		h->type = TCP_F_MSG;
		h->seq = op->seq;
		if (op->kind == TCP_OP_READ)
			h->flags = TCP_FL_ACK_NOW;
		frame_payload(op, op->uiov, op->uiovcnt);
		return;
	}
	h->type = TCP_F_RMA;
	cci__emu_rma_next(&op->tc->rma, &op->rma, TCP_FRAG_LEN, r, &data, &dlen);
	if (r->kind == CCI__EMU_RMA_WR_END)
		frame_payload(op, op->uiov, op->uiovcnt); /* the completion message */
	else if (dlen)
		frame_data(op, data, dlen);
	op->frame_kind = r->kind;
}

void tcp_op_prepare(struct tcp_op *op)
{
	struct tcp_conn *tc = op->tc;
	struct tcp_hdr h = { 0 };
	struct cci__emu_rma_rec r = { 0 };
	uint64_t payload = 0;
	uint32_t sub;

	op->piovcnt = 0;
	op->frame_data = 0;
	frame_fill(op, &h, &r);
	if (h.type == TCP_F_MSG && want_ack_now(op))
		h.flags |= TCP_FL_ACK_NOW;
	for (uint32_t i = 0; i < op->piovcnt; i++)
		payload += op->piov[i].iov_len;
	sub = tcp_sub_len(h.type);
	h.len = (uint32_t)(sub + payload);
	h.ack = tcp_ack_take(tc);
	tcp_hdr_encode(op->hdr, &h);
	if (sub)
		cci__emu_rma_encode(op->hdr + TCP_HDR_LEN, &r);
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
	struct cci__emu_rma_rec r = { .kind = op->frame_kind };

	op->prepared = 0;
	if (op->hdr[1] != TCP_F_RMA)
		return 1;
	cci__emu_rma_sent(&op->rma, &r, op->frame_data);
	return op->rma.phase != CCI__EMU_RMA_SEND;
}
