/*
 * sock_rma.c - RMA emulated over sequenced datagrams
 * (plugins/common/emu_rma.h), one record per RMA datagram.
 *
 * Write: WR_DATA datagrams straight from the initiator's registration,
 * then WR_END and the completion message (as MSG datagrams, in order);
 * the target checks every fragment (key, bounds, WRITE access) before a
 * byte is written, answers WR_END with DONE carrying its verdict, and
 * drops a refused write's completion message.  Read: RD_REQ; the target
 * checks it, and each fragment again as it sends RD_DATA, then DONE; the
 * initiator takes only the next bytes of the read it asked for, and sends
 * the completion message after DONE.  An RMA completes when its DONE
 * arrived and its own datagrams were acknowledged.
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
	cci__emu_rma_op_init(&sc->rma, &op->rma, flags, cci__handle_key(remote), remote_offset,
	                     laddr, data_len, msg_len);
	op->context = context;
	op->flags = flags;
	op->phase = SOCK_PH_RMA;
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

/* Queue the answer to WR_END r (its verdict) or RD_REQ r. */
static int answer_queue(struct sock_conn *sc, const struct cci__emu_rma_rec *r, int verdict)
{
	struct sock_op *op = sock_op_get(sc->sep, SOCK_OP_ANSWER, 0);

	if (!op)
		return CCI_ENOMEM;
	cci__emu_rma_answer_init(&sc->rma, &op->rma, r, verdict);
	if (op->rma.status == CCI_SUCCESS && op->rma.total && sc->nanswers >= SOCK_READS_MAX)
		op->rma.status = CCI_ENOBUFS;
	if (op->rma.status != CCI_SUCCESS)
		sc->sep->stats.rma_refused++;
	op->phase = SOCK_PH_RMA;
	sc->nanswers++;
	sock_op_queue(sc, op);
	return CCI_SUCCESS;
}

/* ---- the initiator's side ---------------------------------------------- */

/* The RMA of id that waits for its DONE, or NULL. */
static struct sock_op *rma_waiting(struct sock_conn *sc, uint32_t id)
{
	struct sock_op *op;

	TAILQ_FOREACH(op, &sc->ops, live)
		if ((op->kind == SOCK_OP_WRITE || op->kind == SOCK_OP_READ) && op->remote_wait &&
		    op->rma.id == id)
			return op;
	return NULL;
}

static int done_in(struct sock_conn *sc, struct sock_op *op, const struct cci__emu_rma_rec *r)
{
	if (!op || cci__emu_rma_done_in(&sc->rma, &op->rma, r) != 0)
		return CCI_ERROR;
	op->remote_wait = 0;
	op->status = op->rma.status;
	if (cci__emu_rma_msg_due(&op->rma)) {
		/* The data is here: now the completion message, in order. */
		op->phase = SOCK_PH_MSG;
		op->in_txq = 1;
		TAILQ_INSERT_TAIL(&sc->txq, op, q);
	}
	sock_conn_touch(sc); /* a FENCE may have waited for this one */
	sock_op_maybe_done(op);
	return CCI_SUCCESS;
}

int sock_rma_rx(struct sock_conn *sc, const struct sock_dg *d, uint64_t now)
{
	const struct cci__emu_rma_limits lim = { SOCK_DG_PAYLOAD_MAX, sc->mss, 0 };
	struct cci__emu_rma_rec r;
	struct sock_op *op;
	const char *why;
	int verdict;

	(void)now;
	if (cci__emu_rma_decode(d->sub.rma, d->body_len, &lim, &r, &why) != 0) {
		SOCK_WARN("sock: RMA datagram from %s: %s", sc->peer_str, why);
		return CCI_ERROR;
	}
	switch (r.kind) {
	case CCI__EMU_RMA_WR_DATA:
		cci__emu_rma_write_in(&sc->rma, &r, d->body, d->body_len);
		return CCI_SUCCESS;
	case CCI__EMU_RMA_WR_END:
		verdict = cci__emu_rma_wr_end(&sc->rma, &r);
		if (verdict != CCI_SUCCESS && r.len > 0)
			sc->rx_drop = 1; /* its completion message, next in order */
		return answer_queue(sc, &r, verdict);
	case CCI__EMU_RMA_RD_REQ:
		return answer_queue(sc, &r, CCI_SUCCESS);
	case CCI__EMU_RMA_RD_DATA:
		op = rma_waiting(sc, r.op);
		return op && cci__emu_rma_read_in(&op->rma, &r, d->body, d->body_len) == 0
		               ? CCI_SUCCESS
		               : CCI_ERROR;
	default: /* DONE */
		return done_in(sc, rma_waiting(sc, r.op), &r);
	}
}
