/*
 * sm_conn.c - a connection's life: its receive ring and the peer's
 * segments, the state, the control messages that follow the handshake
 * (PING, PONG, DISCONNECT), breaking on peer death or timeout, and
 * disconnect.
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

/* Our receive ring: a sealed memfd the peer maps to produce into. */
static int rx_create(struct sm_conn *sc, uint32_t count, uint32_t mss)
{
	uint64_t size = sm_ring_size_for(count, mss);
	size_t bytes = (size_t)sm_ring_seg_bytes(size);
	void *p;

	if (size == 0)
		return CCI_ERANGE;
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
	sm_ring_attach(&sc->rx, p, bytes);
	return CCI_SUCCESS;

err_errno:
	SM_ERR("sm: cannot create a receive ring of %llu bytes: %s", (unsigned long long)bytes,
	       strerror(errno));
	return cci__errno_status(errno);
}

/* Map a peer's memfd; it must carry the seals we rely on. */
static void *map_peer(int fd, int need_seals, int prot, size_t min, size_t *len)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	void *p;

	if (seals < 0 || (seals & need_seals) != need_seals || fstat(fd, &st) != 0 ||
	    (uint64_t)st.st_size < min || (uint64_t)st.st_size > (SM_RING_MAX_SIZE << 1))
		return NULL;
	p = mmap(NULL, (size_t)st.st_size, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	*len = (size_t)st.st_size;
	return p;
}

/* Map what the peer's hello handed us; fds are consumed either way. */
int sm_ep_attach_peer(struct sm_conn *sc, const struct sm_ctl_hello *h, int *fds)
{
	const struct sm_ep_page *pg;
	int rc = CCI_EINVAL;

	sc->tx_seg = map_peer(fds[0], F_SEAL_SHRINK, PROT_READ | PROT_WRITE, SM_RING_CTL_BYTES,
	                      &sc->tx_seg_len);
	if (!sc->tx_seg || sm_ring_attach(&sc->tx, sc->tx_seg, sc->tx_seg_len) != 0 ||
	    sc->tx.size != h->ring_size)
		goto out;
	pg = map_peer(fds[2], F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE, PROT_READ,
	              sizeof(struct sm_ep_page), &sc->peer_page_len);
	sc->peer_page = pg;
	if (!pg || pg->magic != SM_PAGE_MAGIC || pg->version != SM_PAGE_VERSION ||
	    pg->nslots != SM_REG_SLOTS)
		goto out;
	/* Our writes to the doorbell must never block. */
	if (fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0)
		goto out;
	sc->peer_bell = fds[1];
	fds[1] = -1;
	sc->peer_sleeps = (pg->flags & SM_PAGE_SLEEPS) != 0;
	rc = CCI_SUCCESS;
out:
	for (int i = 0; i < SM_HELLO_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return rc;
}

/* A new connection with its receive ring; NULL on failure (logged). */
struct sm_conn *sm_conn_new(struct sm_ep *sep, cci_conn_attribute_t attr, void *context)
{
	struct sm_conn *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return NULL;
	sc->sep = sep;
	sc->sock = sc->peer_bell = sc->rx_fd = -1;
	sc->rma_copy = sep->dev->rma_copy;
	pthread_mutex_init(&sc->tx_lock, NULL);
	if (rx_create(sc, sep->ep->recv_buf_count, sep->mss) != CCI_SUCCESS)
		goto err_free;
	sc->conn = sm_core->conn_alloc(sep->ep, attr, context);
	if (!sc->conn)
		goto err_free;
	*(struct sm_conn **)sc->conn->priv = sc;
	return sc;

err_free:
	sm_conn_destroy(sc);
	return NULL;
}

/* Drop the queued work without events and unmap what the peer handed us. */
static void conn_drop_tx(struct sm_conn *sc)
{
	sm_txq_fail(sc, CCI_ERR_DISCONNECTED, 0);
	if (sc->tx_seg)
		munmap(sc->tx_seg, sc->tx_seg_len);
	if (sc->peer_page)
		munmap((void *)sc->peer_page, sc->peer_page_len);
	if (sc->peer_bell >= 0)
		close(sc->peer_bell);
	sc->tx_seg = NULL;
	sc->peer_page = NULL;
	sc->peer_bell = -1;
}

/* Free everything of sc, without events; it is on no list, its watcher stopped. */
void sm_conn_destroy(struct sm_conn *sc)
{
	if (sc->sock >= 0)
		close(sc->sock);
	conn_drop_tx(sc);
	if (sc->rx_seg)
		munmap(sc->rx_seg, sc->rx_seg_len);
	if (sc->rx_fd >= 0)
		close(sc->rx_fd);
	if (sc->conn)
		sm_core->conn_release(sc->conn);
	pthread_mutex_destroy(&sc->tx_lock);
	free(sc);
}

/* Stop watching sc's control socket and close it; the loop lock and
 * sep->lock held. */
static void conn_close_sock(struct sm_conn *sc)
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
	if (!cci__conn_is_open(&sc->base))
		return;
	SM_LOG(CCI_LOG_CONN, "sm: connection %p to pid %d broken (status %d)", (void *)sc,
	       (int)sc->peer_pid, status);
	if (sc->sock >= 0 && status != CCI_ERR_DISCONNECTED)
		sm_ctl_send(sc->sock, SM_CTL_DISCONNECT, NULL, NULL, 0);
	conn_close_sock(sc);
	pthread_mutex_lock(&sc->tx_lock);
	cci__conn_move(&sc->base, CCI__CONN_BROKEN, sm_core, sc->conn);
	sm_txq_fail(sc, status, 1);
	pthread_mutex_unlock(&sc->tx_lock);
}

/* Client side: the connect failed; report and free.  sep->lock held if
 * sc is listed. */
void sm_connect_failed(struct sm_conn *sc, int status, int listed)
{
	struct sm_ep *sep = sc->sep;

	sm_core->post_connect(sep->ep, sc->conn->pub.context, status, NULL);
	if (listed) {
		CCI__SLIST_UNLINK(&sep->conns, sc, next);
		conn_close_sock(sc);
	}
	sm_conn_destroy(sc);
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

	if (h->mss < conn->pub.max_send_size)
		conn->pub.max_send_size = h->mss;
	close(sc->rx_fd);
	sc->rx_fd = -1;
	cci__ct_arm(&sc->base.timers, conn->keepalive_us, cci__now_ns());
	pthread_mutex_lock(&sc->tx_lock);
	cci__conn_move(&sc->base, CCI__CONN_OPEN, sm_core, sc->conn);
	pthread_mutex_unlock(&sc->tx_lock);
	cci__spin_lock(&sep->rx_lock);
	rc = cci__grow(&sep->rx_set, sep->rx_n, &sep->rx_cap, 8, sizeof(*sep->rx_set));
	if (rc == CCI_SUCCESS)
		sep->rx_set[sep->rx_n++] = sc;
	/* conn->pub.context: connect's or accept's; a failure names no conn. */
	if (type == CCI_EVENT_CONNECT)
		sm_core->post_connect(sep->ep, conn->pub.context, rc, conn);
	else
		sm_core->post_accept(sep->ep, conn->pub.context, rc, conn);
	cci__spin_unlock(&sep->rx_lock);
	if (rc != CCI_SUCCESS)
		SM_ERR("sm: out of memory: connection to pid %d will not receive", (int)sc->peer_pid);
}

/* The control socket of an open connection is readable or hung up: PING,
 * PONG or DISCONNECT from the peer.  sep->lock held. */
void sm_conn_on_ctl(struct sm_conn *sc)
{
	struct sm_ctl_hello raw, h;
	int fds[SM_HELLO_FDS], nfds, n;
	const char *why;

	while (sc->sock >= 0 && (n = sm_ctl_recv(sc->sock, &raw, sizeof(raw), fds, &nfds)) != -1) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (n <= 0) {
			sm_conn_break(sc, CCI_ERR_DISCONNECTED);
			return;
		}
		/* Garbage, or a handshake message once open: the peer cannot
		 * be trusted with the rings any more. */
		if (sm_ctl_decode(&raw, (size_t)n, nfds, &h, &why) == CCI_SUCCESS &&
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
	int last;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	if (sc->sock >= 0 && cci__conn_is_open(&sc->base))
		sm_ctl_send(sc->sock, SM_CTL_DISCONNECT, NULL, NULL, 0);
	conn_close_sock(sc);
	CCI__SLIST_UNLINK(&sep->conns, sc, next);
	cci__spin_lock(&sep->rx_lock);
	CCI__SET_REMOVE(sep->rx_set, sep->rx_n, sc);
	pthread_mutex_lock(&sc->tx_lock);
	cci__conn_move(&sc->base, CCI__CONN_CLOSED, sm_core, sc->conn);
	conn_drop_tx(sc);
	pthread_mutex_unlock(&sc->tx_lock);
	sc->conn = NULL;
	sc->rx_closed = 1;
	/* Lent RECV events still point into the receive ring: keep it mapped
	 * until the last one comes back (sm_recv_returned frees it then). */
	last = (sc->lent == 0);
	if (!last) {
		sc->next = sep->zombies;
		sep->zombies = sc;
	}
	cci__spin_unlock(&sep->rx_lock);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	SM_LOG(CCI_LOG_CONN, "sm: disconnected from pid %d", (int)sc->peer_pid);
	sm_core->conn_release(conn);
	if (last)
		sm_conn_destroy(sc);
	return CCI_SUCCESS;
}

void sm_conn_timeouts_changed(cci__conn_t *conn)
{
	struct sm_conn *sc = sm_conn_of(conn);

	cci__conn_keepalive_changed(&sc->base, conn, &sc->sep->lock);
}
