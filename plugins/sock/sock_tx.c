/*
 * sock_tx.c - the transmit side of the UDP transport: datagrams out in
 * sendmmsg batches, ops and their sequenced datagrams (handed to
 * sock_rel, which says when to send and resend them), acks in, and
 * completions.  Everything here runs with sep->lock held.
 */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sock.h"
#include "net_io.h"

#define TXD_CHUNK 256u

/* ---- datagrams out ------------------------------------------------------ */

static int send_error_transient(int err)
{
	/* A queued ICMP error surfaces on the next call (IP_RECVERR): the
	 * receive path reads the error queue; this datagram is still good. */
	return err == EINTR || err == ECONNREFUSED || err == EHOSTUNREACH ||
	       err == ENETUNREACH || err == EHOSTDOWN;
}

/* One datagram (a ping-pong's).  A small one is gathered into one
 * buffer for sendto, which skips sendmsg's copy of the message header
 * and iovec array (some 50 ns of a 2 us loopback round here); a larger
 * one goes by sendmsg, which still skips sendmmsg's per-batch work. */
static int send_lone(struct sock_ep *sep, const struct msghdr *mh)
{
	size_t len;

	if (mh->msg_iovlen == 2 && mh->msg_iov[1].iov_len > SOCK_TX_GATHER_MAX)
		return net_sendmsg(sep->fd, mh, MSG_DONTWAIT) < 0 ? -1 : 1;
	len = cci__iov_gather(sep->tx_one, mh->msg_iov, mh->msg_iovlen);
	return syscall(SYS_sendto, sep->fd, sep->tx_one, len, MSG_DONTWAIT, mh->msg_name,
	               mh->msg_namelen) < 0 ? -1 : 1;
}

void sock_tx_flush(struct sock_ep *sep)
{
	uint32_t off = 0, retries = 0;

	assert(cci__mutex_held(&sep->lock));
	while (off < sep->ntx) {
		int n;

		if (sep->ntx - off == 1)
			n = send_lone(sep, &sep->tx_mh[off].msg_hdr);
		else
			n = (int)syscall(SYS_sendmmsg, sep->fd, sep->tx_mh + off, sep->ntx - off,
			                 MSG_DONTWAIT);
		if (n > 0) {
			off += (uint32_t)n;
			sep->stats.tx_dgrams += (uint64_t)n;
			continue;
		}
		if (n < 0 && send_error_transient(errno) && ++retries < 8) {
			/* The send took the socket's pending error: the receive
			 * side would not see it, so the error queue is read at
			 * the next poll. */
			if (errno != EINTR)
				sep->errq_due = 1;
			continue;
		}
		/* Full socket or a datagram the kernel refuses: it is lost, and
		 * the reliability layer resends it if it is sequenced. */
		sep->stats.send_err++;
		off++;
	}
	sep->ntx = 0;
}

/* Queue one datagram for the next flush: header and sub-header of d, then
 * len bytes at data, which must stay valid until the flush.  to must too. */
void sock_tx_emit(struct sock_ep *sep, const struct sockaddr_storage *to, socklen_t tolen,
                  struct sock_dg *d, const void *data, uint32_t len)
{
	struct sock_txslot *s;
	struct msghdr *mh;

	if (sep->ntx == SOCK_TX_BATCH)
		sock_tx_flush(sep);
	s = &sep->tx_slot[sep->ntx];
	mh = &sep->tx_mh[sep->ntx].msg_hdr;
	s->iov[0].iov_base = s->hdr;
	s->iov[0].iov_len = sock_dg_encode(s->hdr, d);
	s->iov[1].iov_base = (void *)data;
	s->iov[1].iov_len = len;
	memset(mh, 0, sizeof(*mh));
	mh->msg_name = (void *)to;
	mh->msg_namelen = tolen;
	mh->msg_iov = s->iov;
	mh->msg_iovlen = len ? 2 : 1;
	sep->ntx++;
}

/* A datagram of sc's, with the ack of what we received riding on it. */
static void conn_emit(struct sock_conn *sc, struct sock_dg *d, const void *data, uint32_t len)
{
	d->token = sc->peer_token;
	if (sc->rel_on) {
		struct sock_rel_ack a;
		sock_rel_ack_make(&sc->rel, &a);
		d->flags |= SOCK_DG_F_ACK;
		d->cum = a.cum;
		d->wnd = a.wnd;
		d->sack = a.sack;
	}
	sock_tx_emit(sc->sep, &sc->peer, sc->peerlen, d, data, len);
}

/* A control datagram without a body (ACK, PING, PONG, BYE). */
void sock_tx_ctl(struct sock_conn *sc, uint8_t type, uint8_t flags)
{
	struct sock_dg d = { .type = type, .flags = flags };

	conn_emit(sc, &d, NULL, 0);
}

/* ---- pools --------------------------------------------------------------- */

static struct sock_txd *txd_get(struct sock_ep *sep)
{
	struct sock_txd *t = sep->txd_free;

	if (!t) {
		void **chunks = realloc(sep->txd_chunks, (sep->ntxd_chunks + 1) * sizeof(void *));
		struct sock_txd *c;

		if (!chunks)
			return NULL;
		sep->txd_chunks = chunks;
		c = calloc(TXD_CHUNK, sizeof(*c));
		if (!c)
			return NULL;
		chunks[sep->ntxd_chunks++] = c;
		for (uint32_t i = 0; i < TXD_CHUNK; i++) {
			c[i].next = sep->txd_free;
			sep->txd_free = &c[i];
		}
		t = sep->txd_free;
	}
	sep->txd_free = t->next;
	return t;
}

static void txd_put(struct sock_ep *sep, struct sock_txd *t)
{
	t->next = sep->txd_free;
	sep->txd_free = t;
}

/* What hangs on an op: its copy buffer. */
static void op_free_buf(struct cci__op_link *o)
{
	free(((struct sock_op *)o)->buf);
}

void sock_op_pool_init(struct sock_ep *sep)
{
	cci__op_pool_init(&sep->ops, sizeof(struct sock_op), SOCK_SEND_COUNT_DEFAULT, NULL, NULL,
	                  op_free_buf);
}

/* An op from the pool, its per-use fields cleared: app ops count against
 * CCI_OPT_ENDPT_SEND_BUF_COUNT (NULL when it is reached or memory is
 * short), the transport's own do not. */
struct sock_op *sock_op_get(struct sock_ep *sep, int kind, int app)
{
	struct sock_op *op = (struct sock_op *)cci__op_pool_get(&sep->ops, !app);

	if (!op)
		return NULL;
	memset(&op->q, 0, offsetof(struct sock_op, buf) - offsetof(struct sock_op, q));
	op->kind = (uint8_t)kind;
	return op;
}

void sock_op_put(struct sock_ep *sep, struct sock_op *op)
{
	if (op->cap > (64u << 10)) { /* do not keep big copies around */
		free(op->buf);
		op->buf = NULL;
		op->cap = 0;
	}
	cci__op_pool_put(&sep->ops, &op->link);
}

void sock_tx_ops_free(struct sock_ep *sep)
{
	cci__op_pool_fini(&sep->ops);
	for (uint32_t i = 0; i < sep->ntxd_chunks; i++)
		free(sep->txd_chunks[i]);
	free(sep->txd_chunks);
	sep->txd_chunks = NULL;
	sep->ntxd_chunks = 0;
	sep->txd_free = NULL;
}

/* Copy the message into the op's own buffer. */
int sock_op_copy_in(struct sock_op *op, const struct iovec *iov, uint32_t iovcnt, uint32_t len)
{
	if (len > op->cap) {
		char *b = realloc(op->buf, len);
		if (!b)
			return CCI_ENOMEM;
		op->buf = b;
		op->cap = len;
	}
	cci__iov_gather(op->buf, iov, iovcnt);
	op->msg = op->buf;
	op->len = len;
	return CCI_SUCCESS;
}

/* ---- ops and their datagrams ------------------------------------------- */

void sock_conn_touch(struct sock_conn *sc)
{
	if (sc->touched)
		return;
	sc->touched = 1;
	sc->touch_next = sc->sep->touched;
	sc->sep->touched = sc;
}

void sock_op_queue(struct sock_conn *sc, struct sock_op *op)
{
	assert(cci__mutex_held(&sc->sep->lock));
	op->sc = sc;
	op->in_txq = 1;
	op->t_ns = cci__now_ns();
	TAILQ_INSERT_TAIL(&sc->txq, op, q);
	TAILQ_INSERT_TAIL(&sc->ops, op, live);
	sock_conn_touch(sc);
}

/* The message fragment the op sends next. */
static void fill_msg(struct sock_conn *sc, struct sock_op *op, struct sock_txd *t)
{
	uint32_t room = sc->frag - sock_dg_sub_len(SOCK_DG_MSG);
	uint32_t n = op->len - op->msg_off;

	t->type = SOCK_DG_MSG;
	t->sub.op = op->len;
	t->sub.val = op->msg_off;
	t->data = op->msg + op->msg_off;
	t->len = n < room ? n : room;
}

/* The op's next emulated-RMA record: an initiator's, or the target's
 * answer (its registration checked again for every fragment). */
static void fill_rma(struct sock_conn *sc, struct sock_op *op, struct sock_txd *t)
{
	uint32_t room = sc->frag - sock_dg_sub_len(SOCK_DG_RMA);
	struct cci__emu_rma_rec r;
	uint64_t dlen;
	void *data;

	cci__emu_rma_next(&sc->rma, &op->rma, room, &r, &data, &dlen);
	t->type = SOCK_DG_RMA;
	cci__emu_rma_encode(t->sub.rma, &r);
	t->data = data;
	t->len = (uint32_t)dlen;
}

/* Describe the op's next datagram in t, without moving the op on. */
static void txd_fill(struct sock_conn *sc, struct sock_op *op, struct sock_txd *t)
{
	memset(&t->sub, 0, sizeof(t->sub));
	t->op = op;
	t->data = NULL;
	t->len = 0;
	if (op->phase == SOCK_PH_RMA)
		fill_rma(sc, op, t);
	else if (op->phase == SOCK_PH_MSG)
		fill_msg(sc, op, t);
}

/* The RMA record t was taken: move the op past it.  A write's completion
 * message follows its WR_END; an RMA then waits for its DONE. */
static void rma_advance(struct sock_op *op, const struct sock_txd *t)
{
	struct cci__emu_rma_rec r = { .kind = t->sub.rma[0] };

	cci__emu_rma_sent(&op->rma, &r, t->len);
	if (op->rma.phase == CCI__EMU_RMA_SEND)
		return;
	op->remote_wait = op->kind != SOCK_OP_ANSWER;
	op->phase = op->kind == SOCK_OP_WRITE && op->len ? SOCK_PH_MSG : SOCK_PH_DONE;
}

/* t was taken by the reliability layer: move the op past it. */
static void op_advance(struct sock_op *op, const struct sock_txd *t)
{
	op->txd_out++;
	if (t->type == SOCK_DG_RMA) {
		rma_advance(op, t);
		return;
	}
	op->msg_off += t->len;
	if (op->msg_off == op->len)
		op->phase = SOCK_PH_DONE;
}

/* The datagram t, sequenced as seq, goes out now. */
static void txd_send(struct sock_conn *sc, struct sock_txd *t, uint64_t seq, unsigned flags)
{
	struct sock_dg d = { .type = t->type, .seq = sock_rel_seq_encode(seq), .sub = t->sub };

	if (flags & SOCK_REL_SEND_ACK_NOW)
		d.flags |= SOCK_DG_F_ACK_NOW;
	if (t->type == SOCK_DG_MSG && t->op->kind != SOCK_OP_MSG)
		d.flags |= SOCK_DG_F_IN_ORDER; /* an RMA's completion: after its data */
	conn_emit(sc, &d, t->data, t->len);
}

/* Completion: every datagram pushed and acknowledged, and the target's
 * DONE in (RMA). */
void sock_op_maybe_done(struct sock_op *op)
{
	struct sock_conn *sc = op->sc;

	if (op->phase != SOCK_PH_DONE || op->in_txq || op->txd_out || op->remote_wait)
		return;
	TAILQ_REMOVE(&sc->ops, op, live);
	if (op->kind == SOCK_OP_ANSWER)
		sc->nanswers--;
	if (sock_op_app(op))
		sock_core->send_done(sc->conn, op->context, op->flags, op->status);
	sock_op_put(sc->sep, op);
	sock_conn_touch(sc);
}

/* May the head op send?  A FENCE RMA waits for every earlier one. */
static int op_may_start(struct sock_conn *sc, struct sock_op *op)
{
	return op->kind == SOCK_OP_MSG || cci__emu_rma_start(&sc->rma, &op->rma);
}

/* Push the head ops' datagrams into the window while it is open, then
 * send what the reliability layer asks for (retransmissions first). */
void sock_tx_pump(struct sock_conn *sc, uint64_t now)
{
	struct sock_op *op;
	struct sock_rel_send s;

	assert(cci__mutex_held(&sc->sep->lock));
	while (sc->rel_on && (op = TAILQ_FIRST(&sc->txq)) && op_may_start(sc, op)) {
		struct sock_txd *t = txd_get(sc->sep);
		uint64_t seq;
		int rc;

		if (!t)
			break;
		txd_fill(sc, op, t);
		rc = sock_rel_tx_push(&sc->rel, (uint64_t)(uintptr_t)t, now, &seq);
		/* Window full, or no memory to grow the send ring: the op waits
		 * (for acks, or the next pump; its send timeout bounds it). */
		if (rc == CCI_ENOBUFS || rc == CCI_ENOMEM) {
			txd_put(sc->sep, t);
			break;
		}
		op_advance(op, t);
		if (rc == CCI_SUCCESS)
			txd_send(sc, t, seq, 0);
		if (op->phase == SOCK_PH_DONE) {
			TAILQ_REMOVE(&sc->txq, op, q);
			op->in_txq = 0;
		}
	}
	while (sc->rel_on && sock_rel_tx_next(&sc->rel, now, &s)) {
		if (s.kind == SOCK_REL_SEND_PROBE)
			sock_tx_ctl(sc, SOCK_DG_ACK, SOCK_DG_F_ACK_NOW);
		else
			txd_send(sc, (struct sock_txd *)(uintptr_t)s.handle, s.seq, s.flags);
	}
	sock_tx_note_timer(sc);
}

/* Keep sep->timer_ns no later than sc's next reliability timer, and sc on
 * sep->timed while it has one. */
void sock_tx_note_timer(struct sock_conn *sc)
{
	uint64_t t;

	if (!sc->rel_on)
		return;
	t = sock_rel_next_timer(&sc->rel);
	if (t == SOCK_REL_NEVER)
		return;
	if (!sc->timed) {
		LIST_INSERT_HEAD(&sc->sep->timed, sc, timed_link);
		sc->timed = 1;
	}
	if (t < sc->sep->timer_ns)
		sc->sep->timer_ns = t;
}

/* The peer's ack a, received at now: what it took is done. */
static void ack_apply(struct sock_conn *sc, const struct sock_rel_ack *a, uint64_t now)
{
	uint64_t h;

	sock_rel_tx_ack(&sc->rel, a, now);
	while (sock_rel_tx_done(&sc->rel, &h)) {
		struct sock_txd *t = (struct sock_txd *)(uintptr_t)h;
		struct sock_op *op = t->op;

		txd_put(sc->sep, t);
		op->txd_out--;
		sock_op_maybe_done(op);
	}
}

/* The ack kept by sock_tx_ack_keep, if any, now (sock_tx_finish, or
 * before a later ack of the connection). */
static void sock_tx_ack_kept_apply(struct sock_conn *sc)
{
	if (!sc->ack_kept_set)
		return;
	sc->ack_kept_set = 0;
	if (sc->rel_on && cci__conn_is_open(&sc->base))
		ack_apply(sc, &sc->ack_kept, sc->ack_kept_ns);
}

/* The ack riding on a data datagram d, kept for sock_tx_finish: the
 * completions it brings (and their events) then come after the RECV of
 * d's message and, when the application polls, after its next call, so
 * that a program answering messages (a ping-pong, an RPC) sends its
 * answer first.  Applying it later only delays what it frees; its time
 * (for the round-trip estimate) is the time it came. */
void sock_tx_ack_keep(struct sock_conn *sc, const struct sock_dg *d, uint64_t now)
{
	if (!sc->rel_on || !(d->flags & SOCK_DG_F_ACK))
		return;
	sock_tx_ack_kept_apply(sc);
	sc->ack_kept = (struct sock_rel_ack){ d->cum, d->wnd, d->sack };
	sc->ack_kept_ns = now;
	sc->ack_kept_set = 1;
	sock_conn_touch(sc);
}

/* The ack riding on d, at once (dgram_rx passes only open connections). */
void sock_tx_acked(struct sock_conn *sc, const struct sock_dg *d, uint64_t now)
{
	sock_tx_ack_keep(sc, d, now);
	sock_tx_ack_kept_apply(sc);
}

/* The reliability timers of sc, and an ack that is due. */
void sock_tx_timers(struct sock_conn *sc, uint64_t now)
{
	if (!sc->rel_on)
		return;
	sock_tx_ack_kept_apply(sc); /* nothing it acked times out */
	if (sock_rel_next_timer(&sc->rel) <= now)
		sock_rel_tick(&sc->rel, now);
	sock_tx_pump(sc, now);
	if (sock_rel_ack_due(&sc->rel, now))
		sock_tx_ctl(sc, SOCK_DG_ACK, 0);
}

/* Teardown of sc's transmit side: every op ends, each app op reporting
 * status once when report is set.  After a send timeout (CCI_ETIMEDOUT)
 * each op that too waited past the timeout gets CCI_ETIMEDOUT, a younger
 * one CCI_ERR_DISCONNECTED (conn_timers.h). */
void sock_tx_fail_all(struct sock_conn *sc, int status, int report)
{
	uint32_t timeout_us = sc->conn->send_timeout_us;
	uint64_t now = status == CCI_ETIMEDOUT ? cci__now_ns() : 0;
	struct sock_op *op;
	uint64_t h;

	while (sc->rel_on && sock_rel_tx_abort(&sc->rel, &h))
		txd_put(sc->sep, (struct sock_txd *)(uintptr_t)h);
	/* Oldest first, as they would have completed. */
	while ((op = TAILQ_FIRST(&sc->ops))) {
		TAILQ_REMOVE(&sc->ops, op, live);
		if (op->in_txq)
			TAILQ_REMOVE(&sc->txq, op, q);
		if (sock_op_app(op) && report)
			sock_core->send_done(sc->conn, op->context, op->flags,
			                     status == CCI_ETIMEDOUT
			                             ? cci__ct_send_fail_status(timeout_us, op->t_ns, now)
			                             : status);
		sock_op_put(sc->sep, op);
	}
	TAILQ_INIT(&sc->txq);
	sc->rma.started = 0;
	sc->nanswers = 0;
}

/* ---- cci_send ---------------------------------------------------------- */

static int send_uu(struct sock_conn *sc, const struct iovec *iov, uint32_t iovcnt,
                   uint32_t len, void *context, int flags)
{
	struct sock_ep *sep = sc->sep;
	struct sock_dg d = { .type = SOCK_DG_UU, .seq = sc->uu_seq++ };
	char *copy = NULL;
	const void *data = iovcnt ? iov[0].iov_base : NULL;

	if (iovcnt > 1) {
		copy = malloc(len ? len : 1);
		if (!copy)
			return CCI_ENOMEM;
		cci__iov_gather(copy, iov, iovcnt);
		data = copy;
	}
	conn_emit(sc, &d, data, len);
	sock_tx_flush(sep); /* the bytes are the caller's: out before returning */
	free(copy);
	sock_core->send_done(sc->conn, context, flags, CCI_SUCCESS);
	return CCI_SUCCESS;
}

/* What received datagrams left (sep->touched, see sock_conn_touch): each
 * connection they moved applies its kept ack, sends what it may and the
 * ack that is due. */
void sock_tx_finish(struct sock_ep *sep, uint64_t now)
{
	while (sep->touched) {
		struct sock_conn *sc = sep->touched;

		sep->touched = sc->touch_next;
		sc->touched = 0;
		sock_tx_ack_kept_apply(sc);
		if (!sc->rel_on || !cci__conn_is_open(&sc->base))
			continue;
		sock_tx_pump(sc, now);
		if (sock_rel_ack_due(&sc->rel, now))
			sock_tx_ctl(sc, SOCK_DG_ACK, 0);
		sock_tx_note_timer(sc);
	}
	sock_tx_flush(sep);
}

static int send_locked(struct sock_conn *sc, const struct iovec *iov, uint32_t iovcnt,
                       uint32_t len, void *context, int flags, int *again)
{
	struct sock_op *op;

	if (!cci__conn_is_open(&sc->base))
		return CCI_ERR_DISCONNECTED; /* the events of pending ops carry why */
	if (!sc->reliable)
		return send_uu(sc, iov, iovcnt, len, context, flags);
	op = sock_op_get(sc->sep, SOCK_OP_MSG, 1);
	if (!op) {
		*again = 1;
		return CCI_ENOBUFS;
	}
	op->phase = SOCK_PH_MSG;
	op->context = context;
	op->flags = flags;
	if ((flags & CCI_FLAG_NO_COPY) && iovcnt == 1) {
		op->msg = iov[0].iov_base;
		op->len = len;
	} else if (sock_op_copy_in(op, iov, iovcnt, len) != CCI_SUCCESS) {
		sock_op_put(sc->sep, op);
		return CCI_ENOMEM;
	}
	sock_op_queue(sc, op);
	sock_tx_pump(sc, op->t_ns);
	sock_tx_flush(sc->sep);
	/* The message is out: now the work the last datagram received left
	 * (its kept ack, see sock_tx_ack_keep). */
	sock_tx_finish(sc->sep, op->t_ns);
	return CCI_SUCCESS;
}

int sock_tx_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
                 void *context, int flags)
{
	struct sock_conn *sc = sock_conn_of(conn);
	struct sock_ep *sep = sc->sep;
	int again = 0, rc;

	cci__engine_app_active(&sep->eng);
	pthread_mutex_lock(&sep->lock);
	rc = send_locked(sc, iov, iovcnt, len, context, flags, &again);
	pthread_mutex_unlock(&sep->lock);
	if (!again)
		return rc;
	/* Every op is in flight: one progress pass may read the acks that
	 * free some (a sender that never polls still gets through). */
	sep->ep->plugin->progress(sep->ep);
	pthread_mutex_lock(&sep->lock);
	again = 0;
	rc = send_locked(sc, iov, iovcnt, len, context, flags, &again);
	pthread_mutex_unlock(&sep->lock);
	return rc;
}
