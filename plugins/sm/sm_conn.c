/*
 * sm_conn.c - a connection's life: its receive ring and the peer's
 * segments, the state, the watcher of its control socket and the control
 * messages that follow the handshake (PING, PONG, DISCONNECT), breaking
 * on peer death or timeout, and disconnect.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sm.h"

/* A free bit of the inbox for a new receive ring (freed ones first). */
static int bit_get(struct sm_ep *sep, uint32_t *bit)
{
	int rc = CCI_SUCCESS;

	pthread_mutex_lock(&sep->bit_lock);
	if (sep->bit_nfree)
		*bit = sep->bit_free[--sep->bit_nfree];
	else if (sep->bit_next < SM_INBOX_BITS)
		*bit = sep->bit_next++;
	else
		rc = CCI_ENOMEM;
	pthread_mutex_unlock(&sep->bit_lock);
	return rc;
}

/* A bit whose ring is gone.  Without memory for the stack it is lost
 * (one ring fewer), which only happens out of memory. */
static void bit_put(struct sm_ep *sep, uint32_t bit)
{
	pthread_mutex_lock(&sep->bit_lock);
	if (cci__grow(&sep->bit_free, sep->bit_nfree, &sep->bit_free_cap, 64,
	              sizeof(*sep->bit_free)) == CCI_SUCCESS)
		sep->bit_free[sep->bit_nfree++] = bit;
	pthread_mutex_unlock(&sep->bit_lock);
}

void sm_bits_fini(struct sm_ep *sep)
{
	free(sep->bit_free);
	sep->bit_free = NULL;
	pthread_mutex_destroy(&sep->bit_lock);
}

/* Our receive ring: a sealed memfd the peer maps to produce into, with
 * its bit in our inbox in its header.  The memfd is kept only until it
 * went in our hello (the message in flight holds the file); the mapping
 * stays. */
int sm_conn_rx_create(struct sm_conn *sc)
{
	uint32_t count = sc->sep->ep->recv_buf_count, mss = sc->sep->mss;
	uint64_t size = sm_ring_size_for(count, mss);
	size_t bytes = (size_t)sm_ring_seg_bytes(size);
	void *p;
	int rc;

	if (size == 0) {
		errno = ERANGE;
		return CCI_ERANGE;
	}
	if (sc->rx_bit == SM_NO_BIT && bit_get(sc->sep, &sc->rx_bit) != CCI_SUCCESS) {
		errno = ENOSPC; /* SM_INBOX_BITS rings: not a shortage that passes */
		return CCI_ENOMEM;
	}
	/* Every failure below is this process short of descriptors, memory
	 * or mappings: CCI_ENOMEM, whatever errno (an mmap past
	 * RLIMIT_MEMLOCK under mlockall fails with EAGAIN, which must not
	 * read as "try again": a dial would wait for ever). */
	sc->rx_fd = memfd_create("cci-sm-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (sc->rx_fd < 0 || ftruncate(sc->rx_fd, (off_t)bytes) != 0 ||
	    fcntl(sc->rx_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
		goto err_errno;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sc->rx_fd, 0);
	if (p == MAP_FAILED)
		goto err_errno;
	sc->rx_seg = p;
	sc->rx_seg_len = bytes;
	sm_ring_format(p, size, sm_ring_window_for(size, mss), count);
	sm_ring_set_bit(p, sc->rx_bit);
	sm_ring_attach(&sc->rx, p, bytes);
	return CCI_SUCCESS;

err_errno:
	/* Logged by the caller, which knows the peer; errno says why. */
	rc = errno;
	if (sc->rx_fd >= 0)
		close(sc->rx_fd);
	sc->rx_fd = -1;
	errno = rc;
	return CCI_ENOMEM;
}

/* Unmap and close a receive ring that no peer has been handed. */
void sm_conn_rx_drop(struct sm_conn *sc)
{
	if (sc->rx_seg)
		munmap(sc->rx_seg, sc->rx_seg_len);
	if (sc->rx_fd >= 0)
		close(sc->rx_fd);
	sc->rx_seg = NULL;
	sc->rx_fd = -1;
	memset(&sc->rx, 0, sizeof(sc->rx));
	if (sc->rx_bit != SM_NO_BIT)
		bit_put(sc->sep, sc->rx_bit);
	sc->rx_bit = SM_NO_BIT;
}

/* Take what the peer's hello handed over (sm_hello_map) for sc. */
void sm_conn_attach(struct sm_conn *sc, struct sm_hello_maps *m)
{
	sc->tx_seg = m->seg;
	sc->tx_seg_len = m->seg_len;
	sc->tx = m->ring; /* attached and checked by sm_hello_map */
	sc->peer = m->peer;
	sc->peer_page = m->peer->page;
	sc->peer_inbox = m->peer->inbox;
	sc->peer_bell = m->peer->bell;
	sc->peer_sleeps = m->peer->sleeps;
	memset(m, 0, sizeof(*m));
}

struct sm_conn *sm_conn_new(struct sm_ep *sep, cci_conn_attribute_t attr, void *context)
{
	struct sm_conn *sc;

	assert(cci__mutex_held(&sep->lock));
	/* Its place in the due heap now, so that the tick never allocates. */
	if (cci__due_reserve(&sep->due) != CCI_SUCCESS)
		return NULL;
	sc = calloc(1, sizeof(*sc));
	if (!sc) {
		cci__due_unreserve(&sep->due);
		return NULL;
	}
	sc->sep = sep;
	sc->sock = sc->peer_bell = sc->rx_fd = -1;
	sc->rx_bit = SM_NO_BIT;
	sc->rx_hot = -1;
	sc->rma_copy = sep->dev->rma_copy;
	cci__conn_life_init(&sc->life);
	cci__emu_rma_conn_init(&sc->rma, sm_core, sep->ep, NULL);
	pthread_mutex_init(&sc->tx_lock, NULL);
	sc->conn = sm_core->conn_alloc(sep->ep, attr, context);
	if (!sc->conn) {
		sm_conn_destroy_locked(sc);
		return NULL;
	}
	*(struct sm_conn **)sc->conn->priv = sc;
	return sc;
}

/* Take what the peer handed us off sc into *m, for sm_hello_unmap once no
 * lock is held; queued work is dropped without events.  tx_lock held and,
 * while sc is in rx_bits, rx_lock too (a receiver that frees space rings
 * the peer's doorbell), or sc is private. */
static void conn_detach_tx(struct sm_conn *sc, struct sm_hello_maps *m)
{
	sm_txq_fail(sc, CCI_ERR_DISCONNECTED, 0);
	m->seg = sc->tx_seg;
	m->seg_len = sc->tx_seg_len;
	m->peer = sc->peer;
	sc->tx_seg = NULL;
	sc->peer = NULL;
	sc->peer_page = NULL;
	sc->peer_inbox = NULL;
	sc->peer_bell = -1;
	sc->peer_sleeps = 0;
}

/* sc's slot in the due heap goes back with its memory (a zombie keeps it
 * until then, out of the heap); sep->lock held. */
static void conn_due_release(struct sm_conn *sc)
{
	cci__due_clear(&sc->sep->due, &sc->base.due);
	cci__due_unreserve(&sc->sep->due);
}

static void conn_free(struct sm_conn *sc)
{
	struct sm_hello_maps m;

	if (sc->sock >= 0)
		close(sc->sock);
	conn_detach_tx(sc, &m);
	sm_hello_unmap(sc->sep, &m);
	sm_conn_rx_drop(sc);
	free(sc->dial);
	if (sc->conn)
		sm_core->conn_release(sc->conn);
	pthread_mutex_destroy(&sc->tx_lock);
	free(sc);
}

void sm_conn_destroy_locked(struct sm_conn *sc)
{
	assert(cci__mutex_held(&sc->sep->lock));
	conn_due_release(sc);
	conn_free(sc);
}

/* The rest is freed outside the lock: the control thread's tick waits on it. */
void sm_conn_destroy(struct sm_conn *sc)
{
	struct sm_ep *sep = sc->sep;

	pthread_mutex_lock(&sep->lock);
	conn_due_release(sc);
	pthread_mutex_unlock(&sep->lock);
	conn_free(sc);
}

void sm_conn_found(void *arg, uint32_t w, uint64_t taken)
{
	struct sm_ep *sep = arg;

	for (; taken; taken &= taken - 1) {
		uint32_t bit = w * 64u + (uint32_t)__builtin_ctzll(taken);
		struct sm_conn *sc = bit < sep->rx_cap ? sep->rx_bits[bit] : NULL;
		/* No ring: a peer's stale or stray bit. */
		if (sc && !sc->rx_dead && sc->rx_hot < 0)
			sm_pend_push(sep, sc);
	}
}

void sm_conn_hot_drop(struct sm_ep *sep, uint32_t i)
{
	struct sm_conn *sc = sep->hot[i];
	uint32_t w = sc->rx.bit >> 6, last = --sep->nhot;
	uint64_t taken;

	assert(cci__spin_held(&sep->rx_lock));
	sep->keep[w] &= ~(1ull << (sc->rx.bit & 63u));
	sep->hot[i] = sep->hot[last];
	sep->hot_last[i] = sep->hot_last[last];
	sep->hot[i]->rx_hot = (int)i;
	sep->hot[last] = NULL;
	sc->rx_hot = -1;
	/* Its bit, kept set, is not flagged in the summary: take it now with
	 * whatever else the word holds, or the word would stay non-zero and
	 * hide later bits from the scan. */
	taken = sm_inbox_take_word(sep->inbox, w, sep->keep[w]);
	if (taken)
		sm_conn_found(sep, w, taken);
	if (sc->rx.bit < sep->rx_cap && sep->rx_bits[sc->rx.bit] == sc && !sc->rx_dead)
		sm_pend_push(sep, sc); /* records may be left (the batch limit) */
}

/* Take sc out of what progress reads: its place in rx_bits, the hot
 * rings, the pending list; rx_lock (and sep->lock) held. */
static void rx_set_remove(struct sm_ep *sep, struct sm_conn *sc)
{
	uint32_t bit = sc->rx.bit;

	assert(cci__spin_held(&sep->rx_lock));
	if (!sc->rx.ctl || bit >= sep->rx_cap || sep->rx_bits[bit] != sc)
		return; /* never opened, or its open found no memory */
	sep->rx_bits[bit] = NULL;
	if (sc->rx_hot >= 0) {
		sm_conn_hot_drop(sep, (uint32_t)sc->rx_hot);
		sm_fence(); /* before the others are read */
	}
	sm_pend_unlink(sep, sc);
}

/* Put sc in rx_bits, growing it; rx_lock (and sep->lock) held. */
static int rx_set_add(struct sm_ep *sep, struct sm_conn *sc)
{
	uint32_t bit = sc->rx.bit;

	while (bit >= sep->rx_cap)
		if (cci__grow(&sep->rx_bits, sep->rx_cap, &sep->rx_cap, 64, sizeof(*sep->rx_bits)) !=
		    CCI_SUCCESS)
			return CCI_ENOMEM;
	sep->rx_bits[bit] = sc;
	/* Read at the next poll: the peer may have sent, and marked the bit,
	 * before it was ours to find (the scan ignores a bit without a ring). */
	sm_pend_push(sep, sc);
	return CCI_SUCCESS;
}

void sm_timed_add(struct sm_conn *sc)
{
	if (sc->timed)
		return;
	CCI__DLIST_PUSH(&sc->sep->timed, &sc->tl);
	sc->timed = 1;
}

void sm_timed_remove(struct sm_conn *sc)
{
	if (!sc->timed)
		return;
	CCI__DLIST_UNLINK(&sc->sep->timed, &sc->tl);
	sc->timed = 0;
}

void sm_timed_take_asked(struct sm_ep *sep)
{
	struct sm_conn *sc = atomic_exchange_explicit(&sep->asked, NULL, memory_order_acquire);

	while (sc) {
		struct sm_conn *next = sc->ask_next;
		/* Cleared first: a later ask pushes it again. */
		atomic_store_explicit(&sc->tick_asked, 0, memory_order_release);
		sm_timed_add(sc);
		sc = next;
	}
}

void sm_conn_unwatch(struct sm_conn *sc)
{
	if (sc->sock < 0)
		return;
	ev_io_stop(sc->sep->eng.loop, &sc->ctl_w);
	close(sc->sock);
	sc->sock = -1;
}

/*
 * The connection cannot carry data any more (peer gone, timed out, told us
 * it disconnected): queued work completes (sm_txq_fail: with status
 * CCI_ETIMEDOUT, the sends that waited past the send timeout get it, the
 * others CCI_ERR_DISCONNECTED), later sends fail.  sep->lock held.
 */
void sm_conn_break(struct sm_conn *sc, int status)
{
	struct sm_ep *sep = sc->sep;
	struct sm_hello_maps m;

	assert(cci__mutex_held(&sep->lock));
	if (!cci__conn_is_open(&sc->base))
		return;
	SM_LOG(CCI_LOG_CONN, "sm: connection %p to pid %d broken (status %d)", (void *)sc,
	       (int)sc->peer_pid, status);
	if (sc->sock >= 0 && status != CCI_ERR_DISCONNECTED)
		sm_ctl_send(sc->sock, SM_CTL_DISCONNECT, NULL, NULL, 0);
	sm_conn_unwatch(sc);
	pthread_mutex_lock(&sc->tx_lock);
	cci__conn_move(&sc->base, CCI__CONN_BROKEN, sm_core, sc->conn);
	sm_txq_fail(sc, status, 1);
	pthread_mutex_unlock(&sc->tx_lock);
	/* Nothing goes to the peer any more: its ring and endpoint go now,
	 * not when the application disconnects. */
	sm_rx_lock(sep);
	pthread_mutex_lock(&sc->tx_lock);
	conn_detach_tx(sc, &m);
	pthread_mutex_unlock(&sc->tx_lock);
	cci__spin_unlock(&sep->rx_lock);
	sm_hello_unmap(sep, &m);
	/* Our receive ring goes too, once nothing needs it (the tick's
	 * visits: sm_conn_rx_release). */
	sm_timed_add(sc);
}

/*
 * A broken connection keeps nothing but its object until the application
 * disconnects, which CCI cannot make it do: a server whose clients come
 * and go maps no ring for those that left.  The receive ring stays only
 * while records the peer published before the break wait in it (they are
 * still delivered) or RECV events lent point into it.  Returns 1 while it
 * must stay (the tick asks again), 0 once it is gone.  sep->lock held.
 */
int sm_conn_rx_release(struct sm_conn *sc)
{
	struct sm_ep *sep = sc->sep;
	int bad = 0, wait;

	assert(cci__mutex_held(&sep->lock));
	if (!sc->rx_seg)
		return 0;
	sm_rx_lock(sep);
	wait = cci__conn_holds(&sc->life) > 1 ||
	       (!sc->rx_dead && sm_ring_peek(&sc->rx, &bad) != NULL);
	if (!wait) {
		rx_set_remove(sep, sc);
		sm_conn_rx_drop(sc);
	}
	cci__spin_unlock(&sep->rx_lock);
	return wait;
}

/*
 * Both sides, once the peer's hello is mapped: open sc, start scanning its
 * receive ring, and post the event that announces the connection (type
 * CONNECT or ACCEPT) under the same rx_lock hold: a message the peer sent
 * at once is then seen by the arm() that follows the event, yet its RECV
 * event can never be posted ahead of the announcement.
 */
void sm_conn_open(struct sm_conn *sc, const struct sm_ctl_hello *h, cci_event_type_t type)
{
	struct sm_ep *sep = sc->sep;
	cci__conn_t *conn = sc->conn;
	int rc;

	if (h->core.mss < conn->pub.max_send_size)
		conn->pub.max_send_size = h->core.mss;
	free(sc->dial);
	sc->dial = NULL;
	cci__ct_arm(&sc->base.timers, conn->keepalive_us, cci__now_ns());
	pthread_mutex_lock(&sc->tx_lock);
	cci__conn_move(&sc->base, CCI__CONN_OPEN, sm_core, sc->conn);
	pthread_mutex_unlock(&sc->tx_lock);
	sm_due_note(sc); /* open: its keepalive and send timeout run from now */
	sm_rx_lock(sep);
	rc = rx_set_add(sep, sc);
	/* conn->pub.context: connect's or accept's; a failure names no conn. */
	if (type == CCI_EVENT_CONNECT)
		sm_core->post_connect(sep->ep, conn->pub.context, rc, conn);
	else
		sm_core->post_accept(sep->ep, conn->pub.context, rc, conn);
	cci__spin_unlock(&sep->rx_lock);
	if (rc != CCI_SUCCESS)
		SM_ERR("sm: out of memory: connection to pid %d will not receive", (int)sc->peer_pid);
}

static void conn_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sm_conn *sc = w->data;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sc->sep->lock);
	sm_conn_on_ctl(sc);
	pthread_mutex_unlock(&sc->sep->lock);
}

void sm_conn_watch(struct sm_conn *sc)
{
	if (ev_is_active(&sc->ctl_w)) /* the client's, while it waited for the answer */
		ev_io_stop(sc->sep->eng.loop, &sc->ctl_w);
	ev_io_init(&sc->ctl_w, conn_cb, sc->sock, EV_READ);
	sc->ctl_w.data = sc;
	ev_io_start(sc->sep->eng.loop, &sc->ctl_w);
	cci__engine_tick(&sc->sep->eng, 1);
}

/* The control socket of an open connection is readable or hung up: PING,
 * PONG or DISCONNECT from the peer.  sep->lock held. */
void sm_conn_on_ctl(struct sm_conn *sc)
{
	struct sm_ctl_hello raw, h;
	int fds[SM_HELLO_FDS], nfds, n;
	const char *why;

	assert(cci__mutex_held(&sc->sep->lock));
	while (sc->sock >= 0 && (n = sm_ctl_recv(sc->sock, &raw, sizeof(raw), fds, &nfds)) != -1) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (n == 0 || n == -2) {
			sm_conn_break(sc, CCI_ERR_DISCONNECTED);
			return;
		}
		/* Garbage, or a handshake message once open: the peer cannot
		 * be trusted with the rings any more.  No message carries
		 * descriptors once open, so lost ones are the peer's fault. */
		if (n < 0)
			why = "descriptors on an open connection";
		else if (sm_ctl_decode(&raw, (size_t)n, nfds, &h, &why) == CCI_SUCCESS &&
		         h.hdr.type != SM_CTL_PING && h.hdr.type != SM_CTL_PONG &&
		         h.hdr.type != SM_CTL_DISCONNECT)
			why = "handshake message on an open connection";
		if (why)
			SM_WARN("sm: malformed control message from pid %d (%s); connection closed",
			        (int)sc->peer_pid, why);
		if (why || h.hdr.type == SM_CTL_DISCONNECT) {
			sm_conn_break(sc, CCI_ERR_DISCONNECTED);
			return;
		}
		cci__ct_heard(&sc->base.timers, cci__now_ns());
		if (h.hdr.type == SM_CTL_PING)
			sm_ctl_send(sc->sock, SM_CTL_PONG, NULL, NULL, 0);
	}
}

int sm_disconnect(cci__conn_t *conn)
{
	struct sm_conn *sc = sm_conn_of(conn);
	struct sm_ep *sep = sc->sep;
	struct sm_hello_maps m;
	int last;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	if (sc->sock >= 0 && cci__conn_is_open(&sc->base))
		sm_ctl_send(sc->sock, SM_CTL_DISCONNECT, NULL, NULL, 0);
	sm_conn_unwatch(sc);
	CCI__DLIST_UNLINK(&sep->conns, sc);
	sm_rx_lock(sep);
	rx_set_remove(sep, sc);
	pthread_mutex_lock(&sc->tx_lock);
	cci__conn_move(&sc->base, CCI__CONN_CLOSED, sm_core, sc->conn);
	conn_detach_tx(sc, &m);
	pthread_mutex_unlock(&sc->tx_lock);
	sc->conn = NULL;
	sc->rx_closed = 1;
	/* Closed, out of rx_bits: no thread asks for it any more, and no
	 * timer of it runs. */
	sm_timed_take_asked(sep);
	sm_timed_remove(sc);
	cci__due_clear(&sep->due, &sc->base.due);
	/* Lent RECV events still point into the receive ring: keep it mapped
	 * until the last one comes back (sm_recv_returned frees it then).
	 * Their drops take rx_lock too, so none is the last before this. */
	last = cci__conn_drop(&sc->life);
	if (!last)
		CCI__DLIST_PUSH(&sep->zombies, sc);
	cci__spin_unlock(&sep->rx_lock);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	sm_hello_unmap(sep, &m);
	SM_LOG(CCI_LOG_CONN, "sm: disconnected from pid %d", (int)sc->peer_pid);
	sm_core->conn_release(conn);
	if (last)
		sm_conn_destroy(sc);
	return CCI_SUCCESS;
}

void sm_conn_timeouts_changed(cci__conn_t *conn)
{
	struct sm_conn *sc = sm_conn_of(conn);

	cci__conn_timeouts_changed(&sc->base, conn, &sc->sep->lock, &sc->sep->due);
}
