/*
 * tcp_hs.c - the connection handshake.
 *
 * Client: non-blocking connect(), then HELLO (magic, version, the
 * endpoint's random incarnation id, the hello core of ../common/hello.h:
 * attribute, mss, a random nonce, the connect payload's length; then the
 * payload); the server answers ACCEPT or REJECT echoing the nonce.
 * Server: the progress thread accepts without blocking, reads exactly one
 * HELLO per socket, and posts a CONNECT_REQUEST; cci_accept/cci_reject
 * answer it.  Sockets that do not finish their HELLO within
 * TCP_HS_TIMEOUT_NS are closed, and at most TCP_HS_MAX wait at a time:
 * then accepting waits (requests stay in the kernel's backlog) until one
 * is done, or drops the oldest if it waited TCP_HS_EVICT_NS, so that
 * half-open connections cannot crowd out legitimate ones for long.  When
 * accept() fails for want of descriptors (or memory), the listening socket
 * stays readable: rather than spin on it, the loop stops watching it, says
 * so once, and tries again every TCP_NOFD_RETRY_NS or at the next tick
 * after one of the endpoint's connections closed (the listen guard of
 * plugins/common/listen_guard.h).  Handshake sockets are read exactly to
 * the end of their frame: bytes after it belong to the connection.
 *
 * Client: a server that closes the socket before any reply dropped the
 * handshake (it was overloaded, or its HELLO timer ran out): the client
 * tries again with a new socket, after TCP_CONNECT_RETRY_NS doubling up
 * to TCP_CONNECT_RETRY_MAX_NS, until the connect deadline.  A refused TCP
 * connect (nobody listens) fails at once.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log_due.h"
#include "tcp.h"

void tcp_sock_opts(int fd, uint32_t bufsize)
{
	int one = 1, sz = (int)bufsize;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bufsize) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
}

/* Move bytes *have..need of buf through fd without blocking, sending or
 * receiving: 1 when all are through, 0 for later, -1 when the socket is
 * done for (errno says why, unless the peer closed). */
static int io_exact(int fd, uint8_t *buf, uint32_t *have, uint32_t need, int send)
{
	while (*have < need) {
		ssize_t n = send ? net_send(fd, buf + *have, need - *have,
		                             MSG_DONTWAIT | MSG_NOSIGNAL)
		                 : net_recv(fd, buf + *have, need - *have, MSG_DONTWAIT);
		if (n > 0) {
			*have += (uint32_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return -1;
	}
	return 1;
}

/* Read a handshake frame, a HELLO when want_hello, else an ACCEPT or a
 * REJECT: 1 done, 0 later, -1 bad. */
static int hs_frame(int fd, uint8_t *buf, uint32_t *have, uint32_t mss, int want_hello,
                    const char **why)
{
	struct tcp_limits lim = { mss, TCP_FRAG_MAX };
	struct tcp_hdr h;
	int r = io_exact(fd, buf, have, TCP_HDR_LEN, 0);

	if (r <= 0) {
		*why = r < 0 ? "closed during the handshake" : NULL;
		return r;
	}
	if (tcp_hdr_decode(buf, &lim, &h, why) != 0)
		return -1;
	if (h.type != TCP_F_HELLO && h.type != TCP_F_ACCEPT && h.type != TCP_F_REJECT) {
		*why = "not a handshake frame";
		return -1;
	}
	if ((h.type == TCP_F_HELLO) != want_hello) {
		*why = want_hello ? "a reply where a request belongs" : "a request where a reply belongs";
		return -1;
	}
	r = io_exact(fd, buf, have, TCP_HDR_LEN + h.len, 0);
	if (r < 0)
		*why = "closed during the handshake";
	return r;
}

static void hs_retry_due(struct tcp_ep *sep, uint64_t now);

/* ---- server ------------------------------------------------------------- */

/* The guard's watch: stop or start watching the listening socket (with
 * progress=manual and an OS handle, also its readiness in the handle, which
 * holds the loop's descriptor).  The loop lock held. */
static void listen_watch(void *arg, int on)
{
	struct tcp_ep *sep = arg;

	if (on)
		ev_io_start(sep->eng.loop, &sep->listen_w);
	else
		ev_io_stop(sep->eng.loop, &sep->listen_w);
}

static void req_unlink(struct tcp_req *req)
{
	struct tcp_ep *sep = req->sep;

	if (req->state == TCP_REQ_READING) {
		CCI__DQ_UNLINK(&sep->reqs, &sep->reqs_tail, req);
		if (sep->nreqs-- == TCP_HS_MAX)
			cci__listen_resume(&sep->lg, TCP_PAUSE_FULL);
	} else {
		CCI__DLIST_UNLINK(&sep->posted, req);
	}
}

void tcp_req_free(struct tcp_req *req)
{
	if (ev_is_active(&req->w))
		ev_io_stop(req->sep->eng.loop, &req->w);
	if (req->fd >= 0) {
		close(req->fd);
		cci__listen_fd_freed(&req->sep->lg);
	}
	free(req);
}

static void req_drop(struct tcp_req *req, const char *why)
{
	TCP_LOG(CCI_LOG_CONN, "tcp: handshake from %s dropped: %s", req->peer, why);
	req_unlink(req);
	tcp_req_free(req);
}

static void req_post(struct tcp_req *req)
{
	struct tcp_ep *sep = req->sep;

	ev_io_stop(sep->eng.loop, &req->w);
	req_unlink(req);
	req->state = TCP_REQ_POSTED;
	CCI__DLIST_PUSH(&sep->posted, req);
	if (tcp_core->post_request(sep->ep, (cci_conn_attribute_t)req->hello.core.attr,
	                           req->buf + TCP_HDR_LEN + TCP_HELLO_LEN, req->hello.core.data_len,
	                           req) != CCI_SUCCESS)
		req_drop(req, "out of memory");
}

static void req_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_req *req = w->data;
	struct tcp_ep *sep = req->sep;
	const char *why = NULL;
	int r;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	r = hs_frame(req->fd, req->buf, &req->have, sep->mss, 1, &why);
	if (r == 1 && tcp_hello_decode(req->buf + TCP_HDR_LEN, req->have - TCP_HDR_LEN,
	                                CCI__HELLO_REQUEST, &req->hello, &why) != 0)
		r = -1;
	if (r < 0 && why && strncmp(why, "closed", 6) != 0)
		TCP_WARN("tcp: refusing a connection from %s: %s", req->peer, why);
	if (r < 0)
		req_drop(req, why ? why : "socket error");
	else if (r == 1)
		req_post(req);
	pthread_mutex_unlock(&sep->lock);
}

static void req_new(struct tcp_ep *sep, int fd, const struct sockaddr_storage *ss, uint64_t now)
{
	struct tcp_req *req = calloc(1, sizeof(*req));

	if (!req) {
		TCP_WARN("tcp: %s: no memory for a connection request: closed", sep->ep->uri);
		close(fd);
		return;
	}
	req->sep = sep;
	req->fd = fd;
	req->state = TCP_REQ_READING;
	req->t0_ns = now;
	req->deadline_ns = now + TCP_HS_TIMEOUT_NS;
	cci__sockaddr_str((const struct sockaddr *)ss, req->peer, sizeof(req->peer));
	tcp_sock_opts(fd, sep->dev->bufsize);
	pthread_mutex_lock(&sep->lock);
	CCI__DQ_APPEND(&sep->reqs, &sep->reqs_tail, req);
	sep->nreqs++;
	ev_io_init(&req->w, req_cb, fd, EV_READ);
	req->w.data = req;
	ev_io_start(sep->eng.loop, &req->w);
	pthread_mutex_unlock(&sep->lock);
}

/* Room for one more handshake: 1, or 0 when accepting must wait for one
 * to finish (TCP_PAUSE_FULL).  The oldest (the head of sep->reqs) is
 * dropped if it waited long enough for its HELLO to have come from any
 * live client (the client of one dropped too early tries again). */
static int hs_room(struct tcp_ep *sep, uint64_t now)
{
	struct tcp_req *old = sep->reqs;

	if (sep->nreqs < TCP_HS_MAX)
		return 1;
	if (now - old->t0_ns < TCP_HS_EVICT_NS) {
		cci__listen_pause(&sep->lg, TCP_PAUSE_FULL);
		return 0;
	}
	pthread_mutex_lock(&sep->lock);
	req_drop(old, "too many handshakes pending");
	pthread_mutex_unlock(&sep->lock);
	return 1;
}

static void listen_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_ep *sep = w->data;
	uint64_t now = cci__now_ns();

	(void)loop;
	(void)revents;
	for (int i = 0; i < 64 && hs_room(sep, now); i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(sep->listen_fd, (struct sockaddr *)&ss, &sl,
		                 SOCK_NONBLOCK | SOCK_CLOEXEC);
		int err = errno;

		if (fd < 0) {
			if (cci__listen_accept_failed(&sep->lg, err, now) || err == EAGAIN ||
			    err == EWOULDBLOCK)
				break;
			continue; /* EINTR, ECONNABORTED, or a network error of that one
			           * connection (accept(2)): the next may be fine */
		}
		cci__listen_accepted(&sep->lg, now);
		req_new(sep, fd, &ss, now);
	}
}

void tcp_listen_init(struct tcp_ep *sep)
{
	cci__listen_guard_init(&sep->lg, tcp_core, "tcp", sep->ep->uri, TCP_NOFD_RETRY_NS,
	                       TCP_NOFD_WARN_NS, listen_watch, sep);
	ev_io_init(&sep->listen_w, listen_cb, sep->listen_fd, EV_READ);
	sep->listen_w.data = sep;
	ev_io_start(sep->eng.loop, &sep->listen_w);
}

void tcp_hs_timers(struct tcp_ep *sep, uint64_t now)
{
	struct tcp_req *req;

	/* Oldest first, and every one has the same time for its HELLO. */
	while ((req = sep->reqs) && now >= req->deadline_ns)
		req_drop(req, "no request within the handshake timeout");
	/* libev calls listen_cb if the socket is readable. */
	cci__listen_tick(&sep->lg, now);
	if ((cci__listen_paused(&sep->lg) & TCP_PAUSE_FULL) &&
	    (!sep->reqs || cci__ns_since(sep->reqs->t0_ns, now) >= TCP_HS_EVICT_NS))
		cci__listen_resume(&sep->lg, TCP_PAUSE_FULL); /* hs_room drops the oldest */
	hs_retry_due(sep, now);
}

/* Send a short handshake frame on a fresh socket (it always fits). */
static int reply_send(int fd, uint8_t type, const struct tcp_hello *r)
{
	uint8_t b[TCP_HDR_LEN + TCP_HELLO_LEN];
	struct tcp_hdr h = { .type = type, .len = TCP_HELLO_LEN };
	uint32_t sent = 0;

	tcp_hdr_encode(b, &h);
	tcp_hello_encode(b + TCP_HDR_LEN, r);
	return io_exact(fd, b, &sent, sizeof(b), 1) == 1 ? CCI_SUCCESS : CCI_ERR_DISCONNECTED;
}

/* With the loop lock and sep->lock held. */
static int accept_locked(struct tcp_req *req, void *context, const struct tcp_hello *r)
{
	struct tcp_ep *sep = req->sep;
	cci__conn_t *conn =
		tcp_core->conn_alloc(sep->ep, (cci_conn_attribute_t)req->hello.core.attr, context);
	struct tcp_conn *tc;
	int rc;

	assert(cci__mutex_held(&req->sep->lock));
	assert(cci__mutex_held(&req->sep->eng.lock));
	if (!conn)
		return CCI_ENOMEM;
	if (cci__due_reserve(&sep->due) != CCI_SUCCESS) {
		tcp_core->conn_release(conn);
		return CCI_ENOMEM;
	}
	tc = tcp_conn_of(conn);
	tcp_conn_init(tc, sep, conn, req->fd);
	req->fd = -1; /* the connection owns the socket now */
	memcpy(tc->peer, req->peer, sizeof(tc->peer));
	CCI__DLIST_PUSH(&sep->conns, tc);
	rc = reply_send(tc->fd, TCP_F_ACCEPT, r);
	if (rc == CCI_SUCCESS)
		rc = tcp_conn_open(tc, req->hello.core.mss);
	/* The event goes first: nothing can be read before the lock drops. */
	tcp_core->post_accept(sep->ep, context, rc, conn);
	if (rc != CCI_SUCCESS) {
		TCP_LOG(CCI_LOG_CONN, "tcp: accepting %s failed: %s", tc->peer,
		        tcp_core->status_text(rc));
		tcp_conn_destroy(tc);
	} else {
		TCP_LOG(CCI_LOG_CONN, "tcp: accepted %s (mss %u)", tc->peer, tc->mss);
	}
	return CCI_SUCCESS;
}

static int reject_locked(struct tcp_req *req, const struct tcp_hello *r)
{
	reply_send(req->fd, TCP_F_REJECT, r);
	close(req->fd);
	req->fd = -1;
	return CCI_SUCCESS;
}

/* cci_accept (accept set) or cci_reject of a posted request: the core
 * calls one of them at most once per request. */
static int req_answer(cci__evt_t *evt, void *context, int accept)
{
	struct tcp_req *req = evt->req_state;
	struct tcp_ep *sep = req->sep;
	struct tcp_hello r = { .id = sep->id,
	                       .core = { .mss = sep->mss, .nonce = req->hello.core.nonce } };
	int rc;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	rc = accept ? accept_locked(req, context, &r) : reject_locked(req, &r);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	return rc;
}

int tcp_accept(cci__evt_t *evt, void *context)
{
	return req_answer(evt, context, 1);
}

int tcp_reject(cci__evt_t *evt)
{
	return req_answer(evt, NULL, 0);
}

/* The request's event came back, answered: forget the request. */
void tcp_request_done(cci__evt_t *evt)
{
	struct tcp_req *req = evt->req_state;
	struct tcp_ep *sep = req->sep;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	req_unlink(req); /* from sep->posted, where answered requests wait */
	tcp_req_free(req);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
}

/* ---- client ------------------------------------------------------------- */

static void hs_got_reply(struct tcp_conn *tc)
{
	struct tcp_hello r;
	const char *why = NULL;
	int rc;

	if (tcp_hello_decode(tc->dial->hs + TCP_HDR_LEN, tc->hs_off - TCP_HDR_LEN, CCI__HELLO_ANSWER,
	                     &r, &why) != 0 || r.core.nonce != tc->nonce) {
		TCP_WARN("tcp: bad handshake reply from %s: %s", tc->peer,
		         why ? why : "a reply to another request (wrong nonce)");
		tcp_connect_fail(tc, CCI_ERROR, why ? why : "bad reply");
		return;
	}
	if (tc->dial->hs[1] == TCP_F_REJECT) {
		tcp_connect_fail(tc, CCI_ECONNREFUSED, "rejected by the server");
		return;
	}
	ev_io_stop(tc->sep->eng.loop, &tc->hs_w);
	free(tc->dial);
	tc->dial = NULL;
	rc = tcp_conn_open(tc, r.core.mss);
	if (rc != CCI_SUCCESS) {
		tcp_connect_fail(tc, rc, "cannot open the connection");
		return;
	}
	TCP_LOG(CCI_LOG_CONN, "tcp: connected to %s (mss %u)", tc->peer, tc->mss);
	tcp_core->post_connect(tc->sep->ep, tc->context, CCI_SUCCESS, tc->conn);
}

/* Is a failed attempt worth another?  The server, or the kernel for it,
 * dropped it (an overloaded server's backlog, its HELLO timer, a reset):
 * yes.  Nobody listening (ECONNREFUSED), no route and the rest: no. */
static int attempt_transient(int err)
{
	return err == ETIMEDOUT || err == ECONNRESET || err == EPIPE || err == ECONNABORTED;
}

/* The waits double from TCP_CONNECT_RETRY_NS up to TCP_CONNECT_RETRY_MAX_NS,
 * one FIFO of sep->retry_head for each. */
_Static_assert((TCP_CONNECT_RETRY_NS << (TCP_RETRY_LEVELS - 2)) < TCP_CONNECT_RETRY_MAX_NS &&
               (TCP_CONNECT_RETRY_NS << (TCP_RETRY_LEVELS - 1)) >= TCP_CONNECT_RETRY_MAX_NS,
               "TCP_RETRY_LEVELS is the number of distinct waits");

/* The attempt failed for a passing reason: close its socket and try again
 * after a wait that doubles, until the connect deadline (the tick) ends
 * it.  The HELLO in tc->dial->hs is intact: no reply byte was read over it.
 * Both locks held. */
static void hs_retry(struct tcp_conn *tc, const char *why)
{
	struct tcp_ep *sep = tc->sep;
	uint32_t lv;

	assert(cci__mutex_held(&tc->sep->lock));
	assert(cci__mutex_held(&tc->sep->eng.lock));
	ev_io_stop(sep->eng.loop, &tc->hs_w);
	close(tc->fd);
	tc->fd = -1;
	cci__listen_fd_freed(&sep->lg);
	tc->hello_sent = 0;
	tc->hs_off = 0;
	if (!tc->retry_wait_ns) {
		tc->retry_wait_ns = TCP_CONNECT_RETRY_NS;
	} else if (tc->retry_wait_ns < TCP_CONNECT_RETRY_MAX_NS) {
		tc->retry_wait_ns = tc->retry_wait_ns * 2 < TCP_CONNECT_RETRY_MAX_NS
		                            ? tc->retry_wait_ns * 2
		                            : TCP_CONNECT_RETRY_MAX_NS;
		tc->retry_level++;
	}
	tc->retry_ns = cci__now_ns() + tc->retry_wait_ns;
	lv = tc->retry_level;
	CCI__DQ_APPEND(&sep->retry_head[lv], &sep->retry_tail[lv], &tc->retry);
	TCP_LOG(CCI_LOG_CONN, "tcp: connecting to %s: %s; trying again in %llu ms", tc->peer, why,
	        (unsigned long long)(tc->retry_wait_ns / 1000000));
}

/* Connected: send HELLO (maybe over several writable events). */
static void hs_send_hello(struct tcp_conn *tc)
{
	int err = 0, r;
	socklen_t el = sizeof(err);

	if (tc->hs_off == 0) { /* the first writable event: connected, or not */
		getsockopt(tc->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err && attempt_transient(err))
			hs_retry(tc, strerror(err));
		else if (err)
			tcp_connect_fail(tc, cci__errno_status(err), strerror(err));
		if (err)
			return;
	}
	r = io_exact(tc->fd, tc->dial->hs, &tc->hs_off, tc->hs_len, 1);
	if (r < 0 && attempt_transient(errno) && tc->hs_off == 0)
		hs_retry(tc, strerror(errno));
	else if (r < 0)
		tcp_connect_fail(tc, cci__errno_status(errno), strerror(errno));
	if (r <= 0)
		return;
	tc->hello_sent = 1;
	tc->hs_off = 0;
	ev_io_stop(tc->sep->eng.loop, &tc->hs_w);
	ev_io_set(&tc->hs_w, tc->fd, EV_READ);
	ev_io_start(tc->sep->eng.loop, &tc->hs_w);
}

static void hs_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *tc = w->data;
	struct tcp_ep *sep = tc->sep;
	const char *why = NULL;
	int r;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	if (!tc->hello_sent) {
		hs_send_hello(tc);
	} else {
		r = hs_frame(tc->fd, tc->dial->hs, &tc->hs_off, sep->mss, 0, &why);
		if (r < 0 && why && !strncmp(why, "closed", 6) && tc->hs_off == 0)
			hs_retry(tc, "the server closed the socket before answering");
		else if (r < 0)
			tcp_connect_fail(tc, why && !strncmp(why, "closed", 6) ? CCI_ECONNREFUSED
			                                                        : CCI_ERROR,
			                 why ? why : "socket error");
		else if (r == 1)
			hs_got_reply(tc);
	}
	pthread_mutex_unlock(&sep->lock);
}

static void hello_build(struct tcp_conn *tc, cci_conn_attribute_t attr, const void *data,
                        uint32_t len, uint64_t nonce)
{
	struct tcp_hello h = { .id = tc->sep->id,
	                       .core = { .attr = (uint8_t)attr, .mss = tc->sep->mss,
	                                 .data_len = len, .nonce = nonce } };
	struct tcp_hdr fh = { .type = TCP_F_HELLO, .len = TCP_HELLO_LEN + len };

	tc->nonce = nonce;
	tcp_hdr_encode(tc->dial->hs, &fh);
	tcp_hello_encode(tc->dial->hs + TCP_HDR_LEN, &h);
	if (len)
		memcpy(tc->dial->hs + TCP_HDR_LEN + TCP_HELLO_LEN, data, len);
	tc->hs_len = TCP_HDR_LEN + TCP_HELLO_LEN + len;
	tc->hs_off = 0;
}

/* A non-blocking connect to ss: 0 with *fd_p, or the errno. */
static int connect_socket(const struct sockaddr_storage *ss, socklen_t sl, uint32_t bufsize,
                          int *fd_p)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	tcp_sock_opts(fd, bufsize);
	if (connect(fd, (const struct sockaddr *)ss, sl) != 0 && errno != EINPROGRESS) {
		int err = errno;
		close(fd);
		return err;
	}
	*fd_p = fd;
	return 0;
}

/* A connect to uri could not even begin (err): say so, naming it; a
 * shortage of descriptors or memory as a warning, at most once a second
 * (each call returns its status anyway).  The status for it. */
static int connect_failed_now(struct tcp_ep *sep, const char *uri, int err)
{
	int shortage = err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;

	if (shortage && cci__log_due(&sep->connect_warned_ns, 1000000000ull))
		TCP_WARN("tcp: %s: cannot connect to %s: no socket: %s", sep->ep->uri, uri,
		         strerror(err));
	else
		TCP_LOG(CCI_LOG_CONN, "tcp: %s: cannot connect to %s: %s", sep->ep->uri, uri,
		        strerror(err));
	return cci__errno_status(err);
}

/* A new attempt of tc, whose wait is over.  Both locks held. */
static void hs_retry_start(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;
	int err;

	assert(cci__mutex_held(&tc->sep->lock));
	assert(cci__mutex_held(&tc->sep->eng.lock));
	tcp_retry_unlink(tc);
	err = connect_socket(&tc->dial->addr, tc->dial->addrlen, sep->dev->bufsize, &tc->fd);
	if (err) {
		connect_failed_now(sep, tc->peer, err);
		tcp_connect_fail(tc, cci__errno_status(err), strerror(err));
		return;
	}
	ev_io_init(&tc->hs_w, hs_cb, tc->fd, EV_WRITE);
	tc->hs_w.data = tc;
	ev_io_start(sep->eng.loop, &tc->hs_w);
}

/* The tick, both locks held: connections whose wait after a dropped
 * attempt is over try again; each FIFO is in due order, so only those
 * due and one more of each are looked at. */
static void hs_retry_due(struct tcp_ep *sep, uint64_t now)
{
	assert(cci__mutex_held(&sep->lock));
	assert(cci__mutex_held(&sep->eng.lock));
	for (uint32_t lv = 0; lv < TCP_RETRY_LEVELS; lv++) {
		struct tcp_rlink *l;

		while ((l = sep->retry_head[lv]) && now >= tcp_conn_of_retry(l)->retry_ns)
			hs_retry_start(tcp_conn_of_retry(l));
	}
}

int tcp_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct tcp_ep *sep = tcp_ep_of(ep);
	struct sockaddr_storage ss;
	socklen_t sl;
	cci__conn_t *conn;
	struct tcp_conn *tc;
	uint64_t nonce;
	int fd = -1, rc, err;

	rc = net_uri_resolve(uri, "tcp", &ss, &sl);
	if (rc != CCI_SUCCESS)
		return rc;
	if (cci__random64(&nonce) != CCI_SUCCESS)
		return CCI_ERROR;
	err = connect_socket(&ss, sl, sep->dev->bufsize, &fd);
	if (err)
		return connect_failed_now(sep, uri, err);
	conn = tcp_core->conn_alloc(ep, attr, context);
	if (!conn) {
		close(fd);
		return CCI_ENOMEM;
	}
	tc = tcp_conn_of(conn);
	tcp_conn_init(tc, sep, conn, fd);
	tc->dial = malloc(sizeof(*tc->dial));
	if (!tc->dial) {
		close(fd);
		tcp_core->conn_release(conn);
		return CCI_ENOMEM;
	}
	tc->context = context;
	tc->dial->addr = ss;
	tc->dial->addrlen = sl;
	cci__sockaddr_str((struct sockaddr *)&ss, tc->peer, sizeof(tc->peer));
	hello_build(tc, attr, data, data_len, nonce);
	cci__ct_connecting(&tc->base.timers, timeout, cci__now_ns());
	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	if (cci__due_reserve(&sep->due) != CCI_SUCCESS) {
		pthread_mutex_unlock(&sep->lock);
		pthread_mutex_unlock(&sep->eng.lock);
		close(fd);
		free(tc->dial);
		tcp_core->conn_release(conn);
		return CCI_ENOMEM;
	}
	CCI__DLIST_PUSH(&sep->conns, tc);
	cci__conn_due_note(&sep->due, &tc->base, conn, cci__engine_now(&sep->eng));
	ev_io_init(&tc->hs_w, hs_cb, fd, EV_WRITE);
	tc->hs_w.data = tc;
	ev_io_start(sep->eng.loop, &tc->hs_w);
	pthread_mutex_unlock(&sep->lock);
	tcp_loop_cmd(sep, 0); /* the loop picks the new watcher up */
	pthread_mutex_unlock(&sep->eng.lock);
	return CCI_SUCCESS;
}
