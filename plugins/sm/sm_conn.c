/*
 * sm_conn.c - connection set-up and teardown: the handshake over the
 * endpoint's UNIX socket, the control messages that follow on the same
 * socket, the shared segments each side maps, disconnect.
 *
 * Each side creates the ring it receives on (sized by its own
 * recv_buf_count and mss) and hands its memfd to the peer, which maps it
 * to produce into.  Splitting the rings this way lets each receiver size
 * its own buffer, which a single segment created by the client could not.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sm.h"

#define HELLO_HEAD offsetof(struct sm_ctl_hello, data)

/* The pid behind a connected UNIX socket; it must run as our user. */
int sm_peer_pid(int sock, pid_t *pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != geteuid())
		return CCI_EADDRNOTAVAIL;
	*pid = cr.pid;
	return CCI_SUCCESS;
}

int sm_ctl_send(int sock, uint16_t type, const void *body, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SM_HELLO_FDS)];
		struct cmsghdr align;
	} cm;
	struct sm_ctl_hdr h = { SM_CTL_MAGIC, SM_CTL_VERSION, type };
	struct sm_ctl_hello hello;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (body) {
		memcpy(&hello, body, len);
		hello.hdr = h;
		iov = (struct iovec){ &hello, len };
	} else {
		iov = (struct iovec){ &h, sizeof(h) };
	}
	if (nfds > 0) {
		struct cmsghdr *c;
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	if (sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		return cci__errno_status(errno);
	return CCI_SUCCESS;
}

/* Collect the descriptors of one message; closes extras. */
static void ctl_take_fds(struct msghdr *mh, int *fds, int *nfds, int max)
{
	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		int n, *p;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		p = (int *)CMSG_DATA(c);
		for (int i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, p + i, sizeof(fd));
			if (*nfds < max)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
}

/* One control message: > 0 bytes, 0 at EOF, -1 when none is waiting,
 * -2 on an error. */
int sm_ctl_recv(int sock, void *buf, size_t len, int *fds, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (SM_HELLO_FDS + 2))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
	                     .msg_controllen = sizeof(cm.buf) };
	ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	*nfds = 0;
	if (n < 0)
		return (errno == EAGAIN || errno == EINTR) ? -1 : -2;
	ctl_take_fds(&mh, fds, nfds, SM_HELLO_FDS);
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (int i = 0; i < *nfds; i++) {
			close(fds[i]);
			fds[i] = -1;
		}
		*nfds = 0;
		return -2;
	}
	return n > INT32_MAX ? -2 : (int)n;
}

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
	sm_ring_format(p, size, count);
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
	rc = CCI_SUCCESS;
out:
	for (int i = 0; i < SM_HELLO_FDS; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return rc;
}

/* A new connection with its receive ring; NULL on failure (logged). */
static struct sm_conn *conn_new(struct sm_ep *sep, cci_conn_attribute_t attr, void *context)
{
	struct sm_conn *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return NULL;
	sc->sep = sep;
	sc->sock = sc->peer_bell = sc->rx_fd = -1;
	sc->rma_copy = sep->rma_copy;
	sc->tx_err = CCI_ERR_DISCONNECTED;
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

static void conn_unmap_tx(struct sm_conn *sc)
{
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
	sm_txq_fail(sc, CCI_ERR_DISCONNECTED, 0);
	sm_rma_fail_waiting(sc, 0);
	conn_unmap_tx(sc);
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
	sm_ctl_unwatch(sc->sep, &sc->ctl_w);
	close(sc->sock);
	sc->sock = -1;
}

static void conns_unlink(struct sm_ep *sep, struct sm_conn *sc)
{
	for (struct sm_conn **pp = &sep->conns; *pp; pp = &(*pp)->next) {
		if (*pp == sc) {
			*pp = sc->next;
			return;
		}
	}
}

/* The CONNECT or ACCEPT event that ends a connection's set-up. */
static void post_conn_event(struct sm_ep *sep, cci_event_type_t type, int status,
                            void *context, cci__conn_t *conn)
{
	if (type == CCI_EVENT_CONNECT)
		sm_core->post_connect(sep->ep, context, status, conn);
	else
		sm_core->post_accept(sep->ep, context, status, conn);
}

/*
 * Start scanning sc's receive ring, and post the event that announces the
 * connection (CONNECT or ACCEPT) under the same rx_lock hold: a message
 * the peer sent at once is then seen by the arm() that follows the event,
 * yet its RECV event can never be posted ahead of the announcement.
 */
void sm_rxset_add(struct sm_ep *sep, struct sm_conn *sc, cci_event_type_t type, void *context)
{
	cci__spin_lock(&sep->rx_lock);
	if (sep->rx_n == sep->rx_cap) {
		uint32_t cap = sep->rx_cap ? sep->rx_cap * 2 : 8;
		struct sm_conn **grown = realloc(sep->rx_set, sizeof(*grown) * cap);
		if (!grown) {
			cci__spin_unlock(&sep->rx_lock);
			SM_ERR("sm: out of memory: connection to pid %d will not receive",
			       (int)sc->peer_pid);
			post_conn_event(sep, type, CCI_ENOMEM, context, NULL);
			return;
		}
		sep->rx_set = grown;
		sep->rx_cap = cap;
	}
	sep->rx_set[sep->rx_n++] = sc;
	post_conn_event(sep, type, CCI_SUCCESS, context, sc->conn);
	cci__spin_unlock(&sep->rx_lock);
}

/* With rx_lock held. */
static void rxset_remove(struct sm_ep *sep, struct sm_conn *sc)
{
	for (uint32_t i = 0; i < sep->rx_n; i++) {
		if (sep->rx_set[i] == sc) {
			sep->rx_set[i] = sep->rx_set[--sep->rx_n];
			return;
		}
	}
}

/*
 * The connection cannot carry data any more (peer gone, timed out, told us
 * it disconnected): queued work completes with status (the first) and
 * CCI_ERR_DISCONNECTED (the rest), later sends fail.  sep->lock held.
 */
void sm_conn_break(struct sm_conn *sc, int status)
{
	if (sc->state != SM_CONN_OPEN)
		return;
	SM_LOG(CCI_LOG_CONN, "sm: connection %p to pid %d broken (status %d)", (void *)sc,
	       (int)sc->peer_pid, status);
	if (sc->sock >= 0 && status != CCI_ERR_DISCONNECTED)
		sm_ctl_send(sc->sock, SM_CTL_DISCONNECT, NULL, 0, NULL, 0);
	conn_close_sock(sc);
	pthread_mutex_lock(&sc->tx_lock);
	sc->state = SM_CONN_BROKEN;
	sc->tx_err = CCI_ERR_DISCONNECTED;
	sm_txq_fail(sc, status, 1);
	sm_rma_fail_waiting(sc, 1);
	pthread_mutex_unlock(&sc->tx_lock);
}

/* Client side: the connect failed; report and free.  sep->lock held if
 * sc is listed. */
void sm_connect_failed(struct sm_conn *sc, int status, int listed)
{
	struct sm_ep *sep = sc->sep;

	sm_core->post_connect(sep->ep, sc->conn->pub.context, status, NULL);
	if (listed) {
		conns_unlink(sep, sc);
		conn_close_sock(sc);
	}
	sm_conn_destroy(sc);
}

/* Common to both sides once the peer's hello is mapped. */
static void conn_open(struct sm_conn *sc, const struct sm_ctl_hello *h)
{
	cci__conn_t *conn = sc->conn;

	if (h->mss < conn->pub.max_send_size)
		conn->pub.max_send_size = h->mss;
	close(sc->rx_fd);
	sc->rx_fd = -1;
	cci__ct_arm(&sc->timers, conn->keepalive_us, cci__now_ns());
	pthread_mutex_lock(&sc->tx_lock);
	sc->state = SM_CONN_OPEN;
	pthread_mutex_unlock(&sc->tx_lock);
}

static int hello_valid(const struct sm_ctl_hello *h, int n, uint16_t type)
{
	return n >= (int)HELLO_HEAD && h->hdr.magic == SM_CTL_MAGIC &&
	       h->hdr.version == SM_CTL_VERSION && h->hdr.type == type &&
	       h->data_len <= CCI_CONN_REQ_LEN && n == (int)(HELLO_HEAD + h->data_len) &&
	       h->mss >= SM_MSS_MIN && h->mss <= SM_MSS_MAX;
}

/* Client side: the server's answer.  sep->lock held. */
static void client_on_answer(struct sm_conn *sc, const struct sm_ctl_hello *h, int n,
                             int *fds, int nfds)
{
	int ok = n >= (int)sizeof(h->hdr) && h->hdr.magic == SM_CTL_MAGIC;

	if (ok && h->hdr.type == SM_CTL_REJECT) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		sm_connect_failed(sc, CCI_ECONNREFUSED, 1);
		return;
	}
	if (!hello_valid(h, n, SM_CTL_ACCEPT) || nfds != SM_HELLO_FDS ||
	    sm_ep_attach_peer(sc, h, fds) != CCI_SUCCESS) {
		SM_WARN("sm: malformed answer from the server (pid %d); connection refused",
		        (int)sc->peer_pid);
		if (nfds != SM_HELLO_FDS)
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
		sm_connect_failed(sc, CCI_ECONNREFUSED, 1);
		return;
	}
	conn_open(sc, h);
	sm_rxset_add(sc->sep, sc, CCI_EVENT_CONNECT, sc->conn->pub.context);
}

/* The control socket of a connection is readable or hung up.  sep->lock held. */
void sm_conn_on_ctl(struct sm_conn *sc)
{
	struct sm_ctl_hello h;
	int fds[SM_HELLO_FDS], nfds, n;

	while (sc->sock >= 0 && (n = sm_ctl_recv(sc->sock, &h, sizeof(h), fds, &nfds)) != -1) {
		if (sc->state == SM_CONN_CONNECTING) {
			if (n <= 0) {
				sm_connect_failed(sc, CCI_ECONNREFUSED, 1);
				return;
			}
			client_on_answer(sc, &h, n, fds, nfds);
			return;
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (n <= 0 || (n >= (int)sizeof(h.hdr) && h.hdr.type == SM_CTL_DISCONNECT)) {
			sm_conn_break(sc, CCI_ERR_DISCONNECTED);
			return;
		}
		cci__ct_heard(&sc->timers, cci__now_ns());
		if (h.hdr.type == SM_CTL_PING)
			sm_ctl_send(sc->sock, SM_CTL_PONG, NULL, 0, NULL, 0);
	}
}

int sm_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
               cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct sm_ep *sep = sm_ep_of(ep);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sm_ctl_hello h = { .attr = (uint32_t)attr, .data_len = data_len };
	int fds[SM_HELLO_FDS];
	struct sm_conn *sc;
	int rc;

	if (sm_uri_parse(uri, sa.sun_path, sizeof(sa.sun_path)) != CCI_SUCCESS) {
		SM_LOG(CCI_LOG_CONN, "sm: cannot parse URI \"%s\" (want sm://<dir>/<pid>/<id>)", uri);
		return CCI_EINVAL;
	}
	if (attr > CCI_CONN_ATTR_UU)
		return CCI_EINVAL; /* no multicast between processes */
	sc = conn_new(sep, attr, context);
	if (!sc)
		return CCI_ENOMEM;
	sc->is_client = 1;
	sc->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sc->sock < 0 || connect(sc->sock, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		SM_LOG(CCI_LOG_CONN, "sm: nobody listens at %s: %s", sa.sun_path, strerror(errno));
		sm_connect_failed(sc, CCI_ECONNREFUSED, 0);
		return CCI_SUCCESS;
	}
	if (sm_peer_pid(sc->sock, &sc->peer_pid) != CCI_SUCCESS) {
		SM_WARN("sm: %s is served by another user; connection refused", sa.sun_path);
		sm_connect_failed(sc, CCI_ECONNREFUSED, 0);
		return CCI_SUCCESS;
	}
	h.mss = sep->mss;
	h.pid = (uint32_t)getpid();
	h.ring_size = sc->rx.size;
	if (data_len)
		memcpy(h.data, data, data_len);
	fds[0] = sc->rx_fd;
	fds[1] = sep->bell_fd;
	fds[2] = sep->page_fd;
	rc = sm_ctl_send(sc->sock, SM_CTL_REQ, &h, HELLO_HEAD + data_len, fds, SM_HELLO_FDS);
	if (rc != CCI_SUCCESS) {
		SM_LOG(CCI_LOG_CONN, "sm: cannot send the request to %s: %s", sa.sun_path,
		       strerror(errno));
		sm_connect_failed(sc, CCI_ECONNREFUSED, 0);
		return CCI_SUCCESS;
	}
	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	if (timeout)
		cci__ct_connecting(&sc->timers, timeout, cci__now_ns());
	sc->next = sep->conns;
	sep->conns = sc;
	sm_ctl_watch_conn(sc);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	cci__engine_cmd(&sep->eng, 0); /* the loop sees the watcher and runs the tick */
	return CCI_SUCCESS;
}

/* Server side, the loop lock and sep->lock held: build the connection and
 * answer ACCEPT. */
static int accept_locked(struct sm_ep *sep, struct sm_req *req, void *context)
{
	struct sm_ctl_hello h = { .mss = sep->mss, .pid = (uint32_t)getpid() };
	int fds[SM_HELLO_FDS];
	struct sm_conn *sc = conn_new(sep, (cci_conn_attribute_t)req->hello.attr, context);
	int rc;

	if (!sc)
		return CCI_ENOMEM;
	sc->peer_pid = req->peer_pid;
	rc = sm_ep_attach_peer(sc, &req->hello, req->fds);
	for (int i = 0; i < SM_HELLO_FDS; i++)
		req->fds[i] = -1; /* consumed by sm_ep_attach_peer */
	if (rc != CCI_SUCCESS) {
		SM_WARN("sm: cannot map the segments of pid %d; request refused", (int)req->peer_pid);
		sm_conn_destroy(sc);
		return rc;
	}
	h.ring_size = sc->rx.size;
	fds[0] = sc->rx_fd;
	fds[1] = sep->bell_fd;
	fds[2] = sep->page_fd;
	rc = sm_ctl_send(req->sock, SM_CTL_ACCEPT, &h, HELLO_HEAD, fds, SM_HELLO_FDS);
	if (rc != CCI_SUCCESS) {
		SM_LOG(CCI_LOG_CONN, "sm: client pid %d left before the answer", (int)req->peer_pid);
		sm_core->post_accept(sep->ep, context, CCI_ERR_DISCONNECTED, NULL);
		sm_conn_destroy(sc);
		return CCI_SUCCESS;
	}
	sc->sock = req->sock; /* the connection owns the socket now */
	req->sock = -1;
	conn_open(sc, &req->hello);
	sc->next = sep->conns;
	sep->conns = sc;
	sm_ctl_watch_conn(sc);
	sm_rxset_add(sep, sc, CCI_EVENT_ACCEPT, context);
	return CCI_SUCCESS;
}

/* Forget a request that never became an event; loop thread, sep->lock held. */
void sm_req_drop(struct sm_ep *sep, struct sm_req *req)
{
	for (struct sm_req **pp = &sep->reqs; *pp; pp = &(*pp)->next) {
		if (*pp == req) {
			*pp = req->next;
			break;
		}
	}
	sm_ctl_unwatch(sep, &req->w);
	sm_req_free(req);
}

static const char *req_check(const struct sm_req *req, int n, int nfds)
{
	if (n <= 0)
		return "the socket closed before a request";
	if (!hello_valid(&req->hello, n, SM_CTL_REQ))
		return "malformed request (magic, version or length)";
	if (req->hello.attr > CCI_CONN_ATTR_UU)
		return "unsupported connection attribute";
	if (nfds != SM_HELLO_FDS)
		return "shared-memory descriptors missing";
	return NULL;
}

/* A connection request arrived (or the socket failed); sep->lock held. */
void sm_req_on_readable(struct sm_ep *sep, struct sm_req *req)
{
	int nfds, n = sm_ctl_recv(req->sock, &req->hello, sizeof(req->hello), req->fds, &nfds);
	const char *why;

	if (n == -1)
		return;
	why = req_check(req, n, nfds);
	if (why) {
		SM_WARN("sm: %s: request from pid %d dropped: %s", sep->sock_path,
		        (int)req->peer_pid, why);
		sm_req_drop(sep, req);
		return;
	}
	/* The request is the event's now; the socket waits for the answer
	 * (sep->lock, held, keeps cci_accept off it until it is posted). */
	sm_ctl_unwatch(sep, &req->w);
	req->state = SM_REQ_POSTED;
	if (sm_core->post_request(sep->ep, (cci_conn_attribute_t)req->hello.attr, req->hello.data,
	                          req->hello.data_len, req) != CCI_SUCCESS) {
		sm_req_drop(sep, req);
	}
}

/* Answer REJECT and close; sep->lock held. */
static void req_refuse(struct sm_req *req)
{
	if (req->sock >= 0) {
		sm_ctl_send(req->sock, SM_CTL_REJECT, NULL, 0, NULL, 0);
		close(req->sock);
		req->sock = -1;
	}
	req->state = SM_REQ_DONE;
}

int sm_accept(cci__evt_t *evt, void *context)
{
	struct sm_req *req = evt->req_state;
	struct sm_ep *sep = sm_ep_of(evt->ep);
	int rc = CCI_EINVAL;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	if (req->state == SM_REQ_POSTED) {
		rc = accept_locked(sep, req, context);
		if (rc != CCI_SUCCESS)
			req_refuse(req);
		req->state = SM_REQ_DONE;
	}
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	cci__engine_cmd(&sep->eng, 0); /* the loop sees the new watcher */
	return rc;
}

int sm_reject(cci__evt_t *evt)
{
	struct sm_req *req = evt->req_state;
	struct sm_ep *sep = sm_ep_of(evt->ep);
	int rc = CCI_EINVAL;

	pthread_mutex_lock(&sep->lock);
	if (req->state == SM_REQ_POSTED) {
		req_refuse(req);
		rc = CCI_SUCCESS;
	}
	pthread_mutex_unlock(&sep->lock);
	return rc;
}

void sm_req_free(struct sm_req *req)
{
	if (req->sock >= 0)
		close(req->sock);
	for (int i = 0; i < SM_HELLO_FDS; i++)
		if (req->fds[i] >= 0)
			close(req->fds[i]);
	free(req);
}

/* The CONNECT_REQUEST event came back, answered: forget the request. */
void sm_request_done(cci__evt_t *evt)
{
	struct sm_req *req = evt->req_state;
	struct sm_ep *sep = sm_ep_of(evt->ep);

	pthread_mutex_lock(&sep->lock);
	for (struct sm_req **pp = &sep->reqs; *pp; pp = &(*pp)->next) {
		if (*pp == req) {
			*pp = req->next;
			break;
		}
	}
	pthread_mutex_unlock(&sep->lock);
	sm_req_free(req);
}

int sm_disconnect(cci__conn_t *conn)
{
	struct sm_conn *sc = sm_conn_of(conn);
	struct sm_ep *sep = sc->sep;
	int last;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	if (sc->sock >= 0 && sc->state == SM_CONN_OPEN)
		sm_ctl_send(sc->sock, SM_CTL_DISCONNECT, NULL, 0, NULL, 0);
	conn_close_sock(sc);
	conns_unlink(sep, sc);
	cci__spin_lock(&sep->rx_lock);
	rxset_remove(sep, sc);
	pthread_mutex_lock(&sc->tx_lock);
	sc->state = SM_CONN_CLOSED;
	sm_txq_fail(sc, CCI_ERR_DISCONNECTED, 0);
	sm_rma_fail_waiting(sc, 0);
	conn_unmap_tx(sc);
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
