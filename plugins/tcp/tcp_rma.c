/*
 * tcp_rma.c - RMA emulated over the stream (plugins/common/emu_rma.h):
 * each record is one RMA frame, its data read straight into place.
 *
 * Write: WR_DATA fragments from the initiator's registration, then WR_END
 * with the completion message; the target checks every fragment (key,
 * bounds, access) and reads it into place or drops it, delivers the
 * completion message only if every fragment landed, and answers DONE.
 * Read: RD_REQ; the target answers RD_DATA fragments (checked again as
 * each leaves) and DONE; the initiator reads the data straight into its
 * registration, only the next bytes it asked for.  An RMA completes when
 * its DONE arrives; a read's completion message goes out then, as a
 * message, and the read completes as a send does.  FENCE holds an RMA in
 * the queue until every earlier one completed.
 */

#include "tcp.h"

int tcp_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
            uint64_t local_offset, const struct cci_rma_handle *remote, uint64_t remote_offset,
            uint64_t data_len, void *context, int flags)
{
	struct tcp_conn *tc = tcp_conn_of(conn);
	struct tcp_ep *sep = tc->sep;
	struct tcp_op *op = tcp_op_get_app(tc, (flags & CCI_FLAG_WRITE) ? TCP_OP_WRITE : TCP_OP_READ,
	                                   flags, context), *done = NULL;
	struct iovec iov = { (void *)msg_ptr, msg_len };

	if (!op)
		return CCI_ENOBUFS;
	op->reliable = 1;
	if (tcp_op_copy_in(op, &iov, msg_len ? 1 : 0, msg_len) != CCI_SUCCESS) {
		tcp_op_put(sep, op);
		return CCI_ENOMEM;
	}
	cci__spin_lock(&tc->tx_lock);
	if (!cci__conn_is_open(&tc->base)) {
		cci__spin_unlock(&tc->tx_lock);
		tcp_op_put(sep, op);
		return CCI_ERR_DISCONNECTED;
	}
	cci__emu_rma_op_init(&tc->rma, &op->rma, flags, cci__handle_key(remote), remote_offset,
	                     (char *)local->start + local_offset, data_len, msg_len);
	op->rma_pos = tc->tx_seq;
	tcp_txq_push(tc, op, &done);
	cci__spin_unlock(&tc->tx_lock);
	tcp_ops_complete(sep, done);
	return CCI_SUCCESS;
}

/* ---- target side -------------------------------------------------------- */

/* Queue the answer to the peer's WR_END (its verdict) or RD_REQ. */
static int answer_queue(struct tcp_conn *tc, int verdict, const char **why)
{
	struct tcp_op *op = tc->nanswers < TCP_ANSWERS_MAX ? tcp_op_get(tc->sep, 1) : NULL, *done = NULL;

	if (!op) {
		*why = "too many RMAs of the peer unanswered";
		return -1;
	}
	op->tc = tc;
	op->kind = TCP_OP_ANSWER;
	cci__emu_rma_answer_init(&tc->rma, &op->rma, &tc->rec, verdict);
	cci__spin_lock(&tc->tx_lock);
	tc->nanswers++;
	tcp_txq_push(tc, op, &done);
	cci__spin_unlock(&tc->tx_lock);
	tcp_ops_complete(tc->sep, done);
	return 0;
}

/* ---- initiator side ----------------------------------------------------- */

/* The RMA of id waiting for its DONE, under tx_lock. */
static struct tcp_op *rma_waiting(struct tcp_conn *tc, uint32_t id)
{
	struct tcp_op *op = tc->rma_wait;

	while (op && op->rma.id != id)
		op = op->next;
	return op;
}

static int rd_data_begin(struct tcp_conn *tc, uint64_t dlen, const char **why)
{
	struct tcp_op *op;
	char *dst = NULL;

	cci__spin_lock(&tc->tx_lock);
	op = rma_waiting(tc, tc->rec.op);
	if (op)
		dst = cci__emu_rma_rd_place(&op->rma, &tc->rec, dlen);
	cci__spin_unlock(&tc->tx_lock);
	if (!dst) {
		*why = "RMA read data that was not asked for";
		return -1;
	}
	tc->rd_op = op;
	tcp_rx_sink(tc, TCP_SINK_MEM, dst, dlen);
	return 0;
}

static int done_in(struct tcp_conn *tc, const char **why)
{
	struct tcp_op *op, *done = NULL;

	cci__spin_lock(&tc->tx_lock);
	op = rma_waiting(tc, tc->rec.op);
	if (!op || cci__emu_rma_done_in(&tc->rma, &op->rma, &tc->rec) != 0) {
		cci__spin_unlock(&tc->tx_lock);
		*why = "RMA completion that answers no RMA of ours";
		return -1;
	}
	CCI__SLIST_UNLINK(&tc->rma_wait, op, next);
	op->status = op->rma.status;
	if (cci__emu_rma_msg_due(&op->rma)) {
		/* The data is here: now the completion message, in order. */
		op->seq = tc->tx_seq++;
		tcp_txq_push(tc, op, &done);
	} else {
		op->next = NULL;
		done = op;
	}
	if (tc->txq) /* a FENCE may have waited for this one */
		tcp_tx_flush(tc, &done);
	cci__spin_unlock(&tc->tx_lock);
	tcp_ops_complete(tc->sep, done);
	return 0;
}

/* An RMA frame's header is in (tc->h, tc->rec): act on it and set where
 * its payload goes (tcp_rx_sink; the rx side preset no payload).  0, or
 * -1 with *why when the peer broke the protocol.  Begun again when a
 * completion message waits for a receive buffer: WR_END's verdict is then
 * the same (its write was answered by the first). */
int tcp_rma_frame_begin(struct tcp_conn *tc, const char **why)
{
	uint64_t tail = tc->h.len - CCI__EMU_RMA_HDR_LEN;
	void *addr = NULL;

	switch (tc->rec.kind) {
	case CCI__EMU_RMA_WR_DATA:
		if (cci__emu_rma_wr_place(&tc->rma, &tc->rec, tail, &addr) == CCI_SUCCESS)
			tcp_rx_sink(tc, TCP_SINK_MEM, addr, tail);
		else
			tcp_rx_sink(tc, TCP_SINK_DROP, NULL, tail);
		return 0;
	case CCI__EMU_RMA_WR_END:
		/* The data did not land: no completion message either. */
		tc->wr_verdict = cci__emu_rma_wr_end(&tc->rma, &tc->rec);
		if (tail > 0)
			tcp_rx_sink(tc, tc->wr_verdict == CCI_SUCCESS ? TCP_SINK_BUF : TCP_SINK_DROP,
			            NULL, tail);
		return 0;
	case CCI__EMU_RMA_RD_REQ:
		return answer_queue(tc, CCI_SUCCESS, why);
	case CCI__EMU_RMA_RD_DATA:
		return rd_data_begin(tc, tail, why);
	default: /* DONE */
		return done_in(tc, why);
	}
}

/* The frame's payload is in (a completion message was delivered by the
 * rx side): answer a WR_END, count read data.  0, or -1 with *why. */
int tcp_rma_frame_end(struct tcp_conn *tc, const char **why)
{
	switch (tc->rec.kind) {
	case CCI__EMU_RMA_WR_END:
		return answer_queue(tc, tc->wr_verdict, why);
	case CCI__EMU_RMA_RD_DATA:
		/* Under tx_lock: done_in reads done under it. */
		cci__spin_lock(&tc->tx_lock);
		cci__emu_rma_landed(&tc->rd_op->rma, tc->h.len - CCI__EMU_RMA_HDR_LEN);
		cci__spin_unlock(&tc->tx_lock);
		tc->rd_op = NULL;
		return 0;
	default:
		return 0;
	}
}
