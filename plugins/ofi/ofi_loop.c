/*
 * ofi_loop.c - progress: reading the completion queue, for the
 * application's progress() and for the endpoint's progress thread, which
 * runs on the shared engine (plugins/common/engine.h) and keeps the
 * timers (connect timeouts, keepalive, send timeouts, late credits) and
 * the watch on peer processes that die.
 *
 * progress() reads the CQ (one reader at a time: others return at once)
 * and dispatches each completion to the file whose concern it is:
 * application messages to ofi_rx.c (their credits to ofi_tx.c), the
 * handshake's messages to ofi_hs.c, the key exchange's to ofi_rma.c,
 * transmit completions to ofi_tx.c or ofi_rma.c.
 *
 * libfabric's providers here progress data only when called (manual
 * progress), so someone must read the CQ while the application computes
 * or sleeps on its OS handle.  The application's own polling is the fast
 * path; who polls is the engine's rule (engine.h): the thread stays off
 * the queue while the application polls (cci__engine_app_active in every
 * progress()) and wakes once a tick (OFI_TICK_NS) for the timers only.
 * When a tick passes without progress(), or the application armed its OS
 * handle (cci__engine_app_arm), the thread takes over until the
 * application calls again (cci__engine_who_polls at each round): it
 * sleeps on the queue's wait fd (an ev_io, fi_trywait first) when the
 * provider has one, else it polls on a precise timer (cci__engine_timer),
 * every few microseconds right after activity while the application
 * waits, backing off to a millisecond.  Everything it finds it posts as
 * events; the core rings the OS handle.
 *
 * progress = manual (an ini key, progress_key.h) starts no thread:
 * progress() reads the CQ and runs the loop (timers, pid watches) through
 * cci__engine_poll.  An application asleep on the OS handle wakes for the
 * loop's descriptors and the queue's wait fd (in the handle), and, while a
 * connection is timed or, without a wait fd, to poll the queue on the
 * schedule above (ofi_arm).  A provider without a wait fd then wakes it
 * every millisecond at most, even when nothing comes.
 *
 * cci_rma_deregister is here too: it reads the CQ while it waits for the
 * peers that learned the key to confirm (ofi_rma.c, "Deregistration").
 *
 * The thread's callbacks run with the loop lock held and take the
 * plugin's locks inside it.  Only that thread starts or stops the
 * watchers (CQ wait fd, poll timer, pidfds), so no other thread takes the
 * loop lock: they send a command (ofi_arm, ofi_pidw_get).
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "ofi.h"

#define OFI_CQ_BATCH 16
#define OFI_CQ_ROUNDS 4
#define OFI_POLL_MIN_NS 10000ull     /* polling after activity, no wait fd */
#define OFI_POLL_MAX_NS 1000000ull
#define OFI_POLL_HOT_NS 500000ull    /* poll at the minimum this long after activity */
#define OFI_PROBE_NS 1000000000ull   /* blocked on credits this long: is the peer there? */
#define OFI_TICK_CONNS 2048u          /* due connections a tick visits, at most */
#define OFI_RETIRE_NS 1000000000ull   /* broken this long: out of the table */
#define OFI_RETIRE_MAX 256u           /* connections a tick retires, at most */

_Static_assert(offsetof(struct ofi_op, obj) == sizeof(struct fi_context2) &&
               offsetof(struct ofi_rxbuf, obj) == sizeof(struct fi_context2),
               "completion contexts start with fi_context2 then the object kind");

/* ---- Progress: reading the completion queue ---- */

/* Credits and signs of life carried by any header (heard at the coarse
 * clock: a tick late at most); oc->lock held. */
static void heard(struct ofi_conn *oc, const struct ofi_hdr *h)
{
	assert(cci__mutex_held(&oc->lock));
	cci__ct_heard(&oc->base.timers, cci__engine_now(&oc->sep->eng));
	if (h->credits)
		ofi_tx_credits_in(oc, h->credits);
}

/* An application message in rb for oc (NULL: none such); cq_lock held. */
static void on_msg(struct ofi_ep *sep, struct ofi_conn *oc, struct ofi_rxbuf *rb,
                   const struct ofi_hdr *h, uint32_t len)
{
	assert(cci__spin_held(&sep->cq_lock));
	if (!oc) {
		ofi_rx_repost(sep, rb);
		return;
	}
	pthread_mutex_lock(&oc->lock);
	if (ofi_rx_msg(sep, oc, rb, h, len))
		heard(oc, h);
	pthread_mutex_unlock(&oc->lock);
}

/* A message whose header came as remote CQ data (ofi_imm_pack). */
static void on_imm(struct ofi_ep *sep, struct ofi_rxbuf *rb, uint64_t data, size_t len)
{
	struct ofi_hdr h = { .type = OFI_T_MSG };
	struct ofi_imm im;
	struct ofi_conn *oc = NULL;

	atomic_fetch_sub_explicit(&sep->rx_posted, 1, memory_order_relaxed);
	rb->off = 0;
	if (ofi_imm_decode(data, &im) == CCI_SUCCESS)
		oc = sep->slots[im.slot];
	if (!oc || (oc->id >> 16 & 0xfffu) != im.gen) {
		ofi_rx_repost(sep, rb);
		return;
	}
	h.seq = ofi_imm_seq(oc->rx_next, im.seq20);
	h.credits = (uint16_t)im.credits;
	on_msg(sep, oc, rb, &h, (uint32_t)len);
}

/* A control message: the handshake's go to ofi_hs.c, the key exchange's
 * to ofi_rma.c, a connection's last word to ofi_disc.c, PING is answered
 * here. */
static void on_ctl(struct ofi_ep *sep, const struct ofi_msg *m)
{
	const struct ofi_hdr *h = &m->hdr;
	struct ofi_conn *oc;

	if (h->type == OFI_T_REQ || h->type == OFI_T_CANCEL) {
		ofi_on_conn_msg(sep, NULL, m);
		return;
	}
	oc = ofi_conn_lookup(sep, h->dst);
	if (h->type == OFI_T_DISC || h->type == OFI_T_DISC_ACK)
		ofi_disc_on_msg(oc, sep, h);
	if (!oc)
		return;
	pthread_mutex_lock(&oc->lock);
	heard(oc, h);
	if (h->type == OFI_T_PING && ofi_conn_state(oc) == CCI__CONN_OPEN)
		ofi_ctl_send(oc, OFI_T_PONG, 0, NULL, 0, 0);
	else if (h->type >= OFI_T_MR_REQ && h->type <= OFI_T_MR_DONE)
		ofi_on_mr_msg(oc, m);
	pthread_mutex_unlock(&oc->lock);
	if (h->type == OFI_T_ACCEPT || h->type == OFI_T_REJECT || h->type == OFI_T_DISC)
		ofi_on_conn_msg(sep, oc, m);
}

/* A receive buffer came back with a message whose header is in-band. */
static void on_recv(struct ofi_ep *sep, struct ofi_rxbuf *rb, size_t len)
{
	struct ofi_msg m;
	const char *why;

	atomic_fetch_sub_explicit(&sep->rx_posted, 1, memory_order_relaxed);
	if (ofi_wire_decode(rb->data, len, &m, &why) != CCI_SUCCESS) {
		OFI_LOG(CCI_LOG_MSG, "ofi: malformed message of %zu bytes dropped: %s", len, why);
		ofi_rx_repost(sep, rb);
		return;
	}
	rb->off = OFI_HDR_LEN;
	if (m.hdr.type == OFI_T_MSG) {
		on_msg(sep, ofi_conn_lookup(sep, m.hdr.dst), rb, &m.hdr, m.body_len);
		return;
	}
	on_ctl(sep, &m);
	ofi_rx_repost(sep, rb);
}

/* The provider is done with op (status from its completion). */
static void on_op_done(struct ofi_ep *sep, struct ofi_op *op, int status)
{
	struct ofi_conn *refused;

	if (op->kind == OFI_OP_RMA) {
		ofi_rma_complete(sep, op, status);
		return;
	}
	refused = ofi_tx_complete(sep, op, status);
	if (refused)
		ofi_connect_refused(refused);
}

static int ctx_obj(void *ctx)
{
	return *((const uint8_t *)ctx + sizeof(struct fi_context2));
}

static void cq_error(struct ofi_ep *sep)
{
	struct fi_cq_err_entry err;

	memset(&err, 0, sizeof(err));
	if (fi_cq_readerr(sep->cq, &err, 0) != 1)
		return;
	if (!err.op_context) {
		OFI_LOG(CCI_LOG_MSG, "ofi: a message sent without completion failed: %s",
		        ofi_lib.strerror(err.err));
		return;
	}
	if (ctx_obj(err.op_context) == OFI_OBJ_RX) {
		atomic_fetch_sub_explicit(&sep->rx_posted, 1, memory_order_relaxed);
		if (err.err != FI_ECANCELED) {
			OFI_LOG(CCI_LOG_MSG, "ofi: receive failed: %s", ofi_lib.strerror(err.err));
			ofi_rx_repost(sep, err.op_context);
		}
		return;
	}
	OFI_LOG(CCI_LOG_MSG, "ofi: operation failed: %s (provider error %d)", ofi_lib.strerror(err.err),
	        err.prov_errno);
	on_op_done(sep, err.op_context, ofi_fi_status(err.err));
}

/* Retry every connection with queued work (the provider said EAGAIN). */
static void retry_queued(struct ofi_ep *sep)
{
	atomic_store_explicit(&sep->tx_pending, 0, memory_order_relaxed);
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_conn *oc = sep->conns; oc; oc = oc->next) {
		/* The queues are read under oc->lock only: an application
		 * thread's send may be changing them (ThreadSanitizer). */
		pthread_mutex_lock(&oc->lock);
		ofi_msgq_flush(oc);
		ofi_rmaq_flush(oc);
		pthread_mutex_unlock(&oc->lock);
	}
	pthread_mutex_unlock(&sep->lock);
}

/* Fail the connects the timer ended (cq_lock held). */
static void connects_end(struct ofi_ep *sep)
{
	struct ofi_conn *list;

	assert(cci__spin_held(&sep->cq_lock));
	pthread_mutex_lock(&sep->lock);
	list = atomic_load_explicit(&sep->ended, memory_order_relaxed);
	atomic_store_explicit(&sep->ended, NULL, memory_order_relaxed);
	pthread_mutex_unlock(&sep->lock);
	for (struct ofi_conn *oc; (oc = list) != NULL;) {
		list = oc->end_next;
		if (oc->end_status == CCI_ECONNREFUSED)
			ofi_connect_refused(oc);
		else
			ofi_connect_timeout(oc);
		ofi_conn_unref(oc);
	}
}

/* cq_lock held. */
void ofi_progress_locked(struct ofi_ep *sep)
{
	struct fi_cq_data_entry ent[OFI_CQ_BATCH];

	assert(cci__spin_held(&sep->cq_lock));
	if (atomic_load_explicit(&sep->ended, memory_order_acquire))
		connects_end(sep);
	if (cci__lender_returned(&sep->lend))
		ofi_rx_collect(sep);
	if (sep->backlog)
		ofi_backlog_drain(sep);
	for (int round = 0; round < OFI_CQ_ROUNDS; round++) {
		ssize_t n = fi_cq_read(sep->cq, ent, OFI_CQ_BATCH);

		if (n == -FI_EAVAIL) {
			sep->cq_seen++;
			cq_error(sep);
			continue;
		}
		if (n <= 0) {
			if (n != -FI_EAGAIN)
				OFI_LOG(CCI_LOG_EP, "ofi: fi_cq_read: %s", ofi_lib.strerror((int)-n));
			break;
		}
		sep->cq_seen += (uint64_t)n;
		for (ssize_t i = 0; i < n; i++) {
			if (!ent[i].op_context)
				continue;
			if (ctx_obj(ent[i].op_context) != OFI_OBJ_RX)
				on_op_done(sep, ent[i].op_context, CCI_SUCCESS);
			else if (ent[i].flags & FI_REMOTE_CQ_DATA)
				on_imm(sep, ent[i].op_context, ent[i].data, ent[i].len);
			else
				on_recv(sep, ent[i].op_context, ent[i].len);
		}
		if (n < OFI_CQ_BATCH)
			break;
	}
	if (atomic_load_explicit(&sep->ctlq_peers, memory_order_relaxed))
		ofi_ctlq_flush(sep);
	if (atomic_load_explicit(&sep->tx_pending, memory_order_relaxed))
		retry_queued(sep);
}

int ofi_progress(cci__ep_t *ep)
{
	struct ofi_ep *sep = ofi_ep_of(ep);

	cci__engine_poll(&sep->eng); /* progress = manual: the timers */
	cci__engine_app_active(&sep->eng); /* the progress thread keeps off the CQ */
	if (cci__spin_trylock(&sep->cq_lock)) {
		ofi_progress_locked(sep);
		cci__spin_unlock(&sep->cq_lock);
	}
	/* CCI_ENOBUFS when the application holds every buffer. */
	return cci__lender_available(&sep->lend) ? CCI_SUCCESS : CCI_ENOBUFS;
}

/*
 * cci_rma_deregister.  A registration whose key peers learned stays open
 * in the provider until each of them confirmed the MR_INVAL (MR_DONE,
 * see ofi_rma.c): this thread reads the CQ meanwhile, as a blocking call
 * does, so that the RMAs the peers still have in flight to the region
 * land and their answers arrive.  A peer that has not answered within
 * OFI_MR_DONE_WAIT_NS (a frozen process) loses its connection before the
 * key closes.
 */
void ofi_rma_deregister(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	struct ofi_ep *sep = ofi_ep_of(ep);
	struct ofi_conn **v = NULL;
	uint32_t n = 0;
	int lent;
	struct ofi_mr *m = ofi_mr_unlist(sep, reg, &lent);
	uint64_t key = m ? m->key : 0, stop = cci__now_ns() + OFI_MR_DONE_WAIT_NS;

	if (lent)
		n = ofi_mr_invalidate(sep, key, &v);
	while (n > 0 && cci__now_ns() < stop) {
		uint32_t before = n;

		ofi_progress(ep);
		for (uint32_t i = 0; i < n;) {
			if (ofi_mr_confirmed(v[i], key)) {
				ofi_conn_unref(v[i]);
				v[i] = v[--n];
			} else {
				i++;
			}
		}
		if (n == before)
			sched_yield(); /* the peers may share this core */
	}
	for (uint32_t i = 0; i < n; i++) {
		ofi_mr_unconfirmed(v[i], key);
		ofi_conn_unref(v[i]);
	}
	free(v);
	ofi_mr_close(reg, m);
}

/* A RECV event came back: its buffer goes back to the lender (posted
 * again by the next progress, ofi_rx_collect), and its credit
 * goes back with the next header to the peer; only a quarter of the
 * window owed needs a message of its own. */
void ofi_recv_returned(cci__evt_t *evt)
{
	struct ofi_rxbuf *rb = evt->rx_buf;
	struct ofi_conn *oc = rb->oc;
	struct ofi_ep *sep = oc->sep;

	cci__lender_return(&sep->lend, &rb->lent); /* rb is progress's from here */
	if (cci__credit_owe(&oc->cr)) {
		pthread_mutex_lock(&oc->lock);
		ofi_credit_maybe(oc, 0);
		pthread_mutex_unlock(&oc->lock);
	} else {
		ofi_conn_touch(oc); /* the next tick gives them back */
	}
	ofi_conn_unref(oc);
}

/* ---- The progress thread ---- */

/* The tick's callbacks (cci__conn_tick), oc->lock held. */
static uint64_t oldest_send_ns(void *pc)
{
	const struct ofi_conn *oc = pc;
	uint64_t t = UINT64_MAX;

	for (const struct ofi_op *op = oc->inflight; op; op = op->inext)
		if (op->kind != OFI_OP_CTL) {
			t = op->stamp_ns;
			break;
		}
	for (const struct ofi_op *op = oc->msgq; op; op = op->next)
		if (op->kind != OFI_OP_CTL) {
			t = op->stamp_ns < t ? op->stamp_ns : t;
			break;
		}
	if (oc->rmaq && oc->rmaq->stamp_ns < t)
		t = oc->rmaq->stamp_ns;
	return t;
}

/* A connection waiting for credits for long gets a PING with a
 * completion: if the peer is gone (a host we cannot watch), its failure
 * breaks the connection instead of leaving the sends queued forever. */
static void conn_probe(struct ofi_conn *oc, uint64_t now)
{
	if (!oc->msgq || oc->cr.tx > 0 || oc->msgq->kind == OFI_OP_CTL ||
	    (int64_t)(now - oc->msgq->stamp_ns) < (int64_t)OFI_PROBE_NS ||
	    cci__ns_since(oc->base.timers.last_ping_ns, now) < OFI_PROBE_NS)
		return;
	oc->base.timers.last_ping_ns = now;
	ofi_ctl_send(oc, OFI_T_PING, 0, NULL, 0, OFI_CTL_TRACKED);
}

/* Any message from the peer is a sign of life (heard()); a PING asks for one,
 * unless the peer cannot take it now (see ofi_pidw_unreachable). */
static void ping(void *pc)
{
	struct ofi_conn *oc = pc;

	if (!ofi_pidw_unreachable(oc->sep, ofi_conn_pidw(oc)))
		ofi_ctl_send(oc, OFI_T_PING, 0, NULL, 0, 0);
}

static void send_expired(void *pc)
{
	struct ofi_conn *oc = pc;

	OFI_LOG(CCI_LOG_CONN, "ofi: send timeout on %08x", oc->id);
	ofi_conn_break(oc, CCI_ETIMEDOUT);
}

/* Connects are ended by timers() itself (connect_end). */
static const struct cci__conn_tick_ops tick_ops = { oldest_send_ns, ping, NULL, send_expired };

/* A client's connect that cannot succeed: the server's process exited
 * (shm), or a probe found nobody listening at its address (tcp).  The
 * probe is started here for a connect unanswered for a while.  sep->lock
 * and oc->lock held. */
static int connect_refused(struct ofi_ep *sep, struct ofi_conn *oc, uint64_t now)
{
	const struct ofi_pidw *w = ofi_conn_pidw(oc);

	assert(cci__mutex_held(&oc->lock));
	if (!oc->is_client || !oc->peer)
		return 0;
	if (atomic_load_explicit(&oc->refused, memory_order_acquire) ||
	    (w && atomic_load_explicit(&w->dead, memory_order_acquire)))
		return 1;
	if (sep->reach != OFI_REACH_BY_PROBE)
		return 0;
	if (ofi_peer_refused(oc->peer, oc->start_ns))
		return 1;
	if (now - oc->start_ns >= OFI_PROBE_AFTER_NS)
		ofi_peer_probe(oc->peer, oc->start_ns, now,
		               !atomic_load_explicit(&oc->req_posted, memory_order_acquire));
	return 0;
}

/* The connect of oc ended with status: whoever reads the CQ next fails
 * it (connects_end), since that needs cq_lock, which an application
 * polling in a loop may hold nearly all the time.  sep->lock and
 * oc->lock held. */
static void connect_end(struct ofi_ep *sep, struct ofi_conn *oc, int status)
{
	assert(cci__mutex_held(&sep->lock));
	assert(cci__mutex_held(&oc->lock));
	oc->end_status = status;
	ofi_conn_ref(oc);
	oc->end_next = atomic_load_explicit(&sep->ended, memory_order_relaxed);
	atomic_store_explicit(&sep->ended, oc, memory_order_release);
}

/* The touched connections (ofi_conn_touch) are due now; sep->lock held
 * (no connection is freed meanwhile: ofi_conns_sweep takes it). */
static void touched_file(struct ofi_ep *sep, uint64_t now)
{
	struct ofi_conn *oc = atomic_exchange_explicit(&sep->touched, NULL, memory_order_acquire);

	assert(cci__mutex_held(&sep->lock));
	while (oc) {
		struct ofi_conn *next = oc->touch_next; /* a touch after the clear rewrites it */

		if (!oc->retired)
			cci__due_by(&sep->due, &oc->base.due, now);
		atomic_store_explicit(&oc->touched, 0, memory_order_release);
		ofi_conn_unref(oc);
		oc = next;
	}
}

/* When the tick's own work on open oc is next due: a probe of a peer
 * that grants no credits, credits owed; CCI__DUE_NEVER for none until
 * something touches it.  oc->lock held. */
static uint64_t open_work_due(const struct ofi_conn *oc, uint64_t now)
{
	uint64_t t = CCI__DUE_NEVER;

	if (oc->msgq && oc->cr.tx == 0 && oc->msgq->kind != OFI_OP_CTL) {
		uint64_t last = oc->base.timers.last_ping_ns > oc->msgq->stamp_ns ?
		                oc->base.timers.last_ping_ns : oc->msgq->stamp_ns;
		t = last + OFI_PROBE_NS;
	}
	if (cci__credit_owed(&oc->cr) != 0)
		t = now + OFI_TICK_NS;
	return t;
}

/* One due connection's visit: returns when it is next due
 * (CCI__DUE_NEVER: not until touched).  *retire is set when it has been
 * broken long enough to leave the table.  sep->lock and oc->lock held. */
static uint64_t conn_visit(struct ofi_ep *sep, struct ofi_conn *oc, uint64_t now, int *retire)
{
	uint64_t next, w;

	switch (ofi_conn_state(oc)) {
	case CCI__CONN_CONNECTING:
		/* Ended once (end_status): progress fails it. */
		if (oc->end_status)
			return CCI__DUE_NEVER;
		if (connect_refused(sep, oc, now))
			connect_end(sep, oc, CCI_ECONNREFUSED);
		else if (cci__ct_connect_expired(&oc->base.timers, now))
			connect_end(sep, oc, CCI_ETIMEDOUT);
		else /* the refusal is watched for each tick */
			return now + OFI_TICK_NS;
		return CCI__DUE_NEVER;
	case CCI__CONN_OPEN:
		if (!cci__conn_tick(&oc->base, oc->conn, ofi_core, &tick_ops, oc, now))
			return CCI__DUE_NEVER; /* broken: touched by the move */
		conn_probe(oc, now);
		ofi_credit_maybe(oc, 1);
		next = cci__conn_next_due(&oc->base, oc->conn, oldest_send_ns(oc), now);
		w = open_work_due(oc, now);
		return w < next ? w : next;
	case CCI__CONN_BROKEN:
		if (now - oc->broken_ns < OFI_RETIRE_NS)
			return oc->broken_ns + OFI_RETIRE_NS;
		*retire = 1;
		return CCI__DUE_NEVER;
	default:
		return CCI__DUE_NEVER;
	}
}

/*
 * The connections' part of a tick: it visits those whose time came
 * (sep->due) and no other, at most OFI_TICK_CONNS of them (the rest stay
 * due for the next tick), so that an endpoint with tens of thousands of
 * idle connections spends nothing on them and never holds sep->lock long
 * against cci_connect and cci_disconnect.  No lock held.
 */
static void conns_visit(struct ofi_ep *sep, uint64_t now)
{
	struct ofi_conn *retire[OFI_RETIRE_MAX];
	unsigned nretire = 0;
	struct cci__due *d;

	pthread_mutex_lock(&sep->lock);
	touched_file(sep, now);
	for (unsigned n = 0; n < OFI_TICK_CONNS && (d = cci__due_take(&sep->due, now)); n++) {
		struct ofi_conn *oc = (struct ofi_conn *)((char *)d - offsetof(struct ofi_conn, base.due));
		int gone = 0;
		uint64_t next;

		pthread_mutex_lock(&oc->lock);
		next = conn_visit(sep, oc, now, &gone);
		if (gone && nretire == OFI_RETIRE_MAX) {
			gone = 0;
			next = now + OFI_TICK_NS; /* the next tick retires it */
		}
		if (gone) {
			ofi_conn_ref(oc);
			retire[nretire++] = oc;
		}
		cci__due_set(&sep->due, d, next);
		pthread_mutex_unlock(&oc->lock);
	}
	pthread_mutex_unlock(&sep->lock);
	/* Outside sep->lock: the table's lock (cq_lock) comes first. */
	for (unsigned i = 0; i < nretire; i++) {
		ofi_conn_retire(retire[i]);
		ofi_conn_unref(retire[i]);
	}
}

static void timers(struct ofi_ep *sep, uint64_t now)
{
	ofi_conns_sweep(sep);
	ofi_disc_expire(sep, now, 0);
	ofi_peers_sweep(sep, now);
	if (sep->reach == OFI_REACH_BY_PROBE)
		ofi_peers_probe_poll(sep, now);
	conns_visit(sep, now);
}

/* The peer process w watched is gone: its connections break. */
static void pid_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	struct ofi_pidw *w = (struct ofi_pidw *)io;
	struct ofi_ep *sep = io->data;

	(void)revents;
	pthread_mutex_lock(&sep->lock);
	atomic_store_explicit(&w->dead, 1, memory_order_release); /* read without the lock */
	ev_io_stop(loop, io);
	OFI_LOG(CCI_LOG_CONN, "ofi: peer process %u exited", w->pid);
	for (struct ofi_conn *oc = sep->conns; oc; oc = oc->next) {
		pthread_mutex_lock(&oc->lock); /* pidw is set under it */
		if (ofi_conn_pidw(oc) == w)
			ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
		pthread_mutex_unlock(&oc->lock);
	}
	pthread_mutex_unlock(&sep->lock);
}

/* Watch the pidfds ofi_pidw_get opened since (OFI_CMD_PIDW). */
static void pidws_watch(struct ofi_ep *sep)
{
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_pidw *w = sep->pidws; w; w = w->next) {
		if (w->dead || ev_is_active(&w->io_w))
			continue;
		ev_io_init(&w->io_w, pid_cb, w->fd, EV_READ);
		w->io_w.data = sep;
		ev_io_start(sep->eng.loop, &w->io_w);
	}
	pthread_mutex_unlock(&sep->lock);
}

/* With a wait fd: sleep on it while the application is away (once
 * fi_trywait says the queue is empty), keep off it while it polls. */
static void plan_wait_fd(struct ofi_ep *sep, int idle)
{
	struct fid *f = &sep->cq->fid;

	if (!idle) {
		if (ev_is_active(&sep->cq_w))
			ev_io_stop(sep->eng.loop, &sep->cq_w);
		return;
	}
	if (fi_trywait(sep->fabric, &f, 1) != FI_SUCCESS) {
		cci__engine_timer_set(&sep->poll_t, 0, 0); /* completions came: again at once */
		return;
	}
	if (!ev_is_active(&sep->cq_w))
		ev_io_start(sep->eng.loop, &sep->cq_w);
}

/* Without one, a waiting application is polled for at the minimum
 * interval for a while after anything happened (an answer usually comes
 * soon), then less and less often; one that computes, once a tick. */
/* The next polling interval: the minimum while hot (or at the start),
 * else twice the last, up to the maximum. */
static uint64_t poll_next_ns(uint64_t last_ns, int hot)
{
	if (hot || last_ns == 0)
		return OFI_POLL_MIN_NS;
	return last_ns * 2 > OFI_POLL_MAX_NS ? OFI_POLL_MAX_NS : last_ns * 2;
}

static void plan_poll(struct ofi_ep *sep, int on, uint64_t now)
{
	uint64_t ns;

	if (!on) {
		if (sep->poll_ns)
			cci__engine_timer_stop(&sep->poll_t);
		sep->poll_ns = 0;
		return;
	}
	ns = poll_next_ns(sep->poll_ns, (int64_t)(now - sep->hot_ns) < (int64_t)OFI_POLL_HOT_NS);
	if (ns != sep->poll_ns)
		cci__engine_timer_set(&sep->poll_t, ns, ns);
	sep->poll_ns = ns;
}

/* Read the queue if the thread polls now (idle: the application is away
 * or waits on its OS handle), then choose how the loop comes back to it. */
static void loop_round(struct ofi_ep *sep, int idle)
{
	uint64_t now = cci__now_ns();

	cci__engine_now_set(&sep->eng, now);
	if (idle && cci__spin_trylock(&sep->cq_lock)) {
		uint64_t seen = sep->cq_seen;

		ofi_progress_locked(sep);
		if (sep->cq_seen != seen) /* an answer often follows: poll fast a while */
			sep->hot_ns = now;
		cci__spin_unlock(&sep->cq_lock);
	}
	if (sep->wait_fd >= 0)
		plan_wait_fd(sep, idle);
	else
		plan_poll(sep, idle && cci__engine_app_armed(&sep->eng), now);
}

/* The engine's switch of who polls: back to the application, the thread
 * leaves the queue at once (to the thread: the round that switched plans
 * its watch). */
static void on_mode(void *owner, int thread)
{
	struct ofi_ep *sep = owner;

	if (thread)
		return;
	if (sep->wait_fd >= 0)
		plan_wait_fd(sep, 0);
	else
		plan_poll(sep, 0, 0);
}

static void on_tick(void *owner, uint64_t now, int app_polled)
{
	struct ofi_ep *sep = owner;

	(void)app_polled; /* the engine decided who polls */
	/* The engine set its coarse clock to now: a send timeout fails each
	 * pending send by the time the timer judged the oldest by
	 * (ofi_tx_fail_all). */
	timers(sep, now);
	if (!cci__engine_manual(&sep->eng)) /* else progress() reads the queue */
		loop_round(sep, cci__engine_thread_polls(&sep->eng));
}

static void on_cmd(void *owner, unsigned cmd)
{
	struct ofi_ep *sep = owner;

	if (cmd & OFI_CMD_PIDW)
		pidws_watch(sep);
	if ((cmd & OFI_CMD_ARM) && !cci__engine_manual(&sep->eng)) {
		sep->hot_ns = cci__now_ns(); /* an answer to what it waits for comes soon */
		loop_round(sep, cci__engine_who_polls(&sep->eng));
	}
}

static void poll_cb(void *arg)
{
	struct ofi_ep *sep = arg;

	loop_round(sep, cci__engine_who_polls(&sep->eng));
}

static void cq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	poll_cb(w->data);
}

static int manual_arm(struct ofi_ep *sep);

/* progress = manual with an OS handle: the loop's descriptors and the
 * queue's wait fd join it, armed from the start (the application may
 * sleep before it calls). */
static int handle_join(struct ofi_ep *sep)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int epfd = sep->ep->os_epfd, rc;

	if (!cci__engine_manual(&sep->eng) || epfd < 0)
		return CCI_SUCCESS;
	if (sep->wait_fd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, sep->wait_fd, &ev) != 0)
		return cci__errno_status(errno);
	rc = cci__engine_handle_join(&sep->eng, epfd);
	if (rc == CCI_SUCCESS)
		manual_arm(sep);
	return rc;
}

int ofi_thread_start(struct ofi_ep *sep)
{
	int threaded = !sep->dev->manual, rc;

	if (cci__engine_init(&sep->eng, sep, OFI_TICK_NS * 1e-9, threaded, on_cmd, on_tick) !=
	    CCI_SUCCESS ||
	    (threaded && cci__engine_timer_init(&sep->eng, &sep->poll_t, poll_cb, sep) != CCI_SUCCESS)) {
		OFI_ERR("ofi: cannot set up the progress thread: out of memory or descriptors");
		ofi_thread_stop(sep);
		return CCI_ENOMEM;
	}
	ev_io_init(&sep->cq_w, cq_cb, sep->wait_fd, EV_READ);
	sep->cq_w.data = sep;
	/* Until the application polls, the thread does. */
	cci__engine_mode_init(&sep->eng, on_mode, 1);
	rc = handle_join(sep);
	if (rc != CCI_SUCCESS) {
		OFI_ERR("ofi: cannot build the OS handle: %s", ofi_core->status_text(rc));
		ofi_thread_stop(sep);
		return rc;
	}
	if (cci__engine_start(&sep->eng) != CCI_SUCCESS) {
		OFI_ERR("ofi: cannot start the progress thread");
		ofi_thread_stop(sep);
		return CCI_ENOMEM;
	}
	return CCI_SUCCESS;
}

/* Join the thread and free the loop; the pid watches it had stay for
 * ofi_peers_free to close. */
void ofi_thread_stop(struct ofi_ep *sep)
{
	cci__engine_stop(&sep->eng);
	cci__engine_timer_fini(&sep->eng, &sep->poll_t);
	cci__engine_fini(&sep->eng);
}

/* Does a connection wait for the tick (a visit filed in sep->due, or a
 * touch not yet filed; 1), or for the provider's handshake as well
 * (connecting; 2)?  sep->lock held. */
static int manual_timed(struct ofi_ep *sep)
{
	assert(cci__mutex_held(&sep->lock));
	if (atomic_load_explicit(&sep->connecting, memory_order_relaxed))
		return 2;
	return cci__due_first(&sep->due) != CCI__DUE_NEVER ||
	       atomic_load_explicit(&sep->touched, memory_order_relaxed) != NULL;
}

/*
 * progress = manual: the application about to sleep on its OS handle
 * sets the handle's timer.  The queue's wait fd (in the handle) wakes it
 * for completions; the timer for the tick while a connection is timed,
 * and, to poll the queue, while a connect runs (the provider's handshake
 * moves only when called), while the provider wants calls (fi_trywait
 * refuses) or when it has no wait fd at all: soon after completions came
 * (the last arm saw fewer), less and less often while none do.
 */
static int manual_arm(struct ofi_ep *sep)
{
	int polls = sep->wait_fd < 0, timed;
	uint64_t ns;

	/* What is due is done now (the touched connections above all, which
	 * a connection that just opened is): what is left decides whether the
	 * handle needs its timer. */
	conns_visit(sep, cci__now_ns());
	if (!cci__spin_trylock(&sep->cq_lock))
		return CCI_EAGAIN; /* another thread reads the queue: look after it */
	if (!polls) {
		struct fid *f = &sep->cq->fid;

		polls = fi_trywait(sep->fabric, &f, 1) != FI_SUCCESS;
	}
	pthread_mutex_lock(&sep->lock);
	timed = manual_timed(sep);
	pthread_mutex_unlock(&sep->lock);
	ns = timed ? OFI_TICK_NS : 0;
	if (polls || timed == 2) {
		ns = sep->poll_ns = poll_next_ns(sep->poll_ns, sep->cq_seen != sep->arm_seen);
		sep->arm_seen = sep->cq_seen;
	}
	cci__spin_unlock(&sep->cq_lock);
	cci__engine_handle_arm(&sep->eng, ns);
	return CCI_SUCCESS;
}

/* The application is about to sleep on its OS handle: the thread takes
 * over progress now rather than at its next tick. */
int ofi_arm(cci__ep_t *ep)
{
	struct ofi_ep *sep = ofi_ep_of(ep);

	if (cci__engine_manual(&sep->eng))
		return manual_arm(sep);
	cci__engine_app_arm(&sep->eng, OFI_CMD_ARM);
	return CCI_SUCCESS;
}
