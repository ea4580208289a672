/*
 * ofi_conn.c - connections: the table of connection ids, the handshake
 * (REQ, ACCEPT, REJECT, CANCEL), disconnect, breaking and freeing.
 *
 * The handshake is a few messages on the RDM endpoint.  The client sends
 * REQ to the server's address with its own provider address (so the
 * server can answer without FI_SOURCE), its connection id, the credits it
 * grants and the connect payload.  The server posts CONNECT_REQUEST;
 * cci_accept sends ACCEPT with the server's id and credits, cci_reject
 * sends REJECT.  A client whose connect timeout expires sends CANCEL, so
 * a server still holding the request (or a connection it accepted a
 * moment too late) lets it go.  Every later message carries the
 * receiver's connection id; ids hold a generation so that a message for
 * a closed connection never reaches a new one in the same slot.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ofi.h"

#define OFI_REQ_BODY_MAX (sizeof(struct ofi_hello) + OFI_ADDR_MAX + CCI_CONN_REQ_LEN)

/* cq_lock held. */
static int slot_alloc(struct ofi_ep *sep, struct ofi_conn *oc)
{
	for (uint32_t n = 0; n < OFI_MAX_CONNS; n++) {
		uint32_t s = (sep->slot_hint + n) % OFI_MAX_CONNS + 1;

		if (sep->slots[s])
			continue;
		sep->slot_gen[s]++;
		oc->id = s | (uint32_t)((sep->slot_gen[s] + sep->gen_salt) & 0xffffu) << 16;
		sep->slots[s] = oc;
		sep->slot_hint = s;
		return CCI_SUCCESS;
	}
	return CCI_ENOMEM;
}

/* cq_lock held. */
struct ofi_conn *ofi_conn_lookup(struct ofi_ep *sep, uint32_t id)
{
	struct ofi_conn *oc = sep->slots[id & 0xffffu];

	return (oc && oc->id == id) ? oc : NULL;
}

void ofi_conn_ref(struct ofi_conn *oc)
{
	__atomic_add_fetch(&oc->refs, 1, __ATOMIC_RELAXED);
}

/* The last reference makes oc freeable; the progress thread frees it. */
void ofi_conn_unref(struct ofi_conn *oc)
{
	__atomic_sub_fetch(&oc->refs, 1, __ATOMIC_RELEASE);
}

struct ofi_conn *ofi_conn_new(struct ofi_ep *sep, cci_conn_attribute_t attr, void *context)
{
	struct ofi_conn *oc = calloc(1, sizeof(*oc));
	int rc;

	if (!oc || !(oc->conn = ofi_core->conn_alloc(sep->ep, attr, context))) {
		free(oc);
		return NULL;
	}
	*(struct ofi_conn **)oc->conn->priv = oc;
	oc->sep = sep;
	oc->refs = 1;
	oc->attr = (int)attr;
	oc->state = OFI_CONN_CONNECTING;
	oc->tx_err = CCI_ERR_DISCONNECTED;
	oc->window = __atomic_load_n(&sep->rx_count, __ATOMIC_RELAXED);
	if (oc->window > OFI_WINDOW_MAX)
		oc->window = OFI_WINDOW_MAX;
	pthread_mutex_init(&oc->lock, NULL);
	cci__spin_lock(&sep->cq_lock);
	rc = slot_alloc(sep, oc);
	cci__spin_unlock(&sep->cq_lock);
	if (rc != CCI_SUCCESS) {
		ofi_core->conn_release(oc->conn);
		pthread_mutex_destroy(&oc->lock);
		free(oc);
		return NULL;
	}
	pthread_mutex_lock(&sep->lock);
	oc->next = sep->conns;
	sep->conns = oc;
	pthread_mutex_unlock(&sep->lock);
	return oc;
}

/* Take oc out of service: no message reaches it, the timers forget it;
 * it is freed once the last reference goes.  Drops the table's reference. */
static void conn_unlist(struct ofi_conn *oc, int cq_held)
{
	struct ofi_ep *sep = oc->sep;

	if (!cq_held)
		cci__spin_lock(&sep->cq_lock);
	if (sep->slots[oc->id & 0xffffu] == oc)
		sep->slots[oc->id & 0xffffu] = NULL;
	pthread_mutex_lock(&oc->lock);
	ofi_held_free(oc);
	pthread_mutex_unlock(&oc->lock);
	if (!cq_held)
		cci__spin_unlock(&sep->cq_lock);
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_conn **pp = &sep->conns; *pp; pp = &(*pp)->next) {
		if (*pp == oc) {
			*pp = oc->next;
			break;
		}
	}
	oc->next = sep->gone;
	sep->gone = oc;
	pthread_mutex_unlock(&sep->lock);
	ofi_conn_unref(oc);
}

/* sep->lock held; oc is on no list. */
static void conn_free_locked(struct ofi_ep *sep, struct ofi_conn *oc)
{
	ofi_mrc_free(oc);
	if (oc->peer)
		ofi_peer_put_locked(sep, oc->peer);
	ofi_pidw_put(sep, oc->pidw);
	pthread_mutex_destroy(&oc->lock);
	free(oc);
}

/* Free the connections taken out of service that nothing holds any more. */
void ofi_conns_sweep(struct ofi_ep *sep)
{
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_conn **pp = &sep->gone; *pp;) {
		struct ofi_conn *oc = *pp;
		if (__atomic_load_n(&oc->refs, __ATOMIC_ACQUIRE) == 0) {
			*pp = oc->next;
			/* Whoever dropped the last reference did it holding
			 * oc->lock: wait until it left. */
			pthread_mutex_lock(&oc->lock);
			pthread_mutex_unlock(&oc->lock);
			conn_free_locked(sep, oc);
		} else {
			pp = &oc->next;
		}
	}
	pthread_mutex_unlock(&sep->lock);
}

/*
 * oc cannot carry messages any more (peer gone or disconnected, send
 * timeout): its pending work completes with status (the first) and
 * CCI_ERR_DISCONNECTED, later sends fail.  A local cause (status other
 * than CCI_ERR_DISCONNECTED) is told to the peer.  oc->lock held.
 */
void ofi_conn_break(struct ofi_conn *oc, int status)
{
	if (oc->state != OFI_CONN_OPEN)
		return;
	OFI_LOG(CCI_LOG_CONN, "ofi: connection %08x broken (status %d)", oc->id, status);
	oc->state = OFI_CONN_BROKEN;
	oc->tx_err = CCI_ERR_DISCONNECTED;
	if (status != CCI_ERR_DISCONNECTED)
		ofi_ctl_send(oc, OFI_T_DISC, 0, NULL, 0, 0);
	ofi_tx_fail_all(oc, status, 1);
}

/* Client: the connect failed; report it and let oc go. */
static void connect_failed(struct ofi_conn *oc, int status, int cq_held)
{
	cci__conn_t *conn;

	pthread_mutex_lock(&oc->lock);
	conn = oc->conn;
	oc->conn = NULL;
	oc->state = OFI_CONN_CLOSED;
	ofi_tx_fail_all(oc, status, 0);
	pthread_mutex_unlock(&oc->lock);
	if (!conn)
		return;
	OFI_LOG(CCI_LOG_CONN, "ofi: connect %08x failed (status %d)", oc->id, status);
	ofi_core->post_connect(oc->sep->ep, conn->pub.context, status, NULL);
	ofi_core->conn_release(conn);
	conn_unlist(oc, cq_held);
}

static void hello_fill(struct ofi_conn *oc, struct ofi_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->id = oc->id;
	h->attr = (uint32_t)oc->attr;
	h->mss = oc->sep->mss;
	h->credits = oc->window;
	h->nonce = oc->nonce;
	h->proc = oc->sep->self;
	h->flags = oc->sep->imm ? OFI_HELLO_IMM : 0;
}

static int send_req(struct ofi_conn *oc, const void *data, uint32_t data_len)
{
	struct ofi_ep *sep = oc->sep;
	uint64_t body[(OFI_REQ_BODY_MAX + 7) / 8];
	struct ofi_hello *h = (struct ofi_hello *)body;
	int rc;

	hello_fill(oc, h);
	h->addr_len = (uint32_t)sep->addr_len;
	h->data_len = data_len;
	memcpy((char *)body + sizeof(*h), sep->addr, sep->addr_len);
	if (data_len)
		memcpy((char *)body + sizeof(*h) + sep->addr_len, data, data_len);
	pthread_mutex_lock(&oc->lock);
	rc = ofi_ctl_send(oc, OFI_T_REQ, 0, body,
	                  (uint32_t)(sizeof(*h) + sep->addr_len + data_len), OFI_CTL_TRACKED);
	pthread_mutex_unlock(&oc->lock);
	return rc;
}

int ofi_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct ofi_ep *sep = ofi_ep_of(ep);
	uint8_t addr[OFI_ADDR_MAX];
	size_t alen = 0;
	struct ofi_conn *oc;
	int rc;

	if (attr > CCI_CONN_ATTR_UU)
		return CCI_EINVAL; /* no multicast over RDM endpoints */
	rc = ofi_uri_parse(sep, uri, addr, &alen);
	if (rc != CCI_SUCCESS) {
		OFI_LOG(CCI_LOG_CONN, "ofi: cannot use URI \"%s\" (want ofi://%s/<address>)", uri,
		        sep->dev->core_name);
		return rc;
	}
	oc = ofi_conn_new(sep, attr, context);
	if (!oc)
		return CCI_ENOMEM;
	oc->is_client = 1;
	if (cci__random64(&oc->nonce) != CCI_SUCCESS)
		oc->nonce = cci__now_ns() ^ (uint64_t)(uintptr_t)oc;
	pthread_mutex_lock(&oc->lock);
	if (timeout)
		cci__ct_connecting(&oc->timers, timeout, cci__now_ns());
	pthread_mutex_unlock(&oc->lock);
	oc->peer = ofi_peer_get(sep, addr, alen);
	if (!oc->peer || send_req(oc, data, data_len) != CCI_SUCCESS)
		connect_failed(oc, CCI_ECONNREFUSED, 0);
	return CCI_SUCCESS;
}

/* The connect timeout expired (progress thread, cq_lock held). */
void ofi_connect_timeout(struct ofi_conn *oc)
{
	struct ofi_cancel c = { .id = oc->id, .nonce = oc->nonce };
	int waiting;

	pthread_mutex_lock(&oc->lock);
	waiting = oc->state == OFI_CONN_CONNECTING && oc->conn;
	pthread_mutex_unlock(&oc->lock);
	if (!waiting)
		return;
	if (oc->peer)
		ofi_ctl_to(oc->sep, oc->peer, 0, OFI_T_CANCEL, &c, sizeof(c));
	connect_failed(oc, CCI_ETIMEDOUT, 1);
}

/* The request could not reach the server (progress, cq_lock held). */
void ofi_connect_refused(struct ofi_conn *oc)
{
	connect_failed(oc, CCI_ECONNREFUSED, 1);
}

/* Both sides, once the peer's hello is known; oc->lock held. */
static void conn_set_peer(struct ofi_conn *oc, const struct ofi_hello *h)
{
	oc->peer_id = h->id;
	oc->nonce = h->nonce;
	oc->imm = oc->sep->imm && (h->flags & OFI_HELLO_IMM);
	oc->credits = h->credits < 0xffffu ? h->credits : 0xffffu;
	if (h->mss < oc->conn->pub.max_send_size)
		oc->conn->pub.max_send_size = h->mss;
	cci__ct_arm(&oc->timers, oc->conn->keepalive_us, cci__now_ns());
	oc->send_to_us = oc->conn->send_timeout_us;
	oc->state = OFI_CONN_OPEN;
}

static int hello_valid(const struct ofi_hello *h, uint32_t len, int is_req)
{
	if (len < sizeof(*h) || h->attr > CCI_CONN_ATTR_UU || h->mss < OFI_MSS_MIN || h->id == 0)
		return 0;
	if (!is_req)
		return len == sizeof(*h);
	return h->addr_len > 0 && h->addr_len <= OFI_ADDR_MAX && h->data_len <= CCI_CONN_REQ_LEN &&
	       len == sizeof(*h) + h->addr_len + h->data_len;
}

/* Client: the server accepted.  cq_lock held. */
static void on_accept(struct ofi_ep *sep, struct ofi_conn *oc, const void *body, uint32_t len)
{
	struct ofi_hello h;
	struct ofi_pidw *w;

	if (len < sizeof(h))
		return;
	memcpy(&h, body, sizeof(h));
	if (!oc->is_client || !hello_valid(&h, len, 0) || h.nonce != oc->nonce)
		return;
	w = ofi_pidw_get(sep, &h.proc);
	pthread_mutex_lock(&oc->lock);
	if (oc->state != OFI_CONN_CONNECTING || !oc->conn) {
		pthread_mutex_unlock(&oc->lock);
		if (w) {
			pthread_mutex_lock(&sep->lock);
			ofi_pidw_put(sep, w);
			pthread_mutex_unlock(&sep->lock);
		}
		return;
	}
	oc->pidw = w;
	conn_set_peer(oc, &h);
	ofi_core->post_connect(sep->ep, oc->conn->pub.context, CCI_SUCCESS, oc->conn);
	ofi_conn_opened(oc);
	if (w && w->dead)
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
	pthread_mutex_unlock(&oc->lock);
	OFI_LOG(CCI_LOG_CONN, "ofi: connected %08x to peer %08x", oc->id, oc->peer_id);
}

/* Unlist req, drop its peer reference and free it. */
static void req_forget(struct ofi_ep *sep, struct ofi_req *req)
{
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_req **pp = &sep->reqs; *pp; pp = &(*pp)->next) {
		if (*pp == req) {
			*pp = req->next;
			break;
		}
	}
	ofi_peer_put_locked(sep, req->peer);
	pthread_mutex_unlock(&sep->lock);
	free(req);
}

/* Server: a request arrived.  cq_lock held. */
static void on_req(struct ofi_ep *sep, const void *body, uint32_t len)
{
	const uint8_t *p = body;
	struct ofi_req *req = calloc(1, sizeof(*req));

	if (!req || len < sizeof(req->hello))
		goto err_free;
	memcpy(&req->hello, body, sizeof(req->hello));
	if (!hello_valid(&req->hello, len, 1)) {
		OFI_WARN("ofi: malformed connection request dropped");
		goto err_free;
	}
	req->peer = ofi_peer_get(sep, p + sizeof(req->hello), req->hello.addr_len);
	if (!req->peer)
		goto err_free;
	/* Listed first: once posted, another thread may answer it at once. */
	pthread_mutex_lock(&sep->lock);
	req->state = OFI_REQ_POSTED;
	req->next = sep->reqs;
	sep->reqs = req;
	pthread_mutex_unlock(&sep->lock);
	if (ofi_core->post_request(sep->ep, (cci_conn_attribute_t)req->hello.attr,
	                           p + sizeof(req->hello) + req->hello.addr_len,
	                           req->hello.data_len, req) == CCI_SUCCESS)
		return;
	req_forget(sep, req);
	return;

err_free:
	free(req);
}

/* The client gave up: forget its request, or break what we accepted. */
static void on_cancel(struct ofi_ep *sep, const void *body, uint32_t len)
{
	struct ofi_cancel c;
	struct ofi_conn *hit = NULL;

	if (len != sizeof(c))
		return;
	memcpy(&c, body, sizeof(c));
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_req *r = sep->reqs; r; r = r->next)
		if (r->hello.id == c.id && r->hello.nonce == c.nonce)
			r->cancelled = 1;
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

/* Handshake and teardown messages (progress, cq_lock held). */
void ofi_on_conn_msg(struct ofi_ep *sep, const struct ofi_hdr *h, const void *body,
                     uint32_t len)
{
	struct ofi_conn *oc;

	if (h->type == OFI_T_REQ) {
		on_req(sep, body, len);
		return;
	}
	if (h->type == OFI_T_CANCEL) {
		on_cancel(sep, body, len);
		return;
	}
	oc = ofi_conn_lookup(sep, h->dst);
	if (!oc)
		return;
	if (h->type == OFI_T_ACCEPT) {
		on_accept(sep, oc, body, len);
	} else if (h->type == OFI_T_REJECT) {
		if (oc->is_client && oc->state == OFI_CONN_CONNECTING)
			connect_failed(oc, CCI_ECONNREFUSED, 1);
	} else if (h->type == OFI_T_DISC) {
		pthread_mutex_lock(&oc->lock);
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
		pthread_mutex_unlock(&oc->lock);
	}
}

/* Claim a posted request; CCI_EINVAL if answered already. */
static int req_claim(struct ofi_ep *sep, struct ofi_req *req, int *cancelled)
{
	int rc = CCI_EINVAL;

	pthread_mutex_lock(&sep->lock);
	if (req->state == OFI_REQ_POSTED) {
		req->state = OFI_REQ_DONE;
		*cancelled = req->cancelled;
		rc = CCI_SUCCESS;
	}
	pthread_mutex_unlock(&sep->lock);
	return rc;
}

int ofi_accept(cci__evt_t *evt, void *context)
{
	struct ofi_req *req = evt->req_state;
	struct ofi_ep *sep = ofi_ep_of(evt->ep);
	struct ofi_hello mine;
	struct ofi_pidw *w;
	struct ofi_conn *oc;
	int cancelled = 0;

	if (req_claim(sep, req, &cancelled) != CCI_SUCCESS)
		return CCI_EINVAL;
	oc = ofi_conn_new(sep, (cci_conn_attribute_t)req->hello.attr, context);
	if (!oc) {
		ofi_ctl_to(sep, req->peer, req->hello.id, OFI_T_REJECT, NULL, 0);
		return CCI_ENOMEM;
	}
	pthread_mutex_lock(&sep->lock);
	req->peer->refs++;
	pthread_mutex_unlock(&sep->lock);
	oc->peer = req->peer;
	w = ofi_pidw_get(sep, &req->hello.proc);
	pthread_mutex_lock(&oc->lock);
	oc->pidw = w;
	conn_set_peer(oc, &req->hello);
	hello_fill(oc, &mine);
	/* ACCEPT goes first on the connection, and the ACCEPT event is
	 * posted before any message of the client can be delivered. */
	ofi_ctl_send(oc, OFI_T_ACCEPT, 0, &mine, sizeof(mine), OFI_CTL_ORDERED);
	ofi_core->post_accept(sep->ep, context, CCI_SUCCESS, oc->conn);
	if (cancelled || (oc->pidw && oc->pidw->dead))
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
	pthread_mutex_unlock(&oc->lock);
	OFI_LOG(CCI_LOG_CONN, "ofi: accepted %08x from peer %08x", oc->id, oc->peer_id);
	return CCI_SUCCESS;
}

int ofi_reject(cci__evt_t *evt)
{
	struct ofi_req *req = evt->req_state;
	struct ofi_ep *sep = ofi_ep_of(evt->ep);
	int cancelled = 0;

	if (req_claim(sep, req, &cancelled) != CCI_SUCCESS)
		return CCI_EINVAL;
	if (!cancelled)
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
	while (sep->reqs) {
		struct ofi_req *req = sep->reqs;
		sep->reqs = req->next;
		free(req);
	}
}

int ofi_disconnect(cci__conn_t *conn)
{
	struct ofi_conn *oc = ofi_conn_of(conn);

	pthread_mutex_lock(&oc->lock);
	if (oc->state == OFI_CONN_OPEN)
		ofi_ctl_send(oc, OFI_T_DISC, 0, NULL, 0, OFI_CTL_TRACKED);
	oc->state = OFI_CONN_CLOSED;
	ofi_tx_fail_all(oc, CCI_ERR_DISCONNECTED, 0);
	oc->conn = NULL;
	pthread_mutex_unlock(&oc->lock);
	conn_unlist(oc, 0);
	ofi_core->conn_release(conn);
	OFI_LOG(CCI_LOG_CONN, "ofi: disconnected %08x", oc->id);
	return CCI_SUCCESS;
}

/* Endpoint destruction: tell every peer, drop the work (no thread runs). */
void ofi_conns_close_all(struct ofi_ep *sep)
{
	for (struct ofi_conn *oc = sep->conns; oc; oc = oc->next) {
		pthread_mutex_lock(&oc->lock);
		if (oc->state == OFI_CONN_OPEN)
			ofi_ctl_send(oc, OFI_T_DISC, 0, NULL, 0, OFI_CTL_TRACKED);
		oc->state = OFI_CONN_CLOSED;
		ofi_tx_fail_all(oc, CCI_ERR_DISCONNECTED, 0);
		pthread_mutex_unlock(&oc->lock);
	}
}

/* Endpoint destruction, after the provider endpoint is closed. */
void ofi_conns_free_all(struct ofi_ep *sep)
{
	struct ofi_conn *lists[2] = { sep->conns, sep->gone };

	sep->conns = sep->gone = NULL;
	for (int i = 0; i < 2; i++) {
		while (lists[i]) {
			struct ofi_conn *oc = lists[i];
			lists[i] = oc->next;
			if (oc->conn)
				ofi_core->conn_release(oc->conn);
			ofi_mrc_free(oc);
			pthread_mutex_destroy(&oc->lock);
			free(oc);
		}
	}
	while (sep->pidws) {
		struct ofi_pidw *w = sep->pidws;
		sep->pidws = w->next;
		if (w->fd >= 0)
			close(w->fd);
		free(w);
	}
}
