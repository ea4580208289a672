/*
 * ofi_tx.c - the transmit path: sends, credits, the per-connection queue
 * of messages, control messages, completions and failures.
 *
 * Flow control (plugins/common/credit.h): a receiver grants each
 * connection at most OFI_WINDOW_MAX credits and gives them back in any
 * header, or in a CREDIT message (a quarter of the window owed, or any at
 * the next timer tick).  A message without a credit waits in the
 * connection's queue, which holds at most send_buf_count operations:
 * after that cci_send returns CCI_ENOBUFS.  So a slow receiver slows its
 * senders down, and the provider never has to buffer more than the
 * receiver posted.
 *
 * Order: the queue is strictly FIFO and sequence numbers are assigned
 * when a message is handed to the provider, so a send never overtakes an
 * earlier one; on RO an RMA with a completion message holds its place in
 * the queue until its data has moved (see ofi_rma.c).
 *
 * Small messages whose header and payload fit the provider's inject size
 * leave by fi_inject when nothing of the connection is queued or in
 * flight: the buffer is the provider's at once and the send completes in
 * the call.
 */
#include <string.h>

#include "ofi.h"

/* Write the header of a message on oc at out (wire bytes); returns the
 * credits it gives back. */
static uint32_t hdr_put(struct ofi_conn *oc, void *out, uint8_t type, uint32_t seq, uint32_t aux)
{
	struct ofi_hdr h = { .dst = oc->peer_id, .seq = seq, .type = type, .aux = aux,
	                     .credits = (uint16_t)cci__credit_piggyback(&oc->cr, UINT16_MAX) };

	ofi_hdr_encode(&h, out);
	return h.credits;
}

/* ---- Operations in flight ---- */

void ofi_flight_add(struct ofi_conn *oc, struct ofi_op *op)
{
	op->in_flight = 1;
	op->iprev = oc->inflight_tail;
	CCI__FIFO_PUSH(&oc->inflight, &oc->inflight_tail, op, inext);
}

/* The provider gave op back (it may have been on no list). */
void ofi_flight_del(struct ofi_conn *oc, struct ofi_op *op)
{
	op->in_flight = 0;
	if (op->iprev)
		op->iprev->inext = op->inext;
	else if (oc->inflight == op)
		oc->inflight = op->inext;
	else
		return; /* a control message posted outside the connection's queues */
	if (op->inext)
		op->inext->iprev = op->iprev;
	else
		oc->inflight_tail = op->iprev;
	op->inext = op->iprev = NULL;
}

/* Tell the core once (a control message never is). */
void ofi_op_report(struct ofi_op *op, int status)
{
	if (op->reported)
		return;
	op->reported = 1;
	if (op->kind != OFI_OP_CTL && op->oc && op->oc->conn)
		ofi_core->send_done(op->oc->conn, op->context, op->flags, status);
}

/* A control op was not sent, or failed: a connection's last word will
 * not be answered either (ofi_disc.c). */
static void ctl_lost(struct ofi_ep *sep, const struct ofi_op *op)
{
	if (op->kind == OFI_OP_CTL && op->tracked && op->ctl_type == OFI_T_DISC && op->oc)
		ofi_disc_answered(sep, op->oc->id);
}

/* Release op if nothing holds it any more. */
void ofi_op_done(struct ofi_ep *sep, struct ofi_op *op)
{
	if (op->in_msgq || op->in_rmaq || op->in_flight)
		return;
	if (op->tracked)
		atomic_fetch_sub_explicit(&sep->ctl_out, 1, memory_order_release);
	ofi_op_put(sep, op);
}

/* ---- The message queue ---- */

void ofi_msgq_push(struct ofi_conn *oc, struct ofi_op *op)
{
	op->in_msgq = 1;
	CCI__FIFO_PUSH(&oc->msgq, &oc->msgq_tail, op, next);
}

static void msgq_pop(struct ofi_conn *oc)
{
	struct ofi_op *op = oc->msgq;

	CCI__FIFO_SHIFT(&oc->msgq, &oc->msgq_tail, next);
	op->next = NULL;
	op->in_msgq = 0;
}

static ssize_t op_send(struct ofi_ep *sep, struct ofi_op *op, fi_addr_t dest)
{
	if (op->nocopy) {
		struct iovec iov[2] = { { op->buf, OFI_HDR_LEN }, { (void *)op->ubuf, op->len } };
		void *desc[2] = { op->desc, NULL };
		struct fi_msg m = { .msg_iov = iov, .desc = desc, .iov_count = 2, .addr = dest,
		                    .context = op };
		return fi_sendmsg(sep->fep, &m, FI_COMPLETION);
	}
	return fi_send(sep->fep, op->buf, OFI_HDR_LEN + op->len, op->desc, dest, op);
}

/* Hand a message or control op to the provider, an application
 * message's header as remote CQ data where the peer takes it (then the
 * payload alone is sent); oc->lock held. */
static ssize_t msgq_post(struct ofi_conn *oc, struct ofi_op *op, int credit)
{
	uint32_t c;
	ssize_t rc;

	assert(cci__mutex_held(&oc->lock));
	if (credit && oc->imm) {
		c = cci__credit_piggyback(&oc->cr, OFI_IMM_CREDITS_MAX);
		rc = fi_senddata(oc->sep->fep, op->nocopy ? op->ubuf : op->buf, op->len,
		                 op->nocopy ? NULL : op->desc,
		                 ofi_imm_pack(oc->peer_id, oc->tx_seq, c), oc->peer->fa, op);
	} else {
		c = hdr_put(oc, op->buf, credit ? OFI_T_MSG : op->ctl_type, credit ? oc->tx_seq : 0,
		            op->aux);
		rc = op_send(oc->sep, op, oc->peer->fa);
	}
	if (rc != 0)
		cci__credit_unsent(&oc->cr, c);
	return rc;
}

/* Post the head of the queue.  1: go on with the next one, 0: stop. */
static int msgq_head(struct ofi_conn *oc, struct ofi_op *op)
{
	struct ofi_ep *sep = oc->sep;
	int credit = op->kind != OFI_OP_CTL;
	ssize_t rc;

	if (op->kind == OFI_OP_RMA && !op->data_done)
		return 0; /* RO: its completion message keeps this place */
	if (op->kind == OFI_OP_RMA && op->status != CCI_SUCCESS) {
		msgq_pop(oc);
		ofi_op_report(op, op->status);
		ofi_op_done(sep, op);
		return 1;
	}
	if (credit && oc->cr.tx == 0) {
		ofi_conn_touch(oc); /* a peer granting none for long is probed */
		return 0;
	}
	if (op->kind == OFI_OP_RMA && ofi_conn_shm_peer_exited(oc)) {
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED); /* fails op with the rest */
		return 0;
	}
	rc = msgq_post(oc, op, credit);
	if (rc == -FI_EAGAIN) {
		atomic_store_explicit(&sep->tx_pending, 1, memory_order_relaxed);
		return 0;
	}
	msgq_pop(oc);
	if (rc != 0) {
		OFI_LOG(CCI_LOG_MSG, "ofi: fi_send on %08x: %s", oc->id, ofi_lib.strerror((int)-rc));
		ofi_op_report(op, CCI_ERR_DISCONNECTED);
		ofi_op_done(sep, op);
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
		return 0;
	}
	if (credit) {
		cci__credit_take(&oc->cr);
		oc->tx_seq++;
	}
	ofi_flight_add(oc, op);
	return 1;
}

/* Post what the credits and the provider allow, in order; oc->lock held. */
void ofi_msgq_flush(struct ofi_conn *oc)
{
	assert(cci__mutex_held(&oc->lock));
	while (oc->msgq && ofi_conn_state(oc) == CCI__CONN_OPEN && msgq_head(oc, oc->msgq))
		;
}

/* ---- Control messages ---- */

/*
 * Control messages the provider refused (-FI_EAGAIN) wait in a queue of
 * their destination address (peer->ctlq), in order: a message waits
 * behind those queued for its own peer, never behind another peer's.
 * The peers with a queue are listed on the endpoint (sep->ctlq_peers),
 * so a flush pass visits each once and stops at its first refusal: a
 * connect storm queues thousands of REQs to one peer while the provider
 * opens its connection, and a pass must not walk them all.  libfabric
 * 1.17's tcp provider (tcp;ofi_rxm) refuses, for good, every send to a
 * peer whose process disconnected and exited, so one queue in strict
 * order let one such peer keep every other connection's credits from
 * leaving, and those senders waited for them forever.
 */

#define OFI_CTLQ_REFUSED 32 /* peers refused in one pass, at most */

static struct ofi_peer *op_peer(const struct ofi_op *op)
{
	return op->peer ? op->peer : op->oc->peer;
}

static void ctlq_push(struct ofi_ep *sep, struct ofi_op *op)
{
	struct ofi_peer *peer = op_peer(op);

	op->next = NULL;
	op->stamp_ns = cci__engine_now(&sep->eng);
	cci__spin_lock(&sep->pool_lock);
	CCI__FIFO_PUSH(&peer->ctlq, &peer->ctlq_tail, op, next);
	if (!peer->ctlq_listed) { /* at the tail: a flush pass holds on to the others */
		peer->ctlq_listed = 1;
		peer->ctlq_next = NULL;
		if (sep->ctlq_peers_tail)
			sep->ctlq_peers_tail->ctlq_next = peer;
		else
			atomic_store_explicit(&sep->ctlq_peers, peer, memory_order_relaxed);
		sep->ctlq_peers_tail = peer;
	}
	atomic_fetch_add_explicit(&peer->ctl_queued, 1, memory_order_relaxed);
	cci__spin_unlock(&sep->pool_lock);
}

/* Does a message to peer have to wait behind queued ones? */
static int ctlq_busy(const struct ofi_peer *peer)
{
	return atomic_load_explicit(&peer->ctl_queued, memory_order_relaxed) != 0;
}

static struct ofi_op *ctlq_head(struct ofi_ep *sep, struct ofi_peer *peer)
{
	struct ofi_op *op;

	cci__spin_lock(&sep->pool_lock);
	op = peer->ctlq;
	cci__spin_unlock(&sep->pool_lock);
	return op;
}

/* Take the head of peer's queue off it; only the flush removes. */
static void ctlq_shift(struct ofi_ep *sep, struct ofi_peer *peer)
{
	struct ofi_op *op;

	cci__spin_lock(&sep->pool_lock);
	op = peer->ctlq;
	CCI__FIFO_SHIFT(&peer->ctlq, &peer->ctlq_tail, next);
	atomic_fetch_sub_explicit(&peer->ctl_queued, 1, memory_order_relaxed);
	cci__spin_unlock(&sep->pool_lock);
	op->next = NULL;
}

/* Take peer, whose predecessor is prev (NULL: the head), off the list of
 * peers with a queue if its queue is empty; returns its successor.
 * Others only append, so prev stays. */
static struct ofi_peer *ctlq_peer_next(struct ofi_ep *sep, struct ofi_peer *prev,
                                       struct ofi_peer *peer, struct ofi_peer **prev_p)
{
	struct ofi_peer *next;

	cci__spin_lock(&sep->pool_lock);
	next = peer->ctlq_next;
	if (peer->ctlq) {
		*prev_p = peer;
	} else {
		if (prev)
			prev->ctlq_next = next;
		else
			atomic_store_explicit(&sep->ctlq_peers, next, memory_order_relaxed);
		if (sep->ctlq_peers_tail == peer)
			sep->ctlq_peers_tail = prev;
		peer->ctlq_listed = 0;
		peer->ctlq_next = NULL;
	}
	cci__spin_unlock(&sep->pool_lock);
	return next;
}

/* A queued control message that can no longer serve: its address left
 * the AV; the REQ of a connect that failed meanwhile (timed out, nobody
 * there); a REJECT or CANCEL (no connection) refused for
 * OFI_CTL_KEEP_NS, or to an address where nobody listens; a credit
 * return or a keepalive of a connection that does not carry messages
 * any more. */
static int ctl_stale(const struct ofi_ep *sep, const struct ofi_op *op)
{
	const struct ofi_peer *peer = op_peer(op);

	if (atomic_load_explicit(&peer->cut, memory_order_acquire))
		return 1;
	if (op->ctl_type == OFI_T_REQ)
		return ofi_conn_state(op->oc) != CCI__CONN_CONNECTING;
	if (!op->oc)
		return atomic_load_explicit(&peer->probe_refused, memory_order_relaxed) ||
		       cci__engine_now(&sep->eng) - op->stamp_ns > OFI_CTL_KEEP_NS;
	if (ofi_conn_state(op->oc) == CCI__CONN_OPEN)
		return 0;
	return op->ctl_type == OFI_T_CREDIT || op->ctl_type == OFI_T_PING ||
	       op->ctl_type == OFI_T_PONG;
}

/* The provider took op: a client's REQ is out (its CANCEL then makes sense). */
static void ctl_posted(struct ofi_op *op)
{
	if (op->ctl_type == OFI_T_REQ)
		atomic_store_explicit(&op->oc->req_posted, 1, memory_order_release);
}

/* The provider refused op: is its peer a process of this host that is
 * gone?  Then it never will take it. */
static int ctl_peer_gone(const struct ofi_op *op)
{
	return op->oc && ofi_pidw_exited(ofi_conn_pidw(op->oc));
}

/* A control op to the provider.  A connection's last word (the DISC of
 * cci_disconnect or of a closing endpoint, tracked) asks for delivery
 * complete where the provider offers it: its completion then says that
 * the peer's provider has it and, the connection being one ordered
 * stream, every message before it.  Endpoint teardown waits for it
 * (ep_flush_ctl), so a program that exits once its sends completed does
 * not lose their tail: a tcp socket closed with unread data resets, and
 * what its send queue still held is dropped. */
static ssize_t ctl_fi_send(struct ofi_ep *sep, struct ofi_op *op)
{
	if (op->ctl_type == OFI_T_DISC && op->tracked) {
		struct iovec iov = { op->buf, OFI_HDR_LEN + op->len };
		struct fi_msg m = { .msg_iov = &iov, .desc = &op->desc, .iov_count = 1,
		                    .addr = op_peer(op)->fa, .context = op };
		ssize_t rc = fi_sendmsg(sep->fep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE);

		if (rc != -FI_EBADFLAGS && rc != -FI_EOPNOTSUPP)
			return rc;
	}
	return fi_send(sep->fep, op->buf, OFI_HDR_LEN + op->len, op->desc, op_peer(op)->fa, op);
}

/* Send what the provider takes of peer's queue, in order, until it
 * refuses one: -FI_EAGAIN then, else 0. */
static ssize_t ctlq_flush_peer(struct ofi_ep *sep, struct ofi_peer *peer)
{
	struct ofi_op *op;

	while ((op = ctlq_head(sep, peer)) != NULL) {
		ssize_t rc = ctl_stale(sep, op) ? -FI_ECANCELED : ctl_fi_send(sep, op);

		if (rc == -FI_EAGAIN && ctl_peer_gone(op))
			rc = -FI_ECANCELED;
		if (rc == -FI_EAGAIN)
			return rc;
		if (rc != 0 && rc != -FI_ECANCELED)
			OFI_LOG(CCI_LOG_MSG, "ofi: control message %u not sent: %s", op->ctl_type,
			        ofi_lib.strerror((int)-rc));
		ctlq_shift(sep, peer);
		op->in_flight = rc == 0;
		if (rc == 0) {
			ctl_posted(op);
		} else {
			ctl_lost(sep, op);
			ofi_op_done(sep, op);
		}
	}
	return 0;
}

/* Control messages the provider refused earlier, one pass over the peers
 * with a queue; only progress calls it (cq_lock held: one flush at a
 * time, and only the flush takes peers off the list). */
void ofi_ctlq_flush(struct ofi_ep *sep)
{
	struct ofi_peer *prev = NULL, *peer;
	int nref = 0;

	assert(cci__spin_held(&sep->cq_lock));
	cci__spin_lock(&sep->pool_lock);
	peer = atomic_load_explicit(&sep->ctlq_peers, memory_order_relaxed);
	cci__spin_unlock(&sep->pool_lock);
	while (peer && nref < OFI_CTLQ_REFUSED) {
		nref += ctlq_flush_peer(sep, peer) == -FI_EAGAIN;
		peer = ctlq_peer_next(sep, prev, peer, &prev);
	}
}

/* Post a control op now, or queue it for progress (behind the ones the
 * provider refused earlier for the same peer, so control messages keep
 * their order).  Its header is built. */
static int ctl_post(struct ofi_ep *sep, struct ofi_op *op)
{
	struct ofi_peer *peer = op_peer(op);
	struct ofi_conn *req_oc = op->ctl_type == OFI_T_REQ ? op->oc : NULL;
	ssize_t rc = -FI_EAGAIN;

	/* Marked before the post: once posted, the progress thread may reap
	 * its completion and recycle op before fi_send() returns here. */
	if (!ctlq_busy(peer)) {
		op->in_flight = 1;
		rc = ctl_fi_send(sep, op);
	}
	if (rc == 0 && req_oc)
		atomic_store_explicit(&req_oc->req_posted, 1, memory_order_release);
	if (rc == 0)
		return CCI_SUCCESS;
	op->in_flight = 0;
	if (rc == -FI_EAGAIN) {
		ctlq_push(sep, op);
		return CCI_SUCCESS;
	}
	ofi_op_done(sep, op);
	return ofi_fi_status((int)-rc);
}

static struct ofi_op *ctl_op(struct ofi_ep *sep, uint8_t type, uint32_t aux, const void *body,
                             uint32_t len, unsigned flags)
{
	struct ofi_op *op = len <= OFI_CTL_BODY_MAX ? ofi_op_get(sep, OFI_OP_CTL) : NULL;

	if (!op)
		return NULL;
	op->ctl_type = type;
	op->aux = aux;
	op->len = len;
	if (len)
		memcpy(op->buf + OFI_HDR_LEN, body, len);
	if (flags & OFI_CTL_TRACKED) {
		op->tracked = 1;
		atomic_fetch_add_explicit(&sep->ctl_out, 1, memory_order_relaxed);
	}
	return op;
}

/* A control message on oc; oc->lock held. */
int ofi_ctl_send(struct ofi_conn *oc, uint8_t type, uint32_t aux, const void *body,
                 uint32_t len, unsigned flags)
{
	struct ofi_ep *sep = oc->sep;
	uint64_t buf[16];
	struct ofi_op *op;

	assert(cci__mutex_held(&oc->lock));
	if (!oc->peer || atomic_load_explicit(&oc->peer->cut, memory_order_acquire))
		return CCI_ERR_DISCONNECTED;
	if (!flags && OFI_HDR_LEN + len <= sizeof(buf) && OFI_HDR_LEN + len <= sep->inject_size &&
	    !ctlq_busy(oc->peer)) {
		uint32_t c = hdr_put(oc, buf, type, 0, aux);
		ssize_t rc;

		if (len)
			memcpy((char *)buf + OFI_HDR_LEN, body, len);
		rc = fi_inject(sep->fep, buf, OFI_HDR_LEN + len, oc->peer->fa);
		if (rc == 0)
			return CCI_SUCCESS;
		cci__credit_unsent(&oc->cr, c);
	}
	op = ctl_op(sep, type, aux, body, len, flags);
	if (!op)
		return CCI_ENOMEM;
	op->oc = oc;
	ofi_conn_ref(oc);
	if (flags & OFI_CTL_ORDERED) {
		ofi_msgq_push(oc, op);
		ofi_msgq_flush(oc);
		return CCI_SUCCESS;
	}
	hdr_put(oc, op->buf, type, 0, aux);
	return ctl_post(sep, op);
}

/* A control message to an address, outside any connection. */
int ofi_ctl_to(struct ofi_ep *sep, struct ofi_peer *peer, uint32_t dst, uint8_t type,
               const void *body, uint32_t len)
{
	struct ofi_hdr h = { .dst = dst, .type = type };
	struct ofi_op *op;

	if (atomic_load_explicit(&peer->cut, memory_order_acquire))
		return CCI_ERR_DISCONNECTED;
	op = ctl_op(sep, type, 0, body, len, 0);
	if (!op)
		return CCI_ENOMEM;
	ofi_hdr_encode(&h, op->buf);
	pthread_mutex_lock(&sep->lock);
	peer->refs++;
	pthread_mutex_unlock(&sep->lock);
	op->peer = peer;
	return ctl_post(sep, op);
}

/* Give credits back when a quarter of the window is owed (or any, when
 * forced by the timer); oc->lock held. */
void ofi_credit_maybe(struct ofi_conn *oc, int force)
{
	assert(cci__mutex_held(&oc->lock));
	if (ofi_conn_state(oc) == CCI__CONN_OPEN &&
	    (force ? cci__credit_owed(&oc->cr) != 0 : cci__credit_explicit_due(&oc->cr)))
		ofi_ctl_send(oc, OFI_T_CREDIT, 0, NULL, 0, 0);
}

/* The peer gave credits back, in a header: queued messages may go.
 * More than it ever granted are ignored (credit.h).  oc->lock held. */
void ofi_tx_credits_in(struct ofi_conn *oc, uint32_t n)
{
	assert(cci__mutex_held(&oc->lock));
	if (cci__credit_in(&oc->cr, n) == CCI_SUCCESS && oc->msgq)
		ofi_msgq_flush(oc);
}

/* ---- Sends ---- */

/* fi_inject of header + payload (or payload + CQ data); oc->lock held.
 * 0 or -FI_*. */
static ssize_t send_inject(struct ofi_conn *oc, const struct iovec *iov, uint32_t iovcnt,
                           uint32_t len)
{
	uint64_t buf[(OFI_HDR_LEN + OFI_INJECT_MAX) / 8];
	uint32_t c;
	ssize_t rc;

	assert(cci__mutex_held(&oc->lock));
	cci__iov_gather(oc->imm ? (char *)buf : (char *)buf + OFI_HDR_LEN, iov, iovcnt);
	if (oc->imm) {
		c = cci__credit_piggyback(&oc->cr, OFI_IMM_CREDITS_MAX);
		rc = fi_injectdata(oc->sep->fep, buf, len, ofi_imm_pack(oc->peer_id, oc->tx_seq, c),
		                   oc->peer->fa);
	} else {
		c = hdr_put(oc, buf, OFI_T_MSG, oc->tx_seq, 0);
		rc = fi_inject(oc->sep->fep, buf, OFI_HDR_LEN + len, oc->peer->fa);
	}
	if (rc != 0) {
		cci__credit_unsent(&oc->cr, c); /* they go with a later header */
		return rc;
	}
	cci__credit_take(&oc->cr);
	oc->tx_seq++;
	return 0;
}

static void msg_fill(struct ofi_conn *oc, struct ofi_op *op, const struct iovec *iov,
                     uint32_t iovcnt, uint32_t len, void *context, int flags)
{
	struct ofi_ep *sep = oc->sep;

	op->context = context;
	op->flags = flags;
	op->len = len;
	op->stamp_ns = cci__engine_now(&sep->eng);
	op->call_seq = oc->call_seq++;
	op->oc = oc;
	ofi_conn_ref(oc);
	if ((flags & CCI_FLAG_NO_COPY) && iovcnt == 1 && (oc->imm || sep->iov_limit >= 2) &&
	    !(sep->mr_mode & FI_MR_LOCAL)) {
		op->nocopy = 1;
		op->ubuf = iov[0].iov_base;
		return;
	}
	cci__iov_gather(ofi_op_payload(oc, op), iov, iovcnt);
}

/* An unreliable message the provider could not take at once is dropped,
 * never queued: the receiver is not ready.  oc->lock held. */
static int send_uu_unqueue(struct ofi_conn *oc, struct ofi_op *op)
{
	assert(cci__mutex_held(&oc->lock));
	if (!op->in_msgq)
		return 0;
	/* it is the only one queued: UU never queues */
	msgq_pop(oc);
	op->reported = 1;
	ofi_op_done(oc->sep, op);
	return 1;
}

int ofi_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
             void *context, int flags)
{
	struct ofi_conn *oc = ofi_conn_of(conn);
	struct ofi_ep *sep = oc->sep;
	struct ofi_op *op;
	int uu = oc->attr == CCI_CONN_ATTR_UU, rnr = 0;

	pthread_mutex_lock(&oc->lock);
	if (ofi_conn_state(oc) != CCI__CONN_OPEN) {
		pthread_mutex_unlock(&oc->lock);
		return CCI_ERR_DISCONNECTED;
	}
	if (!oc->msgq && !oc->inflight && oc->cr.tx > 0 &&
	    len + (oc->imm ? 0 : OFI_HDR_LEN) <= sep->inject_size &&
	    send_inject(oc, iov, iovcnt, len) == 0) {
		pthread_mutex_unlock(&oc->lock);
		ofi_core->send_done(conn, context, flags, CCI_SUCCESS);
		return CCI_SUCCESS;
	}
	if (uu && (oc->msgq || oc->cr.tx == 0)) {
		rnr = 1;
	} else if ((op = ofi_op_get(sep, OFI_OP_MSG)) == NULL) {
		pthread_mutex_unlock(&oc->lock);
		return CCI_ENOBUFS;
	} else {
		msg_fill(oc, op, iov, iovcnt, len, context, flags);
		ofi_msgq_push(oc, op);
		ofi_msgq_flush(oc);
		rnr = uu && send_uu_unqueue(oc, op);
	}
	pthread_mutex_unlock(&oc->lock);
	if (rnr)
		ofi_core->send_done(conn, context, flags, CCI_ERR_RNR);
	return CCI_SUCCESS;
}

/* ---- Completions and failures ---- */

/*
 * The provider is done with op, a message, a control message or an RMA's
 * completion message (status from its completion).  Returns the
 * connection whose connection request could not be delivered, for the
 * caller to fail the connect (ofi_connect_refused), else NULL.  cq_lock
 * held: it keeps that connection in the table.
 */
struct ofi_conn *ofi_tx_complete(struct ofi_ep *sep, struct ofi_op *op, int status)
{
	struct ofi_conn *oc = op->oc;
	int refused = 0;

	assert(cci__spin_held(&sep->cq_lock));
	if (!oc) {
		op->in_flight = 0;
		ofi_op_done(sep, op);
		return NULL;
	}
	pthread_mutex_lock(&oc->lock);
	ofi_flight_del(oc, op);
	if (status != CCI_SUCCESS)
		ctl_lost(sep, op);
	if (status != CCI_SUCCESS && op->kind == OFI_OP_CTL && op->ctl_type == OFI_T_REQ) {
		/* the server is not there: the caller fails the connect */
		refused = ofi_conn_state(oc) == CCI__CONN_CONNECTING;
	} else if (status != CCI_SUCCESS) {
		/* the connection is gone (a control message is never reported) */
		ofi_op_report(op, CCI_ERR_DISCONNECTED);
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
	} else {
		ofi_op_report(op, op->kind == OFI_OP_RMA ? op->status : CCI_SUCCESS);
	}
	if (oc->msgq && ofi_conn_state(oc) == CCI__CONN_OPEN)
		ofi_msgq_flush(oc);
	pthread_mutex_unlock(&oc->lock);
	ofi_op_done(sep, op);
	return refused ? oc : NULL;
}

/* Collect op on *list for its failure report, once (a control message
 * is never reported). */
static void fail_gather(struct ofi_op *op, struct ofi_op **list)
{
	if (op->kind == OFI_OP_CTL || op->reported)
		return;
	op->reported = 1;
	op->fnext = *list;
	*list = op;
}

/* The operations of list in the order of their calls (a merge sort). */
static struct ofi_op *fail_sort(struct ofi_op *list)
{
	struct ofi_op *a = NULL, *b = NULL, *out = NULL, **tail = &out;

	if (!list || !list->fnext)
		return list;
	for (int i = 0; list; i ^= 1) { /* split in two */
		struct ofi_op *next = list->fnext;
		struct ofi_op **half = i ? &b : &a;
		list->fnext = *half;
		*half = list;
		list = next;
	}
	a = fail_sort(a);
	b = fail_sort(b);
	while (a && b) {
		struct ofi_op **first = (int32_t)(a->call_seq - b->call_seq) < 0 ? &a : &b;
		*tail = *first;
		*first = (*first)->fnext;
		tail = &(*tail)->fnext;
	}
	*tail = a ? a : b;
	return out;
}

/*
 * Everything pending on oc fails: operations the provider owns are
 * reported now (and freed when it gives them back), queued ones are
 * dropped; the reports follow the order of the calls.  After a send
 * timeout (status CCI_ETIMEDOUT) each that waited past the timeout gets
 * CCI_ETIMEDOUT and the younger ones CCI_ERR_DISCONNECTED
 * (cci__ct_send_fail_status, at the clock the tick judged by); with any
 * other status all get CCI_ERR_DISCONNECTED.  Without notify nobody is
 * told.  oc->lock held.
 */
void ofi_tx_fail_all(struct ofi_conn *oc, int status, int notify)
{
	struct ofi_ep *sep = oc->sep;
	uint32_t timeout_us = oc->conn ? oc->conn->send_timeout_us : 0;
	uint64_t now = cci__engine_now(&sep->eng);
	struct ofi_op *list = NULL;

	assert(cci__mutex_held(&oc->lock));
	for (struct ofi_op *op = oc->inflight; op; op = op->inext)
		fail_gather(op, &list);
	for (struct ofi_op *op = oc->rmaq; op; op = op->rnext)
		fail_gather(op, &list);
	for (struct ofi_op *op = oc->msgq; op; op = op->next)
		fail_gather(op, &list);
	for (struct ofi_op *op = fail_sort(list); notify && op; op = op->fnext)
		if (oc->conn)
			ofi_core->send_done(oc->conn, op->context, op->flags,
			                    status == CCI_ETIMEDOUT
			                            ? cci__ct_send_fail_status(timeout_us, op->stamp_ns, now)
			                            : CCI_ERR_DISCONNECTED);
	for (struct ofi_op *op; CCI__SLIST_POP(&oc->rmaq, op, rnext);) {
		op->in_rmaq = 0;
		op->data_done = 1;
		op->status = CCI_ERR_DISCONNECTED;
		ofi_op_done(sep, op);
	}
	oc->rmaq_tail = NULL;
	while (oc->msgq) {
		struct ofi_op *op = oc->msgq;
		msgq_pop(oc);
		ofi_op_done(sep, op);
	}
}

/*
 * oc cannot carry messages any more (peer gone or disconnected, send
 * timeout): its pending work fails (ofi_tx_fail_all: CCI_ETIMEDOUT is a
 * send timeout's), later sends fail.  A local cause (status other than
 * CCI_ERR_DISCONNECTED) is told to the peer.  oc->lock held.
 */
void ofi_conn_break(struct ofi_conn *oc, int status)
{
	assert(cci__mutex_held(&oc->lock));
	if (ofi_conn_state(oc) != CCI__CONN_OPEN)
		return;
	OFI_LOG(CCI_LOG_CONN, "ofi: connection %08x broken (status %d)", oc->id, status);
	ofi_conn_move(oc, CCI__CONN_BROKEN);
	oc->broken_ns = cci__engine_now(&oc->sep->eng);
	if (status != CCI_ERR_DISCONNECTED && !ofi_pidw_unreachable(oc->sep, ofi_conn_pidw(oc)))
		ofi_ctl_send(oc, OFI_T_DISC, 0, NULL, 0, 0);
	ofi_tx_fail_all(oc, status, 1);
}
