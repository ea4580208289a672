/*
 * sock_rx.c - the receive side of the UDP transport: recvmmsg batches,
 * the check of every datagram (codec, token, source address, state), the
 * reliability layer's verdict, reassembly, delivery within the
 * application's receive buffer count, and ICMP errors.  sep->lock held,
 * except in sock_recv_returned.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/errqueue.h>

#include "sock.h"

/* ---- receive buffers ---------------------------------------------------- */

static struct sock_rxbuf *rb_get(struct sock_ep *sep, uint32_t len)
{
	int small = len <= SOCK_SMALL;
	struct sock_rxbuf **list = small ? &sep->rb_small : &sep->rb_big;
	uint32_t cap = small ? SOCK_SMALL : sep->mss;
	struct sock_rxbuf *rb = *list;

	if (rb) {
		*list = rb->next;
		return rb;
	}
	rb = malloc(SOCK_RB_HDR + cap);
	if (!rb)
		return NULL;
	rb->cap = cap;
	rb->all_next = sep->rb_all;
	sep->rb_all = rb;
	return rb;
}

static void rb_put(struct sock_ep *sep, struct sock_rxbuf *rb)
{
	struct sock_rxbuf **list = rb->cap > SOCK_SMALL ? &sep->rb_big : &sep->rb_small;

	rb->next = *list;
	*list = rb;
}

void sock_rb_free_all(struct sock_ep *sep)
{
	while (sep->rb_all) {
		struct sock_rxbuf *rb = sep->rb_all;
		sep->rb_all = rb->all_next;
		free(rb);
	}
	while (sep->hd_free) {
		struct sock_held *h = sep->hd_free;
		sep->hd_free = h->next;
		free(h);
	}
}

/* Any thread: the application returned a RECV event. */
void sock_recv_returned(cci__evt_t *evt)
{
	struct sock_ep *sep = sock_ep_of(evt->ep);
	struct sock_rxbuf *rb = evt->rx_buf;

	cci__lender_return(&sep->lend, &rb->lent);
	if (cci__engine_thread_polls(&sep->eng))
		cci__engine_cmd(&sep->eng, 0);
}

/* Lend rb with a RECV event, within recv_buf_count: 1 if it went out. */
static int post(struct sock_conn *sc, struct sock_rxbuf *rb)
{
	if (!cci__lender_can_take(&sc->sep->lend) ||
	    sock_core->post_recv(sc->conn, sock_rb_data(rb), rb->len, rb) != CCI_SUCCESS)
		return 0;
	cci__lender_take(&sc->sep->lend);
	return 1;
}

static void pend_add(struct sock_conn *sc, struct sock_rxbuf *rb)
{
	rb->next = NULL;
	if (sc->pend)
		sc->pend_tail->next = rb;
	else
		sc->pend = rb;
	sc->pend_tail = rb;
	if (!sc->in_pend) {
		sc->in_pend = 1;
		sc->pend_next = sc->sep->pend;
		sc->sep->pend = sc;
	}
}

static void deliver(struct sock_conn *sc, struct sock_rxbuf *rb)
{
	if (sc->pend || !post(sc, rb))
		pend_add(sc, rb);
}

/* Messages that waited for a receive buffer, in order, while there is one. */
void sock_rx_pend(struct sock_ep *sep)
{
	struct sock_conn **p = &sep->pend;

	assert(cci__mutex_held(&sep->lock));
	while (*p && cci__lender_can_take(&sep->lend)) {
		struct sock_conn *sc = *p;

		while (sc->pend && cci__lender_can_take(&sep->lend)) {
			struct sock_rxbuf *rb = sc->pend;
			struct sock_rxbuf *next = rb->next;

			/* Once posted, rb is the application's: it may return
			 * the event at once, and sock_recv_returned() reuses
			 * rb->next from its thread. */
			if (!post(sc, rb))
				return;
			sc->pend = next;
		}
		if (sc->pend) {
			p = &sc->pend_next;
			continue;
		}
		sc->in_pend = 0;
		*p = sc->pend_next;
	}
}

/* Returned buffers: grant the peer their datagrams again. */
void sock_rx_back(struct sock_ep *sep)
{
	struct cci__lent *b = cci__lender_collect(&sep->lend);

	assert(cci__mutex_held(&sep->lock));
	while (b) {
		struct sock_rxbuf *rb = (struct sock_rxbuf *)b;
		struct cci__lent *next = b->next;
		struct sock_conn *sc = sock_conn_find(sep, rb->token);

		if (sc && sc->rel_on && rb->dgs) {
			sock_rel_rx_release(&sc->rel, rb->dgs);
			sock_conn_touch(sc);
		}
		rb_put(sep, rb);
		b = next;
	}
	sock_rx_pend(sep);
}

/* ---- messages ---------------------------------------------------------- */

static int msg_rx(struct sock_conn *sc, const struct sock_dg *d)
{
	struct sock_rxbuf *rb = sc->asm_rb;

	if (d->sub.val == 0) {
		if (rb)
			return CCI_ERROR; /* a new message before the last one ended */
		rb = rb_get(sc->sep, d->sub.op);
		if (!rb)
			return CCI_ENOMEM;
		rb->len = d->sub.op;
		rb->token = sc->token;
		sc->asm_rb = rb;
		sc->asm_have = 0;
	} else if (!rb || rb->len != d->sub.op || d->sub.val != sc->asm_have) {
		return CCI_ERROR;
	}
	if (d->body_len)
		memcpy(sock_rb_data(rb) + sc->asm_have, d->body, d->body_len);
	sc->asm_have += d->body_len;
	if (sc->asm_have < rb->len) {
		/* Copied out: its window slot is free again.  A whole message
		 * keeps one slot (its last datagram's) until it is returned,
		 * which bounds what a receiver holds. */
		sock_rel_rx_release(&sc->rel, 1);
		return CCI_SUCCESS;
	}
	sc->asm_rb = NULL;
	rb->dgs = 1;
	if (sc->rx_drop) {
		sc->rx_drop = 0;
		sock_rel_rx_release(&sc->rel, rb->dgs);
		rb_put(sc->sep, rb);
	} else {
		deliver(sc, rb);
	}
	return CCI_SUCCESS;
}

/* One sequenced datagram, in its turn. */
static void seq_process(struct sock_conn *sc, const struct sock_dg *d, uint64_t now)
{
	int rc;

	if (d->type == SOCK_DG_MSG) {
		rc = msg_rx(sc, d);
	} else {
		rc = sock_rma_rx(sc, d, now);
		sock_rel_rx_release(&sc->rel, 1);
	}
	if (rc != CCI_SUCCESS) {
		SOCK_WARN("sock: %s broke the protocol (datagram type %u): connection closed",
		          sc->peer_str, d->type);
		sock_conn_break(sc, CCI_ERR_DISCONNECTED, "protocol violation");
	}
}

static struct sock_held *held_copy(struct sock_ep *sep, const uint8_t *b, uint32_t len)
{
	struct sock_held *h = sep->hd_free;

	if (h) {
		sep->hd_free = h->next;
	} else {
		h = malloc(sizeof(*h) + sep->dgram);
		if (!h)
			return NULL;
	}
	memcpy(h->data, b, len);
	h->len = len;
	h->delivered = 0;
	return h;
}

static void held_put(struct sock_ep *sep, struct sock_held *h)
{
	h->next = sep->hd_free;
	sep->hd_free = h;
}

/* Held datagrams whose turn came. */
static void held_drain(struct sock_conn *sc, uint64_t now)
{
	uint64_t hnd;

	while (cci__conn_is_open(&sc->base) && sock_rel_rx_next(&sc->rel, &hnd)) {
		struct sock_held *h = (struct sock_held *)(uintptr_t)hnd;
		struct sock_dg d;
		const char *why;

		if (!h->delivered && sock_dg_decode(h->data, h->len, sc->sep->mss, &d, &why) == 0)
			seq_process(sc, &d, now);
		held_put(sc->sep, h);
	}
}

/* RU: a whole message that arrived early goes out at once; its datagram
 * stays with the reliability layer (sequence order) only as a mark.
 * Fragments of longer messages, RMA datagrams and RMA completion messages
 * (SOCK_DG_F_IN_ORDER) wait for their turn. */
static void early_deliver(struct sock_conn *sc, const struct sock_dg *d, struct sock_held *h)
{
	struct sock_rxbuf *rb;

	if (sc->attr != CCI_CONN_ATTR_RU || d->type != SOCK_DG_MSG || d->sub.val != 0 ||
	    d->body_len != d->sub.op || (d->flags & SOCK_DG_F_IN_ORDER))
		return;
	rb = rb_get(sc->sep, d->sub.op);
	if (!rb)
		return; /* delivered in its turn instead */
	if (d->body_len)
		memcpy(sock_rb_data(rb), d->body, d->body_len);
	rb->len = d->body_len;
	rb->dgs = 1;
	rb->token = sc->token;
	deliver(sc, rb);
	h->delivered = 1;
}

static void seq_rx(struct sock_conn *sc, const struct sock_dg *d, const uint8_t *b,
                   uint32_t len, uint64_t now)
{
	unsigned fl = (d->flags & SOCK_DG_F_ACK_NOW) ? SOCK_REL_RX_ACK_NOW : 0;
	uint64_t wide = sock_rel_seq_widen(sc->rel.rcv_nxt, d->seq);
	struct sock_held *h = NULL;
	int rc;

	if (wide != sc->rel.rcv_nxt && !(h = held_copy(sc->sep, b, len)))
		return; /* out of memory: as if lost, it comes again */
	rc = sock_rel_rx(&sc->rel, d->seq, (uint64_t)(uintptr_t)h, fl, now);
	if (rc == SOCK_REL_RX_DELIVER)
		seq_process(sc, d, now);
	if (rc == SOCK_REL_RX_HELD)
		early_deliver(sc, d, h);
	if (rc != SOCK_REL_RX_HELD && h)
		held_put(sc->sep, h);
	if (rc == SOCK_REL_RX_DELIVER)
		held_drain(sc, now);
}

/* UU: never a duplicate; late or without a buffer, it is lost. */
static void uu_rx(struct sock_conn *sc, const struct sock_dg *d)
{
	struct sock_ep *sep = sc->sep;
	uint64_t w = sock_rel_seq_widen(sc->uu_top, d->seq);
	struct sock_rxbuf *rb;

	if (!sc->uu_any || sock_rel_seq_lt(sc->uu_top, w)) {
		uint64_t shift = sc->uu_any ? w - sc->uu_top : 64;
		sc->uu_bits = shift >= 64 ? 0 : sc->uu_bits << shift;
		sc->uu_bits |= 1;
		sc->uu_top = w;
		sc->uu_any = 1;
	} else if (sc->uu_top - w >= 64 || (sc->uu_bits >> (sc->uu_top - w)) & 1) {
		sep->stats.uu_dup++;
		return;
	} else {
		sc->uu_bits |= 1ull << (sc->uu_top - w);
	}
	if (d->body_len > sc->mss || !cci__lender_can_take(&sep->lend) ||
	    !(rb = rb_get(sep, d->body_len))) {
		sep->stats.uu_drop++;
		return;
	}
	memcpy(sock_rb_data(rb), d->body, d->body_len);
	rb->len = d->body_len;
	rb->dgs = 0;
	rb->token = sc->token;
	if (!post(sc, rb)) {
		rb_put(sep, rb);
		sep->stats.uu_drop++;
	}
}

/* ---- datagrams ---------------------------------------------------------- */

static void conn_rx(struct sock_conn *sc, const struct sock_dg *d, const uint8_t *b,
                    uint32_t len, uint64_t now)
{
	/* A sequenced datagram's payload goes before the ack riding on it,
	 * which is kept for sock_tx_finish (sock_tx_ack_keep): a RECV event is
	 * queued ahead of the SEND completions that the ack brings, and a
	 * program that answers messages (a ping-pong, an RPC) answers first
	 * and tends to its completions while it waits.  Other datagrams apply
	 * their ack first: a BYE's ack completes what the peer took before the
	 * connection breaks. */
	int data_first = sock_dg_sequenced(d->type);

	cci__ct_heard(&sc->base.timers, now);
	sc->suspect_ns = 0; /* alive, whatever an ICMP error said */
	if (!data_first)
		sock_tx_acked(sc, d, now);
	switch (d->type) {
	case SOCK_DG_ACK:
		if ((d->flags & SOCK_DG_F_ACK_NOW) && sc->rel_on)
			sock_rel_rx_probe(&sc->rel);
		break;
	case SOCK_DG_PING:
		sock_tx_ctl(sc, SOCK_DG_PONG, 0);
		break;
	case SOCK_DG_PONG:
		break;
	case SOCK_DG_BYE:
		sock_conn_break(sc, CCI_ERR_DISCONNECTED, "the peer disconnected");
		break;
	case SOCK_DG_UU:
		if (!sc->reliable)
			uu_rx(sc, d);
		break;
	default:
		if (sc->rel_on)
			seq_rx(sc, d, b, len, now);
		break;
	}
	if (data_first && cci__conn_is_open(&sc->base))
		sock_tx_ack_keep(sc, d, now);
	sock_conn_touch(sc);
}

static void dgram_rx(struct sock_ep *sep, const uint8_t *b, uint32_t len,
                     const struct sockaddr_storage *from, socklen_t fromlen, uint64_t now)
{
	struct sock_dg d;
	struct sock_conn *sc;
	const char *why = NULL;

	sep->stats.rx_dgrams++;
	if (sock_dg_decode(b, len, sep->mss, &d, &why) != 0) {
		sep->stats.bad++;
		SOCK_LOG(CCI_LOG_MSG, "sock: %s: datagram dropped: %s", sep->ep->uri, why);
		return;
	}
	if (d.type == SOCK_DG_HELLO || d.type == SOCK_DG_ACCEPT || d.type == SOCK_DG_REJECT) {
		sock_hs_rx(sep, &d, from, fromlen, now);
		return;
	}
	sc = sock_conn_find(sep, d.token);
	if (!sc || !sock_addr_same(from, &sc->peer) || !cci__conn_is_open(&sc->base) ||
	    (sock_dg_sequenced(d.type) && !sc->reliable)) {
		sep->stats.foreign++;
		return;
	}
	conn_rx(sc, &d, b, len, now);
}

/* One error of the queue: an ICMP port unreachable quoting a datagram of
 * ours goes to sock_conn_icmp_refused; anything else is ignored. */
static void errqueue_one(struct sock_ep *sep, struct msghdr *mh, size_t quoted)
{
	const uint8_t *b = mh->msg_iov[0].iov_base;
	uint64_t token;
	uint8_t type;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		struct sock_extended_err ee;

		if (!((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR) ||
		      (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR)))
			continue;
		memcpy(&ee, CMSG_DATA(c), sizeof(ee));
		if (ee.ee_errno == ECONNREFUSED && mh->msg_namelen > 0 &&
		    sock_dg_quoted(b, quoted, &type, &token) == 0)
			sock_conn_icmp_refused(sep, mh->msg_name, type, token, cci__now_ns());
		else
			sep->stats.icmp_ignored++;
	}
}

/* The ICMP errors queued on the socket (IP_RECVERR), each with the start
 * of the datagram that caused it and the address it went to.  Read when a
 * receive reports the error, when a send did (sep->errq_due), and when
 * the progress thread was woken with nothing to read (an error queue
 * that is not empty keeps the socket ready). */
void sock_rx_errqueue(struct sock_ep *sep)
{
	sep->errq_due = 0;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage to;
		char ctl[512];
		uint8_t quoted[SOCK_DG_HDR_LEN + SOCK_DG_HELLO_TOKEN_END];
		struct iovec iov = { quoted, sizeof(quoted) };
		struct msghdr mh = { .msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov,
		                     .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl) };
		ssize_t n = recvmsg(sep->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);

		if (n < 0)
			return;
		errqueue_one(sep, &mh, (size_t)n);
	}
}

/* The receive batch's headers, set once; a call resets only the entries
 * the previous one filled. */
void sock_rx_batch_init(struct sock_ep *sep)
{
	for (uint32_t i = 0; i < SOCK_RX_BATCH; i++) {
		struct msghdr *mh = &sep->rx_mh[i].msg_hdr;

		memset(mh, 0, sizeof(*mh));
		mh->msg_name = &sep->rx_from[i];
		mh->msg_namelen = sizeof(sep->rx_from[i]);
		mh->msg_iov = &sep->rx_iov[i];
		mh->msg_iovlen = 1;
	}
}

static void batch_reset(struct sock_ep *sep, int n)
{
	for (int i = 0; i < n; i++) {
		sep->rx_mh[i].msg_hdr.msg_namelen = sizeof(sep->rx_from[i]);
		sep->rx_mh[i].msg_hdr.msg_flags = 0;
	}
}

/* Sparse traffic: one datagram by recvfrom, whose empty call costs much
 * less than recvmmsg's (no message header or iovec to bring in). */
static int rx_one(struct sock_ep *sep, uint64_t *now_p)
{
	socklen_t fl = sizeof(sep->rx_from[0]);
	ssize_t n;

	do
		n = syscall(SYS_recvfrom, sep->fd, sep->rx_iov[0].iov_base, sep->dgram,
		            MSG_DONTWAIT | MSG_TRUNC, &sep->rx_from[0], &fl);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			sock_rx_errqueue(sep);
		return 0;
	}
	if (!*now_p)
		*now_p = cci__now_ns();
	if ((size_t)n > sep->dgram)
		sep->stats.bad++; /* truncated: longer than any datagram of ours */
	else
		dgram_rx(sep, sep->rx_iov[0].iov_base, (uint32_t)n, &sep->rx_from[0], fl, *now_p);
	return 1;
}

/* Bulk traffic: recvmmsg batches, a bounded number of them. */
static int rx_batches(struct sock_ep *sep, uint64_t *now_p)
{
	int total = 0;

	for (uint32_t round = 0; round < SOCK_RX_ROUNDS; round++) {
		int n = (int)syscall(SYS_recvmmsg, sep->fd, sep->rx_mh, SOCK_RX_BATCH, MSG_DONTWAIT, NULL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sock_rx_errqueue(sep);
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOMEM || errno == EBADF)
				break;
			continue;
		}
		if (!*now_p)
			*now_p = cci__now_ns();
		for (int i = 0; i < n; i++) {
			struct msghdr *mh = &sep->rx_mh[i].msg_hdr;
			if (mh->msg_flags & MSG_TRUNC)
				sep->stats.bad++;
			else
				dgram_rx(sep, sep->rx_iov[i].iov_base, sep->rx_mh[i].msg_len,
				         &sep->rx_from[i], mh->msg_namelen, *now_p);
		}
		batch_reset(sep, n);
		total += n;
		sock_tx_finish(sep, *now_p);
		if (n < (int)SOCK_RX_BATCH)
			break;
	}
	return total;
}

/* Read what the socket holds: one datagram at a time while they come one
 * by one (a ping-pong), in batches once two polls in a row found some
 * (a stream) until a batch brings less than two.  Returns the datagrams
 * read; the clock is read only when some came (*now_p is 0 before, the
 * time after).  What a lone datagram leaves to do (the ack it brought,
 * the sends that frees, an ack of ours that is due) waits on
 * sep->touched for the caller's sock_tx_finish: a polling application
 * gets the message first. */
int sock_rx_poll(struct sock_ep *sep, uint64_t *now_p)
{
	int n;

	assert(cci__mutex_held(&sep->lock));
	if (sep->errq_due)
		sock_rx_errqueue(sep);
	if (!sep->rx_bulk) {
		n = rx_one(sep, now_p);
		if (n && sep->rx_last)
			sep->rx_bulk = 1;
	} else {
		n = rx_batches(sep, now_p);
		if (n < 2)
			sep->rx_bulk = 0;
	}
	sep->rx_last = n > 0;
	return n;
}
