/*
 * sm_hs.c - the server side of the handshake (the client's is sm_dial.c).
 *
 * The control thread accepts the sockets waiting on the listening socket
 * and reads each one's REQ; the client's ring is mapped and its endpoint
 * taken (sm_peer.c) at once, so a request holds one descriptor, its
 * socket, however long the application takes to answer.  Then the
 * request is posted; cci_accept creates our ring and answers ACCEPT with
 * our three descriptors, cci_reject answers REJECT, and a request this
 * process cannot afford (memory, mappings) is answered NORES: the
 * client's connect fails with CCI_ENOMEM.
 *
 * Descriptors running out is a moment to wait through, not a refusal.
 * Accepting a socket takes one, receiving its REQ three more: a server
 * with one or two left accepts, then loses the REQ's.  It answers BUSY
 * (the client asks again later, sm_dial.c), and like an accept(2) that
 * finds none it stops watching the listening socket until the next tick
 * (5 ms): the clients wait in the backlog and their queues instead of the
 * thread spinning on a socket that stays readable, and the warning is
 * said once a second at most.  An ACCEPT whose ring finds no descriptor
 * waits too, tried again at each tick (before the listening socket takes
 * the descriptors freed meanwhile), for up to 10 s.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sm.h"

static void listen_pause(struct sm_ep *sep, const char *why);

/* Refuse req for lack of resources: answer NORES and forget it; loop
 * thread, sep->lock held. */
static void req_nores(struct sm_ep *sep, struct sm_req *req, const char *why)
{
	assert(cci__mutex_held(&sep->lock));
	SM_LIMIT_LOG(sep, "sm: %s: request from pid %d refused: %s", sep->sock_path,
	             (int)req->peer_pid, why);
	sm_ctl_send(req->sock, SM_CTL_NORES, NULL, NULL, 0);
	sm_req_drop(sep, req);
}

/* req's descriptors were lost for want of room: ask its client to try
 * again later (BUSY), and accept no more sockets until the tick, since
 * each would take a descriptor its request needs; sep->lock held. */
static void req_busy(struct sm_ep *sep, struct sm_req *req)
{
	assert(cci__mutex_held(&sep->lock));
	SM_LOG(CCI_LOG_CONN, "sm: %s: no descriptor left for the request of pid %d; it asks "
	       "again later", sep->sock_path, (int)req->peer_pid);
	sm_ctl_send(req->sock, SM_CTL_BUSY, NULL, NULL, 0);
	sm_req_drop(sep, req);
	listen_pause(sep, "no descriptor left to receive requests");
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
	int fds[SM_HELLO_FDS], nfds, rc, n = sm_ctl_recv(req->sock, &raw, sizeof(raw), fds, &nfds);
	const char *why;

	assert(cci__mutex_held(&sep->lock));
	if (n == -1)
		return;
	if (n == SM_CTL_RECV_NOFDS) {
		req_busy(sep, req);
		return;
	}
	why = n == SM_CTL_RECV_TOOMANY ? "more descriptors than a request carries (protocol error)"
	                               : req_check(req, &raw, n, nfds);
	if (why) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		/* A client that gives up before asking (its connect failed on
		 * its side, or it died) is no fault of anyone's. */
		if (n == 0 || n == -2)
			SM_LOG(CCI_LOG_CONN, "sm: %s: pid %d left before asking", sep->sock_path,
			       (int)req->peer_pid);
		else
			SM_WARN("sm: %s: request from pid %d dropped: %s", sep->sock_path,
			        (int)req->peer_pid, why);
		sm_req_drop(sep, req);
		return;
	}
	rc = sm_hello_map(sep, &req->hello, fds, &req->maps, &why);
	if (rc == CCI_ENOMEM) {
		req_nores(sep, req, why);
		return;
	}
	if (rc != CCI_SUCCESS) {
		SM_WARN("sm: %s: request from pid %d dropped: %s", sep->sock_path,
		        (int)req->peer_pid, why);
		sm_req_drop(sep, req);
		return;
	}
	/* The request is the event's now; the socket waits for the answer
	 * (sep->lock, held, keeps cci_accept off it until it is posted). */
	ev_io_stop(sep->eng.loop, &req->w);
	if (sm_core->post_request(sep->ep, (cci_conn_attribute_t)req->hello.core.attr,
	                          req->hello.data, req->hello.core.data_len, req) != CCI_SUCCESS) {
		req_nores(sep, req, "no memory for its event");
		return;
	}
	CCI__DLIST_UNLINK(&sep->reqs, req);
	CCI__DLIST_PUSH(&sep->posted, req);
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

/* accept(2) failed for lack of descriptors or memory, or a request's
 * descriptors were lost: stop watching the listening socket (it stays
 * readable: the thread would spin) until the tick looks again; sep->lock
 * held. */
static void listen_pause(struct sm_ep *sep, const char *why)
{
	assert(cci__mutex_held(&sep->lock));
	ev_io_stop(sep->eng.loop, &sep->listen_w);
	if (!sep->listen_paused)
		SM_LIMIT_LOG(sep, "sm: %s: cannot accept connections: %s; clients wait until "
		             "a descriptor frees", sep->sock_path, why);
	sep->listen_paused = 1;
	cci__engine_tick(&sep->eng, 1);
}

/* A socket accepted: a request waiting for its hello. */
static void req_new(struct sm_ep *sep, int fd)
{
	struct sm_req *req;
	pid_t pid = 0;

	if (sm_peer_pid(fd, &pid) != CCI_SUCCESS) {
		SM_WARN("sm: %s: connection from another user refused", sep->sock_path);
		close(fd);
		return;
	}
	req = calloc(1, sizeof(*req));
	if (!req) {
		SM_LIMIT_LOG(sep, "sm: %s: request from pid %d refused: out of memory",
		             sep->sock_path, (int)pid);
		sm_ctl_send(fd, SM_CTL_NORES, NULL, NULL, 0);
		close(fd);
		return;
	}
	req->sep = sep;
	req->sock = fd;
	req->peer_pid = pid;
	req->since_ns = cci__now_ns();
	CCI__DLIST_PUSH(&sep->reqs, req);
	ev_io_init(&req->w, req_cb, fd, EV_READ);
	req->w.data = req;
	ev_io_start(sep->eng.loop, &req->w);
	cci__engine_tick(&sep->eng, 1); /* its request must come in time */
}

/* Accepting (a descriptor, or an empty backlog) works again. */
static void listen_recovered(struct sm_ep *sep)
{
	if (!sep->listen_paused)
		return;
	SM_LOG(CCI_LOG_CONN, "sm: %s: accepting connections again", sep->sock_path);
	sep->listen_paused = 0;
}

/* Take the sockets waiting on the listening socket, at most
 * SM_ACCEPT_BATCH (sep->lock is held meanwhile; the watcher, level
 * triggered, fires again for the rest); sep->lock held. */
static void listen_take(struct sm_ep *sep)
{
	assert(cci__mutex_held(&sep->lock));
	for (int i = 0; i < SM_ACCEPT_BATCH;) {
		int fd = accept4(sep->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				listen_recovered(sep);
			else
				listen_pause(sep, strerror(errno));
			return;
		}
		listen_recovered(sep);
		req_new(sep, fd);
		i++;
	}
}

void sm_hs_on_listen(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sm_ep *sep = w->data;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	listen_take(sep);
	pthread_mutex_unlock(&sep->lock);
}

void sm_hs_listen_resume(struct sm_ep *sep)
{
	if (!sep->listen_paused || ev_is_active(&sep->listen_w))
		return;
	ev_io_start(sep->eng.loop, &sep->listen_w);
	/* At once: with the backlog empty the watcher would never fire, and
	 * listen_paused (which keeps the tick running) never clear. */
	listen_take(sep);
}

/* errno of a failed sm_conn_rx_create: this process, or the system, is
 * out of descriptors for the moment. */
static int short_of_fds(int err)
{
	return err == EMFILE || err == ENFILE;
}

/* Send sc's ACCEPT (its ring made again if it was dropped while the
 * answer waited).  CCI_EAGAIN when it cannot go for now: no descriptor
 * for the ring, or the kernel refuses the descriptors in flight
 * (ETOOMANYREFS, a limit of RLIMIT_NOFILE unless CAP_SYS_RESOURCE) while
 * a storm of requests waits in the backlog; the ring is dropped then, so
 * that a waiting answer holds only its socket. */
static int answer_send(struct sm_conn *sc)
{
	struct sm_ctl_hello h = { .core.data_len = 0 };
	int rc;

	if (!sc->rx_seg) {
		rc = sm_conn_rx_create(sc);
		if (rc != CCI_SUCCESS && short_of_fds(errno))
			return CCI_EAGAIN;
		if (rc != CCI_SUCCESS) {
			SM_LIMIT_LOG(sc->sep, "sm: %s: cannot accept pid %d: no receive ring: %s",
			             sc->sep->sock_path, (int)sc->peer_pid, strerror(errno));
			return CCI_ENOMEM;
		}
	}
	if (sm_hello_send(sc, sc->sock, SM_CTL_ACCEPT, &h) == CCI_SUCCESS) {
		close(sc->rx_fd); /* the answer holds the file */
		sc->rx_fd = -1;
		return CCI_SUCCESS;
	}
	if (errno == EAGAIN || errno == ETOOMANYREFS) {
		sm_conn_rx_drop(sc);
		return CCI_EAGAIN;
	}
	SM_LOG(CCI_LOG_CONN, "sm: client pid %d left before the answer", (int)sc->peer_pid);
	return CCI_ERR_DISCONNECTED;
}

/* The ACCEPT went (rc CCI_SUCCESS): open sc; or it cannot go: the
 * ACCEPT event fails with rc.  The loop lock and sep->lock held. */
static void answer_done(struct sm_conn *sc, int rc)
{
	struct sm_ep *sep = sc->sep;
	struct sm_ctl_hello h = { .core.mss = sc->peer_mss };

	assert(cci__mutex_held(&sep->lock));
	sc->answer_until_ns = 0;
	if (rc == CCI_SUCCESS) {
		sm_conn_watch(sc);
		sm_conn_open(sc, &h, CCI_EVENT_ACCEPT);
		return;
	}
	if (rc == CCI_ENOMEM)
		sm_ctl_send(sc->sock, SM_CTL_NORES, NULL, NULL, 0);
	sm_core->post_accept(sep->ep, sc->conn->pub.context, rc, NULL);
	CCI__DLIST_UNLINK(&sep->conns, sc);
	sm_timed_remove(sc);
	sm_conn_destroy_locked(sc);
}

int sm_hs_answer_retry(struct sm_conn *sc, uint64_t now)
{
	int rc = answer_send(sc);

	if (rc == CCI_EAGAIN && now < sc->answer_until_ns)
		return 1;
	if (rc == CCI_EAGAIN)
		SM_LIMIT_LOG(sc->sep, "sm: %s: cannot answer pid %d: no descriptor for its ring, "
		             "or the kernel kept refusing them (too many in flight), for %llu s",
		             sc->sep->sock_path, (int)sc->peer_pid,
		             (unsigned long long)(SM_REQ_WAIT_NS / 1000000000ull));
	answer_done(sc, rc == CCI_EAGAIN ? CCI_ENOMEM : rc);
	return rc == CCI_SUCCESS ? 0 : -1;
}

/* Server side, the loop lock and sep->lock held: build the connection and
 * answer ACCEPT, now or, when descriptors are short for now, at a later
 * tick (sm_hs_answer_retry).  CCI_ENOMEM (logged) when this process
 * cannot afford the connection. */
static int accept_locked(struct sm_ep *sep, struct sm_req *req, void *context)
{
	struct sm_conn *sc = sm_conn_new(sep, (cci_conn_attribute_t)req->hello.core.attr, context);
	int rc;

	assert(cci__mutex_held(&sep->lock));
	if (!sc) {
		SM_LIMIT_LOG(sep, "sm: %s: cannot accept pid %d: out of memory", sep->sock_path,
		             (int)req->peer_pid);
		return CCI_ENOMEM;
	}
	sc->peer_pid = req->peer_pid;
	sc->peer_mss = req->hello.core.mss;
	rc = sm_conn_rx_create(sc);
	if (rc != CCI_SUCCESS && !short_of_fds(errno)) {
		SM_LIMIT_LOG(sep, "sm: %s: cannot accept pid %d: no receive ring: %s",
		             sep->sock_path, (int)req->peer_pid, strerror(errno));
		sm_conn_destroy_locked(sc);
		return rc;
	}
	sm_conn_attach(sc, &req->maps);
	sc->sock = req->sock; /* the connection owns the socket now */
	req->sock = -1;
	CCI__DLIST_PUSH(&sep->conns, sc);
	rc = sc->rx_seg ? answer_send(sc) : CCI_EAGAIN;
	if (rc != CCI_EAGAIN) {
		answer_done(sc, rc);
		return CCI_SUCCESS;
	}
	SM_LOG(CCI_LOG_CONN, "sm: %s: the answer to pid %d waits for descriptors",
	       sep->sock_path, (int)sc->peer_pid);
	sc->answer_until_ns = cci__now_ns() + SM_REQ_WAIT_NS;
	sm_timed_add(sc);
	cci__engine_tick(&sep->eng, 1);
	return CCI_SUCCESS;
}

/* Forget a request that never became an event; loop thread, sep->lock held. */
void sm_req_drop(struct sm_ep *sep, struct sm_req *req)
{
	assert(cci__mutex_held(&sep->lock));
	CCI__DLIST_UNLINK(&sep->reqs, req);
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
	struct sm_req *req = evt->req_state;
	int rc;

	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	rc = accept_locked(sep, req, context);
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	if (rc != CCI_SUCCESS) {
		/* This side's limit, not the application's refusal. */
		sm_ctl_send(req->sock, SM_CTL_NORES, NULL, NULL, 0);
		close(req->sock);
		req->sock = -1;
	}
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
	sm_hello_unmap(req->sep, &req->maps);
	free(req);
}

/* The CONNECT_REQUEST event came back, answered: forget the request. */
void sm_request_done(cci__evt_t *evt)
{
	struct sm_req *req = evt->req_state;
	struct sm_ep *sep = sm_ep_of(evt->ep);

	pthread_mutex_lock(&sep->lock);
	CCI__DLIST_UNLINK(&sep->posted, req);
	pthread_mutex_unlock(&sep->lock);
	sm_req_free(req);
}
