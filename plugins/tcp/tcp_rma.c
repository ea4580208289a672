/*
 * tcp_rma.c - RMA emulated over the stream.
 *
 * Write: the initiator streams WR_DATA fragments from its registration,
 * then a sequenced WR_END carrying the completion message; the target
 * checks every fragment with core->rma_lookup() (key, bounds, access)
 * and reads it straight into place, or discards it and answers RMA_NACK.
 * TCP keeps order, so the data is in place when WR_END arrives: the
 * completion message is delivered then, and the ack of WR_END completes
 * the write at the initiator.
 *
 * Read: the initiator sends RD_REQ; the target checks it (and each
 * fragment again as it sends it) and streams RD_DATA then RD_END; the
 * initiator reads the data straight into its registration, only at the
 * offsets it asked for.  The completion message goes out after RD_END.
 *
 * FENCE holds an RMA in the queue until every earlier one completed.
 */

#include "tcp.h"

/* A status from the wire, reduced to the ones an RMA may end with. */
static int peer_status(uint32_t st)
{
	switch (st) {
	case CCI_ERR_RMA_HANDLE:
	case CCI_EINVAL:
	case CCI_ERR_RMA_OP:
	case CCI_ENOMEM:
		return (int)st;
	default:
		return CCI_ERR_RMA_OP;
	}
}

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
	op->fence = (flags & CCI_FLAG_FENCE) != 0;
	op->laddr = (char *)local->start + local_offset;
	op->key = cci__handle_key(remote);
	op->roff = remote_offset;
	op->total = data_len;
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
	op->op_id = ++tc->next_op;
	if (op->kind == TCP_OP_WRITE)
		op->seq = tc->tx_seq++;
	else
		op->rd_pos = tc->tx_seq; /* its sequence comes with its completion message */
	tcp_txq_push(tc, op, &done);
	cci__spin_unlock(&tc->tx_lock);
	tcp_ops_complete(sep, done);
	return CCI_SUCCESS;
}

/* ---- target side -------------------------------------------------------- */

static void refuse(struct tcp_conn *tc, const char *what, int rc)
{
	TCP_WARN("tcp: %s from %s refused (%s): key %#llx offset %llu", what, tc->peer,
	         rc == CCI_ERR_RMA_HANDLE ? "unknown or stale handle, or no access"
	                                  : "outside the registration",
	         (unsigned long long)tc->sub.key, (unsigned long long)tc->sub.off);
}

static void wr_data_begin(struct tcp_conn *tc, uint64_t dlen)
{
	struct tcp_sub nack = { .op = tc->sub.op };
	void *addr = NULL;
	int rc;

	if (tc->wr_op != tc->sub.op)
		tc->wr_status = CCI_SUCCESS;
	tc->wr_op = tc->sub.op;
	if (tc->wr_status == CCI_SUCCESS) {
		rc = tcp_core->rma_lookup(tc->sep->ep, tc->sub.key, tc->sub.off, dlen,
		                          CCI_FLAG_WRITE, &addr);
		if (rc == CCI_SUCCESS) {
			tcp_rx_sink(tc, TCP_SINK_MEM, addr, dlen);
			return;
		}
		refuse(tc, "RMA write", rc);
		tc->wr_status = rc;
		nack.status = (uint32_t)rc;
		tcp_tx_flush_now(tc, TCP_F_RMA_NACK, &nack);
	}
	/* Refused, now or at an earlier fragment of this write. */
	tcp_rx_sink(tc, TCP_SINK_DROP, NULL, dlen);
}

static void wr_end_begin(struct tcp_conn *tc, uint64_t mlen)
{
	if (tc->wr_op == tc->sub.op && tc->wr_status != CCI_SUCCESS)
		/* The data did not land: no completion message either. */
		tcp_rx_sink(tc, TCP_SINK_DROP, NULL, mlen);
	else if (mlen > 0)
		tcp_rx_sink(tc, TCP_SINK_BUF, NULL, mlen);
}

static int rd_req(struct tcp_conn *tc, const char **why)
{
	struct tcp_op *op, *done = NULL;
	void *addr = NULL;
	int rc;

	rc = tcp_core->rma_lookup(tc->sep->ep, tc->sub.key, tc->sub.off, tc->sub.len,
	                          CCI_FLAG_READ, &addr);
	if (rc != CCI_SUCCESS)
		refuse(tc, "RMA read", rc);
	op = tc->nrdresp < TCP_READS_MAX ? tcp_op_get(tc->sep, 1) : NULL;
	if (!op) {
		*why = "too many RMA read requests pending";
		return -1;
	}
	op->tc = tc;
	op->kind = TCP_OP_RDRESP;
	op->op_id = tc->sub.op;
	op->key = tc->sub.key;
	op->roff = tc->sub.off;
	op->total = tc->sub.len;
	op->status = rc;
	cci__spin_lock(&tc->tx_lock);
	tc->nrdresp++;
	tcp_txq_push(tc, op, &done);
	cci__spin_unlock(&tc->tx_lock);
	tcp_ops_complete(tc->sep, done);
	return 0;
}

/* ---- initiator side ----------------------------------------------------- */

/* The read op of id, under tx_lock. */
static struct tcp_op *read_find(struct tcp_conn *tc, uint32_t id)
{
	struct tcp_op *op = tc->reads;

	while (op && op->op_id != id)
		op = op->next;
	return op;
}

static int rd_data_begin(struct tcp_conn *tc, uint64_t dlen, const char **why)
{
	struct tcp_op *op;

	cci__spin_lock(&tc->tx_lock);
	op = read_find(tc, tc->sub.op);
	cci__spin_unlock(&tc->tx_lock);
	/* Only the next bytes of a read we asked for, nowhere else. */
	if (!op || tc->sub.off != op->done || dlen > op->total - op->done) {
		*why = "RMA read data that was not asked for";
		return -1;
	}
	tc->rd_op = op;
	tcp_rx_sink(tc, TCP_SINK_MEM, op->laddr + op->done, dlen);
	return 0;
}

static int rd_end(struct tcp_conn *tc, const char **why)
{
	struct tcp_op *op, *done = NULL;

	cci__spin_lock(&tc->tx_lock);
	op = read_find(tc, tc->sub.op);
	if (!op || (tc->sub.status == CCI_SUCCESS && op->done != op->total)) {
		cci__spin_unlock(&tc->tx_lock);
		*why = "RMA read end that does not match a request";
		return -1;
	}
	CCI__SLIST_UNLINK(&tc->reads, op, next);
	op->started = 0;
	tc->rma_out--;
	if (tc->sub.status != CCI_SUCCESS)
		op->status = peer_status(tc->sub.status);
	if (tc->sub.status == CCI_SUCCESS && op->len > 0) {
		/* The data is here: now the completion message, in order. */
		op->msg_phase = 1;
		op->seq = tc->tx_seq++;
		tcp_txq_push(tc, op, &done);
	} else {
		op->next = NULL;
		done = op;
	}
	if (tc->txq)
		tcp_tx_flush(tc, &done);
	cci__spin_unlock(&tc->tx_lock);
	tcp_ops_complete(tc->sep, done);
	return 0;
}

static void rma_nack(struct tcp_conn *tc)
{
	cci__spin_lock(&tc->tx_lock);
	for (int infl = 0; infl < 2; infl++)
		for (struct tcp_op *op = infl ? tc->infl : tc->txq; op; op = op->next)
			if (op->kind == TCP_OP_WRITE && op->op_id == tc->sub.op)
				op->status = peer_status(tc->sub.status);
	cci__spin_unlock(&tc->tx_lock);
}

/* An RMA frame's header is in (tc->h, tc->sub): act on it and set where
 * its payload goes (tcp_rx_sink; the rx side preset no payload).  0, or
 * -1 with *why when the peer broke the protocol. */
int tcp_rma_frame_begin(struct tcp_conn *tc, const char **why)
{
	uint64_t plen = tc->h.len - tcp_sub_len(tc->h.type);

	switch (tc->h.type) {
	case TCP_F_WR_DATA:
		wr_data_begin(tc, plen);
		return 0;
	case TCP_F_WR_END:
		wr_end_begin(tc, plen);
		return 0;
	case TCP_F_RD_REQ:
		return rd_req(tc, why);
	case TCP_F_RD_DATA:
		return rd_data_begin(tc, plen, why);
	case TCP_F_RD_END:
		return rd_end(tc, why);
	default: /* TCP_F_RMA_NACK */
		rma_nack(tc);
		return 0;
	}
}

/* The frame's payload is in (a completion message is delivered by the rx
 * side). */
void tcp_rma_frame_end(struct tcp_conn *tc)
{
	switch (tc->h.type) {
	case TCP_F_WR_END:
		if (tc->wr_op == tc->sub.op)
			tc->wr_status = CCI_SUCCESS;
		break;
	case TCP_F_RD_DATA:
		/* Under tx_lock: rd_end reads done under it. */
		cci__spin_lock(&tc->tx_lock);
		tc->rd_op->done += tc->h.len - tcp_sub_len(TCP_F_RD_DATA);
		cci__spin_unlock(&tc->tx_lock);
		tc->rd_op = NULL;
		break;
	default:
		break;
	}
}
