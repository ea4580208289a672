/*
 * sock_hs.c - the connection handshake of the UDP transport.
 *
 * The client sends HELLO (its token, first sequence, window, mss, largest
 * datagram and the connect payload) again and again, backing off from
 * 100 ms to 1 s, until ACCEPT or REJECT comes or the connect deadline
 * passes.  The server posts one CONNECT_REQUEST per (address, client
 * token); a repeated HELLO gets the answer again (the answered request is
 * remembered for SOCK_DECIDED_NS), or nothing while the application
 * decides.  An ICMP "port unreachable" fails the attempt at once.
 */
#include <stdlib.h>

#include "sock.h"

/* ---- client ------------------------------------------------------------- */

static void hello_send(struct sock_conn *sc)
{
	struct sock_dg d = { .type = SOCK_DG_HELLO };

	sock_tx_emit(sc->sep, &sc->peer, sc->peerlen, &d, sc->hello, sc->hello_len);
}

static int hello_build(struct sock_conn *sc, const void *data, uint32_t len)
{
	struct sock_dg_hello h = {
		.attr = (uint32_t)sc->attr, .mss = sc->sep->mss, .window = sc->sep->window,
		.data_len = len, .dgram = sc->sep->dgram, .token = sc->token, .isn = sc->isn,
	};

	sc->hello = malloc(SOCK_DG_HELLO_LEN + len);
	if (!sc->hello)
		return CCI_ENOMEM;
	sock_dg_hello_encode(sc->hello, &h);
	if (len)
		memcpy(sc->hello + SOCK_DG_HELLO_LEN, data, len);
	sc->hello_len = SOCK_DG_HELLO_LEN + len;
	return CCI_SUCCESS;
}

static void conn_fields(struct sock_conn *sc, struct sock_ep *sep, cci__conn_t *conn, int attr)
{
	memset(sc, 0, sizeof(*sc));
	sc->conn = conn;
	sc->sep = sep;
	sc->attr = attr;
	sc->reliable = attr != CCI_CONN_ATTR_UU;
	TAILQ_INIT(&sc->txq);
	LIST_INIT(&sc->ops);
}

static int connect_locked(struct sock_conn *sc, const void *data, uint32_t len,
                          const struct timeval *timeout)
{
	struct sock_ep *sep = sc->sep;
	uint64_t now = cci__now_ns();
	int rc = sock_conn_slot(sep, sc);

	if (rc != CCI_SUCCESS)
		return rc;
	rc = cci__random64(&sc->isn);
	if (rc == CCI_SUCCESS)
		rc = hello_build(sc, data, len);
	if (rc != CCI_SUCCESS) {
		sep->slots[sc->slot] = NULL;
		LIST_REMOVE(sc, link);
		return rc;
	}
	cci__ct_connecting(&sc->base.timers, timeout, now);
	sc->hs_wait_ns = SOCK_HS_RETRY_NS;
	sc->hs_next_ns = now + sc->hs_wait_ns;
	hello_send(sc);
	sock_tx_flush(sep);
	return CCI_SUCCESS;
}

int sock_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                 cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct sock_ep *sep = sock_ep_of(ep);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	cci__conn_t *conn;
	struct sock_conn *sc;
	int rc;

	rc = sock_uri_resolve(uri, "sock", &ss, &sl);
	if (rc != CCI_SUCCESS)
		return rc;
	if (ss.ss_family != sep->family)
		return CCI_EADDRNOTAVAIL;
	conn = sock_core->conn_alloc(ep, attr, context);
	if (!conn)
		return CCI_ENOMEM;
	sc = sock_conn_of(conn);
	conn_fields(sc, sep, conn, attr);
	sc->peer = ss;
	sc->peerlen = sl;
	sc->context = context;
	cci__sockaddr_str((struct sockaddr *)&ss, sc->peer_str, sizeof(sc->peer_str));
	pthread_mutex_lock(&sep->lock);
	rc = connect_locked(sc, data, data_len, timeout);
	pthread_mutex_unlock(&sep->lock);
	if (rc != CCI_SUCCESS) {
		sock_core->conn_release(conn);
		return rc;
	}
	SOCK_LOG(CCI_LOG_CONN, "sock: connecting to %s", sc->peer_str);
	return CCI_SUCCESS;
}

/* Both sides: the connection's sizes from what each side takes. */
static void conn_sizes(struct sock_conn *sc, uint32_t peer_mss, uint32_t peer_dgram)
{
	uint32_t dg = peer_dgram < sc->sep->dgram ? peer_dgram : sc->sep->dgram;

	sc->mss = peer_mss < sc->sep->mss ? peer_mss : sc->sep->mss;
	sc->frag = dg - SOCK_DG_HDR_LEN;
	if (!sc->reliable && sc->mss > sc->frag)
		sc->mss = sc->frag; /* a UU message is one datagram */
	sc->conn->pub.max_send_size = sc->mss;
}

static void got_accept(struct sock_conn *sc, const struct sock_dg *d, uint64_t now)
{
	struct sock_dg_accept a;
	const char *why = NULL;

	if (sock_dg_accept_decode(d->body, d->body_len, &a, &why) != 0 ||
	    a.client_token != sc->token) {
		sc->sep->stats.bad++;
		SOCK_LOG(CCI_LOG_CONN, "sock: bad ACCEPT from %s: %s", sc->peer_str,
		         why ? why : "not for this connection");
		return;
	}
	sc->peer_token = a.token;
	conn_sizes(sc, a.mss, a.dgram);
	if (sc->reliable && sock_conn_rel_init(sc, sc->isn, a.isn, a.window) != CCI_SUCCESS) {
		sock_connect_fail(sc, CCI_ENOMEM, "out of memory");
		return;
	}
	free(sc->hello);
	sc->hello = NULL;
	sock_conn_open(sc, now);
	SOCK_LOG(CCI_LOG_CONN, "sock: connected to %s (mss %u)", sc->peer_str, sc->mss);
	sock_core->post_connect(sc->sep->ep, sc->context, CCI_SUCCESS, sc->conn);
}

static void client_rx(struct sock_ep *sep, const struct sock_dg *d,
                      const struct sockaddr_storage *from, uint64_t now)
{
	struct sock_conn *sc = sock_conn_find(sep, d->token);

	if (!sc || !sock_addr_same(from, &sc->peer) ||
	    cci__conn_state(&sc->base) != CCI__CONN_CONNECTING) {
		sep->stats.foreign++; /* late, repeated or forged */
		return;
	}
	if (d->type == SOCK_DG_REJECT)
		sock_connect_fail(sc, CCI_ECONNREFUSED, "rejected by the server");
	else
		got_accept(sc, d, now);
}

/* ---- server ------------------------------------------------------------- */

static void reply_send(struct sock_ep *sep, struct sock_req *req)
{
	struct sock_dg d = { .type = req->accepted ? SOCK_DG_ACCEPT : SOCK_DG_REJECT,
	                     .token = req->hello.token };
	struct sock_conn *sc = req->accepted ? sock_conn_find(sep, req->sc_token) : NULL;
	uint8_t *b = req->reply;

	if (req->accepted) {
		struct sock_dg_accept a = {
			.mss = sep->mss, .window = sep->window, .client_token = req->hello.token,
			.token = req->sc_token, .isn = req->isn, .dgram = sep->dgram,
		};
		if (!sc)
			return; /* closed since: the client will time out */
		sock_dg_accept_encode(b, &a);
	}
	sock_tx_emit(sep, &req->from, req->fromlen, &d, b, req->accepted ? SOCK_DG_ACCEPT_LEN : 0);
}

static struct sock_req *req_find(struct sock_ep *sep, const struct sockaddr_storage *from,
                                 uint64_t token)
{
	struct sock_req *req;

	LIST_FOREACH(req, &sep->reqs, link)
		if (req->hello.token == token && sock_addr_same(&req->from, from))
			return req;
	return NULL;
}

static void req_free(struct sock_ep *sep, struct sock_req *req)
{
	sock_tx_flush(sep); /* a reply may point into req */
	LIST_REMOVE(req, link);
	sep->nreqs--;
	free(req);
}

/* Room for one more request: forget the oldest answered one if full. */
static int req_room(struct sock_ep *sep)
{
	struct sock_req *req, *old = NULL;

	if (sep->nreqs < SOCK_REQS_MAX)
		return 1;
	LIST_FOREACH(req, &sep->reqs, link)
		if (req->done)
			old = req; /* the list is newest first */
	if (!old)
		return 0;
	req_free(sep, old);
	return 1;
}

static void hello_rx(struct sock_ep *sep, const struct sock_dg *d,
                     const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct sock_dg_hello h;
	struct sock_req *req;
	const char *why = NULL;

	if (sock_dg_hello_decode(d->body, d->body_len, &h, &why) != 0) {
		sep->stats.bad++;
		SOCK_LOG(CCI_LOG_CONN, "sock: bad HELLO: %s", why);
		return;
	}
	req = req_find(sep, from, h.token);
	if (req) {
		if (req->answered)
			reply_send(sep, req);
		return;
	}
	if (!req_room(sep) || !(req = calloc(1, sizeof(*req)))) {
		sep->stats.foreign++;
		return;
	}
	req->sep = sep;
	req->from = *from;
	req->fromlen = fromlen;
	req->hello = h;
	cci__sockaddr_str((const struct sockaddr *)from, req->peer_str, sizeof(req->peer_str));
	LIST_INSERT_HEAD(&sep->reqs, req, link);
	sep->nreqs++;
	if (sock_core->post_request(sep->ep, (cci_conn_attribute_t)h.attr,
	                            d->body + SOCK_DG_HELLO_LEN, h.data_len, req) != CCI_SUCCESS) {
		req_free(sep, req); /* the client asks again */
		return;
	}
	SOCK_LOG(CCI_LOG_CONN, "sock: connection request from %s", req->peer_str);
}

void sock_hs_rx(struct sock_ep *sep, const struct sock_dg *d,
                const struct sockaddr_storage *from, socklen_t fromlen, uint64_t now)
{
	if (d->type == SOCK_DG_HELLO)
		hello_rx(sep, d, from, fromlen);
	else
		client_rx(sep, d, from, now);
}

static int accept_locked(struct sock_req *req, void *context)
{
	struct sock_ep *sep = req->sep;
	cci__conn_t *conn = sock_core->conn_alloc(sep->ep, (cci_conn_attribute_t)req->hello.attr,
	                                          context);
	struct sock_conn *sc;
	int rc;

	if (!conn)
		return CCI_ENOMEM;
	sc = sock_conn_of(conn);
	conn_fields(sc, sep, conn, (int)req->hello.attr);
	sc->peer = req->from;
	sc->peerlen = req->fromlen;
	sc->peer_token = req->hello.token;
	memcpy(sc->peer_str, req->peer_str, sizeof(sc->peer_str));
	conn_sizes(sc, req->hello.mss, req->hello.dgram);
	rc = sock_conn_slot(sep, sc);
	if (rc == CCI_SUCCESS)
		rc = cci__random64(&sc->isn);
	if (rc == CCI_SUCCESS && sc->reliable)
		rc = sock_conn_rel_init(sc, sc->isn, req->hello.isn, req->hello.window);
	if (rc != CCI_SUCCESS) {
		if (sep->slots && sep->slots[sc->slot] == sc)
			sock_conn_destroy(sc);
		sock_core->conn_release(conn);
		return rc;
	}
	req->accepted = 1;
	req->sc_token = sc->token;
	req->isn = sc->isn;
	sock_conn_open(sc, cci__now_ns());
	reply_send(sep, req);
	sock_tx_flush(sep);
	SOCK_LOG(CCI_LOG_CONN, "sock: accepted %s (mss %u)", sc->peer_str, sc->mss);
	sock_core->post_accept(sep->ep, context, CCI_SUCCESS, conn);
	return CCI_SUCCESS;
}

static int answer(cci__evt_t *evt, void *context, int accept)
{
	struct sock_req *req = evt->req_state;
	struct sock_ep *sep = req->sep;
	int rc = CCI_EINVAL;

	pthread_mutex_lock(&sep->lock);
	if (!req->answered) {
		req->answered = 1;
		rc = CCI_SUCCESS;
		if (accept)
			rc = accept_locked(req, context);
		if (!accept || rc != CCI_SUCCESS) {
			req->accepted = 0;
			reply_send(sep, req);
			sock_tx_flush(sep);
		}
	}
	pthread_mutex_unlock(&sep->lock);
	return rc;
}

int sock_accept(cci__evt_t *evt, void *context)
{
	return answer(evt, context, 1);
}

int sock_reject(cci__evt_t *evt)
{
	return answer(evt, NULL, 0);
}

/* The request's event came back: remember the answer for a while, for
 * HELLOs still on their way. */
void sock_request_done(cci__evt_t *evt)
{
	struct sock_req *req = evt->req_state;
	struct sock_ep *sep = req->sep;

	pthread_mutex_lock(&sep->lock);
	req->done = 1;
	req->expire_ns = cci__now_ns() + SOCK_DECIDED_NS;
	pthread_mutex_unlock(&sep->lock);
}

/* HELLOs again, and forgetting old answers. */
void sock_hs_tick(struct sock_ep *sep, uint64_t now)
{
	struct sock_conn *sc;
	struct sock_req *req, *next;

	LIST_FOREACH(sc, &sep->conns, link) {
		if (cci__conn_state(&sc->base) != CCI__CONN_CONNECTING || now < sc->hs_next_ns)
			continue;
		hello_send(sc);
		sc->hs_wait_ns = sc->hs_wait_ns * 2 < SOCK_HS_RETRY_MAX_NS ? sc->hs_wait_ns * 2
		                                                             : SOCK_HS_RETRY_MAX_NS;
		sc->hs_next_ns = now + sc->hs_wait_ns;
	}
	for (req = LIST_FIRST(&sep->reqs); req; req = next) {
		next = LIST_NEXT(req, link);
		if (req->done && now >= req->expire_ns)
			req_free(sep, req);
	}
}

void sock_hs_free_all(struct sock_ep *sep)
{
	while (!LIST_EMPTY(&sep->reqs))
		req_free(sep, LIST_FIRST(&sep->reqs));
}
