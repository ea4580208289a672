/*
 * verbs_tx.c - the send side: a connection's queue of operations waiting
 * for credits or send-queue room (in call order, so RO messages and RMA
 * completion messages keep their order), posting with inline data and
 * selective signalling, and completions.
 *
 * Every work request's wr_id is the connection's serial number of it;
 * posted operations wait on vc->flight in post order.  A completion of
 * serial s completes every operation up to s (RC completes in order, so
 * the unsignaled ones before it are done); an error completion fails the
 * operation it belongs to.  sep->lock held throughout.
 */
#include <string.h>
#include <sys/uio.h>

#include "verbs.h"

void verbs_txq_push(struct verbs_conn *vc, struct verbs_op *op)
{
	op->stamp_ns = cci__now_ns();
	CCI__FIFO_PUSH(&vc->txq, &vc->txq_tail, op, next);
}

/* Post the SEND of op (header written now: credits and sequence are
 * those of the moment it leaves).  fence: wait for earlier READs. */
static int post_send(struct verbs_conn *vc, struct verbs_op *op, int last, int fence)
{
	struct verbs_hdr h = { .type = op->type, .len = op->len - VERBS_HDR_LEN, .aux = op->aux,
	                       .credits = (uint16_t)cci__credit_piggyback(&vc->cr, UINT16_MAX) };
	struct ibv_sge sge = { .addr = (uintptr_t)op->buf, .length = op->len, .lkey = op->lkey };
	struct ibv_send_wr wr = { .wr_id = vc->serial_posted + 1, .sg_list = &sge, .num_sge = 1,
	                          .opcode = IBV_WR_SEND }, *bad;
	int rc;

	if (op->type == VERBS_T_MSG)
		h.seq = vc->tx_seq;
	verbs_hdr_encode(&h, op->buf);
	if (op->len <= vc->max_inline)
		wr.send_flags |= IBV_SEND_INLINE;
	if (fence)
		wr.send_flags |= IBV_SEND_FENCE;
	if (verbs_signal_wanted(vc->unsignaled, vc->sep->sq_depth, last))
		wr.send_flags |= IBV_SEND_SIGNALED;
	rc = ibv_post_send(vc->qp, &wr, &bad);
	if (rc != 0) {
		cci__credit_unsent(&vc->cr, h.credits);
		return cci__errno_status(rc);
	}
	vc->unsignaled = (wr.send_flags & IBV_SEND_SIGNALED) ? 0 : vc->unsignaled + 1;
	vc->tx_seq += op->type == VERBS_T_MSG;
	vc->serial_posted = wr.wr_id;
	return CCI_SUCCESS;
}

/* Post one RDMA WRITE or READ work request of an RMA's data. */
static int post_data(struct verbs_conn *vc, struct verbs_op *op, uint64_t off, uint64_t n,
                     int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(op->laddr + off), .length = (uint32_t)n,
	                       .lkey = op->lmr->lkey };
	struct ibv_send_wr wr = { .wr_id = vc->serial_posted + 1, .sg_list = &sge, .num_sge = 1,
	                          .opcode = op->is_read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
	                          .send_flags = (unsigned)flags }, *bad;
	int rc;

	wr.wr.rdma.remote_addr = op->raddr + off;
	wr.wr.rdma.rkey = op->rkey;
	rc = ibv_post_send(vc->qp, &wr, &bad);
	if (rc != 0)
		return cci__errno_status(rc);
	vc->unsignaled = (flags & IBV_SEND_SIGNALED) ? 0 : vc->unsignaled + 1;
	vc->serial_posted = wr.wr_id;
	return CCI_SUCCESS;
}

/* Work requests op needs. */
static uint64_t op_wrs(const struct verbs_conn *vc, const struct verbs_op *op)
{
	if (op->kind == VERBS_OP_RMA)
		return verbs_rma_wrs(op->rlen, vc->sep->max_msg, op->len != 0);
	return 1;
}

/* An RMA's data in chunks of the port's largest message, then its
 * completion message; the last request is signaled.  A READ's message
 * is fenced: it leaves once the data is here.  CCI_FLAG_FENCE fences the
 * first data request too (verbs_rma.c also waits for earlier RMAs). */
static int post_rma(struct verbs_conn *vc, struct verbs_op *op)
{
	uint64_t chunk = vc->sep->max_msg;
	int rc = CCI_SUCCESS;

	for (uint64_t off = 0; off < op->rlen && rc == CCI_SUCCESS; off += chunk) {
		uint64_t n = op->rlen - off < chunk ? op->rlen - off : chunk;
		int flags = (off == 0 && op->fence) ? IBV_SEND_FENCE : 0;

		if (off + n == op->rlen && op->len == 0)
			flags |= IBV_SEND_SIGNALED;
		rc = post_data(vc, op, off, n, flags);
	}
	if (rc == CCI_SUCCESS && op->len != 0)
		rc = post_send(vc, op, 1, op->is_read); /* last: signaled */
	return rc;
}

/* Can the head of the queue not be posted now (no credit, no room)?  Then
 * the request just posted is the last for a while, and is signaled: an
 * unsignaled one would wait for a later completion to report it. */
static int head_blocked_after(const struct verbs_conn *vc)
{
	const struct verbs_op *op = vc->txq;

	if (!op)
		return 1;
	if (op->spends_credit && vc->cr.tx == 0)
		return 1;
	/* the request about to be posted takes one more slot */
	return !verbs_sq_fits(vc->serial_posted + 1, vc->serial_done, op_wrs(vc, op),
	                      vc->sep->sq_depth);
}

/* Post what the queue's head allows; a refused post breaks nothing here:
 * the caller sees the status (the QP is in error, its event follows). */
void verbs_txq_flush(struct verbs_conn *vc)
{
	while (vc->txq && vc->qp && vc->step != VERBS_STEP_DOWN) {
		struct verbs_op *op = vc->txq;
		int rc;

		if (!verbs_sq_fits(vc->serial_posted, vc->serial_done, op_wrs(vc, op),
		                   vc->sep->sq_depth))
			return;
		if (op->spends_credit && !cci__credit_take(&vc->cr))
			return;
		CCI__FIFO_SHIFT(&vc->txq, &vc->txq_tail, next);
		rc = op->kind == VERBS_OP_RMA ? post_rma(vc, op)
		                              : post_send(vc, op, head_blocked_after(vc), 0);
		op->serial = vc->serial_posted;
		CCI__FIFO_PUSH(&vc->flight, &vc->flight_tail, op, next);
		if (rc != CCI_SUCCESS) {
			/* Reported now; freed when the queue pair's requests are
			 * (the part posted of an RMA may still be in the adapter). */
			VERBS_LOG(CCI_LOG_MSG, "verbs: %s: post failed: %s", vc->peer,
			          verbs_core->status_text(rc));
			if (op->user && !op->reported && vc->conn)
				verbs_core->send_done(vc->conn, op->context, op->flags, rc);
			op->reported = 1;
			return;
		}
	}
}

int verbs_ctl_send(struct verbs_conn *vc, uint8_t type, uint32_t aux, const void *body,
                   uint32_t len)
{
	struct verbs_op *op = verbs_op_get(vc->sep, 0);

	if (!op) {
		VERBS_LOG(CCI_LOG_CONN, "verbs: %s: no operation free for a control message (type %u)",
		          vc->peer, type);
		return CCI_ENOBUFS;
	}
	op->kind = VERBS_OP_CTL;
	op->type = type;
	op->aux = aux;
	op->spends_credit = (uint8_t)verbs_type_spends_credit(type);
	if (len)
		memcpy(op->buf + VERBS_HDR_LEN, body, len);
	op->len = VERBS_HDR_LEN + len;
	verbs_txq_push(vc, op);
	verbs_txq_flush(vc);
	return CCI_SUCCESS;
}

int verbs_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
               void *context, int flags)
{
	struct verbs_conn *vc = verbs_conn_of(conn);
	struct verbs_ep *sep = vc->sep;
	struct verbs_op *op;
	int rc = CCI_SUCCESS;

	pthread_mutex_lock(&sep->lock);
	if (!cci__conn_is_open(&vc->base)) {
		rc = vc->tx_err ? vc->tx_err : CCI_ERR_DISCONNECTED;
	} else if (!(op = verbs_op_get(sep, 1))) {
		rc = CCI_ENOBUFS;
	} else {
		op->kind = VERBS_OP_MSG;
		op->type = VERBS_T_MSG;
		op->spends_credit = 1;
		op->context = context;
		op->flags = flags;
		cci__iov_gather(op->buf + VERBS_HDR_LEN, iov, iovcnt);
		op->len = VERBS_HDR_LEN + len;
		verbs_txq_push(vc, op);
		verbs_txq_flush(vc);
	}
	pthread_mutex_unlock(&sep->lock);
	cci__engine_app_active(&sep->eng);
	return rc;
}

/* op is done with status: tell the core (once) and free it. */
static void op_done(struct verbs_conn *vc, struct verbs_op *op, int status)
{
	if (op->kind == VERBS_OP_RMA && vc->rma_busy)
		vc->rma_busy--;
	if (op->user && !op->reported && vc->conn)
		verbs_core->send_done(vc->conn, op->context, op->flags, status);
	verbs_op_put(vc->sep, op);
}

void verbs_tx_complete(struct verbs_conn *vc, uint64_t serial, int status)
{
	if (serial > vc->serial_done && serial <= vc->serial_posted)
		vc->serial_done = serial;
	while (vc->flight && verbs_op_status(vc->flight->serial, serial, status) != -1) {
		struct verbs_op *op = vc->flight;

		CCI__FIFO_SHIFT(&vc->flight, &vc->flight_tail, next);
		op_done(vc, op, verbs_op_status(op->serial, serial, status));
	}
	/* The failing request may be inside a multi-request RMA. */
	if (status != CCI_SUCCESS && vc->flight && vc->flight->kind == VERBS_OP_RMA &&
	    !vc->flight->reported && vc->conn && vc->flight->user) {
		vc->flight->reported = 1;
		verbs_core->send_done(vc->conn, vc->flight->context, vc->flight->flags, status);
	}
}

static void fail_list(struct verbs_conn *vc, struct verbs_op **head, struct verbs_op **tail,
                      int status, int notify)
{
	while (*head) {
		struct verbs_op *op = *head;

		*head = op->next;
		if (!notify)
			op->reported = 1;
		op_done(vc, op, status);
	}
	*tail = NULL;
}

/* Everything queued fails with status (notify: SEND events, else none);
 * what is posted is reported now and freed at its flush completion or
 * when the queue pair is destroyed. */
void verbs_tx_fail_all(struct verbs_conn *vc, int status, int notify)
{
	fail_list(vc, &vc->txq, &vc->txq_tail, status, notify);
	fail_list(vc, &vc->rmaq, &vc->rmaq_tail, status, notify);
	for (struct verbs_op *op = vc->flight; op; op = op->next) {
		if (op->user && !op->reported && notify && vc->conn)
			verbs_core->send_done(vc->conn, op->context, op->flags, status);
		op->reported = 1;
	}
}

static uint64_t oldest_in(const struct verbs_op *op, uint64_t best)
{
	for (; op; op = op->next)
		if (op->user && !op->reported && op->stamp_ns < best)
			best = op->stamp_ns;
	return best;
}

uint64_t verbs_tx_oldest(const struct verbs_conn *vc)
{
	return oldest_in(vc->rmaq, oldest_in(vc->txq, oldest_in(vc->flight, UINT64_MAX)));
}
