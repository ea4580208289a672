/*
 * tcp_tx.c - the transmit side: per-connection queues, one sendmsg for
 * as many frames as fit, completions on the peer's acks.
 *
 * A message goes out with one system call when the queue is empty: a small
 * one copied behind its header (send_small), a bigger one straight from
 * the caller's buffers; only what the socket did not take is copied
 * before cci_send returns.  Written reliable frames wait in
 * tc->infl until the peer's cumulative ack covers their sequence number.
 */
#include <errno.h>
#include <string.h>

#include "tcp.h"

/*
 * An op for a send or RMA of the application on tc.  When every op is in
 * flight, one progress pass first: the acks that free them are read only
 * by progress() while the application is active, so a sender that spins
 * on CCI_ENOBUFS without calling cci_get_event still moves (the acks read
 * in this pass are applied in the next, i.e. at its next try).
 */
struct tcp_op *tcp_op_get_app(struct tcp_conn *tc, int kind, int flags, void *context)
{
	struct tcp_ep *sep = tc->sep;
	struct tcp_op *op = tcp_op_get(sep, 0);

	if (!op) {
		/* progress() is the top layer's: reached through the ops
		 * table, the one call upward of this layer (README.md, "Source layout"). */
		sep->ep->plugin->progress(sep->ep);
		op = tcp_op_get(sep, 0);
	}
	cci__engine_app_active(&sep->eng);
	if (op) {
		op->tc = tc;
		op->kind = (uint8_t)kind;
		op->flags = flags;
		op->context = context;
		op->t_ns = cci__engine_now(&sep->eng);
	}
	return op;
}

/* The caller's buffers are about to be reused: copy what op still needs. */
static int op_detach(struct tcp_op *op)
{
	struct iovec tmp[TCP_OP_IOV];
	uint32_t n = op->uiovcnt;

	if (n)
		memcpy(tmp, op->uiov, sizeof(*tmp) * n);
	if (tcp_op_copy_in(op, tmp, n, op->len) != CCI_SUCCESS)
		return CCI_ENOMEM;
	op->borrowed = 0;
	if (op->prepared) {
		/* Same bytes, new place: the frame offset stays valid. */
		op->piovcnt = 0;
		if (op->len > 0) {
			op->piov[0] = op->uiov[0];
			op->piovcnt = 1;
		}
	}
	return CCI_SUCCESS;
}

/* A send met an error it cannot handle here: leave the connection to
 * be broken by the loop or the next progress() (tcp_faults_process),
 * which take the locks that breaking needs. */
static void tx_fault(struct tcp_conn *tc, int status)
{
	int zero = 0;

	if (atomic_compare_exchange_strong(&tc->fault, &zero, status)) {
		atomic_fetch_add(&tc->sep->nfaults, 1);
		tcp_loop_cmd(tc->sep, TCP_CMD_FAULT);
	}
}

/*
 * The connections with bytes queued, so that a pass flushes those and
 * not every open connection: a stack any sender pushes onto (a connection
 * whose queue fills, tx_mark) and the pass takes whole, under sep->lock
 * (tcp_tx_flush_all, its only taker).  A connection is on it at most once
 * (tx_listed); one whose queue emptied is dropped when the pass meets it.
 * A pass clears tx_listed before it reads tx_queued, and a sender sets
 * tx_queued before it tests tx_listed: a queue that fills meanwhile is
 * pushed by one of the two.
 */
static void tx_due_push(struct tcp_ep *sep, struct tcp_conn *tc)
{
	struct tcp_conn *head = atomic_load_explicit(&sep->tx_due, memory_order_relaxed);

	if (atomic_exchange(&tc->tx_listed, 1))
		return;
	do
		tc->tx_due_next = head;
	while (!atomic_compare_exchange_weak_explicit(&sep->tx_due, &head, tc,
	                                              memory_order_release,
	                                              memory_order_relaxed));
}

/* tc is about to be freed: off the stack.  sep->lock held (no pass
 * runs), and tc's queue is empty for good (no sender pushes it). */
void tcp_tx_due_forget(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;
	struct tcp_conn *all, *next;

	if (!atomic_load(&tc->tx_listed))
		return;
	all = atomic_exchange_explicit(&sep->tx_due, NULL, memory_order_acquire);
	for (; all; all = next) {
		next = all->tx_due_next;
		if (all == tc)
			continue;
		atomic_store(&all->tx_listed, 0);
		tx_due_push(sep, all);
	}
	atomic_store(&tc->tx_listed, 0);
}

/* Keep sep->tx_busy, the stack above and the progress thread in step with
 * tc's queue. */
static void tx_mark(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;
	int q = tc->txq != NULL || tc->ctl_off < tc->ctl_len;

	if (q == atomic_load_explicit(&tc->tx_queued, memory_order_relaxed))
		return;
	atomic_store(&tc->tx_queued, q);
	atomic_fetch_add(&sep->tx_busy, q ? 1 : -1);
	if (q)
		tx_due_push(sep, tc);
	/* The thread, or an application asleep on a manual endpoint's OS
	 * handle, must come back for the queued bytes. */
	if (q && (cci__engine_thread_polls(&sep->eng) || (sep->manual && sep->ep->os_epfd >= 0)))
		tcp_loop_cmd(sep, TCP_CMD_TX);
}

/* The iovecs of what remains of op's current frame. */
static uint32_t op_iov(const struct tcp_op *op, struct iovec *iov)
{
	uint64_t skip = op->frame_off;
	uint32_t n = 0;

	if (skip < op->hdr_len) {
		iov[n].iov_base = (char *)op->hdr + skip;
		iov[n++].iov_len = op->hdr_len - skip;
		skip = 0;
	} else {
		skip -= op->hdr_len;
	}
	for (uint32_t i = 0; i < op->piovcnt; i++) {
		if (skip >= op->piov[i].iov_len) {
			skip -= op->piov[i].iov_len;
			continue;
		}
		iov[n].iov_base = (char *)op->piov[i].iov_base + skip;
		iov[n++].iov_len = op->piov[i].iov_len - skip;
		skip = 0;
	}
	return n;
}

/* Encode op's next frame unless a fence holds it back. */
static int op_ready(struct tcp_conn *tc, struct tcp_op *op)
{
	if (op->prepared)
		return 1;
	if (op->kind != TCP_OP_MSG && !cci__emu_rma_start(&tc->rma, &op->rma))
		return 0;
	tcp_op_prepare(op);
	return 1;
}

/* Gather control bytes and the frames of the queue head onwards. */
static uint32_t gather(struct tcp_conn *tc, struct iovec *iov, uint64_t *total, int *with_ctl)
{
	struct tcp_op *op = tc->txq;
	uint32_t n = 0;

	*with_ctl = 0;
	if (!(op && op->prepared && op->frame_off > 0) && tc->ctl_off < tc->ctl_len) {
		iov[n].iov_base = tc->ctl + tc->ctl_off;
		iov[n++].iov_len = tc->ctl_len - tc->ctl_off;
		*with_ctl = 1;
	}
	for (; op && n + TCP_OP_IOV + 1 <= TCP_GATHER_IOV; op = op->next) {
		if (!op_ready(tc, op))
			break;
		n += op_iov(op, iov + n);
		/* An op's frames stay together: stop after an RMA data frame,
		 * which has more.  A big frame fills the socket on its own. */
		if (op->frame_data > 0 || op->frame_len - op->frame_off >= TCP_ALONE_MIN)
			break;
	}
	*total = 0;
	for (uint32_t i = 0; i < n; i++)
		*total += iov[i].iov_len;
	return n;
}

/* op's last frame left: it waits for an ack or its DONE, or is done. */
static void op_route(struct tcp_conn *tc, struct tcp_op *op, struct tcp_op **done)
{
	int rma_waits = op->kind != TCP_OP_MSG && op->rma.phase == CCI__EMU_RMA_WAIT;

	/* The message bytes are in the socket: the copy is no longer needed
	 * (a read still needs its completion message until it is sent). */
	if (op->kind != TCP_OP_READ || !rma_waits)
		tcp_op_copy_release(op);
	if (rma_waits) {
		op->next = tc->rma_wait;
		tc->rma_wait = op;
		return;
	}
	switch (op->kind) {
	case TCP_OP_MSG:
		if (!op->reliable)
			break;
		/* fall through */
	case TCP_OP_READ: /* its completion message, after its DONE */
		CCI__FIFO_PUSH(&tc->infl, &tc->infl_tail, op, next);
		return;
	case TCP_OP_ANSWER:
		tc->nanswers--;
		break;
	default:
		break;
	}
	op->next = *done;
	*done = op;
}

/* n bytes of the gathered frames left. */
static void advance(struct tcp_conn *tc, uint64_t n, int with_ctl, struct tcp_op **done)
{
	if (with_ctl) {
		uint64_t k = tc->ctl_len - tc->ctl_off;
		if (k > n)
			k = n;
		tc->ctl_off += (uint32_t)k;
		n -= k;
		if (tc->ctl_off == tc->ctl_len)
			tc->ctl_off = tc->ctl_len = 0;
	}
	while (n > 0 && tc->txq) {
		struct tcp_op *op = tc->txq;
		uint64_t rem = op->frame_len - op->frame_off;
		if (n < rem) {
			op->frame_off += n;
			return;
		}
		n -= rem;
		if (!tcp_op_frame_done(op))
			continue;
		CCI__FIFO_SHIFT(&tc->txq, &tc->txq_tail, next);
		op->in_txq = 0;
		op_route(tc, op, done);
	}
}

/* Write the gathered bytes: a small batch from one contiguous copy with
 * send() (cheaper in the kernel than importing an iovec array). */
static ssize_t tx_write(int fd, struct msghdr *mh, uint64_t total)
{
	char lin[TCP_LINEAR_MAX];

	if (mh->msg_iovlen == 1)
		return net_send(fd, mh->msg_iov[0].iov_base, mh->msg_iov[0].iov_len,
		                 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (total > sizeof(lin))
		return net_sendmsg(fd, mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	return net_send(fd, lin, cci__iov_gather(lin, mh->msg_iov, mh->msg_iovlen),
	                 MSG_DONTWAIT | MSG_NOSIGNAL);
}

void tcp_tx_flush(struct tcp_conn *tc, struct tcp_op **done)
{
	struct iovec iov[TCP_GATHER_IOV];
	struct msghdr mh = { .msg_iov = iov };

	tc->held = 0;

	while (cci__conn_is_open(&tc->base)) {
		uint64_t total;
		int with_ctl;
		ssize_t n;

		mh.msg_iovlen = gather(tc, iov, &total, &with_ctl);
		if (mh.msg_iovlen == 0)
			break;
		n = tx_write(tc->fd, &mh, total);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				atomic_store_explicit(&tc->tx_full, TCP_FULL_SKIP,
				                      memory_order_relaxed);
			else
				tx_fault(tc, CCI_ERR_DISCONNECTED);
			break;
		}
		advance(tc, (uint64_t)n, with_ctl, done);
		if ((uint64_t)n < total)
			break;
	}
	tx_mark(tc);
}

/*
 * The usual small send: a message that fits TCP_LINEAR_MAX with the queue
 * and the control bytes empty goes out whole from one copy with a single
 * send(), without being prepared, queued, gathered and advanced past (a
 * few hundred instructions on a ping-pong's critical path).  What the
 * socket does not take is queued for tcp_tx_flush.
 */
static void send_small(struct tcp_conn *tc, struct tcp_op *op, const struct iovec *iov,
                      uint32_t iovcnt, struct tcp_op **done)
{
	uint8_t frame[TCP_LINEAR_MAX];
	uint64_t ack;
	uint32_t len = tcp_msg_linear(op, iov, iovcnt, frame, &ack);
	ssize_t n = net_send(tc->fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n == (ssize_t)len) {
		op_route(tc, op, done);
		return;
	}
	if (n > 0) {
		/* Part of it left: the rest follows from the very bytes sent,
		 * which may carry an older ack than a new encoding would. */
		tcp_op_prepare(op);
		memcpy(op->hdr, frame, TCP_HDR_LEN);
		atomic_store_explicit(&tc->ack_sent, ack, memory_order_relaxed);
		op->frame_off = (uint64_t)n;
	}
	/* Nothing left (full socket, or an error that flushing meets again
	 * and handles): queued as any other. */
	tcp_txq_push(tc, op, done);
}

void tcp_txq_push(struct tcp_conn *tc, struct tcp_op *op, struct tcp_op **done)
{
	op->in_txq = 1;
	CCI__FIFO_PUSH(&tc->txq, &tc->txq_tail, op, next);
	tcp_tx_flush(tc, done);
}

static void ctl_push(struct tcp_conn *tc, uint8_t type)
{
	struct tcp_hdr h = { .type = type };

	/* An ACK is owed only for what came since the last one, and a queued
	 * frame carries it. */
	if (type == TCP_F_ACK &&
	    (tc->txq || atomic_load(&tc->rx_seq) == atomic_load(&tc->ack_sent)))
		return;
	if (tc->ctl_len + TCP_HDR_LEN > TCP_CTL_LEN)
		return; /* acks and probes are repeated later */
	h.ack = tcp_ack_take(tc);
	tcp_hdr_encode(tc->ctl + tc->ctl_len, &h);
	tc->ctl_len += TCP_HDR_LEN;
}

/* Flush tc, taking its tx_lock, after queueing the control frame ctl
 * (ACK, PING, PONG; 0 for none), and complete what that finished. */
void tcp_tx_flush_now(struct tcp_conn *tc, uint8_t ctl)
{
	struct tcp_op *done = NULL;

	cci__spin_lock(&tc->tx_lock);
	if (ctl)
		ctl_push(tc, ctl);
	tcp_tx_flush(tc, &done);
	cci__spin_unlock(&tc->tx_lock);
	tcp_ops_complete(tc->sep, done);
}

int tcp_tx_acked(struct tcp_conn *tc, uint64_t ack)
{
	struct tcp_op *done = NULL, **tail = &done;

	cci__spin_lock(&tc->tx_lock);
	if (ack < tc->peer_acked || ack > tc->tx_seq) {
		cci__spin_unlock(&tc->tx_lock);
		return -1;
	}
	tc->peer_acked = ack;
	while (tc->infl && tc->infl->seq < ack) {
		struct tcp_op *op = tc->infl;
		tc->infl = op->next;
		op->next = NULL;
		*tail = op;
		tail = &op->next;
	}
	if (!tc->infl)
		tc->infl_tail = NULL;
	if (tc->txq)
		tcp_tx_flush(tc, tail);
	cci__spin_unlock(&tc->tx_lock);
	tcp_ops_complete(tc->sep, done);
	return 0;
}

void tcp_ops_complete(struct tcp_ep *sep, struct tcp_op *done)
{
	while (done) {
		struct tcp_op *op = done;
		done = op->next;
		if (op->kind != TCP_OP_ANSWER)
			tcp_core->send_done(op->tc->conn, op->context, op->flags, op->status);
		tcp_op_put(sep, op);
	}
}

void tcp_tx_flush_all(struct tcp_ep *sep)
{
	struct tcp_conn *tc = atomic_exchange_explicit(&sep->tx_due, NULL, memory_order_acquire);
	struct tcp_conn *next;

	assert(cci__mutex_held(&sep->lock));
	for (; tc; tc = next) {
		next = tc->tx_due_next;
		atomic_store(&tc->tx_listed, 0);
		if (!atomic_load(&tc->tx_queued))
			continue;
		/* The socket was full a moment ago: retrying at every poll only
		 * fights the kernel for the socket lock while it drains. */
		if (atomic_load_explicit(&tc->tx_full, memory_order_relaxed) > 0)
			atomic_fetch_sub_explicit(&tc->tx_full, 1, memory_order_relaxed);
		else
			tcp_tx_flush_now(tc, 0);
		if (atomic_load(&tc->tx_queued))
			tx_due_push(sep, tc);
	}
}

/* Would queueing op copy a big message while the endpoint already holds
 * TCP_COPY_QUEUED_MAX copied bytes?  Then the sender waits (ENOBUFS)
 * rather than the library's memory growing with the backlog. */
static int copy_would_overflow(const struct tcp_conn *tc, struct tcp_op *op)
{
	return tc->txq && op->borrowed && op->len > TCP_COPY_SMALL &&
	       atomic_load_explicit(&tc->sep->copy_queued, memory_order_relaxed) >=
	       TCP_COPY_QUEUED_MAX;
}

/*
 * A burst: a polling application (not the progress thread's mode, not
 * progress=manual) sends more than TCP_BURST_FREE small reliable messages
 * without polling in between.  The rest of the burst is held in the queue
 * and leaves in one write: at TCP_HOLD_MAX frames, at the application's
 * next poll (cci_get_event, also before it sleeps on the OS handle), or
 * when the progress thread, woken by the first frame held, gets to it (at
 * the tick if the application's poll held the endpoint then).  One system
 * call and one segment for many messages, where the kernel's cost per
 * send, on both sides of a loopback, bounds the rate.  A program that
 * polls between sends never holds anything; progress=manual never does,
 * as nothing would write the frames if the application did not call
 * again.  tx_lock held.
 */
static int burst_holds(struct tcp_conn *tc, const struct tcp_op *op)
{
	struct tcp_ep *sep = tc->sep;
	uint64_t gen = atomic_load_explicit(&sep->progress_gen, memory_order_relaxed);

	assert(cci__spin_held(&tc->tx_lock));
	if (gen != tc->burst_gen) {
		tc->burst_gen = gen;
		tc->burst = 0;
	}
	if (tc->burst < TCP_BURST_FREE) {
		tc->burst++;
		return 0;
	}
	return op->reliable && op->len <= TCP_LINEAR_MAX - TCP_HDR_LEN &&
	       tc->ctl_off == tc->ctl_len && tc->held < TCP_HOLD_MAX - 1 && !sep->manual &&
	       !cci__engine_thread_polls(&sep->eng);
}

/* Hold op; caller_bytes: its uiov points at the caller's buffers.  Those
 * are copied before cci_send returns even with CCI_FLAG_NO_COPY (a
 * permission, not a promise): holding is our choice, and a caller that
 * reuses a small buffer at once must not see its message change. */
static void hold(struct tcp_conn *tc, struct tcp_op *op, int caller_bytes)
{
	if (caller_bytes)
		op->borrowed = 1;
	op->in_txq = 1;
	CCI__FIFO_PUSH(&tc->txq, &tc->txq_tail, op, next);
	if (tc->held++ == 0)
		tcp_loop_cmd(tc->sep, TCP_CMD_FLUSH);
	tx_mark(tc);
}

int tcp_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
             void *context, int flags)
{
	struct tcp_conn *tc = tcp_conn_of(conn);
	struct tcp_ep *sep = tc->sep;
	struct tcp_op *op = tcp_op_get_app(tc, TCP_OP_MSG, flags, context), *done = NULL;

	if (!op)
		return CCI_ENOBUFS;
	op->reliable = conn->pub.attribute != CCI_CONN_ATTR_UU;
	if (iovcnt <= TCP_OP_IOV) {
		/* Borrow the caller's bytes; copied below only if not all left. */
		for (uint32_t i = 0; i < iovcnt; i++)
			op->uiov[i] = iov[i];
		op->uiovcnt = iovcnt;
		op->len = len;
		op->borrowed = !(flags & CCI_FLAG_NO_COPY);
	} else if (tcp_op_copy_in(op, iov, iovcnt, len) != CCI_SUCCESS) {
		tcp_op_put(sep, op);
		return CCI_ENOMEM;
	}
	cci__spin_lock(&tc->tx_lock);
	if (!cci__conn_is_open(&tc->base)) {
		cci__spin_unlock(&tc->tx_lock);
		tcp_op_put(sep, op);
		return CCI_ERR_DISCONNECTED;
	}
	if (copy_would_overflow(tc, op)) {
		cci__spin_unlock(&tc->tx_lock);
		tcp_op_put(sep, op);
		return CCI_ENOBUFS;
	}
	op->seq = tc->tx_seq++;
	if (burst_holds(tc, op))
		hold(tc, op, iovcnt <= TCP_OP_IOV);
	else if (!tc->txq && tc->ctl_off == tc->ctl_len && len <= TCP_LINEAR_MAX - TCP_HDR_LEN)
		send_small(tc, op, iov, iovcnt, &done);
	else
		tcp_txq_push(tc, op, &done);
	if (op->in_txq && op->borrowed && op_detach(op) != CCI_SUCCESS)
		tx_fault(tc, CCI_ENOMEM);
	cci__spin_unlock(&tc->tx_lock);
	if (done)
		tcp_ops_complete(sep, done);
	return CCI_SUCCESS;
}
