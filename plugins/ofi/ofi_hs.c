/*
 * ofi_hs.c - the handshake that opens a connection (REQ, ACCEPT, REJECT,
 * CANCEL) and the requests a server holds.
 *
 * The handshake is a few messages on the RDM endpoint.  The client sends
 * REQ to the server's address with its own provider address (so the
 * server can answer without FI_SOURCE), its connection id, the credits it
 * grants and the connect payload.  The server posts CONNECT_REQUEST;
 * cci_accept sends ACCEPT with the server's id and credits, cci_reject
 * sends REJECT.  A client whose connect timeout expires sends CANCEL, so
 * a server still holding the request (or a connection it accepted a
 * moment too late) lets it go.
 */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

/* The AV entry of a peer (a reference in *peer_p), unless it is a closed
 * endpoint of this process (see ofi_live.c) or nobody is there
 * (ofi_reach.c): CCI_ECONNREFUSED; CCI_ENOMEM past a limit.  An entry
 * kept for an shm peer whose process has exited since is stale (the
 * provider maps its dead region): it is cut off, and the address looked
 * at afresh, in case a new endpoint took the name. */
static int peer_get(struct ofi_ep *sep, const uint8_t *addr, size_t len, struct ofi_peer **peer_p)
{
	int rc;

	*peer_p = NULL;
	if (ofi_live_gone(sep, addr, len))
		return CCI_ECONNREFUSED;
	rc = ofi_peer_get(sep, addr, len, peer_p);
	if (rc == CCI_SUCCESS && ofi_peer_owner_gone(*peer_p)) {
		OFI_LOG(CCI_LOG_CONN, "ofi: the process at %s has exited", (const char *)addr);
		ofi_peer_cut(sep, *peer_p);
		ofi_peer_put(sep, *peer_p);
		rc = ofi_peer_get(sep, addr, len, peer_p);
	}
	return rc;
}

/* Client: the connect failed (unless it opened meanwhile); report it and
 * let oc go. */
static void connect_failed(struct ofi_conn *oc, int status, int cq_held)
{
	cci__conn_t *conn;

	pthread_mutex_lock(&oc->lock);
	if (ofi_conn_state(oc) != CCI__CONN_CONNECTING) {
		pthread_mutex_unlock(&oc->lock);
		return;
	}
	conn = oc->conn;
	ofi_conn_move(oc, CCI__CONN_FAILED);
	oc->conn = NULL;
	ofi_tx_fail_all(oc, status, 0);
	pthread_mutex_unlock(&oc->lock);
	OFI_LOG(CCI_LOG_CONN, "ofi: connect %08x failed (status %d)", oc->id, status);
	ofi_core->post_connect(oc->sep->ep, conn->pub.context, status, NULL);
	ofi_core->conn_release(conn);
	ofi_conn_unlist(oc, cq_held);
}

/* Our hello for oc: a request says its attribute, an answer none. */
static void hello_fill(struct ofi_conn *oc, enum cci__hello_kind kind, struct ofi_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->core = (struct cci__hello){
		.attr = kind == CCI__HELLO_REQUEST ? (uint8_t)oc->attr : 0,
		.mss = oc->sep->mss, .credits = oc->cr.window, .nonce = oc->nonce };
	h->id = oc->id;
	h->proc = oc->sep->self;
	h->flags = oc->sep->imm ? OFI_HELLO_IMM : 0;
}

static int send_req(struct ofi_conn *oc, const void *data, uint32_t data_len)
{
	struct ofi_ep *sep = oc->sep;
	uint8_t body[OFI_CTL_BODY_MAX];
	struct ofi_hello h;
	int rc;

	hello_fill(oc, CCI__HELLO_REQUEST, &h);
	h.addr_len = (uint32_t)sep->addr_len;
	h.core.data_len = data_len;
	ofi_hello_encode(&h, body);
	memcpy(body + OFI_HELLO_LEN, sep->addr, sep->addr_len);
	if (data_len)
		memcpy(body + OFI_HELLO_LEN + sep->addr_len, data, data_len);
	pthread_mutex_lock(&oc->lock);
	rc = ofi_ctl_send(oc, OFI_T_REQ, 0, body,
	                  (uint32_t)(OFI_HELLO_LEN + sep->addr_len + data_len), OFI_CTL_TRACKED);
	pthread_mutex_unlock(&oc->lock);
	return rc;
}

int ofi_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct ofi_ep *sep = ofi_ep_of(ep);
	uint8_t addr[OFI_ADDR_MAX];
	size_t alen = 0;
	struct ofi_peer *peer;
	struct ofi_pidw *owner;
	struct ofi_conn *oc;
	int rc;

	rc = ofi_uri_parse(sep, uri, addr, &alen);
	if (rc != CCI_SUCCESS) {
		OFI_LOG(CCI_LOG_CONN, "ofi: cannot use URI \"%s\" (want ofi://%s/<address>)", uri,
		        sep->dev->core_name);
		return rc;
	}
	/* Past a limit the connect fails at once (logged where it was met). */
	if (peer_get(sep, addr, alen, &peer) == CCI_ENOMEM)
		return CCI_ENOMEM;
	oc = ofi_conn_new(sep, attr, context);
	if (!oc) {
		OFI_WARN("ofi: connect to %s: endpoint %s is out of memory or holds %u connections, "
		         "its most", uri, ep->uri, OFI_MAX_CONNS);
		ofi_peer_put(sep, peer);
		return CCI_ENOMEM;
	}
	/* shm: the server's process, watched until it answers (the timer
	 * refuses the connect if it exits first). */
	owner = peer ? ofi_peer_owner_ref(sep, peer) : NULL;
	pthread_mutex_lock(&oc->lock); /* the timer reads these under it */
	oc->is_client = 1;
	if (cci__random64(&oc->nonce) != CCI_SUCCESS)
		oc->nonce = cci__now_ns() ^ (uint64_t)(uintptr_t)oc;
	oc->peer = peer;
	oc->start_ns = cci__now_ns();
	if (timeout)
		cci__ct_connecting(&oc->base.timers, timeout, oc->start_ns);
	atomic_store_explicit(&oc->pidw, owner, memory_order_release);
	pthread_mutex_unlock(&oc->lock);
	rc = oc->peer ? send_req(oc, data, data_len) : CCI_ECONNREFUSED;
	if (rc != CCI_SUCCESS && rc != CCI_ECONNREFUSED) {
		/* The provider could not even try (out of descriptors or memory:
		 * tcp;ofi_rxm opens a socket to a new peer here). */
		OFI_WARN("ofi: connect to %s: the provider refused the request: %s (a new "
		         "tcp peer takes a descriptor)", uri, ofi_core->status_text(rc));
		rc = rc == CCI_ERR_DISCONNECTED ? CCI_ECONNREFUSED : rc;
	}
	if (rc != CCI_SUCCESS)
		connect_failed(oc, rc, 0);
	return CCI_SUCCESS;
}

/* The connect timeout expired (progress thread, cq_lock held). */
void ofi_connect_timeout(struct ofi_conn *oc)
{
	struct ofi_cancel c = { .id = oc->id, .nonce = oc->nonce };
	uint8_t body[OFI_CANCEL_LEN];

	assert(cci__spin_held(&oc->sep->cq_lock));
	if (ofi_conn_state(oc) != CCI__CONN_CONNECTING)
		return;
	/* A REQ the provider never took is dropped from the queue: then
	 * nobody holds a request to cancel. */
	ofi_cancel_encode(&c, body);
	if (oc->peer && atomic_load_explicit(&oc->req_posted, memory_order_acquire))
		ofi_ctl_to(oc->sep, oc->peer, 0, OFI_T_CANCEL, body, sizeof(body));
	connect_failed(oc, CCI_ETIMEDOUT, 1);
}

/* The request could not reach the server (progress, cq_lock held). */
void ofi_connect_refused(struct ofi_conn *oc)
{
	assert(cci__spin_held(&oc->sep->cq_lock));
	connect_failed(oc, CCI_ECONNREFUSED, 1);
}

/* Both sides, once the peer's hello is known; oc->lock held. */
static void conn_set_peer(struct ofi_conn *oc, const struct ofi_hello *h)
{
	assert(cci__mutex_held(&oc->lock));
	oc->peer_id = h->id;
	oc->peer_proc = h->proc;
	oc->nonce = h->core.nonce;
	oc->imm = oc->sep->imm && (h->flags & OFI_HELLO_IMM);
	cci__credit_init(&oc->cr, h->core.credits, oc->cr.window); /* <= OFI_WINDOW_MAX */
	if (h->core.mss < oc->conn->pub.max_send_size)
		oc->conn->pub.max_send_size = h->core.mss;
	cci__ct_arm(&oc->base.timers, oc->conn->keepalive_us, cci__now_ns());
	ofi_conn_move(oc, CCI__CONN_OPEN);
}

/* Client: the server accepted, its hello decoded (ofi_wire.c).  cq_lock
 * held. */
static void on_accept(struct ofi_ep *sep, struct ofi_conn *oc, const struct ofi_hello *hp)
{
	const struct ofi_hello h = *hp;
	struct ofi_pidw *w, *old;

	assert(cci__spin_held(&sep->cq_lock));
	if (!oc->is_client || h.core.nonce != oc->nonce)
		return;
	w = ofi_pidw_get(sep, &h.proc);
	pthread_mutex_lock(&oc->lock);
	if (ofi_conn_state(oc) != CCI__CONN_CONNECTING) {
		pthread_mutex_unlock(&oc->lock);
		pthread_mutex_lock(&sep->lock);
		ofi_pidw_put(w);
		pthread_mutex_unlock(&sep->lock);
		return;
	}
	old = ofi_conn_pidw(oc); /* shm: the server's process as its region named it */
	atomic_store_explicit(&oc->pidw, w, memory_order_release); /* ctl_peer_gone reads it unlocked */
	conn_set_peer(oc, &h);
	ofi_core->post_connect(sep->ep, oc->conn->pub.context, CCI_SUCCESS, oc->conn);
	ofi_held_drain(oc); /* what arrived early goes out now */
	if (w && atomic_load_explicit(&w->dead, memory_order_acquire))
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
	pthread_mutex_unlock(&oc->lock);
	if (old) {
		pthread_mutex_lock(&sep->lock);
		ofi_pidw_put(old);
		pthread_mutex_unlock(&sep->lock);
	}
	OFI_LOG(CCI_LOG_CONN, "ofi: connected %08x to peer %08x", oc->id, oc->peer_id);
}

/* Unlist req, drop its peer reference and free it. */
static void req_forget(struct ofi_ep *sep, struct ofi_req *req)
{
	pthread_mutex_lock(&sep->lock);
	CCI__SLIST_UNLINK(&sep->reqs, req, next);
	ofi_peer_put_locked(req->peer);
	pthread_mutex_unlock(&sep->lock);
	free(req);
}

/* Server: a request arrived, decoded (ofi_wire.c).  cq_lock held. */
static void on_req(struct ofi_ep *sep, const struct ofi_msg *m)
{
	struct ofi_req *req = calloc(1, sizeof(*req));

	assert(cci__spin_held(&sep->cq_lock));
	if (!req)
		return;
	req->hello = m->u.hello;
	if (peer_get(sep, m->addr, req->hello.addr_len, &req->peer) != CCI_SUCCESS) {
		free(req); /* a limit was logged; the client waits for its timeout */
		return;
	}
	/* Listed first: once posted, another thread may answer it at once. */
	pthread_mutex_lock(&sep->lock);
	req->next = sep->reqs;
	sep->reqs = req;
	pthread_mutex_unlock(&sep->lock);
	if (ofi_core->post_request(sep->ep, (cci_conn_attribute_t)req->hello.core.attr,
	                           m->data, req->hello.core.data_len, req) == CCI_SUCCESS)
		return;
	req_forget(sep, req);
}

/* The client gave up: forget its request, or break what we accepted. */
static void on_cancel(struct ofi_ep *sep, const struct ofi_cancel *cp)
{
	const struct ofi_cancel c = *cp;
	struct ofi_conn *hit = NULL;

	pthread_mutex_lock(&sep->lock);
	for (struct ofi_req *r = sep->reqs; r; r = r->next)
		if (r->hello.id == c.id && r->hello.core.nonce == c.nonce)
			atomic_store_explicit(&r->cancelled, 1, memory_order_relaxed);
	for (struct ofi_conn *oc = sep->conns; oc && !hit; oc = oc->next)
		if (!oc->is_client && oc->peer_id == c.id && oc->nonce == c.nonce)
			hit = oc;
	if (hit)
		ofi_conn_ref(hit);
	pthread_mutex_unlock(&sep->lock);
	if (!hit)
		return;
	pthread_mutex_lock(&hit->lock);
	ofi_conn_break(hit, CCI_ERR_DISCONNECTED);
	pthread_mutex_unlock(&hit->lock);
	ofi_conn_unref(hit);
}

/* Handshake and teardown messages, decoded (ofi_wire.c), and oc, the
 * connection their dst names (NULL for REQ and CANCEL, which name none);
 * progress, cq_lock held. */
void ofi_on_conn_msg(struct ofi_ep *sep, struct ofi_conn *oc, const struct ofi_msg *m)
{
	const struct ofi_hdr *h = &m->hdr;

	assert(cci__spin_held(&sep->cq_lock));
	if (h->type == OFI_T_REQ) {
		on_req(sep, m);
	} else if (h->type == OFI_T_CANCEL) {
		on_cancel(sep, &m->u.cancel);
	} else if (h->type == OFI_T_ACCEPT) {
		on_accept(sep, oc, &m->u.hello);
	} else if (h->type == OFI_T_REJECT) {
		if (oc->is_client && ofi_conn_state(oc) == CCI__CONN_CONNECTING)
			connect_failed(oc, CCI_ECONNREFUSED, 1);
	} else if (h->type == OFI_T_DISC) {
		pthread_mutex_lock(&oc->lock);
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
		pthread_mutex_unlock(&oc->lock);
	}
}

int ofi_accept(cci__evt_t *evt, void *context)
{
	struct ofi_req *req = evt->req_state;
	struct ofi_ep *sep = ofi_ep_of(evt->ep);
	struct ofi_hello mine;
	uint8_t body[OFI_HELLO_LEN];
	struct ofi_pidw *w;
	struct ofi_conn *oc;
	int cancelled = atomic_load_explicit(&req->cancelled, memory_order_relaxed);

	oc = ofi_conn_new(sep, (cci_conn_attribute_t)req->hello.core.attr, context);
	if (!oc) {
		OFI_WARN("ofi: endpoint %s is out of memory or holds %u connections, its most: "
		         "request %08x rejected", evt->ep->uri, OFI_MAX_CONNS, req->hello.id);
		ofi_ctl_to(sep, req->peer, req->hello.id, OFI_T_REJECT, NULL, 0);
		return CCI_ENOMEM;
	}
	pthread_mutex_lock(&sep->lock);
	req->peer->refs++;
	pthread_mutex_unlock(&sep->lock);
	oc->peer = req->peer;
	w = ofi_pidw_get(sep, &req->hello.proc);
	pthread_mutex_lock(&oc->lock);
	atomic_store_explicit(&oc->pidw, w, memory_order_release); /* ctl_peer_gone reads it unlocked */
	conn_set_peer(oc, &req->hello);
	hello_fill(oc, CCI__HELLO_ANSWER, &mine);
	ofi_hello_encode(&mine, body);
	/* ACCEPT goes first on the connection, and the ACCEPT event is
	 * posted before any message of the client can be delivered. */
	ofi_ctl_send(oc, OFI_T_ACCEPT, 0, body, sizeof(body), OFI_CTL_ORDERED);
	ofi_core->post_accept(sep->ep, context, CCI_SUCCESS, oc->conn);
	if (cancelled || (w && atomic_load_explicit(&w->dead, memory_order_acquire)))
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
	pthread_mutex_unlock(&oc->lock);
	OFI_LOG(CCI_LOG_CONN, "ofi: accepted %08x from peer %08x", oc->id, oc->peer_id);
	return CCI_SUCCESS;
}

int ofi_reject(cci__evt_t *evt)
{
	struct ofi_req *req = evt->req_state;
	struct ofi_ep *sep = ofi_ep_of(evt->ep);

	if (!atomic_load_explicit(&req->cancelled, memory_order_relaxed))
		ofi_ctl_to(sep, req->peer, req->hello.id, OFI_T_REJECT, NULL, 0);
	return CCI_SUCCESS;
}

/* The CONNECT_REQUEST event came back, answered: forget the request. */
void ofi_request_done(cci__evt_t *evt)
{
	req_forget(ofi_ep_of(evt->ep), evt->req_state);
}

void ofi_reqs_free(struct ofi_ep *sep)
{
	for (struct ofi_req *req; CCI__SLIST_POP(&sep->reqs, req, next);)
		free(req);
}

