/*
 * sock_conn.c - a UDP connection's lifetime: its slot and token, its
 * reliability state, opening, breaking, closing, the peer's death, and the
 * tick of the shared connection base (connect deadline, send timeout,
 * keepalive), which visits only the connections due in sep->due.  The
 * clients of closed server connections are remembered for a while, so
 * that a late HELLO of theirs is not taken for a new connect
 * (sock_conn_gone).  sep->lock held throughout.
 */
#include <search.h>
#include <stdlib.h>

#include "sock.h"

int sock_addr_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
		return x->sin6_port == y->sin6_port &&
		       memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
	}
	return 0;
}

/* An order on addresses (family, port, address bytes), for the indexes. */
static int addr_cmp(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return a->ss_family < b->ss_family ? -1 : 1;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		if (x->sin_port != y->sin_port)
			return x->sin_port < y->sin_port ? -1 : 1;
		return memcmp(&x->sin_addr, &y->sin_addr, sizeof(x->sin_addr));
	}
	if (a->ss_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
		if (x->sin6_port != y->sin6_port)
			return x->sin6_port < y->sin6_port ? -1 : 1;
		return memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	return 0;
}

int sock_peer_key_cmp(const void *a, const void *b)
{
	const struct sock_peer_key *x = a, *y = b;

	if (x->token != y->token)
		return x->token < y->token ? -1 : 1;
	return addr_cmp(x->addr, y->addr);
}

/* ---- closed server connections ------------------------------------------ */

static void gone_free(struct sock_ep *sep, struct sock_gone *g)
{
	tdelete(&g->key, &sep->gone_index, sock_peer_key_cmp);
	TAILQ_REMOVE(&sep->gone, g, link);
	sep->ngone--;
	free(g);
}

/*
 * The server connection sc leaves the index of its client's token and
 * address: remember the client for SOCK_DECIDED_NS, or a HELLO of that
 * client still on its way (duplicated, delayed, or sent again because
 * every ACCEPT was lost) would post a second CONNECT_REQUEST for one
 * connect, and a connection nobody uses if the application accepted it.
 * At most SOCK_GONE_MAX are kept (the oldest goes); without memory, none
 * (logged).
 */
static void gone_add(struct sock_ep *sep, const struct sock_conn *sc)
{
	struct sock_gone *g;
	void *node;

	if (sep->closing)
		return;
	if (sep->ngone >= SOCK_GONE_MAX)
		gone_free(sep, TAILQ_FIRST(&sep->gone));
	g = calloc(1, sizeof(*g));
	if (!g) {
		SOCK_LOG(CCI_LOG_CONN, "sock: %s: no memory to remember the closed connection of "
		         "%s", sep->ep->uri, sc->peer_str);
		return;
	}
	g->addr = sc->peer;
	g->key.token = sc->peer_token;
	g->key.addr = &g->addr;
	g->expire_ns = cci__now_ns() + SOCK_DECIDED_NS;
	node = tsearch(&g->key, &sep->gone_index, sock_peer_key_cmp);
	if (!node || *(struct sock_peer_key **)node != &g->key) {
		free(g); /* no memory, or remembered already */
		return;
	}
	TAILQ_INSERT_TAIL(&sep->gone, g, link);
	sep->ngone++;
}

int sock_conn_gone(struct sock_ep *sep, const struct sock_peer_key *k)
{
	return tfind(k, &sep->gone_index, sock_peer_key_cmp) != NULL;
}

static void gone_tick(struct sock_ep *sep, uint64_t now)
{
	struct sock_gone *g;

	while ((g = TAILQ_FIRST(&sep->gone)) && now >= g->expire_ns)
		gone_free(sep, g);
}

void sock_conn_gone_free_all(struct sock_ep *sep)
{
	while (!TAILQ_EMPTY(&sep->gone))
		gone_free(sep, TAILQ_FIRST(&sep->gone));
}

/* ---- slots -------------------------------------------------------------- */

/*
 * Give sc a slot and a token: a random tag over the slot number, so that
 * a datagram for an earlier connection of the slot, or of an earlier
 * incarnation of this endpoint, finds nothing.  Freed slots are reused
 * from a stack, which always has room for every slot ever used (so that
 * freeing one cannot fail): a storm of connects costs no scan.  The
 * connection's place in sep->due is reserved here too, so that filing it
 * never allocates; both go back in sock_conn_slot_release.
 */
int sock_conn_slot(struct sock_ep *sep, struct sock_conn *sc)
{
	uint32_t i = sep->nslot_free ? sep->slot_free[sep->nslot_free - 1] : sep->slot_top;
	uint64_t tag = 0;

	assert(cci__mutex_held(&sep->lock));
	if (!sep->nslot_free &&
	    (cci__grow(&sep->slots, i, &sep->nslots, 16, sizeof(*sep->slots)) != CCI_SUCCESS ||
	     cci__grow(&sep->slot_free, i, &sep->slot_free_cap, 16, sizeof(*sep->slot_free)) !=
	             CCI_SUCCESS))
		return CCI_ENOMEM;
	if (cci__due_reserve(&sep->due) != CCI_SUCCESS)
		return CCI_ENOMEM;
	while ((uint32_t)tag == 0)
		if (cci__random64(&tag) != CCI_SUCCESS) {
			cci__due_unreserve(&sep->due);
			return CCI_ERROR;
		}
	if (sep->nslot_free)
		sep->nslot_free--;
	else
		sep->slot_top++;
	sc->slot = i;
	sc->token = (tag << 32) | i;
	sep->slots[i] = sc;
	LIST_INSERT_HEAD(&sep->conns, sc, link);
	return CCI_SUCCESS;
}

/* sc leaves its slot, the endpoint's indexes, and the due heap (its
 * reserved place too): nothing files it again.  It stays on sep->conns
 * (sock_conn_destroy takes it off). */
void sock_conn_slot_release(struct sock_ep *sep, struct sock_conn *sc)
{
	assert(cci__mutex_held(&sep->lock));
	if (sc->slot_gone)
		return;
	sc->slot_gone = 1;
	cci__due_clear(&sep->due, &sc->base.due);
	cci__due_unreserve(&sep->due);
	if (sc->in_index && !tdelete(&sc->key, &sep->by_peer, sock_peer_key_cmp))
		SOCK_ERR("sock: %s: a connection was missing from its index", sep->ep->uri);
	if (sc->in_index && sc->is_server)
		gone_add(sep, sc);
	sc->in_index = 0;
	if (sc->in_connecting)
		TAILQ_REMOVE(&sep->connecting, sc, hs_link);
	sc->in_connecting = 0;
	if (sep->slots[sc->slot] == sc) {
		sep->slots[sc->slot] = NULL;
		sep->slot_free[sep->nslot_free++] = sc->slot;
	}
}

/* Index a connection by its peer's token and address: CCI_SUCCESS, or
 * CCI_ENOMEM (CCI_ERROR if the key is taken: random tokens make that a
 * forgery or a bug). */
int sock_conn_index(struct sock_conn *sc)
{
	void *node;

	sc->key.token = sc->peer_token;
	sc->key.addr = &sc->peer;
	node = tsearch(&sc->key, &sc->sep->by_peer, sock_peer_key_cmp);
	if (!node)
		return CCI_ENOMEM;
	if (*(struct sock_peer_key **)node != &sc->key)
		return CCI_ERROR; /* one client connection, one server connection */
	sc->in_index = 1;
	return CCI_SUCCESS;
}

struct sock_conn *sock_conn_by_peer(struct sock_ep *sep, const struct sock_peer_key *k)
{
	void *node = tfind(k, &sep->by_peer, sock_peer_key_cmp);

	if (!node)
		return NULL;
	return (struct sock_conn *)((char *)*(struct sock_peer_key **)node -
	                            offsetof(struct sock_conn, key));
}

struct sock_conn *sock_conn_find(struct sock_ep *sep, uint64_t token)
{
	uint32_t slot = (uint32_t)token;
	struct sock_conn *sc;

	if (slot >= sep->nslots || !(sc = sep->slots[slot]) || sc->token != token)
		return NULL;
	return sc;
}

int sock_conn_rel_init(struct sock_conn *sc, uint64_t tx_isn, uint64_t rx_isn,
                       uint32_t peer_window)
{
	struct sock_rel_conf c;
	int rc;

	sock_rel_conf_default(&c);
	c.cap = SOCK_REL_SLOTS;
	c.ordered = 1;
	c.tx_isn = tx_isn;
	c.rx_isn = rx_isn;
	c.rx_bufs = sc->sep->window;
	c.peer_bufs = peer_window < SOCK_REL_SLOTS ? peer_window : SOCK_REL_SLOTS;
	c.cwnd_max = SOCK_REL_SLOTS;
	/* Ack every other datagram, or within 100 us: a sender whose window
	 * loss keeps small must not wait a millisecond per window. */
	c.ack_every = 2;
	c.ack_delay_ns = 100000;
	c.rto_min_ns = 5000000; /* 5 ms: loopback and LAN round trips are far below */
	rc = sock_rel_init(&sc->rel, &c);
	if (rc == CCI_SUCCESS)
		sc->rel_on = 1;
	return rc;
}

void sock_conn_open(struct sock_conn *sc, uint64_t now)
{
	assert(cci__mutex_held(&sc->sep->lock));
	cci__conn_move(&sc->base, CCI__CONN_OPEN, sock_core, sc->conn);
	cci__ct_arm(&sc->base.timers, sc->conn->keepalive_us, now);
	/* Filed by its connect deadline, if any: now by its keepalive and
	 * send timeout. */
	cci__conn_due_note(&sc->sep->due, &sc->base, sc->conn, now);
	sock_conn_touch(sc);
}

/* The peer is gone, closed us, broke the protocol or timed out: every
 * pending op fails once with status, and so does every later send. */
void sock_conn_break(struct sock_conn *sc, int status, const char *why)
{
	assert(cci__mutex_held(&sc->sep->lock));
	if (cci__conn_state(&sc->base) != CCI__CONN_OPEN)
		return;
	SOCK_LOG(CCI_LOG_CONN, "sock: connection to %s broken: %s", sc->peer_str, why);
	cci__conn_move(&sc->base, CCI__CONN_BROKEN, sock_core, sc->conn);
	sock_tx_fail_all(sc, status, 1);
	/* What it holds goes at the next tick (sock_conn_release_broken):
	 * the caller may still be inside sc's reliability state. */
	if (!sc->broken_listed) {
		sc->broken_listed = 1;
		sc->broken_next = sc->sep->broken;
		sc->sep->broken = sc;
	}
}

static void broken_unlink(struct sock_conn *sc)
{
	CCI__SLIST_UNLINK(&sc->sep->broken, sc, broken_next);
	sc->broken_listed = 0;
}

static void timed_unlink(struct sock_conn *sc)
{
	if (!sc->timed)
		return;
	LIST_REMOVE(sc, timed_link);
	sc->timed = 0;
}

static void touched_unlink(struct sock_ep *sep, struct sock_conn *sc)
{
	struct sock_conn **p;

	for (p = &sep->touched; *p; p = &(*p)->touch_next)
		if (*p == sc) {
			*p = sc->touch_next;
			break;
		}
	for (p = &sep->pend; *p; p = &(*p)->pend_next)
		if (*p == sc) {
			*p = sc->pend_next;
			break;
		}
}

static void rb_drop(struct sock_ep *sep, struct sock_rxbuf *rb)
{
	rb->next = rb->cap > SOCK_SMALL ? sep->rb_big : sep->rb_small;
	if (rb->cap > SOCK_SMALL)
		sep->rb_big = rb;
	else
		sep->rb_small = rb;
}

/* Everything sc holds but its object: its ops end without events, what
 * it received and did not deliver is dropped, its window, buffers and
 * slot are freed.  Again later, it does nothing.  sep->lock held. */
static void conn_release(struct sock_conn *sc)
{
	struct sock_ep *sep = sc->sep;
	uint64_t h;

	sock_tx_flush(sep); /* queued datagrams point at sc->peer */
	sock_tx_fail_all(sc, CCI_ERR_DISCONNECTED, 0);
	while (sc->rel_on && sock_rel_rx_abort(&sc->rel, &h)) {
		struct sock_held *hd = (struct sock_held *)(uintptr_t)h;
		hd->next = sep->hd_free;
		sep->hd_free = hd;
	}
	if (sc->asm_rb)
		rb_drop(sep, sc->asm_rb);
	while (sc->pend) {
		struct sock_rxbuf *rb = sc->pend;
		sc->pend = rb->next;
		rb_drop(sep, rb);
	}
	if (sc->rel_on) {
		const struct sock_rel_stats *st = &sc->rel.stats;
		SOCK_LOG(CCI_LOG_CONN, "sock: connection to %s closed: %llu sent, %llu resent "
		         "(%llu fast, %llu timeouts, %llu probes), %llu delivered, %llu duplicates, "
		         "%llu outside the window, %llu forged acks", sc->peer_str,
		         (unsigned long long)st->tx_new, (unsigned long long)st->tx_retx,
		         (unsigned long long)st->tx_fast, (unsigned long long)st->rto,
		         (unsigned long long)st->tlp, (unsigned long long)st->rx_delivered,
		         (unsigned long long)st->rx_dup, (unsigned long long)st->rx_outside,
		         (unsigned long long)st->ack_forged);
		sock_rel_fini(&sc->rel);
	}
	sc->rel_on = 0;
	timed_unlink(sc);
	touched_unlink(sep, sc);
	sc->touched = sc->in_pend = sc->ack_kept_set = 0;
	sock_conn_slot_release(sep, sc);
	free(sc->hello);
	sc->hello = NULL;
}

/*
 * A broken connection (the peer said goodbye, died or timed out) keeps
 * nothing but its object until the application disconnects, which CCI
 * cannot make it do: a server whose clients come and go holds no window
 * or buffer for those that left.  Its sends already fail
 * (CCI_ERR_DISCONNECTED).  Messages it received in order before the
 * break and that wait for a receive buffer (sc->pend) are still
 * delivered: it stays listed until they are.  sep->lock held.
 */
void sock_conn_release_broken(struct sock_ep *sep)
{
	struct sock_conn **p = &sep->broken;

	assert(cci__mutex_held(&sep->lock));
	while (*p) {
		struct sock_conn *sc = *p;
		if (sc->in_pend) {
			p = &sc->broken_next;
			continue;
		}
		*p = sc->broken_next;
		sc->broken_listed = 0;
		conn_release(sc);
	}
}

/* Forget sc (conn_release) and take it off the endpoint.  The caller
 * releases the core's connection. */
void sock_conn_destroy(struct sock_conn *sc)
{
	if (sc->broken_listed)
		broken_unlink(sc);
	conn_release(sc);
	LIST_REMOVE(sc, link);
	cci__conn_move(&sc->base, CCI__CONN_CLOSED, sock_core, sc->conn);
}

/* A connect attempt ends without a connection. */
void sock_connect_fail(struct sock_conn *sc, int status, const char *why)
{
	cci__conn_t *conn = sc->conn;

	SOCK_LOG(CCI_LOG_CONN, "sock: connecting to %s failed: %s", sc->peer_str, why);
	cci__conn_move(&sc->base, CCI__CONN_FAILED, sock_core, conn);
	sock_core->post_connect(sc->sep->ep, sc->context, status, NULL);
	sock_conn_destroy(sc);
	sock_core->conn_release(conn);
}

/*
 * An ICMP port unreachable came back for a datagram of ours of type,
 * naming token, sent to ss.  An ICMP error carries no proof of origin;
 * the token it quotes does (it is random, and only the two ends see it),
 * so only one naming a connection of ours, at that very address, counts:
 *  - our HELLO (token: ours): that connect, still unanswered, fails at
 *    once, CCI_ECONNREFUSED (nobody listens there);
 *  - any other (token: the peer's): never breaks the connection on its
 *    own.  It becomes suspect and is probed (suspect_tick); only when
 *    SOCK_ICMP_CONFIRM errors came and nothing was heard from the peer for
 *    SOCK_ICMP_SILENCE_NS is it broken, as a dead peer's would be (a
 *    killed process leaves no other trace on UDP).  A word from the peer
 *    clears the suspicion (sock_rx.c).
 */
void sock_conn_icmp_refused(struct sock_ep *sep, const struct sockaddr_storage *ss, uint8_t type,
                            uint64_t token, uint64_t now)
{
	struct sock_peer_key k = { token, ss };
	struct sock_conn *sc = type == SOCK_DG_HELLO ? sock_conn_find(sep, token)
	                                             : sock_conn_by_peer(sep, &k);
	int state = sc ? cci__conn_state(&sc->base) : -1;

	if (!sc || !sock_addr_same(&sc->peer, ss) ||
	    state != (type == SOCK_DG_HELLO ? CCI__CONN_CONNECTING : CCI__CONN_OPEN)) {
		sep->stats.icmp_ignored++;
		return;
	}
	if (type == SOCK_DG_HELLO) {
		sock_connect_fail(sc, CCI_ECONNREFUSED,
		                  "nobody listens at the address (ICMP port unreachable)");
		return;
	}
	if (!sc->suspect_ns) {
		SOCK_LOG(CCI_LOG_CONN, "sock: connection to %s: ICMP port unreachable; probing it",
		         sc->peer_str);
		sc->suspect_ns = now;
		sc->last_probe_ns = now;
		sc->icmp_count = 0;
		sock_tx_ctl(sc, SOCK_DG_PING, SOCK_DG_F_ACK_NOW);
		/* The tick visits it for the next probe (suspect_next)... */
		cci__due_by(&sep->due, &sc->base.due, now + SOCK_ICMP_PROBE_NS);
	}
	/* ... and for the break, once enough errors came. */
	if (++sc->icmp_count >= SOCK_ICMP_CONFIRM)
		cci__due_by(&sep->due, &sc->base.due, sc->suspect_ns + SOCK_ICMP_SILENCE_NS);
}

/* The tick of a suspect connection: probe it, or break it if its peer
 * stayed silent through enough ICMP errors. */
static void suspect_tick(struct sock_conn *sc, uint64_t now)
{
	uint64_t silent = cci__ns_since(sc->suspect_ns, now);

	if (sc->icmp_count >= SOCK_ICMP_CONFIRM && silent >= SOCK_ICMP_SILENCE_NS) {
		sc->suspect_ns = 0;
		sock_conn_break(sc, CCI_ERR_DISCONNECTED,
		                "the peer's port is closed (ICMP port unreachable, nothing heard)");
		return;
	}
	if (now - sc->last_probe_ns >= SOCK_ICMP_PROBE_NS) {
		sc->last_probe_ns = now;
		sock_tx_ctl(sc, SOCK_DG_PING, SOCK_DG_F_ACK_NOW);
	}
}

/* When a suspect connection next needs suspect_tick: its next probe, or
 * the end of the silence that breaks it when enough ICMP errors came
 * (each later error files it for that time itself). */
static uint64_t suspect_next(const struct sock_conn *sc, uint64_t now)
{
	uint64_t probe = sc->last_probe_ns + SOCK_ICMP_PROBE_NS;
	uint64_t silence = sc->suspect_ns + SOCK_ICMP_SILENCE_NS;

	return silence > now && silence < probe ? silence : probe;
}

/* ---- the tick ----------------------------------------------------------- */

static uint64_t oldest_send_ns(void *pc)
{
	struct sock_conn *sc = pc;
	struct sock_op *op;

	/* The list is in queueing order: the first send of the application's
	 * is the oldest (answers to the peer's RMAs do not count). */
	TAILQ_FOREACH(op, &sc->ops, live)
		if (sock_op_app(op))
			return op->t_ns;
	return UINT64_MAX;
}

static void ping(void *pc)
{
	sock_tx_ctl(pc, SOCK_DG_PING, 0);
}

static void connect_expired(void *pc)
{
	sock_connect_fail(pc, CCI_ETIMEDOUT, "connect timeout");
}

static void send_expired(void *pc)
{
	sock_conn_break(pc, CCI_ETIMEDOUT, "send timeout");
}

static cci__conn_t *conn_of(void *pc)
{
	return ((struct sock_conn *)pc)->conn;
}

/*
 * sock's own work on an open connection the tick visits: an ICMP
 * suspicion.  A reliability timer needs no visit: every change of the
 * reliability state either ends in sock_tx_pump or touches the
 * connection, and both note its timer (sock_tx_note_timer, at the latest
 * in the sock_tx_finish that tick_run runs before the timers), so the
 * connections on sep->timed are all that can have one.  The assertion
 * samples that rule on every connection visited.
 */
static uint64_t visit(void *pc, uint64_t now)
{
	struct sock_conn *sc = pc;

	assert(!sc->rel_on || sc->timed || sc->touched ||
	       sock_rel_next_timer(&sc->rel) == SOCK_REL_NEVER);
	if (!sc->suspect_ns)
		return CCI__DUE_NEVER;
	suspect_tick(sc, now);
	if (!sc->suspect_ns || !cci__conn_is_open(&sc->base))
		return CCI__DUE_NEVER;
	return suspect_next(sc, now);
}

static const struct cci__conn_tick_ops tick_ops = {
	.oldest_send_ns = oldest_send_ns,
	.ping = ping,
	.connect_expired = connect_expired,
	.send_expired = send_expired,
	.conn_of = conn_of,
	.visit = visit,
};

/* The connections due by now (sep->due), each visited once: 10,000 idle
 * ones cost nothing, a keepalive a visit per probe. */
void sock_conn_due_run(struct sock_ep *sep, uint64_t now)
{
	assert(cci__mutex_held(&sep->lock));
	cci__conn_due_tick(&sep->due, sock_core, &tick_ops, now);
}

void sock_conn_tick(struct sock_ep *sep, uint64_t now)
{
	assert(cci__mutex_held(&sep->lock));
	if (sep->broken)
		sock_conn_release_broken(sep);
	gone_tick(sep, now);
	sock_conn_due_run(sep, now);
}

/* The reliability timers of every connection that has one due, and the
 * earliest next one.  Only the connections on sep->timed can have one
 * (sock_tx_note_timer): a connection with nothing in flight and no ack
 * owed costs nothing here, and leaves the list when met without one.
 * The timers run may set new ones (sock_tx_note_timer lowers timer_ns). */
void sock_conn_timers(struct sock_ep *sep, uint64_t now)
{
	struct sock_conn *sc, *nxt;
	uint64_t next = SOCK_REL_NEVER;

	assert(cci__mutex_held(&sep->lock));
	sep->timer_ns = SOCK_REL_NEVER;
	for (sc = LIST_FIRST(&sep->timed); sc; sc = nxt) {
		uint64_t t = SOCK_REL_NEVER;

		nxt = LIST_NEXT(sc, timed_link);
		if (sc->rel_on && cci__conn_is_open(&sc->base)) {
			if (sock_rel_next_timer(&sc->rel) <= now)
				sock_tx_timers(sc, now);
			t = sock_rel_next_timer(&sc->rel);
		}
		if (t == SOCK_REL_NEVER)
			timed_unlink(sc);
		next = t < next ? t : next;
	}
	if (next < sep->timer_ns)
		sep->timer_ns = next;
}

/* ---- ops ---------------------------------------------------------------- */

int sock_disconnect(cci__conn_t *conn)
{
	struct sock_conn *sc = sock_conn_of(conn);
	struct sock_ep *sep = sc->sep;

	pthread_mutex_lock(&sep->lock);
	SOCK_LOG(CCI_LOG_CONN, "sock: disconnecting from %s", sc->peer_str);
	if (cci__conn_is_open(&sc->base)) {
		/* Ack what arrived, so the peer's last sends complete, then
		 * say goodbye. */
		if (sc->rel_on)
			sock_tx_ctl(sc, SOCK_DG_ACK, 0);
		sock_tx_ctl(sc, SOCK_DG_BYE, 0);
		sock_tx_flush(sep);
	}
	sock_conn_destroy(sc);
	pthread_mutex_unlock(&sep->lock);
	sock_core->conn_release(conn);
	return CCI_SUCCESS;
}

void sock_conn_timeouts_changed(cci__conn_t *conn)
{
	struct sock_conn *sc = sock_conn_of(conn);

	cci__conn_timeouts_changed(&sc->base, conn, &sc->sep->lock, &sc->sep->due);
}
