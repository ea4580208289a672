/*
 * sm_hs.c - the handshake.  A client connects to the server endpoint's
 * listening socket and sends REQ with its hello (mss, ring size, payload)
 * and three descriptors: its receive ring, its doorbell and its endpoint
 * page.  The server posts the request; cci_accept maps the client's
 * segments and answers ACCEPT with its own three, cci_reject answers
 * REJECT.  The socket then stays as the connection's control socket.
 *
 * Each side creates the ring it receives on (sized by its own
 * recv_buf_count and mss) and hands its memfd to the peer, which maps it
 * to produce into.  Splitting the rings this way lets each receiver size
 * its own buffer, which a single segment created by the client could not.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sm.h"

/* Send REQ or ACCEPT: h (its attr and payload filled in) with this side's
 * mss, pid and ring size, and the three descriptors the peer maps: sc's
 * receive ring, the endpoint's doorbell and page. */
static int hello_send(struct sm_conn *sc, int sock, uint16_t type, struct sm_ctl_hello *h)
{
	const int fds[SM_HELLO_FDS] = { sc->rx_fd, sc->sep->bell_fd, sc->sep->page_fd };

	h->mss = sc->sep->mss;
	h->pid = (uint32_t)getpid();
	h->ring_size = sc->rx.size;
	return sm_ctl_send(sock, type, h, fds, SM_HELLO_FDS);
}

/* Client side: the server answered, or hung up.  sep->lock held. */
static void client_on_readable(struct sm_conn *sc)
{
	struct sm_ctl_hello raw, h;
	int fds[SM_HELLO_FDS], nfds;
	int n = sm_ctl_recv(sc->sock, &raw, sizeof(raw), fds, &nfds);
	const char *why = NULL;

	if (n == -1)
		return;
	if (n > 0 && sm_ctl_decode(&raw, (size_t)n, nfds, &h, &why) == CCI_SUCCESS &&
	    h.hdr.type != SM_CTL_ACCEPT && h.hdr.type != SM_CTL_REJECT)
		why = "not an answer to a request";
	/* An empty record (the server closed, or sent nothing) may carry
	 * descriptors too: only an ACCEPT's are kept. */
	if (n <= 0 || why || h.hdr.type == SM_CTL_REJECT) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (why)
			SM_WARN("sm: malformed answer from the server (pid %d): %s; connection refused",
			        (int)sc->peer_pid, why);
		goto err_refused;
	}
	if (sm_ep_attach_peer(sc, &h, fds) != CCI_SUCCESS) {
		SM_WARN("sm: cannot map the segments of the server (pid %d); connection refused",
		        (int)sc->peer_pid);
		goto err_refused;
	}
	sm_conn_open(sc, &h, CCI_EVENT_CONNECT);
	return;

err_refused:
	sm_connect_failed(sc, CCI_ECONNREFUSED, 1);
}

/* The request in the n bytes of buf, decoded into req->hello: NULL, or
 * why it is refused. */
static const char *req_check(struct sm_req *req, const void *buf, int n, int nfds)
{
	const char *why;

	if (n <= 0)
		return "the socket closed before a request";
	if (sm_ctl_decode(buf, (size_t)n, nfds, &req->hello, &why) != CCI_SUCCESS)
		return why;
	if (req->hello.hdr.type != SM_CTL_REQ)
		return "not a connection request";
	return NULL;
}

/* A connection request arrived (or the socket failed); sep->lock held. */
static void req_on_readable(struct sm_ep *sep, struct sm_req *req)
{
	struct sm_ctl_hello raw;
	int nfds, n = sm_ctl_recv(req->sock, &raw, sizeof(raw), req->fds, &nfds);
	const char *why;

	if (n == -1)
		return;
	why = req_check(req, &raw, n, nfds);
	if (why) {
		SM_WARN("sm: %s: request from pid %d dropped: %s", sep->sock_path,
		        (int)req->peer_pid, why);
		sm_req_drop(sep, req);
		return;
	}
	/* The request is the event's now; the socket waits for the answer
	 * (sep->lock, held, keeps cci_accept off it until it is posted). */
	ev_io_stop(sep->eng.loop, &req->w);
	if (sm_core->post_request(sep->ep, (cci_conn_attribute_t)req->hello.attr, req->hello.data,
	                          req->hello.data_len, req) != CCI_SUCCESS) {
		sm_req_drop(sep, req);
	}
}

static void req_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sm_req *req = w->data;
	struct sm_ep *sep = req->sep;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	req_on_readable(sep, req);
	pthread_mutex_unlock(&sep->lock);
}

static void conn_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sm_conn *sc = w->data;
	struct sm_ep *sep = sc->sep;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	if (cci__conn_state(&sc->base) == CCI__CONN_CONNECTING)
		client_on_readable(sc);
	else
		sm_conn_on_ctl(sc);
	pthread_mutex_unlock(&sep->lock);
}

/* List sc, watch its control socket and run the tick; the loop lock and
 * sep->lock held.  Another thread than the loop's then wakes it
 * (cci__engine_cmd). */
static void conn_watch(struct sm_conn *sc)
{
	sc->next = sc->sep->conns;
	sc->sep->conns = sc;
	ev_io_init(&sc->ctl_w, conn_cb, sc->sock, EV_READ);
	sc->ctl_w.data = sc;
	ev_io_start(sc->sep->eng.loop, &sc->ctl_w);
	cci__engine_tick(&sc->sep->eng, 1);
}

void sm_hs_on_listen(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sm_ep *sep = w->data;
	struct sm_req *req;
	int fd;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	while ((fd = accept4(sep->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		pid_t pid = 0;
		if (sm_peer_pid(fd, &pid) != CCI_SUCCESS) {
			SM_WARN("sm: %s: connection from another user refused", sep->sock_path);
			close(fd);
			continue;
		}
		req = calloc(1, sizeof(*req));
		if (!req) {
			close(fd);
			continue;
		}
		req->sep = sep;
		req->sock = fd;
		req->peer_pid = pid;
		req->since_ns = cci__now_ns();
		for (int i = 0; i < SM_HELLO_FDS; i++)
			req->fds[i] = -1;
		req->next = sep->reqs;
		sep->reqs = req;
		ev_io_init(&req->w, req_cb, fd, EV_READ);
		req->w.data = req;
		ev_io_start(sep->eng.loop, &req->w);
		cci__engine_tick(&sep->eng, 1); /* its request must come in time */
	}
	pthread_mutex_unlock(&sep->lock);
}

int sm_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
               cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct sm_ep *sep = sm_ep_of(ep);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sm_ctl_hello h = { .attr = (uint32_t)attr, .data_len = data_len };
	struct sm_conn *sc;

	if (sm_uri_parse(uri, sa.sun_path, sizeof(sa.sun_path)) != CCI_SUCCESS) {
		SM_LOG(CCI_LOG_CONN, "sm: cannot parse URI \"%s\" (want sm://<dir>/<pid>/<id>)", uri);
		return CCI_EINVAL;
	}
	sc = sm_conn_new(sep, attr, context);
	if (!sc)
		return CCI_ENOMEM;
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
	if (data_len)
		memcpy(h.data, data, data_len);
	if (hello_send(sc, sc->sock, SM_CTL_REQ, &h) != CCI_SUCCESS) {
		SM_LOG(CCI_LOG_CONN, "sm: cannot send the request to %s: %s", sa.sun_path,
		       strerror(errno));
		sm_connect_failed(sc, CCI_ECONNREFUSED, 0);
		return CCI_SUCCESS;
	}
	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	if (timeout)
		cci__ct_connecting(&sc->base.timers, timeout, cci__now_ns());
	conn_watch(sc);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	cci__engine_cmd(&sep->eng, 0); /* the loop sees the watcher and runs the tick */
	return CCI_SUCCESS;
}

/* Server side, the loop lock and sep->lock held: build the connection and
 * answer ACCEPT. */
static int accept_locked(struct sm_ep *sep, struct sm_req *req, void *context)
{
	struct sm_ctl_hello h = { .data_len = 0 };
	struct sm_conn *sc = sm_conn_new(sep, (cci_conn_attribute_t)req->hello.attr, context);
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
	if (hello_send(sc, req->sock, SM_CTL_ACCEPT, &h) != CCI_SUCCESS) {
		SM_LOG(CCI_LOG_CONN, "sm: client pid %d left before the answer", (int)req->peer_pid);
		sm_core->post_accept(sep->ep, context, CCI_ERR_DISCONNECTED, NULL);
		sm_conn_destroy(sc);
		return CCI_SUCCESS;
	}
	sc->sock = req->sock; /* the connection owns the socket now */
	req->sock = -1;
	conn_watch(sc);
	sm_conn_open(sc, &req->hello, CCI_EVENT_ACCEPT);
	return CCI_SUCCESS;
}

/* Forget a request that never became an event; loop thread, sep->lock held. */
void sm_req_drop(struct sm_ep *sep, struct sm_req *req)
{
	CCI__SLIST_UNLINK(&sep->reqs, req, next);
	ev_io_stop(sep->eng.loop, &req->w);
	sm_req_free(req);
}

/*
 * The core answers each posted request exactly once, by accept or reject
 * (it refuses a second answer itself).  The request is the event's: the
 * control thread no longer watches its socket nor times it.
 */
int sm_accept(cci__evt_t *evt, void *context)
{
	struct sm_ep *sep = sm_ep_of(evt->ep);
	int rc;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	rc = accept_locked(sep, evt->req_state, context);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	if (rc != CCI_SUCCESS)
		sm_reject(evt);
	cci__engine_cmd(&sep->eng, 0); /* the loop sees the new watcher */
	return rc;
}

/* Answer REJECT and close. */
int sm_reject(cci__evt_t *evt)
{
	struct sm_req *req = evt->req_state;

	sm_ctl_send(req->sock, SM_CTL_REJECT, NULL, NULL, 0);
	close(req->sock);
	req->sock = -1;
	return CCI_SUCCESS;
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
	CCI__SLIST_UNLINK(&sep->reqs, req, next);
	pthread_mutex_unlock(&sep->lock);
	sm_req_free(req);
}
