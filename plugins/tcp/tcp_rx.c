/*
 * tcp_rx.c - the receive side: reading sockets, cutting the stream into
 * frames, lending receive buffers with RECV events.
 *
 * Small frames are read in batches into the endpoint's staging buffer
 * and copied out (a connection keeps the stage holding what it could not
 * parse yet, only while it waits for a receive buffer); a payload of
 * TCP_DIRECT_MIN bytes or more is read straight into its final place (a
 * receive buffer, or registered memory for RMA), so large transfers cost
 * the kernel's copy only.  Called with sep->lock held.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "tcp.h"

/* Where tc's unparsed bytes are: the stage it kept while stalled, else the
 * endpoint's. */
static inline uint8_t *rx_stage(const struct tcp_conn *tc)
{
	return tc->kept ? tc->kept : tc->sep->stage;
}

static void rx_fail(struct tcp_conn *tc, const char *why)
{
	TCP_WARN("tcp: closing the connection with %s: %s", tc->peer, why);
	tcp_conn_break(tc, CCI_ERR_DISCONNECTED, why);
}

static void rx_deliver(struct tcp_conn *tc, struct tcp_buf *rb, uint32_t len)
{
	/* A big message ends this pass (when nothing is left staged, so no
	 * byte waits in user space): the application returns its buffer
	 * before we fill the next one, which is then that same, cached one. */
	if (len >= TCP_ALONE_MIN && tc->st_pos == tc->st_end)
		tc->yield = 1;

	if (tcp_core->post_recv(tc->conn, tcp_rb_data(rb), len, rb) != CCI_SUCCESS)
		tcp_rb_put(tc->sep, rb); /* the loss is logged */
}

/* A watched socket is watched for reading unless it is stalled. */
static void rx_epoll_events(struct tcp_conn *tc)
{
	struct epoll_event ev = { .events = tc->stalled ? 0 : EPOLLIN, .data.ptr = tc };

	if (tc->in_epoll)
		epoll_ctl(tc->sep->rx_epfd, EPOLL_CTL_MOD, tc->fd, &ev);
}

/* No receive buffer: stop reading this socket until one comes back. */
static void rx_stall(struct tcp_conn *tc)
{
	tc->stalled = 1;
	atomic_store(&tc->sep->rx_starved, 1);
	rx_epoll_events(tc);
}

/* The frame's last byte is in: deliver or finish it.  Returns 1 when the
 * pass must stop here (a big message delivered, or a bad RMA frame broke
 * the connection), else 0. */
static int frame_end(struct tcp_conn *tc)
{
	uint8_t type = tc->h.type;
	const char *why = NULL;

	tc->in_payload = 0;
	tc->fh_ready = 0;
	tc->sink = TCP_SINK_NONE;
	if (tcp_type_sequenced(type))
		atomic_store_explicit(&tc->rx_seq, tc->h.seq + 1, memory_order_relaxed);
	if (tc->rb) {
		rx_deliver(tc, tc->rb, tc->h.len - tcp_sub_len(type));
		tc->rb = NULL;
	}
	if (type == TCP_F_MSG)
		return tc->yield;
	if (type == TCP_F_RMA && tcp_rma_frame_end(tc, &why) != 0) {
		rx_fail(tc, why);
		return 1;
	}
	return tc->yield || !cci__conn_is_open(&tc->base);
}

/* A decoded header: check it in context, set the payload's sink.
 * Returns 0 to go on, 1 when stalled or a frame_end stops the pass, -1
 * when the connection broke. */
static int frame_begin(struct tcp_conn *tc)
{
	const struct tcp_hdr *h = &tc->h;
	const char *why = NULL;

	if (tcp_type_sequenced(h->type) &&
	    h->seq != atomic_load_explicit(&tc->rx_seq, memory_order_relaxed)) {
		rx_fail(tc, "frame out of sequence");
		return -1;
	}
	/* Acks are applied once per pass, after the messages are posted: the
	 * application sees a reply before the completion it implies. */
	if (h->ack < tc->ack_seen) {
		rx_fail(tc, "acknowledgement going backwards");
		return -1;
	}
	tc->ack_seen = h->ack;
	if (h->flags & TCP_FL_ACK_NOW)
		tc->ack_now = 1;
	tc->ack_bytes += h->len;
	tcp_rx_sink(tc, TCP_SINK_NONE, NULL, 0);
	switch (h->type) {
	case TCP_F_ACK:
	case TCP_F_PONG:
		break;
	case TCP_F_PING:
		tcp_tx_flush_now(tc, TCP_F_PONG);
		break;
	case TCP_F_MSG:
		tcp_rx_sink(tc, TCP_SINK_BUF, NULL, h->len);
		break;
	case TCP_F_HELLO:
	case TCP_F_ACCEPT:
	case TCP_F_REJECT:
		rx_fail(tc, "handshake frame on an open connection");
		return -1;
	default: /* TCP_F_RMA */
		if (tcp_rma_frame_begin(tc, &why) != 0) {
			rx_fail(tc, why);
			return -1;
		}
		break;
	}
	/* A message, or the completion message of an RMA write, goes into a
	 * receive buffer; without one the frame is begun again later. */
	if (tc->sink == TCP_SINK_BUF) {
		tc->rb = tcp_rb_get(tc->sep);
		if (!tc->rb) {
			rx_stall(tc);
			return 1;
		}
		tc->dst = tcp_rb_data(tc->rb);
	}
	tc->in_payload = 1;
	if (tc->left == 0)
		return frame_end(tc);
	return 0;
}

/* Header bytes from the stage; 1 when a header is decoded, 0 for more
 * bytes, -1 when the connection broke.  A header wholly staged (the usual
 * case) is decoded in place; one cut by the end of a read is gathered in
 * tc->fh first. */
static int rx_header(struct tcp_conn *tc)
{
	struct tcp_limits lim = { tc->mss, TCP_FRAG_MAX };
	const struct cci__emu_rma_limits rma_lim = { TCP_FRAG_MAX, tc->mss, 1 };
	const uint8_t *hdr = tc->fh;
	const char *why = NULL;
	uint32_t need, avail = tc->st_end - tc->st_pos;

	if (tc->fh_have == 0 && avail >= TCP_HDR_LEN) {
		const uint8_t *staged = rx_stage(tc) + tc->st_pos;
		if (tcp_hdr_decode(staged, &lim, &tc->h, &why) != 0)
			goto bad;
		need = TCP_HDR_LEN + tcp_sub_len(tc->h.type);
		if (avail >= need) {
			hdr = staged;
			tc->st_pos += need;
			goto decoded;
		}
		/* The sub-header is cut: gathered below (and decoded again). */
	}
	for (;;) {
		uint32_t k;
		avail = tc->st_end - tc->st_pos;
		need = TCP_HDR_LEN + (tc->fh_have >= TCP_HDR_LEN ? tcp_sub_len(tc->h.type) : 0);
		if (tc->fh_have == need)
			break;
		if (avail == 0)
			return 0;
		k = need - tc->fh_have < avail ? need - tc->fh_have : avail;
		memcpy(tc->fh + tc->fh_have, rx_stage(tc) + tc->st_pos, k);
		tc->st_pos += k;
		tc->fh_have += k;
		if (tc->fh_have == TCP_HDR_LEN && tcp_hdr_decode(tc->fh, &lim, &tc->h, &why) != 0)
			goto bad;
	}
decoded:
	if (need > TCP_HDR_LEN &&
	    cci__emu_rma_decode(hdr + TCP_HDR_LEN, tc->h.len - CCI__EMU_RMA_HDR_LEN, &rma_lim,
	                        &tc->rec, &why) != 0)
		goto bad;
	tc->fh_have = 0;
	tc->fh_ready = 1;
	return 1;
bad:
	rx_fail(tc, why);
	return -1;
}

/* Consume the staged bytes.  0 when they are used up, else stalled,
 * broken or yielding.  The connection's state is looked at only where it
 * can change: after a frame ends (delivering may end the pass, a bad RMA
 * frame the connection) and when frame_begin says so. */
static int rx_parse(struct tcp_conn *tc)
{
	if (!cci__conn_is_open(&tc->base) || tc->stalled || tc->yield)
		return 1;
	for (;;) {
		if (tc->in_payload) {
			uint64_t k = tc->st_end - tc->st_pos;
			if (k == 0)
				return 0;
			if (k > tc->left)
				k = tc->left;
			if (tc->sink == TCP_SINK_BUF || tc->sink == TCP_SINK_MEM) {
				memcpy(tc->dst, rx_stage(tc) + tc->st_pos, k);
				tc->dst += k;
			}
			tc->st_pos += (uint32_t)k;
			tc->left -= k;
			if (tc->left > 0)
				return 0;
			if (frame_end(tc) != 0)
				return 1;
			continue;
		}
		if (!tc->fh_ready) {
			int r;
			if (tc->st_pos == tc->st_end)
				return 0;
			r = rx_header(tc);
			if (r <= 0)
				return r;
		}
		if (frame_begin(tc) != 0)
			return 1;
	}
}

/* recv gave 0 (end of stream) or an error. */
static void rx_closed(struct tcp_conn *tc, ssize_t n)
{
	if (n == 0 && !tc->in_payload && !tc->fh_ready && tc->fh_have == 0) {
		TCP_LOG(CCI_LOG_CONN, "tcp: %s closed the connection", tc->peer);
		tcp_conn_break(tc, CCI_ERR_DISCONNECTED, "closed by the peer");
	} else if (n == 0) {
		rx_fail(tc, "truncated frame (the peer closed mid-frame)");
	} else {
		TCP_LOG(CCI_LOG_CONN, "tcp: connection with %s: %s", tc->peer, strerror(errno));
		tcp_conn_break(tc, CCI_ERR_DISCONNECTED, "socket error");
	}
}

/* A pass that leaves bytes unparsed (a stall) keeps the stage they are in:
 * the connection takes it, the endpoint reads into its spare (or a new
 * one) from now on.  No copy: a stream that stalls often swaps the two. */
static void rx_stage_keep(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;
	uint8_t *next;

	if (tc->st_pos == tc->st_end || tc->kept || !cci__conn_is_open(&tc->base))
		return;
	next = sep->stage_spare ? sep->stage_spare : malloc(TCP_STAGE_LEN);
	if (!next) {
		rx_fail(tc, "no memory to keep the bytes read");
		return;
	}
	sep->stage_spare = NULL;
	tc->kept = sep->stage;
	sep->stage = next;
}

/* The stage tc kept, used up or no longer needed, goes back to the
 * endpoint as its spare (one is kept). */
static void rx_stage_give_back(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;

	if (!tc->kept)
		return;
	if (!sep->stage_spare)
		sep->stage_spare = tc->kept;
	else
		free(tc->kept);
	tc->kept = NULL;
}

void tcp_rx_stage_drop(struct tcp_conn *tc)
{
	rx_stage_give_back(tc);
	tc->st_pos = tc->st_end = 0;
}

/* One recv: into the payload's place when big, else into the stage.
 * Returns 1 if the socket may hold more, 0 when it is empty or gone: a
 * short read means the kernel had no more, so we do not ask again (that
 * would be a system call for nothing on every message). */
static int rx_read(struct tcp_conn *tc)
{
	int direct = tc->in_payload && tc->sink != TCP_SINK_DROP && tc->left >= TCP_DIRECT_MIN;
	size_t want = direct ? (tc->left < (1u << 30) ? tc->left : (1u << 30)) : TCP_STAGE_LEN;
	ssize_t n;

	/* After a big payload, expect another: stage only its header, so its
	 * data is not copied twice. */
	if (!direct && tc->big)
		want = TCP_HDR_LEN + TCP_SUB_MAX;
	tc->big = direct;
	if (!direct)
		rx_stage_give_back(tc); /* its bytes are used up */

	do
		n = net_recv(tc->fd, direct ? tc->dst : (char *)rx_stage(tc), want, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		cci__ct_heard(&tc->base.timers,
		              cci__engine_now(&tc->sep->eng));
		if (!direct) {
			tc->st_pos = 0;
			tc->st_end = (uint32_t)n;
		} else {
			tc->dst += n;
			tc->left -= (uint64_t)n;
			/* A stop it asks for is seen by the next rx_parse. */
			if (tc->left == 0)
				(void)frame_end(tc);
		}
		tc->drained = (size_t)n < want;
		return 1;
	}
	tc->drained = 1;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	rx_closed(tc, n);
	return 0;
}

static void rx_apply_acks(struct tcp_conn *tc)
{
	if (tc->ack_seen == tc->ack_done || !cci__conn_is_open(&tc->base))
		return;
	if (tcp_tx_acked(tc, tc->ack_seen) != 0) {
		rx_fail(tc, "acknowledgement of frames never sent");
		return;
	}
	tc->ack_done = tc->ack_seen;
}

/* Acks read while the application polls are applied at its next pass:
 * list tc for that pass.  sep->lock held. */
static void ack_due_add(struct tcp_conn *tc)
{
	tc->ack_listed = 1;
	tc->ack_next = tc->sep->ack_due;
	tc->sep->ack_due = tc;
}

/* tc ends: off that list.  sep->lock held (or no other thread runs:
 * teardown). */
void tcp_rx_ack_due_drop(struct tcp_conn *tc)
{
	if (!tc->ack_listed)
		return;
	CCI__SLIST_UNLINK(&tc->sep->ack_due, tc, ack_next);
	tc->ack_listed = 0;
}

static void rx_ack_policy(struct tcp_conn *tc)
{
	uint64_t owed = atomic_load_explicit(&tc->rx_seq, memory_order_relaxed) -
	                atomic_load_explicit(&tc->ack_sent, memory_order_relaxed);

	if (owed == 0 || !cci__conn_is_open(&tc->base)) {
		tc->ack_now = 0;
		return;
	}
	if (tc->ack_now || owed >= TCP_ACK_EVERY || tc->ack_bytes >= TCP_ACK_BYTES) {
		tc->ack_now = 0;
		tc->ack_bytes = 0;
		tcp_tx_flush_now(tc, TCP_F_ACK);
	}
	/* Owed still (not due yet, or a queued frame will carry it): the
	 * tick sends it if nothing else did. */
	if (atomic_load_explicit(&tc->rx_seq, memory_order_relaxed) !=
	    atomic_load_explicit(&tc->ack_sent, memory_order_relaxed))
		tcp_conn_ack_owed(tc);
}

static void rx_conn(struct tcp_conn *tc)
{
	/* Parse after every read, so nothing is left staged when we stop
	 * unless stalled. */
	/* The completions the peer's last acks imply are handled one pass
	 * late when the application polls: the message it waits for is
	 * handed out first, the completions while it waits for the next. */
	rx_apply_acks(tc);
	tc->drained = 0;
	tc->yield = 0;
	for (int round = 0;; round++) {
		if (rx_parse(tc) != 0 || round == TCP_RX_ROUNDS || tc->drained || !rx_read(tc))
			break;
	}
	rx_stage_keep(tc);
	if (cci__engine_thread_polls(&tc->sep->eng))
		rx_apply_acks(tc);
	else if (tc->ack_seen != tc->ack_done && !tc->ack_listed)
		ack_due_add(tc);
	rx_ack_policy(tc);
}

void tcp_rx_poll(struct tcp_ep *sep)
{
	if (sep->nopen > TCP_POLL_DIRECT_MAX) {
		tcp_rx_ready(sep);
		return;
	}
	/* Few sockets: one recv each beats epoll_wait plus recv. */
	for (uint32_t i = sep->nopen; i-- > 0;)
		if (i < sep->nopen && !sep->open[i]->stalled)
			rx_conn(sep->open[i]);
}

void tcp_rx_ready(struct tcp_ep *sep)
{
	struct epoll_event evs[64];
	int n;

	n = epoll_wait(sep->rx_epfd, evs, 64, 0);
	for (int i = 0; i < n; i++) {
		struct tcp_conn *tc = evs[i].data.ptr;
		if (tc->in_rx && !tc->stalled)
			rx_conn(tc);
	}
}

/* Apply the acks left from earlier passes; sep->lock held. */
void tcp_rx_acks_all(struct tcp_ep *sep)
{
	struct tcp_conn *tc;

	assert(cci__mutex_held(&sep->lock));
	while (CCI__SLIST_POP(&sep->ack_due, tc, ack_next)) {
		tc->ack_listed = 0;
		rx_apply_acks(tc);
	}
}

void tcp_rx_resume(struct tcp_ep *sep)
{
	if (!tcp_rb_available(sep))
		return;
	atomic_store(&sep->rx_starved, 0);
	for (uint32_t i = sep->nopen; i-- > 0;) {
		struct tcp_conn *tc;
		if (i >= sep->nopen || !sep->open[i]->stalled)
			continue;
		tc = sep->open[i];
		tc->stalled = 0;
		rx_epoll_events(tc);
		rx_conn(tc);
	}
}

