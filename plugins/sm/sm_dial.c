/*
 * sm_dial.c - the client side of the handshake, and the watcher of every
 * connection's control socket.
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
 * application slow to take requests.  The connection then waits in
 * sep->dials, in order, and is tried again at every tick and whenever an
 * answer comes (the server is taking requests, so there may be room),
 * until its connect timeout, or for ever without one.  A waiting
 * connection holds its socket and its request, nothing else: its ring is
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

#define SM_DIAL_FULL_MAX 4 /* servers found full in one pass that it still skips */

int sm_hello_send(struct sm_conn *sc, int sock, uint16_t type, struct sm_ctl_hello *h)
{
	const int fds[SM_HELLO_FDS] = { sc->rx_fd, sc->sep->bell_fd, sc->sep->page_fd };

	h->mss = sc->sep->mss;
	h->pid = (uint32_t)getpid();
	h->ring_size = sc->rx.size;
	return sm_ctl_send(sock, type, h, fds, SM_HELLO_FDS);
}

/* Send sc's request; the memfd of its ring is closed once it went (the
 * message holds the file).  CCI_EAGAIN when the kernel refuses for now
 * (too many descriptors in flight for this user, or a full socket). */
static int dial_send(struct sm_conn *sc)
{
	struct sm_dial *d = sc->dial;
	struct sm_ctl_hello h = { .attr = d->attr, .data_len = d->data_len };

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

/* Connect sc's socket: CCI_EAGAIN while the backlog is full. */
static int dial_connect(struct sm_conn *sc)
{
	struct sm_dial *d = sc->dial;

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

/* Client side: the server answered, or hung up.  sep->lock held. */
static void client_on_readable(struct sm_conn *sc)
{
	struct sm_ctl_hello raw, h;
	struct sm_hello_maps m;
	const char *path = sc->dial->sa.sun_path, *why = NULL;
	int fds[SM_HELLO_FDS], nfds, rc = CCI_ECONNREFUSED;
	int n = sm_ctl_recv(sc->sock, &raw, sizeof(raw), fds, &nfds);

	if (n == -1)
		return;
	if (n == SM_CTL_RECV_NOFDS) {
		SM_LIMIT_LOG(sc->sep, "sm: cannot connect to %s: no descriptor left to receive "
		             "the server's segments", path);
		rc = CCI_ENOMEM;
		goto err;
	}
	if (n > 0 && sm_ctl_decode(&raw, (size_t)n, nfds, &h, &why) == CCI_SUCCESS &&
	    h.hdr.type != SM_CTL_ACCEPT && h.hdr.type != SM_CTL_REJECT &&
	    h.hdr.type != SM_CTL_NORES)
		why = "not an answer to a request";
	/* An empty record (the server closed, or sent nothing) may carry
	 * descriptors too: only an ACCEPT's are kept. */
	if (n <= 0 || why || h.hdr.type != SM_CTL_ACCEPT) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (why)
			SM_WARN("sm: malformed answer from %s (pid %d): %s; connection refused", path,
			        (int)sc->peer_pid, why);
		if (n > 0 && !why && h.hdr.type == SM_CTL_NORES) {
			SM_LIMIT_LOG(sc->sep, "sm: cannot connect to %s: the server (pid %d) lacks "
			             "descriptors, memory or mappings for another connection", path,
			             (int)sc->peer_pid);
			rc = CCI_ENOMEM;
		}
		goto err;
	}
	rc = sm_hello_map(sc->sep, &h, fds, &m, &why);
	if (rc != CCI_SUCCESS) {
		if (rc == CCI_ENOMEM)
			SM_LIMIT_LOG(sc->sep, "sm: cannot connect to %s: %s", path, why);
		else
			SM_WARN("sm: cannot map the segments of %s (pid %d): %s; connection refused",
			        path, (int)sc->peer_pid, why);
		rc = rc == CCI_ENOMEM ? CCI_ENOMEM : CCI_ECONNREFUSED;
		goto err;
	}
	sm_conn_attach(sc, &m);
	sm_conn_open(sc, &h, CCI_EVENT_CONNECT);
	return;

err:
	sm_connect_failed(sc, rc, 1);
}

static void conn_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sm_conn *sc = w->data;
	struct sm_ep *sep = sc->sep;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	if (cci__conn_state(&sc->base) == CCI__CONN_CONNECTING) {
		client_on_readable(sc);
		/* The server takes requests: its backlog may have room.  Up
		 * to the first still full: an answer frees about one place,
		 * and a walk of thousands per answer would cost more. */
		if (sep->dials)
			sm_dial_retry(sep, 0);
	} else {
		sm_conn_on_ctl(sc);
	}
	pthread_mutex_unlock(&sep->lock);
}

void sm_conn_watch(struct sm_conn *sc)
{
	ev_io_init(&sc->ctl_w, conn_cb, sc->sock, EV_READ);
	sc->ctl_w.data = sc;
	ev_io_start(sc->sep->eng.loop, &sc->ctl_w);
	cci__engine_tick(&sc->sep->eng, 1);
}

void sm_dial_retry(struct sm_ep *sep, int all)
{
	const char *full[SM_DIAL_FULL_MAX];
	int nfull = 0;

	for (struct sm_dial *d = sep->dials, *next; d; d = next) {
		int rc, skip = 0;
		next = d->next;
		for (int i = 0; i < nfull && !skip; i++)
			skip = strcmp(full[i], d->sa.sun_path) == 0;
		if (skip)
			continue;
		rc = dial_step(d->sc);
		if (rc == CCI_EAGAIN) {
			if (!all || nfull == SM_DIAL_FULL_MAX)
				break;
			full[nfull++] = d->sa.sun_path; /* d stays listed: the text lives */
			continue;
		}
		CCI__DQ_UNLINK(&sep->dials, &sep->dials_tail, d);
		if (rc == CCI_SUCCESS)
			sm_conn_watch(d->sc);
		else
			sm_connect_failed(d->sc, rc, 1);
	}
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
	d->attr = (uint32_t)attr;
	d->data_len = data_len;
	if (data_len)
		memcpy(d->data, data, data_len);
	sc = sm_conn_new(sep, attr, context);
	if (!sc) {
		free(d);
		return CCI_ENOMEM;
	}
	sc->dial = d;
	d->sc = sc;
	*scp = sc;
	return CCI_SUCCESS;
}

/*
 * The first attempt runs here, outside the locks (sc is ours alone until
 * listed).  A connect that this process cannot afford (no descriptor for
 * the socket, no memory for the ring) fails at once, from cci_connect; one
 * the server refuses gets its CONNECT event; one that finds the backlog
 * full waits.
 */
int sm_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
               cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct sm_ep *sep = sm_ep_of(ep);
	struct sm_conn *sc = NULL;
	int rc = dial_new(&sc, sep, uri, data, data_len, attr, context);

	if (rc != CCI_SUCCESS)
		return rc;
	sc->sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sc->sock < 0) {
		rc = cci__errno_status(errno);
		SM_LIMIT_LOG(sep, "sm: cannot connect to %s: no socket: %s", sc->dial->sa.sun_path,
		             strerror(errno));
		sm_conn_destroy(sc);
		return rc;
	}
	rc = dial_step(sc);
	if (rc == CCI_ENOMEM || rc == CCI_ERANGE) {
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
		sm_timed_add(sc);
	}
	CCI__DLIST_PUSH(&sep->conns, sc);
	if (rc == CCI_SUCCESS) {
		sm_conn_watch(sc);
	} else {
		SM_LOG(CCI_LOG_CONN, "sm: %s: backlog full (or too many descriptors in flight), "
		       "the connect waits", sc->dial->sa.sun_path);
		CCI__DQ_APPEND(&sep->dials, &sep->dials_tail, sc->dial);
		cci__engine_tick(&sep->eng, 1);
	}
	pthread_mutex_unlock(&sep->lock);
	pthread_mutex_unlock(&sep->eng.lock);
	cci__engine_cmd(&sep->eng, 0); /* the loop sees the watcher and runs the tick */
	return CCI_SUCCESS;
}
