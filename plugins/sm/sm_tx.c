/*
 * sm_tx.c - the transmit side: send, the pool of pending descriptors and
 * the queue of sends waiting for ring space.
 *
 * A reliable send completes as soon as its record sits in the peer's
 * ring.  When the ring is full the send is copied into a descriptor from
 * the endpoint's pool (send_buf_count of them, mss bytes each) and queued;
 * queues are flushed in order by progress() and by the control thread's
 * tick, and a new send never overtakes a queued one.  Every record an
 * endpoint sends is framed here, the copy-RMA ones too (sm_rma.c queues
 * them as descriptors).  No allocation and no system call happen on the
 * path of a message that fits, except the doorbell write to a peer that
 * sleeps on its OS handle.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sm.h"

/* ------------------------------------------------------------------------ */
/* The pool of pending descriptors                                           */
/* ------------------------------------------------------------------------ */

/* A descriptor is the struct and mss bytes after it. */
void sm_pool_init(struct sm_ep *sep, uint32_t count)
{
	cci__op_pool_init(&sep->pool, sizeof(struct sm_pend) + sep->mss, count, NULL, NULL, NULL);
}

/* A new send_buf_count (and the first, at endpoint creation): as many
 * descriptors are made now, so that a full ring costs no malloc. */
int sm_pool_resize(struct sm_ep *sep, uint32_t count)
{
	uint32_t made = cci__op_pool_made(&sep->pool);

	cci__op_pool_set_limit(&sep->pool, count);
	return made < count ? cci__op_pool_prealloc(&sep->pool, count - made, NULL) : CCI_SUCCESS;
}

/* A descriptor for the application's send or RMA (ctl 0: NULL past
 * send_buf_count) or for what must be sent whatever the count (ctl 1: a
 * copy-RMA reply, the completion of an RMA whose data already moved). */
struct sm_pend *sm_pend_get(struct sm_ep *sep, int ctl)
{
	struct sm_pend *p = (struct sm_pend *)cci__op_pool_get(&sep->pool, ctl);

	if (p) {
		memset(&p->next, 0, sizeof(*p) - offsetof(struct sm_pend, next));
		p->buf = (char *)(p + 1);
	}
	return p;
}

void sm_pend_put(struct sm_ep *sep, struct sm_pend *p)
{
	cci__op_pool_put(&sep->pool, &p->link);
}

/* ------------------------------------------------------------------------ */
/* Transmit                                                                  */
/* ------------------------------------------------------------------------ */

static void peer_bell_write(struct sm_conn *sc)
{
	static const uint64_t one = 1;

	if (atomic_load_explicit(&sc->peer_page->armed, memory_order_relaxed) &&
	    write(sc->peer_bell, &one, sizeof(one)) < 0 && errno != EAGAIN)
		SM_LOG(CCI_LOG_MSG, "sm: doorbell of pid %d: %s", (int)sc->peer_pid, strerror(errno));
}

/*
 * After publishing: the fence orders the stamps before the look at the
 * inbox bit (sm_inbox.h: the receiver takes the bit, fences, then reads
 * the ring), and before the look at armed (the receiver raises armed,
 * fences, then looks at the inbox and its hot rings: sm_arm).  A bit
 * marked with a locked operation is ordered before armed by a second
 * fence.  A peer without an OS handle never sleeps: no look at its flag.
 */
void sm_ring_bell(struct sm_conn *sc)
{
	int marked;

	sm_fence();
	marked = sm_inbox_mark(sc->peer_inbox, sc->tx.bit);
	if (!sc->peer_sleeps)
		return;
	if (marked)
		sm_fence();
	peer_bell_write(sc);
}

void sm_peer_wake(struct sm_conn *sc)
{
	if (!sc->peer_sleeps)
		return;
	sm_fence();
	peer_bell_write(sc);
}

/* Copy one record into the peer's ring; tx_lock held.  CCI_EAGAIN if full. */
int sm_tx_place(struct sm_conn *sc, uint16_t type, uint32_t aux, const struct iovec *iov,
                uint32_t iovcnt, uint32_t len)
{
	struct sm_rec *rec = sm_ring_reserve(&sc->tx, len);

	if (!rec)
		return CCI_EAGAIN;
	cci__iov_gather(sm_rec_payload(rec), iov, iovcnt);
	sm_ring_commit(&sc->tx, rec, type, len, aux);
	sm_ring_bell(sc);
	if (len > SM_WARM_MIN && !atomic_load_explicit(&sc->tx_warm, memory_order_relaxed)) {
		atomic_store_explicit(&sc->tx_warm, 1, memory_order_relaxed);
		if (sc->rx_bit != SM_NO_BIT)
			sm_inbox_mark(sc->sep->warm, sc->rx_bit);
	}
	return CCI_SUCCESS;
}

/* Queue p behind the others, stamped for the send timeout, and send what
 * the ring takes now; tx_lock held. */
void sm_txq_queue(struct sm_conn *sc, struct sm_pend *p)
{
	p->queued_ns = cci__now_ns();
	if (!sc->txq) {
		atomic_fetch_add_explicit(&sc->sep->txq_busy, 1, memory_order_relaxed);
		sm_tick_ask(sc); /* its send timeout, and a flush if nobody polls */
		if (sc->rx_bit != SM_NO_BIT)
			sm_inbox_mark(sc->sep->flush, sc->rx_bit); /* and progress flushes */
	}
	CCI__FIFO_PUSH(&sc->txq, &sc->txq_tail, p, next);
	/* Ask the consumer for a doorbell when it frees space, and have it
	 * look at the ring (a starved ring makes its progress say
	 * CCI_ENOBUFS). */
	atomic_store_explicit(&sc->tx.ctl->prod_waiting, 1, memory_order_relaxed);
	sm_fence();
	if (sc->peer_inbox)
		sm_inbox_mark(sc->peer_inbox, sc->tx.bit);
	sm_txq_flush_locked(sc);
}

static void txq_pop(struct sm_conn *sc)
{
	CCI__FIFO_SHIFT(&sc->txq, &sc->txq_tail, next);
	if (!sc->txq)
		atomic_fetch_sub_explicit(&sc->sep->txq_busy, 1, memory_order_relaxed);
}

/* Sends and RMA initiations complete through the core; replies do not. */
static int pend_is_user(const struct sm_pend *p)
{
	return p->kind != SM_PEND_REPLY;
}

/* One emulated-RMA record: its header, then dlen bytes at data; tx_lock
 * held.  CCI_EAGAIN if the ring is full. */
static int rma_rec_place(struct sm_conn *sc, const struct cci__emu_rma_rec *r, const void *data,
                         uint64_t dlen)
{
	uint32_t len = (uint32_t)(CCI__EMU_RMA_HDR_LEN + dlen);
	struct sm_rec *rec = sm_ring_reserve(&sc->tx, len);

	if (!rec)
		return CCI_EAGAIN;
	cci__emu_rma_encode(sm_rec_payload(rec), r);
	if (dlen)
		memcpy((char *)sm_rec_payload(rec) + CCI__EMU_RMA_HDR_LEN, data, dlen);
	sm_ring_commit(&sc->tx, rec, SM_REC_RMA, len, 0);
	return CCI_SUCCESS;
}

/* A copy RMA's records, or a reply's, as many as fit: CCI_EAGAIN if not
 * all (no room, or FENCE holds it); else CCI_SUCCESS for a reply, 1 for
 * an RMA, which then waits for its DONE. */
static int rma_place(struct sm_conn *sc, struct sm_pend *p)
{
	uint64_t frag = sc->conn->pub.max_send_size, dlen;
	struct cci__emu_rma_rec r;
	void *data;
	int rc = CCI_SUCCESS;

	if (!cci__emu_rma_start(&sc->rma, &p->rma))
		return CCI_EAGAIN;
	while (rc == CCI_SUCCESS && cci__emu_rma_next(&sc->rma, &p->rma, frag, &r, &data, &dlen)) {
		if (r.kind == CCI__EMU_RMA_WR_END) /* its completion message follows */
			rc = rma_rec_place(sc, &r, p->buf, p->len);
		else
			rc = rma_rec_place(sc, &r, data, dlen);
		if (rc == CCI_SUCCESS)
			cci__emu_rma_sent(&p->rma, &r, dlen);
	}
	sm_ring_bell(sc);
	if (rc != CCI_SUCCESS)
		return rc;
	return p->kind == SM_PEND_REPLY ? CCI_SUCCESS : 1;
}

/* Place the head of the queue.  SUCCESS: done; EAGAIN: no room; 1: kept elsewhere. */
static int pend_place(struct sm_conn *sc, struct sm_pend *p)
{
	struct iovec iov = { p->buf, p->len };

	switch (p->kind) {
	case SM_PEND_MSG:
		return sm_tx_place(sc, SM_REC_MSG, 0, &iov, p->len ? 1 : 0, p->len);
	case SM_PEND_DONE:
		if (p->len == 0)
			return CCI_SUCCESS;
		return sm_tx_place(sc, SM_REC_MSG, 0, &iov, 1, p->len);
	default:
		return rma_place(sc, p);
	}
}

/* Flush in order; tx_lock held. */
void sm_txq_flush_locked(struct sm_conn *sc)
{
	struct sm_pend *p;

	while ((p = sc->txq) != NULL && cci__conn_is_open(&sc->base)) {
		int rc = pend_place(sc, p);
		if (rc == CCI_EAGAIN)
			break;
		txq_pop(sc);
		if (rc == 1) { /* a copy RMA, now waiting for its DONE */
			p->next = sc->rma_wait;
			sc->rma_wait = p;
			continue;
		}
		if (pend_is_user(p))
			sm_core->send_done(sc->conn, p->context, p->flags, p->status);
		sm_pend_put(sc->sep, p);
	}
}

int sm_txq_flush(struct sm_conn *sc)
{
	int queued;

	if (pthread_mutex_trylock(&sc->tx_lock) != 0)
		return 1; /* the holder flushes, or the next flush will */
	sm_txq_flush_locked(sc);
	queued = sc->txq != NULL;
	pthread_mutex_unlock(&sc->tx_lock);
	return queued;
}

/* Fail the queue: completions (notify) or silently dropped.  After a send
 * timeout (status CCI_ETIMEDOUT) each queued send that waited past the
 * timeout for ring space completes with CCI_ETIMEDOUT, the younger ones
 * with CCI_ERR_DISCONNECTED (cci__ct_send_fail_status); with any other
 * status all get CCI_ERR_DISCONNECTED.  Then the copy RMAs waiting for
 * their DONE, with CCI_ERR_DISCONNECTED: they reached the peer's ring.  tx_lock
 * held (or sc is private). */
void sm_txq_fail(struct sm_conn *sc, int status, int notify)
{
	uint32_t timeout_us = sc->conn ? sc->conn->send_timeout_us : 0;
	uint64_t now = cci__now_ns();

	while (sc->txq) {
		struct sm_pend *p = sc->txq;
		txq_pop(sc);
		if (notify && pend_is_user(p) && sc->conn)
			sm_core->send_done(sc->conn, p->context, p->flags,
			                   status == CCI_ETIMEDOUT
			                           ? cci__ct_send_fail_status(timeout_us,
			                                                      p->queued_ns, now)
			                           : CCI_ERR_DISCONNECTED);
		sm_pend_put(sc->sep, p);
	}
	for (struct sm_pend *p; CCI__SLIST_POP(&sc->rma_wait, p, next);) {
		if (notify && sc->conn)
			sm_core->send_done(sc->conn, p->context, p->flags, CCI_ERR_DISCONNECTED);
		sm_pend_put(sc->sep, p);
	}
}

/* cma_finish (sm_rma.c) has the same shape; one function serving both
 * cost the 64 B message stream about 20% when measured. */
int sm_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
            void *context, int flags)
{
	struct sm_conn *sc = sm_conn_of(conn);
	struct sm_pend *p;

	pthread_mutex_lock(&sc->tx_lock);
	if (!cci__conn_is_open(&sc->base)) {
		pthread_mutex_unlock(&sc->tx_lock);
		return CCI_ERR_DISCONNECTED;
	}
	if (!sc->txq && sm_tx_place(sc, SM_REC_MSG, 0, iov, iovcnt, len) == CCI_SUCCESS) {
		pthread_mutex_unlock(&sc->tx_lock);
		sm_core->send_done(conn, context, flags, CCI_SUCCESS);
		return CCI_SUCCESS;
	}
	p = sm_pend_get(sc->sep, 0);
	if (!p) {
		pthread_mutex_unlock(&sc->tx_lock);
		return CCI_ENOBUFS;
	}
	p->kind = SM_PEND_MSG;
	p->context = context;
	p->flags = flags;
	p->len = len;
	cci__iov_gather(p->buf, iov, iovcnt);
	sm_txq_queue(sc, p); /* space may have appeared since the attempt */
	pthread_mutex_unlock(&sc->tx_lock);
	return CCI_SUCCESS;
}

/* The connection whose receive ring has bit in our inbox, if open. */
static struct sm_conn *conn_at(struct sm_ep *sep, uint32_t bit)
{
	return bit < sep->rx_cap ? sep->rx_bits[bit] : NULL;
}

/* A word of connections with queued sends: flush each, and keep marked
 * those whose queue still waits for space. */
static void flush_word(void *arg, uint32_t w, uint64_t taken)
{
	struct sm_ep *sep = arg;

	for (; taken; taken &= taken - 1) {
		uint32_t bit = w * 64u + (uint32_t)__builtin_ctzll(taken);
		struct sm_conn *sc = conn_at(sep, bit);
		if (sc && sm_txq_flush(sc))
			sm_inbox_mark(sep->flush, bit);
	}
}

void sm_tx_flush_marked(struct sm_ep *sep)
{
	sm_inbox_scan(sep->flush, NULL, flush_word, sep);
}

static void warm_word(void *arg, uint32_t w, uint64_t taken)
{
	struct sm_ep *sep = arg;

	for (; taken; taken &= taken - 1) {
		struct sm_conn *sc = conn_at(sep, w * 64u + (uint32_t)__builtin_ctzll(taken));
		if (!sc || !atomic_load_explicit(&sc->tx_warm, memory_order_relaxed) ||
		    pthread_mutex_trylock(&sc->tx_lock) != 0)
			continue; /* a sender holds it: it is not idle */
		atomic_store_explicit(&sc->tx_warm, 0, memory_order_relaxed);
		if (cci__conn_is_open(&sc->base) && !sc->txq)
			sm_ring_warm(&sc->tx);
		pthread_mutex_unlock(&sc->tx_lock);
	}
}

void sm_tx_warm_marked(struct sm_ep *sep)
{
	if (atomic_load_explicit(&sep->warm->top, memory_order_relaxed))
		sm_inbox_scan(sep->warm, NULL, warm_word, sep);
}
