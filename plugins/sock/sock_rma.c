/*
 * sock_rma.c - RMA emulated over sequenced datagrams.
 *
 * Write: WR_DATA datagrams straight from the initiator's registration,
 * then WR_END and the completion message; the target checks every
 * WR_DATA against its registration table (key, bounds, WRITE access)
 * before a byte is written, and answers WR_END with WR_DONE carrying its
 * verdict, which completes the write.  A refused write's completion
 * message is dropped, never delivered.  Read: RD_REQ; the target checks
 * it, and each fragment again as it sends RD_DATA, then RD_DONE; the
 * initiator takes only bytes inside the read it asked for, and sends the
 * completion message after RD_DONE.  The stream is in order, so
 * "after" above is a guarantee.  A READ holds the connection's queue
 * until its RD_DONE (later sends wait: RO order of completion messages).
 */
#include "sock.h"

static int rma_locked(struct sock_conn *sc, const void *msg_ptr, uint32_t msg_len,
                      char *laddr, const struct cci_rma_handle *remote,
                      uint64_t remote_offset, uint64_t data_len, void *context, int flags,
                      int *again)
{
	int write = (flags & CCI_FLAG_WRITE) != 0;
	struct sock_op *op;
	struct iovec iov = { (void *)msg_ptr, msg_len };

	if (!cci__conn_is_open(&sc->base))
		return CCI_ERR_DISCONNECTED; /* the events of pending ops carry why */
	if (msg_len > sc->mss)
		return CCI_EMSGSIZE;
	op = sock_op_get(sc->sep, write ? SOCK_OP_WRITE : SOCK_OP_READ, 1);
	if (!op) {
		*again = 1;
		return CCI_ENOBUFS;
	}
	if (sock_op_copy_in(op, &iov, msg_len ? 1 : 0, msg_len) != CCI_SUCCESS) {
		sock_op_put(sc->sep, op);
		return CCI_ENOMEM;
	}
	op->op_id = ++sc->next_op_id;
	op->key = cci__handle_key(remote);
	op->roff = remote_offset;
	op->total = data_len;
	op->laddr = laddr;
	op->fence = (flags & CCI_FLAG_FENCE) != 0;
	op->context = context;
	op->flags = flags;
	op->phase = write ? SOCK_PH_DATA : SOCK_PH_END;
	op->remote_wait = (uint8_t)write;
	sock_op_queue(sc, op);
	sock_tx_pump(sc, cci__now_ns());
	sock_tx_flush(sc->sep);
	return CCI_SUCCESS;
}

int sock_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
             uint64_t local_offset, const struct cci_rma_handle *remote,
             uint64_t remote_offset, uint64_t data_len, void *context, int flags)
{
	struct sock_conn *sc = sock_conn_of(conn);
	struct sock_ep *sep = sc->sep;
	char *laddr = (char *)local->start + local_offset;
	int again = 0, rc;

	if (!sc->reliable)
		return CCI_EINVAL;
	cci__engine_app_active(&sep->eng);
	pthread_mutex_lock(&sep->lock);
	rc = rma_locked(sc, msg_ptr, msg_len, laddr, remote, remote_offset, data_len, context,
	                flags, &again);
	pthread_mutex_unlock(&sep->lock);
	if (!again)
		return rc;
	sep->ep->plugin->progress(sep->ep); /* see sock_tx_send */
	pthread_mutex_lock(&sep->lock);
	again = 0;
	rc = rma_locked(sc, msg_ptr, msg_len, laddr, remote, remote_offset, data_len, context,
	                flags, &again);
	pthread_mutex_unlock(&sep->lock);
	return rc;
}

/* ---- the target's side ------------------------------------------------- */

static int ctl_queue(struct sock_conn *sc, uint8_t type, uint32_t op_id, int status)
{
	struct sock_op *op = sock_op_get(sc->sep, SOCK_OP_CTL, 0);

	if (!op)
		return CCI_ENOMEM;
	op->phase = SOCK_PH_END;
	op->ctl_type = type;
	op->op_id = op_id;
	op->ctl_status = (uint32_t)status;
	sock_op_queue(sc, op);
	return CCI_SUCCESS;
}

static void refused(struct sock_conn *sc, const char *what, const struct sock_dg *d, int rc)
{
	sc->sep->stats.rma_refused++;
	SOCK_LOG(CCI_LOG_RMA, "sock: %s from %s refused (key %#llx, offset %llu): %s", what,
	         sc->peer_str, (unsigned long long)d->sub.key, (unsigned long long)d->sub.off,
	         sock_core->status_text(rc));
}

static int wr_data(struct sock_conn *sc, const struct sock_dg *d)
{
	void *addr;
	int rc;

	if (sc->wr_failed && sc->wr_fail_op == d->sub.op)
		return CCI_SUCCESS; /* the rest of a refused write */
	rc = sock_core->rma_lookup(sc->sep->ep, d->sub.key, d->sub.off, d->body_len,
	                           CCI_FLAG_WRITE, &addr);
	if (rc != CCI_SUCCESS) {
		refused(sc, "rma write", d, rc);
		sc->wr_failed = 1;
		sc->wr_fail_op = d->sub.op;
		sc->wr_fail_status = rc;
		return CCI_SUCCESS;
	}
	if (d->body_len)
		memcpy(addr, d->body, d->body_len);
	return CCI_SUCCESS;
}

static int wr_end(struct sock_conn *sc, const struct sock_dg *d)
{
	int status = CCI_SUCCESS;

	if (sc->wr_failed && sc->wr_fail_op == d->sub.op)
		status = sc->wr_fail_status;
	sc->wr_failed = 0;
	if (status != CCI_SUCCESS && d->sub.val > 0)
		sc->rx_drop = 1;
	return ctl_queue(sc, SOCK_DG_WR_DONE, d->sub.op, status);
}

static int rd_req(struct sock_conn *sc, const struct sock_dg *d)
{
	struct sock_op *op;
	void *addr;
	int rc = CCI_EINVAL;

	if (d->sub.len > 0)
		rc = sock_core->rma_lookup(sc->sep->ep, d->sub.key, d->sub.off, d->sub.len,
		                           CCI_FLAG_READ, &addr);
	if (rc == CCI_SUCCESS && sc->nrdresp >= SOCK_READS_MAX)
		rc = CCI_ENOBUFS;
	if (rc != CCI_SUCCESS) {
		refused(sc, "rma read", d, rc);
		return ctl_queue(sc, SOCK_DG_RD_DONE, d->sub.op, rc);
	}
	op = sock_op_get(sc->sep, SOCK_OP_RDRESP, 0);
	if (!op)
		return CCI_ENOMEM;
	op->phase = SOCK_PH_DATA;
	op->op_id = d->sub.op;
	op->key = d->sub.key;
	op->roff = d->sub.off;
	op->total = d->sub.len;
	sc->nrdresp++;
	sock_op_queue(sc, op);
	return CCI_SUCCESS;
}

/* ---- the initiator's side ---------------------------------------------- */

static int wr_done(struct sock_conn *sc, const struct sock_dg *d)
{
	struct sock_op *op;

	TAILQ_FOREACH(op, &sc->ops, live)
		if (op->kind == SOCK_OP_WRITE && op->op_id == d->sub.op && op->remote_wait)
			break;
	if (!op)
		return CCI_ERROR;
	op->remote_wait = 0;
	op->status = (int)d->sub.val;
	sock_op_maybe_done(op);
	return CCI_SUCCESS;
}

/* The read waiting at the head of the queue for d, or NULL. */
static struct sock_op *read_waiting(struct sock_conn *sc, const struct sock_dg *d)
{
	struct sock_op *op = TAILQ_FIRST(&sc->txq);

	if (!op || op->kind != SOCK_OP_READ || op->phase != SOCK_PH_WAIT || op->op_id != d->sub.op)
		return NULL;
	return op;
}

static int rd_data(struct sock_conn *sc, const struct sock_dg *d)
{
	struct sock_op *op = read_waiting(sc, d);

	if (!op || d->sub.off != op->done || d->body_len > op->total - op->done)
		return CCI_ERROR;
	if (d->body_len)
		memcpy(op->laddr + d->sub.off, d->body, d->body_len);
	op->done += d->body_len;
	return CCI_SUCCESS;
}

static int rd_done(struct sock_conn *sc, const struct sock_dg *d)
{
	struct sock_op *op = read_waiting(sc, d);
	int status = (int)d->sub.val;

	if (!op || (status == CCI_SUCCESS && op->done != op->total))
		return CCI_ERROR;
	op->status = status;
	op->phase = (status == CCI_SUCCESS && op->len) ? SOCK_PH_MSG : SOCK_PH_DONE;
	if (op->phase == SOCK_PH_DONE) {
		TAILQ_REMOVE(&sc->txq, op, q);
		op->in_txq = 0;
		sock_op_maybe_done(op);
	}
	sock_conn_touch(sc);
	return CCI_SUCCESS;
}

int sock_rma_rx(struct sock_conn *sc, const struct sock_dg *d, uint64_t now)
{
	(void)now;
	switch (d->type) {
	case SOCK_DG_WR_DATA:
		return wr_data(sc, d);
	case SOCK_DG_WR_END:
		return wr_end(sc, d);
	case SOCK_DG_WR_DONE:
		return wr_done(sc, d);
	case SOCK_DG_RD_REQ:
		return rd_req(sc, d);
	case SOCK_DG_RD_DATA:
		return rd_data(sc, d);
	case SOCK_DG_RD_DONE:
		return rd_done(sc, d);
	default:
		return CCI_ERROR;
	}
}
