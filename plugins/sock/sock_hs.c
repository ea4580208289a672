/*
 * sock_hs.c - the connection handshake of the UDP transport.
 *
 * The client sends HELLO (its token, first sequence, window, mss, largest
 * datagram and the connect payload) again and again, backing off from
 * 100 ms to 1 s (each wait drawn from 3/4 to 5/4 of it, so that a storm of
 * connects does not come back in one burst), until ACCEPT or REJECT comes
 * or the connect deadline passes.  The server posts one CONNECT_REQUEST
 * per (address, client token); a repeated HELLO gets the answer again, or
 * nothing while the application decides.  The answer comes from the
 * connection itself once accepted (indexed by its client's token and
 * address for as long as it lives), from the request for SOCK_DECIDED_NS
 * once rejected; once the connection closed, a HELLO of its client is
 * ignored for SOCK_DECIDED_NS (sock_conn_gone).  At most SOCK_REQS_MAX
 * requests wait or are remembered as rejected (the oldest rejected one
 * makes room): past that a HELLO is dropped and the client's next one
 * tries again.  A client answers an ACCEPT that opens nothing (its
 * connect ended, or it is open with another server connection) with BYE,
 * so the server keeps no connection nobody uses.  An ICMP "port
 * unreachable" quoting a HELLO fails the attempt at once
 * (sock_conn_icmp_refused in sock_conn.c).
 */
#include <search.h>
#include <stdlib.h>

#include "sock.h"

/* ---- client ------------------------------------------------------------- */

static void hello_send(struct sock_conn *sc)
{
	struct sock_dg d = { .type = SOCK_DG_HELLO };

	sock_tx_emit(sc->sep, &sc->peer, sc->peerlen, &d, sc->hello, sc->hello_len);
}

/* When to send the HELLO again: the wait doubles up to its cap, and each
 * is drawn from 3/4 to 5/4 of it (xorshift64 of the endpoint). */
static void hello_next(struct sock_conn *sc, uint64_t now)
{
	struct sock_ep *sep = sc->sep;
	uint64_t x = sep->rng;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	sep->rng = x;
	sc->hs_next_ns = now + sc->hs_wait_ns * 3 / 4 + x % (sc->hs_wait_ns / 2 + 1);
	sc->hs_wait_ns = sc->hs_wait_ns * 2 < SOCK_HS_RETRY_MAX_NS ? sc->hs_wait_ns * 2
	                                                             : SOCK_HS_RETRY_MAX_NS;
}

static int hello_build(struct sock_conn *sc, const void *data, uint32_t len)
{
	struct sock_dg_hello h = {
		.core = { .attr = (uint8_t)sc->attr, .mss = sc->sep->mss, .credits = sc->sep->window,
		          .data_len = len, .nonce = sc->token },
		.dgram = sc->sep->dgram, .isn = sc->isn,
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
	TAILQ_INIT(&sc->ops);
	cci__emu_rma_conn_init(&sc->rma, sock_core, sep->ep, sc->peer_str);
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
		sock_conn_slot_release(sep, sc);
		LIST_REMOVE(sc, link); /* put on sep->conns by sock_conn_slot */
		return rc;
	}
	cci__ct_connecting(&sc->base.timers, timeout, now);
	cci__conn_due_note(&sep->due, &sc->base, sc->conn, now); /* its deadline */
	TAILQ_INSERT_TAIL(&sep->connecting, sc, hs_link);
	sc->in_connecting = 1;
	sc->hs_wait_ns = SOCK_HS_RETRY_NS;
	sc->hs_next_ns = 0; /* past its tick's budget: at the next tick */
	if (sep->hs_budget) {
		sep->hs_budget--;
		hello_next(sc, now);
		hello_send(sc);
		sock_tx_flush(sep);
	}
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

	rc = net_uri_resolve(uri, "sock", &ss, &sl);
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
	    a.core.nonce != sc->token) {
		sc->sep->stats.bad++;
		SOCK_LOG(CCI_LOG_CONN, "sock: bad ACCEPT from %s: %s", sc->peer_str,
		         why ? why : "not for this connection");
		return;
	}
	sc->peer_token = a.token;
	if (sock_conn_index(sc) != CCI_SUCCESS) /* only ICMP errors will not find it */
		SOCK_LOG(CCI_LOG_CONN, "sock: connection to %s: cannot index it", sc->peer_str);
	conn_sizes(sc, a.core.mss, a.dgram);
	if (sc->reliable && sock_conn_rel_init(sc, sc->isn, a.isn, a.core.credits) != CCI_SUCCESS) {
		sock_connect_fail(sc, CCI_ENOMEM, "out of memory");
		return;
	}
	free(sc->hello);
	sc->hello = NULL;
	TAILQ_REMOVE(&sc->sep->connecting, sc, hs_link);
	sc->in_connecting = 0;
	sock_conn_open(sc, now);
	SOCK_LOG(CCI_LOG_CONN, "sock: connected to %s (mss %u)", sc->peer_str, sc->mss);
	sock_core->post_connect(sc->sep->ep, sc->context, CCI_SUCCESS, sc->conn);
}

/* An ACCEPT that opens nothing: its connect is no more (it timed out, or
 * failed, while the answer was on its way), or it comes for a client
 * connection that is past connecting from another server connection than
 * its own (keep: the token of its own; tokens are never 0, so 0 keeps
 * none).  Tell the server, whose connection would otherwise wait for a
 * client that does not use it; the ACCEPT of the client's own connection
 * again (its HELLO was answered twice) is only a repeat. */
static void accept_orphan(struct sock_ep *sep, const struct sock_dg *d,
                          const struct sockaddr_storage *from, socklen_t fromlen, uint64_t keep)
{
	struct sock_dg_accept a;
	struct sock_dg bye = { .type = SOCK_DG_BYE };
	const char *why = NULL;
	char peer[64];

	if (sock_dg_accept_decode(d->body, d->body_len, &a, &why) != 0 ||
	    a.core.nonce != d->token || a.token == keep)
		return;
	cci__sockaddr_str((const struct sockaddr *)from, peer, sizeof(peer));
	SOCK_LOG(CCI_LOG_CONN, "sock: %s: an ACCEPT from %s opens no connection: answered with BYE",
	         sep->ep->uri, peer);
	bye.token = a.token;
	sock_tx_emit(sep, from, fromlen, &bye, NULL, 0);
	sock_tx_flush(sep);
}

static void client_rx(struct sock_ep *sep, const struct sock_dg *d,
                      const struct sockaddr_storage *from, socklen_t fromlen, uint64_t now)
{
	struct sock_conn *sc = sock_conn_find(sep, d->token);

	if (!sc && d->type == SOCK_DG_ACCEPT)
		accept_orphan(sep, d, from, fromlen, 0);
	if (!sc || !sock_addr_same(from, &sc->peer) ||
	    cci__conn_state(&sc->base) != CCI__CONN_CONNECTING) {
		if (sc && !sc->is_server && d->type == SOCK_DG_ACCEPT &&
		    sock_addr_same(from, &sc->peer))
			accept_orphan(sep, d, from, fromlen, sc->peer_token);
		sep->stats.foreign++; /* late, repeated or forged */
		return;
	}
	if (d->type == SOCK_DG_REJECT)
		sock_connect_fail(sc, CCI_ECONNREFUSED, "rejected by the server");
	else
		got_accept(sc, d, now);
}

/* ---- server ------------------------------------------------------------- */

/* The ACCEPT of a server connection, sent now (again, when the client's
 * HELLO comes back: our first one was lost). */
static void accept_send(struct sock_conn *sc)
{
	struct sock_ep *sep = sc->sep;
	struct sock_dg d = { .type = SOCK_DG_ACCEPT, .token = sc->peer_token };
	struct sock_dg_accept a = {
		.core = { .mss = sep->mss, .credits = sep->window, .nonce = sc->peer_token },
		.dgram = sep->dgram, .token = sc->token, .isn = sc->isn,
	};
	uint8_t b[SOCK_DG_ACCEPT_LEN];

	sock_dg_accept_encode(b, &a);
	sock_tx_emit(sep, &sc->peer, sc->peerlen, &d, b, sizeof(b));
	sock_tx_flush(sep); /* b is on the stack */
}

static void reject_send(struct sock_ep *sep, struct sock_req *req)
{
	struct sock_dg d = { .type = SOCK_DG_REJECT, .token = req->hello.core.nonce };

	sock_tx_emit(sep, &req->from, req->fromlen, &d, NULL, 0);
}

static void req_free(struct sock_ep *sep, struct sock_req *req)
{
	sock_tx_flush(sep); /* a reply may point at req->from */
	if (!tdelete(&req->key, &sep->req_index, sock_peer_key_cmp))
		SOCK_ERR("sock: %s: a request was missing from its index", sep->ep->uri);
	LIST_REMOVE(req, link);
	if (req->done)
		TAILQ_REMOVE(&sep->decided, req, done_link);
	sep->nreqs--;
	free(req);
}

/* Room for one more request: forget the oldest rejected one if full
 * (accepted ones are forgotten once their event comes back). */
static int req_room(struct sock_ep *sep)
{
	if (sep->nreqs < SOCK_REQS_MAX)
		return 1;
	if (TAILQ_EMPTY(&sep->decided))
		return 0;
	req_free(sep, TAILQ_FIRST(&sep->decided));
	return 1;
}

/* A new request from h; NULL when it cannot be kept (the client asks
 * again). */
static struct sock_req *req_new(struct sock_ep *sep, const struct sock_dg_hello *h,
                                const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct sock_req *req;
	void *node;

	if (!req_room(sep) || !(req = calloc(1, sizeof(*req))))
		return NULL;
	req->sep = sep;
	req->from = *from;
	req->fromlen = fromlen;
	req->hello = *h;
	req->key.token = h->core.nonce;
	req->key.addr = &req->from;
	node = tsearch(&req->key, &sep->req_index, sock_peer_key_cmp);
	if (!node || *(struct sock_peer_key **)node != &req->key) {
		free(req);
		return NULL;
	}
	cci__sockaddr_str((const struct sockaddr *)from, req->peer_str, sizeof(req->peer_str));
	LIST_INSERT_HEAD(&sep->reqs, req, link);
	sep->nreqs++;
	return req;
}

/* A HELLO from from finds no room (SOCK_REQS_MAX requests wait for the
 * application) or no memory: the client's next one asks again.  A storm
 * repeats this: a warning at most every SOCK_WARN_EVERY_NS. */
static void hello_dropped(struct sock_ep *sep, const struct sockaddr_storage *from)
{
	char peer[64];

	sep->stats.hello_dropped++;
	cci__sockaddr_str((const struct sockaddr *)from, peer, sizeof(peer));
	if (cci__log_due(&sep->hello_warned_ns, SOCK_WARN_EVERY_NS))
		SOCK_WARN("sock: %s: a connection request from %s dropped: %u requests wait for the "
		          "application (or no memory); the client asks again (%llu dropped so far)",
		          sep->ep->uri, peer, sep->nreqs, (unsigned long long)sep->stats.hello_dropped);
	else
		SOCK_LOG(CCI_LOG_CONN, "sock: %s: a connection request from %s dropped", sep->ep->uri,
		         peer);
}

static void hello_rx(struct sock_ep *sep, const struct sock_dg *d,
                     const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct sock_peer_key k = { 0, from };
	struct sock_dg_hello h;
	struct sock_conn *sc;
	struct sock_req *req;
	const char *why = NULL;
	void *node;

	if (sock_dg_hello_decode(d->body, d->body_len, &h, &why) != 0) {
		sep->stats.bad++;
		SOCK_LOG(CCI_LOG_CONN, "sock: bad HELLO: %s", why);
		return;
	}
	k.token = h.core.nonce;
	if ((sc = sock_conn_by_peer(sep, &k))) {
		if (sc->is_server && cci__conn_is_open(&sc->base))
			accept_send(sc);
		return;
	}
	if ((node = tfind(&k, &sep->req_index, sock_peer_key_cmp))) {
		req = (struct sock_req *)((char *)*(struct sock_peer_key **)node -
		                          offsetof(struct sock_req, key));
		if (req->answered && !req->accepted)
			reject_send(sep, req);
		return; /* else the application decides */
	}
	if (sock_conn_gone(sep, &k)) {
		sep->stats.hello_gone++; /* for the connection that closed */
		return;
	}
	if (!(req = req_new(sep, &h, from, fromlen))) {
		hello_dropped(sep, from);
		return;
	}
	if (sock_core->post_request(sep->ep, (cci_conn_attribute_t)h.core.attr,
	                            d->body + SOCK_DG_HELLO_LEN, h.core.data_len, req) != CCI_SUCCESS) {
		req_free(sep, req);
		hello_dropped(sep, from);
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
		client_rx(sep, d, from, fromlen, now);
}

static int accept_locked(struct sock_req *req, void *context)
{
	struct sock_ep *sep = req->sep;
	cci__conn_t *conn = sock_core->conn_alloc(sep->ep,
	                                          (cci_conn_attribute_t)req->hello.core.attr, context);
	struct sock_conn *sc;
	int rc;

	if (!conn)
		return CCI_ENOMEM;
	sc = sock_conn_of(conn);
	conn_fields(sc, sep, conn, (int)req->hello.core.attr);
	sc->peer = req->from;
	sc->peerlen = req->fromlen;
	sc->peer_token = req->hello.core.nonce;
	sc->is_server = 1;
	memcpy(sc->peer_str, req->peer_str, sizeof(sc->peer_str));
	conn_sizes(sc, req->hello.core.mss, req->hello.dgram);
	rc = sock_conn_slot(sep, sc);
	if (rc != CCI_SUCCESS) {
		sock_core->conn_release(conn);
		return rc;
	}
	rc = cci__random64(&sc->isn);
	if (rc == CCI_SUCCESS && sc->reliable)
		rc = sock_conn_rel_init(sc, sc->isn, req->hello.isn, req->hello.core.credits);
	if (rc == CCI_SUCCESS)
		rc = sock_conn_index(sc);
	if (rc != CCI_SUCCESS) {
		sock_conn_destroy(sc);
		sock_core->conn_release(conn);
		return rc;
	}
	req->accepted = 1;
	sock_conn_open(sc, cci__now_ns());
	accept_send(sc);
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
			reject_send(sep, req);
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

/* The request's event came back.  An accepted request is done with: its
 * connection answers repeated HELLOs from now on.  A rejected one is
 * remembered for a while, for HELLOs still on their way. */
void sock_request_done(cci__evt_t *evt)
{
	struct sock_req *req = evt->req_state;
	struct sock_ep *sep = req->sep;

	pthread_mutex_lock(&sep->lock);
	if (req->accepted) {
		req_free(sep, req);
	} else {
		req->done = 1;
		req->expire_ns = cci__now_ns() + SOCK_DECIDED_NS;
		TAILQ_INSERT_TAIL(&sep->decided, req, done_link); /* in expiry order */
	}
	pthread_mutex_unlock(&sep->lock);
}

/* HELLOs due (again, or held back by the budget), oldest connect first,
 * at most SOCK_HS_BURST a tick: a storm of connects reaches the server
 * as a stream its socket can take, not as one burst that overflows it;
 * and forgetting old answers. */
void sock_hs_tick(struct sock_ep *sep, uint64_t now)
{
	struct sock_conn *sc;
	struct sock_req *req;

	sep->hs_budget = SOCK_HS_BURST;
	TAILQ_FOREACH(sc, &sep->connecting, hs_link) {
		if (now < sc->hs_next_ns)
			continue;
		if (!sep->hs_budget)
			break;
		sep->hs_budget--;
		hello_send(sc);
		hello_next(sc, now);
	}
	while ((req = TAILQ_FIRST(&sep->decided)) && now >= req->expire_ns)
		req_free(sep, req);
}

void sock_hs_free_all(struct sock_ep *sep)
{
	while (!LIST_EMPTY(&sep->reqs))
		req_free(sep, LIST_FIRST(&sep->reqs));
}
