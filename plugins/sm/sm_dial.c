/*
 * sm_dial.c - the client side of the handshake.
 *
 * A client connects a socket to the server endpoint's listening socket,
 * creates its receive ring and sends REQ with its hello (mss, ring size,
 * payload) and three descriptors: the ring, its doorbell and its endpoint
 * page.  The server answers ACCEPT with its own three, REJECT, or NORES
 * when it lacks descriptors, memory or mappings; the socket then stays as
 * the connection's control socket.  Each side creates the ring it
 * receives on (sized by its own recv_buf_count and mss) and hands its
 * memfd to the peer, which maps it to produce into.
 *
 * A full backlog is no answer.  The listening socket refuses connect(2)
 * with EAGAIN while its backlog is full: a storm of connects, or a server
 * application slow to take requests.  The connection then waits in its
 * server's queue, in order, and is tried again at every tick and whenever
 * that server answers (it is taking requests, so there may be room),
 * until its connect timeout, or for ever without one.  A server that had
 * no descriptor left to receive the request's answers BUSY: the connect
 * goes to the back of the queue the same way.  A waiting connection holds
 * its socket (none after BUSY) and its request, nothing else: its ring is
 * created when the request can go, and its memfd is closed once the
 * request carries it.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sm.h"

/* A server's queue is found by a hash of its path (FNV-1a), then the path. */
static uint64_t path_key(const char *path)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

static struct sm_dial *dial_of_hlink(struct sm_dlink *l)
{
	return (struct sm_dial *)(void *)((char *)l - offsetof(struct sm_dial, hl));
}

/* The head of the queue of the server at path, or NULL; sep->lock held.
 * The servers with connects waiting are few: a walk of them is cheap. */
static struct sm_dial *dialq_find(struct sm_ep *sep, uint64_t key, const char *path)
{
	assert(cci__mutex_held(&sep->lock));
	for (struct sm_dlink *l = sep->dialq; l; l = l->next) {
		struct sm_dial *h = dial_of_hlink(l);
		if (h->key == key && strcmp(h->sa.sun_path, path) == 0)
			return h;
	}
	return NULL;
}

/* d waits at the back of its server's queue; sep->lock held. */
static void dial_queue(struct sm_ep *sep, struct sm_dial *d)
{
	struct sm_dial *h = dialq_find(sep, d->key, d->sa.sun_path);

	assert(cci__mutex_held(&sep->lock));
	d->queued = 1;
	if (!h) {
		d->prev = d->next = d;
		d->head = 1;
		CCI__DLIST_PUSH(&sep->dialq, &d->hl);
		return;
	}
	d->next = h;
	d->prev = h->prev;
	h->prev->next = d;
	h->prev = d;
}

/* Take d off its server's queue (a no-op if it waits in none); the next
 * connect, if any, heads the queue in d's place; sep->lock held. */
static void dial_unqueue(struct sm_ep *sep, struct sm_dial *d)
{
	struct sm_dial *n = d->next;

	assert(cci__mutex_held(&sep->lock));
	if (!d->queued)
		return;
	if (d->head && n != d) {
		/* n takes d's place on sep->dialq: a walk of it stays valid */
		n->hl = d->hl;
		if (n->hl.prev)
			n->hl.prev->next = &n->hl;
		else
			sep->dialq = &n->hl;
		if (n->hl.next)
			n->hl.next->prev = &n->hl;
		n->head = 1;
	} else if (d->head) {
		CCI__DLIST_UNLINK(&sep->dialq, &d->hl);
	}
	d->prev->next = n;
	n->prev = d->prev;
	d->prev = d->next = NULL;
	d->hl.prev = d->hl.next = NULL;
	d->queued = d->head = 0;
}

/* Send sc's request; the memfd of its ring is closed once it went (the
 * message holds the file).  CCI_EAGAIN when the kernel refuses for now
 * (too many descriptors in flight for this user, or a full socket). */
static int dial_send(struct sm_conn *sc)
{
	struct sm_dial *d = sc->dial;
	struct sm_ctl_hello h = { .core = { .attr = (uint8_t)d->attr, .data_len = d->data_len } };

	memcpy(h.data, d->data, d->data_len);
	if (sm_hello_send(sc, sc->sock, SM_CTL_REQ, &h) != CCI_SUCCESS) {
		if (errno == EAGAIN || errno == ETOOMANYREFS) {
			/* Wait holding the socket alone: nobody has the ring
			 * yet, the next attempt makes it again. */
			sm_conn_rx_drop(sc);
			return CCI_EAGAIN;
		}
		SM_LOG(CCI_LOG_CONN, "sm: cannot send the request to %s: %s", d->sa.sun_path,
		       strerror(errno));
		return CCI_ECONNREFUSED;
	}
	close(sc->rx_fd);
	sc->rx_fd = -1;
	return CCI_SUCCESS;
}

/* sc's socket, if it has none (a new connect, or one the server turned
 * away); CCI_ENOMEM (logged) without a descriptor for it. */
static int dial_socket(struct sm_conn *sc)
{
	if (sc->sock >= 0)
		return CCI_SUCCESS;
	sc->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sc->sock >= 0)
		return CCI_SUCCESS;
	SM_LIMIT_LOG(sc->sep, "sm: cannot connect to %s: no socket: %s", sc->dial->sa.sun_path,
	             strerror(errno));
	return CCI_ENOMEM;
}

/* Connect sc's socket: CCI_EAGAIN while the backlog is full. */
static int dial_connect(struct sm_conn *sc)
{
	struct sm_dial *d = sc->dial;
	int rc = dial_socket(sc);

	if (rc != CCI_SUCCESS)
		return rc;
	if (connect(sc->sock, (struct sockaddr *)&d->sa, sizeof(d->sa)) != 0) {
		if (errno == EAGAIN)
			return CCI_EAGAIN;
		if (errno == ENOMEM || errno == ENOBUFS) {
			SM_LIMIT_LOG(sc->sep, "sm: cannot connect to %s: %s", d->sa.sun_path,
			             strerror(errno));
			return CCI_ENOMEM;
		}
		SM_LOG(CCI_LOG_CONN, "sm: nobody listens at %s: %s", d->sa.sun_path, strerror(errno));
		return CCI_ECONNREFUSED;
	}
	d->connected = 1;
	if (sm_peer_pid(sc->sock, &sc->peer_pid) != CCI_SUCCESS) {
		SM_WARN("sm: %s is served by another user; connection refused", d->sa.sun_path);
		return CCI_ECONNREFUSED;
	}
	return CCI_SUCCESS;
}

/* One attempt of sc's request: connect, create the ring, send REQ.
 * CCI_SUCCESS once it went, CCI_EAGAIN to try again later, else the
 * status the connect fails with (logged). */
static int dial_step(struct sm_conn *sc)
{
	int rc;

	if (!sc->dial->connected) {
		rc = dial_connect(sc);
		if (rc != CCI_SUCCESS)
			return rc;
	}
	if (!sc->rx_seg) {
		rc = sm_conn_rx_create(sc);
		if (rc != CCI_SUCCESS) {
			SM_LIMIT_LOG(sc->sep, "sm: cannot connect to %s: no receive ring: %s",
			             sc->dial->sa.sun_path, strerror(errno));
			return rc;
		}
	}
	return dial_send(sc);
}

void sm_connect_failed(struct sm_conn *sc, int status, int listed)
{
	struct sm_ep *sep = sc->sep;

	sm_core->post_connect(sep->ep, sc->conn->pub.context, status, NULL);
	if (listed) {
		CCI__DLIST_UNLINK(&sep->conns, sc);
		sm_timed_remove(sc);
		sm_conn_unwatch(sc);
		if (sc->dial)
			dial_unqueue(sep, sc->dial);
		sm_conn_destroy_locked(sc);
		return;
	}
	sm_conn_destroy(sc);
}

static void dial_cb(struct ev_loop *loop, ev_io *w, int revents);

/* Watch sc's socket for the server's answer; the loop lock and sep->lock
 * held. */
static void dial_watch(struct sm_conn *sc)
{
	ev_io_init(&sc->ctl_w, dial_cb, sc->sock, EV_READ);
	sc->ctl_w.data = sc;
	ev_io_start(sc->sep->eng.loop, &sc->ctl_w);
	cci__engine_tick(&sc->sep->eng, 1);
}

/* Try the connects of the server whose queue h heads, in order, up to the
 * first that must still wait; the loop lock and sep->lock held. */
static void dialq_serve(struct sm_ep *sep, struct sm_dial *h)
{
	assert(cci__mutex_held(&sep->lock));
	for (struct sm_dial *d = h, *next; d; d = next) {
		int rc = dial_step(d->sc);
		if (rc == CCI_EAGAIN)
			return;
		next = d->next != d ? d->next : NULL;
		dial_unqueue(sep, d);
		if (rc == CCI_SUCCESS)
			dial_watch(d->sc);
		else
			sm_connect_failed(d->sc, rc, 1);
	}
}

void sm_dial_retry(struct sm_ep *sep)
{
	for (struct sm_dlink *l = sep->dialq, *next; l; l = next) {
		next = l->next; /* serving one server's queue touches no other */
		dialq_serve(sep, dial_of_hlink(l));
	}
}

/* The server had no descriptor for the request's (BUSY): the connect
 * waits at the back of its server's queue with nothing but its request,
 * and asks again on a new socket.  The loop lock and sep->lock held. */
static void dial_requeue(struct sm_conn *sc)
{
	assert(cci__mutex_held(&sc->sep->lock));
	SM_LOG(CCI_LOG_CONN, "sm: %s (pid %d) has no descriptor for the request for now; "
	       "the connect waits", sc->dial->sa.sun_path, (int)sc->peer_pid);
	sm_conn_unwatch(sc);
	sm_conn_rx_drop(sc);
	sc->dial->connected = 0;
	dial_queue(sc->sep, sc->dial);
}

/* The n bytes (or sm_ctl_recv's status n) of the answer in raw, decoded
 * into h: NULL, or why it is no answer (*rc then the connect's status). */
static const char *answer_check(struct sm_conn *sc, const struct sm_ctl_hello *raw, int n,
                                int nfds, struct sm_ctl_hello *h, int *rc)
{
	const char *why = NULL;

	*rc = CCI_ECONNREFUSED;
	if (n == SM_CTL_RECV_NOFDS) {
		*rc = CCI_ENOMEM;
		return "no descriptor left to receive the server's segments";
	}
	if (n == SM_CTL_RECV_TOOMANY)
		why = "more descriptors than an answer carries";
	else if (n <= 0)
		return "the server closed without an answer";
	else if (sm_ctl_decode(raw, (size_t)n, nfds, h, &why) == CCI_SUCCESS &&
	         h->hdr.type != SM_CTL_ACCEPT && h->hdr.type != SM_CTL_REJECT &&
	         h->hdr.type != SM_CTL_NORES && h->hdr.type != SM_CTL_BUSY)
		why = "not an answer to a request";
	if (why) {
		SM_WARN("sm: malformed answer from %s (pid %d): %s; connection refused",
		        sc->dial->sa.sun_path, (int)sc->peer_pid, why);
		return why;
	}
	if (h->hdr.type == SM_CTL_NORES) {
		*rc = CCI_ENOMEM;
		return "the server lacks descriptors, memory or mappings for another connection";
	}
	if (h->hdr.type == SM_CTL_REJECT)
		return "rejected";
	return NULL;
}

/* The server answered (or hung up): open sc, fail it, or (BUSY) queue it
 * again.  1 if the server took a request from its backlog, 0 if it
 * answered BUSY (it is short) or nothing came.  The loop lock and
 * sep->lock held. */
static int client_on_readable(struct sm_conn *sc)
{
	struct sm_ctl_hello raw, h;
	struct sm_hello_maps m;
	const char *path = sc->dial->sa.sun_path, *why;
	int fds[SM_HELLO_FDS], nfds, rc;
	int n = sm_ctl_recv(sc->sock, &raw, sizeof(raw), fds, &nfds);

	assert(cci__mutex_held(&sc->sep->lock));
	if (n == -1)
		return 0;
	why = answer_check(sc, &raw, n, nfds, &h, &rc);
	/* An empty record (the server closed, or sent nothing) may carry
	 * descriptors too: only an ACCEPT's are kept. */
	if (why || h.hdr.type != SM_CTL_ACCEPT) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (!why) { /* BUSY */
			dial_requeue(sc);
			return 0;
		}
		if (rc == CCI_ENOMEM)
			SM_LIMIT_LOG(sc->sep, "sm: cannot connect to %s (pid %d): %s", path,
			             (int)sc->peer_pid, why);
		sm_connect_failed(sc, rc, 1);
		return 1;
	}
	rc = sm_hello_map(sc->sep, &h, fds, &m, &why);
	if (rc != CCI_SUCCESS) {
		if (rc == CCI_ENOMEM)
			SM_LIMIT_LOG(sc->sep, "sm: cannot connect to %s: %s", path, why);
		else
			SM_WARN("sm: cannot map the segments of %s (pid %d): %s; connection refused",
			        path, (int)sc->peer_pid, why);
		sm_connect_failed(sc, rc == CCI_ENOMEM ? CCI_ENOMEM : CCI_ECONNREFUSED, 1);
		return 1;
	}
	sm_conn_attach(sc, &m);
	sm_conn_watch(sc); /* from now on the open connection's watcher */
	sm_conn_open(sc, &h, CCI_EVENT_CONNECT);
	return 1;
}

/* The client's watcher until the answer. */
static void dial_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sm_conn *sc = w->data;
	struct sm_ep *sep = sc->sep;
	struct sockaddr_un sa = sc->dial->sa; /* sc->dial goes with the answer */
	uint64_t key = sc->dial->key;
	struct sm_dial *h;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	/* The server takes requests: its backlog may have room.  Up to the
	 * first still full: an answer frees about one place. */
	if (client_on_readable(sc) && (h = dialq_find(sep, key, sa.sun_path)) != NULL)
		dialq_serve(sep, h);
	pthread_mutex_unlock(&sep->lock);
}

/* sc's request and the server's socket; CCI_EINVAL for a bad URI. */
static int dial_new(struct sm_conn **scp, struct sm_ep *sep, const char *uri, const void *data,
                    uint32_t data_len, cci_conn_attribute_t attr, void *context)
{
	struct sm_dial *d = calloc(1, sizeof(*d) + data_len);
	struct sm_conn *sc;

	if (!d)
		return CCI_ENOMEM;
	d->sa.sun_family = AF_UNIX;
	if (sm_uri_parse(uri, d->sa.sun_path, sizeof(d->sa.sun_path)) != CCI_SUCCESS) {
		SM_LOG(CCI_LOG_CONN, "sm: cannot parse URI \"%s\" (want sm://<dir>/<pid>/<id>)", uri);
		free(d);
		return CCI_EINVAL;
	}
	d->key = path_key(d->sa.sun_path);
	d->attr = (uint32_t)attr;
	d->data_len = data_len;
	if (data_len)
		memcpy(d->data, data, data_len);
	pthread_mutex_lock(&sep->lock);
	sc = sm_conn_new(sep, attr, context);
	pthread_mutex_unlock(&sep->lock);
	if (!sc) {
		free(d);
		return CCI_ENOMEM;
	}
	sc->dial = d;
	d->sc = sc;
	*scp = sc;
	return CCI_SUCCESS;
}

/* Are connects to sc's server waiting already?  Then sc waits behind
 * them instead of trying first.  Another thread may queue one right after
 * the look: concurrent connects have no order between them. */
static int dial_must_queue(struct sm_conn *sc)
{
	struct sm_ep *sep = sc->sep;
	int waiting;

	pthread_mutex_lock(&sep->lock);
	waiting = sep->dialq && dialq_find(sep, sc->dial->key, sc->dial->sa.sun_path);
	pthread_mutex_unlock(&sep->lock);
	return waiting;
}

/*
 * The first attempt runs here, outside the locks (sc is ours alone until
 * listed), unless connects to the same server wait already.  A connect
 * that this process cannot afford (no descriptor for the socket, no memory
 * for the ring) fails at once, from cci_connect; one the server refuses
 * gets its CONNECT event; one that finds the backlog full waits.
 */
int sm_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
               cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct sm_ep *sep = sm_ep_of(ep);
	struct sm_conn *sc = NULL;
	int rc = dial_new(&sc, sep, uri, data, data_len, attr, context);

	if (rc == CCI_SUCCESS)
		rc = dial_socket(sc);
	if (rc == CCI_SUCCESS)
		rc = dial_must_queue(sc) ? CCI_EAGAIN : dial_step(sc);
	if (rc == CCI_ENOMEM || rc == CCI_ERANGE || rc == CCI_EINVAL) {
		if (sc)
			sm_conn_destroy(sc);
		return rc;
	}
	if (rc != CCI_SUCCESS && rc != CCI_EAGAIN) {
		sm_connect_failed(sc, rc, 0);
		return CCI_SUCCESS;
	}
	pthread_mutex_lock(&sep->eng.lock);
	pthread_mutex_lock(&sep->lock);
	if (timeout) {
		cci__ct_connecting(&sc->base.timers, timeout, cci__now_ns());
		sm_due_note(sc);
	}
	CCI__DLIST_PUSH(&sep->conns, sc);
	if (rc == CCI_SUCCESS) {
		dial_watch(sc);
	} else {
		SM_LOG(CCI_LOG_CONN, "sm: %s: backlog full (or too many descriptors in flight, or "
		       "connects waiting before), the connect waits", sc->dial->sa.sun_path);
		dial_queue(sep, sc->dial);
		cci__engine_tick(&sep->eng, 1);
	}
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	cci__engine_cmd(&sep->eng, 0); /* the loop sees the watcher and runs the tick */
	return CCI_SUCCESS;
}
