/*
 * tcp_conn.c - connection lifetime: opening (into the set of readable
 * connections), breaking (the peer left, sent garbage, or a send timed
 * out), failing a connect, closing, and the per-connection timers (send
 * timeout, keepalive, delayed acks).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "tcp.h"

void tcp_conn_init(struct tcp_conn *tc, struct tcp_ep *sep, cci__conn_t *conn, int fd)
{
	memset(tc, 0, sizeof(*tc));
	tc->conn = conn;
	tc->sep = sep;
	tc->fd = fd;
	cci__emu_rma_conn_init(&tc->rma, tcp_core, sep->ep, tc->peer);
}

/*
 * Whether the open sockets belong in rx_epfd.  A socket in an epoll set
 * pays a wake-up callback for every segment that arrives (about 0.2 us of
 * a 4 us loopback message), so while the application polls a few sockets
 * with recv they stay out.  The progress thread sleeps on the set, the OS
 * handle contains it, and past TCP_POLL_DIRECT_MAX sockets polling reads
 * only the ready ones: then they are in.  sep->lock held (or no other
 * thread runs: teardown).
 */
static int want_epoll(const struct tcp_ep *sep)
{
	return cci__engine_thread_polls(&sep->eng) || sep->ep->os_epfd >= 0 ||
	       sep->nopen > TCP_POLL_DIRECT_MAX;
}

/* Add tc to rx_epfd or take it out; 0 or an errno. */
static int epoll_set(struct tcp_conn *tc, int on)
{
	struct epoll_event ev = { .events = tc->stalled ? 0 : EPOLLIN, .data.ptr = tc };

	if (on == tc->in_epoll)
		return 0;
	if (epoll_ctl(tc->sep->rx_epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, tc->fd, &ev) != 0)
		return errno;
	tc->in_epoll = on;
	return 0;
}

static void watch_one(struct tcp_ep *sep, struct tcp_conn *tc)
{
	int err = epoll_set(tc, sep->watch_want);

	if (err) {
		sep->watch_failed = 1;
		TCP_ERR("tcp: connection with %s: cannot watch its socket: %s", tc->peer,
		        strerror(err));
	}
}

/* Bring every open socket in line with want_epoll; after a mode
 * change, and when connections open or close.  Only a change of the
 * answer walks the sockets (a storm of connects costs no walk per
 * connection).  An ADD that fails (no kernel memory) is logged and tried
 * again at the next update; until then that socket is read only when the
 * application polls.  sep->lock held (or no other thread runs: teardown). */
void tcp_conn_watch_update(struct tcp_ep *sep)
{
	int want = want_epoll(sep);

	if (want == sep->watch_want && !sep->watch_failed)
		return;
	sep->watch_want = want;
	sep->watch_failed = 0;
	for (uint32_t i = 0; i < sep->nopen; i++)
		watch_one(sep, sep->open[i]);
}

/* Handshake done, the peer's mss known: make the connection readable.
 * sep->lock held. */
int tcp_conn_open(struct tcp_conn *tc, uint32_t peer_mss)
{
	struct tcp_ep *sep = tc->sep;

	assert(cci__mutex_held(&tc->sep->lock));
	tc->mss = peer_mss < sep->mss ? peer_mss : sep->mss;
	tc->conn->pub.max_send_size = tc->mss;
	tc->kept = NULL;
	tc->st_pos = tc->st_end = 0;
	if (cci__grow(&sep->open, sep->nopen, &sep->open_cap, 16, sizeof(*sep->open)) != CCI_SUCCESS)
		return CCI_ENOMEM;
	CCI__ISET_ADD(sep->open, sep->nopen, tc, open_idx);
	tc->in_rx = 1;
	tcp_conn_watch_update(sep);
	if (tc->in_epoll != sep->watch_want)
		watch_one(sep, tc);
	if (tc->in_epoll != sep->watch_want) {
		CCI__ISET_REMOVE(sep->open, sep->nopen, tc, open_idx);
		tc->in_rx = 0;
		return CCI_ENOMEM;
	}
	cci__ct_arm(&tc->base.timers, tc->conn->keepalive_us, cci__engine_now(&sep->eng));
	cci__conn_move(&tc->base, CCI__CONN_OPEN, tcp_core, tc->conn);
	cci__conn_due_note(&sep->due, &tc->base, tc->conn, cci__engine_now(&sep->eng));
	return CCI_SUCCESS;
}

/* A connection that ends leaves the readable set and gives back the
 * buffer of its half-read frame. */
static void rx_end(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;

	if (tc->rb) {
		tcp_rb_put(sep, tc->rb);
		tc->rb = NULL;
	}
	tc->in_payload = tc->fh_ready = 0;
	tc->stalled = 0;
	tcp_rx_ack_due_drop(tc);
	if (!tc->in_rx)
		return;
	epoll_set(tc, 0);
	CCI__ISET_REMOVE(sep->open, sep->nopen, tc, open_idx);
	tc->in_rx = 0;
	tcp_conn_watch_update(sep); /* fewer sockets may leave epoll */
}

/* Move tc to state to and take every op off it (tx_lock held); returns
 * them oldest first. */
static struct tcp_op *ops_detach(struct tcp_conn *tc, int to)
{
	struct tcp_op *all = tc->infl, **tail = &all;

	assert(cci__spin_held(&tc->tx_lock));
	cci__conn_move(&tc->base, to, tcp_core, tc->conn);
	while (*tail)
		tail = &(*tail)->next;
	*tail = tc->txq;
	while (*tail)
		tail = &(*tail)->next;
	*tail = tc->rma_wait;
	tc->infl = tc->infl_tail = tc->txq = tc->txq_tail = tc->rma_wait = NULL;
	tc->rma.started = 0;
	tc->nanswers = 0;
	tc->ctl_len = tc->ctl_off = 0;
	if (atomic_load_explicit(&tc->tx_queued, memory_order_relaxed)) {
		atomic_store_explicit(&tc->tx_queued, 0, memory_order_relaxed);
		atomic_fetch_sub(&tc->sep->tx_busy, 1);
	}
	return all;
}

/*
 * The place of op among its connection's sends and RMAs, in the order the
 * application made them (ops_detach's lists are not: an RMA waits for its
 * DONE apart from the queues, and a read's completion message is queued
 * when its DONE came).  A message has its sequence number, taken when it
 * was queued; an RMA, the sequence number the next message would take
 * (its rma_pos), so it goes just before that one, after earlier RMAs (by
 * op id).
 */
static int is_rma(const struct tcp_op *op)
{
	return op->kind == TCP_OP_WRITE || op->kind == TCP_OP_READ;
}

static int op_before(const struct tcp_op *a, const struct tcp_op *b)
{
	uint64_t x = is_rma(a) ? 2 * a->rma_pos : 2 * a->seq + 1;
	uint64_t y = is_rma(b) ? 2 * b->rma_pos : 2 * b->seq + 1;

	return x < y || (x == y && is_rma(a) && is_rma(b) && a->rma.id < b->rma.id);
}

static struct tcp_op *ops_merge(struct tcp_op *a, struct tcp_op *b)
{
	struct tcp_op *head = NULL, **tail = &head;

	while (a && b) {
		struct tcp_op **from = op_before(b, a) ? &b : &a;
		*tail = *from;
		tail = &(*from)->next;
		*from = (*from)->next;
	}
	*tail = a ? a : b;
	return head;
}

/* Merge sort of a list of ops into the order they were made. */
static struct tcp_op *ops_sort(struct tcp_op *list)
{
	struct tcp_op *mid = list, *fast, *back;

	if (!list || !list->next)
		return list;
	for (fast = list->next; fast && fast->next; fast = fast->next->next)
		mid = mid->next;
	back = mid->next;
	mid->next = NULL;
	return ops_merge(ops_sort(list), ops_sort(back));
}

/* Fail the ops of a connection that ends (silently when status is
 * CCI_SUCCESS: the application closed it).  After a send timeout
 * (CCI_ETIMEDOUT) each op that too waited past the timeout by now gets
 * CCI_ETIMEDOUT, a younger one CCI_ERR_DISCONNECTED (conn_timers.h). */
static void ops_drop(struct tcp_ep *sep, struct tcp_op *list, int status, uint64_t now)
{
	for (struct tcp_op *op; CCI__SLIST_POP(&list, op, next);) {
		cci__conn_t *conn = op->tc->conn;
		int st = status == CCI_ETIMEDOUT
		                 ? cci__ct_send_fail_status(conn->send_timeout_us, op->t_ns, now)
		                 : status;
		if (status != CCI_SUCCESS && op->kind != TCP_OP_ANSWER)
			tcp_core->send_done(conn, op->context, op->flags, st);
		tcp_op_put(sep, op);
	}
}

void tcp_conn_break(struct tcp_conn *tc, int status, const char *why)
{
	struct tcp_op *ops;

	cci__spin_lock(&tc->tx_lock);
	if (!cci__conn_is_open(&tc->base)) {
		cci__spin_unlock(&tc->tx_lock);
		return;
	}
	ops = ops_detach(tc, CCI__CONN_BROKEN);
	cci__spin_unlock(&tc->tx_lock);
	TCP_LOG(CCI_LOG_CONN, "tcp: connection with %s broken (%s)", tc->peer, why);
	rx_end(tc);
	/* The peer learns at once; the socket itself goes at the next tick
	 * (tcp_conn_release_gone), which holds the loop lock its watcher
	 * needs. */
	shutdown(tc->fd, SHUT_RDWR);
	if (!tc->gone_listed) {
		tc->gone_listed = 1;
		tc->gone_next = tc->sep->gone;
		tc->sep->gone = tc;
	}
	/* The queued times are the tick's clock (cci__engine_now), as is the
	 * time the send timeout was judged at. */
	ops_drop(tc->sep, ops_sort(ops), status, cci__engine_now(&tc->sep->eng));
}

static void gone_unlink(struct tcp_conn *tc)
{
	CCI__SLIST_UNLINK(&tc->sep->gone, tc, gone_next);
	tc->gone_listed = 0;
}

/*
 * A broken connection (the peer closed it, died, or timed out) keeps
 * nothing but its object until the application disconnects, which CCI
 * cannot make it do: a server whose clients come and go holds no socket
 * and no buffer for those that left.  Its sends already fail
 * (CCI_ERR_DISCONNECTED) without touching the socket, and every use of
 * the socket checks the state under tx_lock, so the descriptor closes
 * under tx_lock and no sender can write to a number reused meanwhile.
 * The loop lock and sep->lock held.
 */
void tcp_conn_release_gone(struct tcp_ep *sep)
{
	assert(cci__mutex_held(&sep->lock));
	assert(cci__mutex_held(&sep->eng.lock));
	while (sep->gone) {
		struct tcp_conn *tc = sep->gone;
		int fd;

		gone_unlink(tc);
		if (tc->w_on)
			ev_io_stop(sep->eng.loop, &tc->w_w);
		tc->w_on = 0;
		tcp_tx_due_forget(tc);
		cci__spin_lock(&tc->tx_lock);
		fd = tc->fd;
		tc->fd = -1;
		cci__spin_unlock(&tc->tx_lock);
		if (fd >= 0) {
			close(fd);
			cci__listen_fd_freed(&sep->lg);
		}
		tcp_rx_stage_drop(tc);
		cci__due_clear(&sep->due, &tc->base.due);
	}
}

void tcp_faults_process(struct tcp_ep *sep)
{
	for (struct tcp_conn *tc = sep->conns, *next; tc; tc = next) {
		int st = atomic_exchange(&tc->fault, 0);
		next = tc->next;
		if (!st)
			continue;
		atomic_fetch_sub(&sep->nfaults, 1);
		if (st != CCI_ENOMEM)
			st = CCI_ERR_DISCONNECTED;
		tcp_conn_break(tc, st, "send failed");
	}
}

/* Closing an open connection: ack what we received, so the peer's sends
 * to us complete, and read what is left so the close is a FIN, not a RST
 * that could destroy that ack.  Only between frames. */
static void close_gracefully(struct tcp_conn *tc)
{
	struct tcp_hdr h = { .type = TCP_F_ACK };
	uint8_t b[TCP_HDR_LEN];
	char scratch[4096];

	h.ack = atomic_load(&tc->rx_seq);
	tcp_hdr_encode(b, &h);
	if (net_send(tc->fd, b, sizeof(b), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(b))
		return;
	shutdown(tc->fd, SHUT_WR);
	for (int i = 0; i < 64; i++)
		if (net_recv(tc->fd, scratch, sizeof(scratch), MSG_DONTWAIT) <= 0)
			break;
}

/* Free everything of tc, and drop the plugin's reference on its connection
 * (lent events keep theirs): tc may be gone on return.  The loop lock and
 * sep->lock held (or no thread runs). */
void tcp_conn_destroy(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;
	cci__conn_t *conn = tc->conn;
	struct tcp_op *ops;
	int clean;

	if (ev_is_active(&tc->hs_w))
		ev_io_stop(sep->eng.loop, &tc->hs_w);
	if (tc->w_on)
		ev_io_stop(sep->eng.loop, &tc->w_w);
	tc->w_on = 0;
	cci__spin_lock(&tc->tx_lock);
	clean = cci__conn_is_open(&tc->base) && tc->ctl_off == 0 &&
	        !(tc->txq && tc->txq->prepared && tc->txq->frame_off > 0);
	ops = ops_detach(tc, CCI__CONN_CLOSED);
	cci__spin_unlock(&tc->tx_lock);
	if (clean)
		close_gracefully(tc);
	rx_end(tc);
	tcp_tx_due_forget(tc);
	ops_drop(sep, ops, CCI_SUCCESS, 0);
	if (atomic_exchange(&tc->fault, 0))
		atomic_fetch_sub(&sep->nfaults, 1);
	if (tc->fd >= 0) {
		close(tc->fd);
		/* A descriptor is free: accepting, if it waits for one, tries
		 * again at the next tick (tcp_hs.c). */
		cci__listen_fd_freed(&sep->lg);
	}
	tc->fd = -1;
	if (tc->gone_listed)
		gone_unlink(tc);
	tcp_retry_unlink(tc);
	CCI__DLIST_UNLINK(&tc->sep->conns, tc);
	cci__due_clear(&sep->due, &tc->base.due);
	cci__due_unreserve(&sep->due);
	tcp_rx_stage_drop(tc);
	free(tc->dial);
	tc->dial = NULL;
	tcp_core->conn_release(conn);
}

/* The loop lock and sep->lock held. */
void tcp_connect_fail(struct tcp_conn *tc, int status, const char *why)
{
	assert(cci__mutex_held(&tc->sep->lock));
	assert(cci__mutex_held(&tc->sep->eng.lock));
	TCP_LOG(CCI_LOG_CONN, "tcp: connecting to %s failed: %s", tc->peer, why);
	cci__conn_move(&tc->base, CCI__CONN_FAILED, tcp_core, tc->conn);
	tcp_core->post_connect(tc->sep->ep, tc->context, status, tc->conn);
	tcp_conn_destroy(tc);
}

int tcp_disconnect(cci__conn_t *conn)
{
	struct tcp_conn *tc = tcp_conn_of(conn);
	struct tcp_ep *sep = tc->sep;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	TCP_LOG(CCI_LOG_CONN, "tcp: disconnecting from %s", tc->peer);
	tcp_conn_destroy(tc);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	return CCI_SUCCESS;
}

void tcp_conn_timeouts_changed(cci__conn_t *conn)
{
	struct tcp_conn *tc = tcp_conn_of(conn);

	cci__conn_timeouts_changed(&tc->base, conn, &tc->sep->lock, &tc->sep->due);
}

/* When the oldest unfinished send or RMA was queued, UINT64_MAX if none
 * (answers to the peer's RMAs do not count: they are the peer's).  The
 * queues are in queueing order; the RMAs waiting for their DONE are
 * newest first. */
static uint64_t oldest_send_ns(void *pc)
{
	struct tcp_conn *tc = pc;
	struct tcp_op *op;
	uint64_t t;

	cci__spin_lock(&tc->tx_lock);
	op = tc->infl ? tc->infl : tc->txq;
	while (op && op->kind == TCP_OP_ANSWER)
		op = op->next;
	t = op ? op->t_ns : UINT64_MAX;
	for (op = tc->rma_wait; op; op = op->next)
		t = op->t_ns < t ? op->t_ns : t;
	cci__spin_unlock(&tc->tx_lock);
	return t;
}

/* A PING to a quiet peer: its PONG is a sign of life. */
static void ping(void *pc)
{
	tcp_tx_flush_now(pc, TCP_F_PING);
}

static void connect_expired(void *pc)
{
	tcp_connect_fail(pc, CCI_ETIMEDOUT, "connect timeout");
}

static void send_expired(void *pc)
{
	struct tcp_conn *tc = pc;

	TCP_LOG(CCI_LOG_CONN, "tcp: send to %s timed out", tc->peer);
	tcp_conn_break(tc, CCI_ETIMEDOUT, "send timeout");
}

static cci__conn_t *conn_of(void *pc)
{
	return ((struct tcp_conn *)pc)->conn;
}

static int ack_owed(const struct tcp_conn *tc)
{
	return atomic_load(&tc->rx_seq) != atomic_load(&tc->ack_sent);
}

/* An ack the receive path left owed (tcp_conn_ack_owed) goes out; one the
 * socket did not take is tried again at the next tick. */
static uint64_t visit(void *pc, uint64_t now)
{
	struct tcp_conn *tc = pc;

	if (!ack_owed(tc))
		return CCI__DUE_NEVER;
	tcp_tx_flush_now(tc, TCP_F_ACK);
	return ack_owed(tc) ? now + (uint64_t)(TCP_TICK_S * 1e9) : CCI__DUE_NEVER;
}

/* A failed connect stops its watcher, which needs the loop lock. */
static const struct cci__conn_tick_ops tick_ops[2] = {
	{ oldest_send_ns, ping, NULL, send_expired, conn_of, visit },
	{ oldest_send_ns, ping, connect_expired, send_expired, conn_of, visit },
};

/* The tick: only the connections due (sep->due), so 10,000 idle ones cost
 * it nothing.  sep->lock held; with_loop when the loop lock is too. */
void tcp_conn_timers(struct tcp_ep *sep, uint64_t now, int with_loop)
{
	assert(cci__mutex_held(&sep->lock));
	cci__conn_due_tick(&sep->due, tcp_core, &tick_ops[with_loop != 0], now);
}

/* The receive path left an ack owed (not sent at once, tcp_rx.c): the
 * next tick sends it unless a frame carries it first.  sep->lock held. */
void tcp_conn_ack_owed(struct tcp_conn *tc)
{
	assert(cci__mutex_held(&tc->sep->lock));
	cci__due_by(&tc->sep->due, &tc->base.due, cci__engine_now(&tc->sep->eng));
}
