/*
 * ofi_loop.c - the endpoint's progress thread, on the shared engine
 * (plugins/common/engine.h): timers (connect timeouts, keepalive, send
 * timeouts, late credits), peer processes that die, and progress while
 * the application does not make any.
 *
 * libfabric's providers here progress data only when called (manual
 * progress), so someone must read the completion queue while the
 * application computes or sleeps on its OS handle.  The application's
 * own polling is the fast path, and the thread stays off the queue while
 * the application polls (cci__engine_app_active in every progress()): it
 * wakes once a tick (OFI_TICK_NS) for the timers only.  When a tick
 * passes without progress(), or the application armed its OS handle (a
 * command, OFI_CMD_ARM), the thread takes over: it sleeps on the queue's
 * wait fd (an ev_io, fi_trywait first) when the provider has one, else
 * it polls on a precise timer, every few microseconds right after
 * activity when the application waits, backing off to a millisecond.
 * Everything it finds it posts as events; the core rings the OS handle.
 *
 * Every function here but ofi_arm and ofi_conn_timeouts_changed runs in
 * the engine's thread with the loop lock held; only that thread starts
 * or stops the watchers (CQ wait fd, poll timer, pidfds), so no other
 * thread ever takes the loop lock: they send a command.
 */
#include <string.h>

#include "ofi.h"

#define OFI_POLL_MIN_NS 10000ull     /* polling after activity, no wait fd */
#define OFI_POLL_MAX_NS 1000000ull
#define OFI_POLL_HOT_NS 500000ull    /* poll at the minimum this long after activity */
#define OFI_EXPIRED_MAX 32
#define OFI_PROBE_NS 1000000000ull   /* blocked on credits this long: is the peer there? */

/* Any message from the peer is a sign of life; PINGs ask for one.
 * oc->lock held. */
static void conn_keepalive(struct ofi_conn *oc, uint64_t now)
{
	if (oc->rx_count != oc->seen_rx) {
		oc->seen_rx = oc->rx_count;
		cci__ct_heard(&oc->timers, now);
	}
	if (cci__ct_keepalive(&oc->timers, ofi_core, oc->conn, now) == CCI__KA_PING)
		ofi_ctl_send(oc, OFI_T_PING, 0, NULL, 0, 0);
}

static uint64_t oldest_user_stamp(const struct ofi_conn *oc)
{
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
	if (!oc->msgq || oc->credits > 0 || oc->msgq->kind == OFI_OP_CTL ||
	    (int64_t)(now - oc->msgq->stamp_ns) < (int64_t)OFI_PROBE_NS ||
	    cci__ns_since(oc->timers.last_ping_ns, now) < OFI_PROBE_NS)
		return;
	oc->timers.last_ping_ns = now;
	ofi_ctl_send(oc, OFI_T_PING, 0, NULL, 0, OFI_CTL_TRACKED);
}

/* oc->lock held. */
static void conn_timers(struct ofi_conn *oc, uint64_t now)
{
	conn_keepalive(oc, now);
	if (cci__ct_send_expired(oc->send_to_us, oldest_user_stamp(oc), now)) {
		OFI_LOG(CCI_LOG_CONN, "ofi: send timeout on %08x", oc->id);
		ofi_conn_break(oc, CCI_ETIMEDOUT);
		return;
	}
	conn_probe(oc, now);
	ofi_credit_maybe(oc, 1);
}

static void timers(struct ofi_ep *sep, uint64_t now)
{
	struct ofi_conn *expired[OFI_EXPIRED_MAX];
	int n = 0;

	ofi_conns_sweep(sep);
	ofi_peers_sweep(sep, now);
	ofi_pidws_sweep(sep, now);
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_conn *oc = sep->conns; oc; oc = oc->next) {
		pthread_mutex_lock(&oc->lock);
		if (oc->state == OFI_CONN_CONNECTING && cci__ct_connect_expired(&oc->timers, now) &&
		    n < OFI_EXPIRED_MAX) {
			ofi_conn_ref(oc);
			expired[n++] = oc;
		} else if (oc->state == OFI_CONN_OPEN) {
			conn_timers(oc, now);
		}
		pthread_mutex_unlock(&oc->lock);
	}
	pthread_mutex_unlock(&sep->lock);
	for (int i = 0; i < n; i++) {
		cci__spin_lock(&sep->cq_lock);
		ofi_connect_timeout(expired[i]);
		cci__spin_unlock(&sep->cq_lock);
		ofi_conn_unref(expired[i]);
	}
}

/* The peer process w watched is gone: its connections break. */
static void pid_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	struct ofi_pidw *w = (struct ofi_pidw *)io;
	struct ofi_ep *sep = io->data;

	(void)revents;
	pthread_mutex_lock(&sep->lock);
	w->dead = 1;
	ev_io_stop(loop, io);
	OFI_LOG(CCI_LOG_CONN, "ofi: peer process %u exited", w->pid);
	for (struct ofi_conn *oc = sep->conns; oc; oc = oc->next) {
		pthread_mutex_lock(&oc->lock); /* pidw is set under it */
		if (oc->pidw == w)
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

/* Progress for an absent application; returns the completions seen. */
static uint64_t loop_progress(struct ofi_ep *sep)
{
	uint64_t before;

	if (!cci__spin_trylock(&sep->cq_lock))
		return 0;
	before = sep->cq_seen;
	ofi_progress_locked(sep);
	before = sep->cq_seen - before;
	cci__spin_unlock(&sep->cq_lock);
	return before;
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
static void plan_poll(struct ofi_ep *sep, int on, uint64_t now)
{
	uint64_t hot = __atomic_load_n(&sep->hot_ns, __ATOMIC_RELAXED), ns;

	if (!on) {
		if (sep->poll_ns)
			cci__engine_timer_stop(&sep->poll_t);
		sep->poll_ns = 0;
		return;
	}
	if ((int64_t)(now - hot) < (int64_t)OFI_POLL_HOT_NS || sep->poll_ns == 0)
		ns = OFI_POLL_MIN_NS;
	else
		ns = sep->poll_ns * 2 > OFI_POLL_MAX_NS ? OFI_POLL_MAX_NS : sep->poll_ns * 2;
	if (ns != sep->poll_ns)
		cci__engine_timer_set(&sep->poll_t, ns, ns);
	sep->poll_ns = ns;
}

/* Read the queue if the application is away (idle: it made no progress
 * call since the last tick) or waits on its OS handle, then choose how
 * the loop comes back to it. */
static void loop_round(struct ofi_ep *sep, int idle)
{
	uint64_t now = cci__now_ns();
	int armed = __atomic_load_n(&sep->app_armed, __ATOMIC_RELAXED);

	idle = idle || armed;
	__atomic_store_n(&sep->now_ns, now, __ATOMIC_RELAXED);
	if (idle && loop_progress(sep) > 0)
		__atomic_store_n(&sep->hot_ns, now, __ATOMIC_RELAXED);
	if (sep->wait_fd >= 0)
		plan_wait_fd(sep, idle);
	else
		plan_poll(sep, idle && armed, now);
}

static void on_tick(void *owner, uint64_t now, int app_polled)
{
	struct ofi_ep *sep = owner;

	timers(sep, now);
	loop_round(sep, !app_polled);
}

static void on_cmd(void *owner, unsigned cmd)
{
	struct ofi_ep *sep = owner;

	if (cmd & OFI_CMD_PIDW)
		pidws_watch(sep);
	if (cmd & OFI_CMD_ARM)
		loop_round(sep, !cci__engine_app_recent(&sep->eng));
}

static void poll_cb(void *arg)
{
	struct ofi_ep *sep = arg;

	loop_round(sep, !cci__engine_app_recent(&sep->eng));
}

static void cq_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	poll_cb(w->data);
}

int ofi_thread_start(struct ofi_ep *sep)
{
	sep->now_ns = cci__now_ns();
	if (cci__engine_init(&sep->eng, sep, OFI_TICK_NS * 1e-9, 1, on_cmd, on_tick) != CCI_SUCCESS ||
	    cci__engine_timer_init(&sep->eng, &sep->poll_t, poll_cb, sep) != CCI_SUCCESS) {
		OFI_ERR("ofi: cannot set up the progress thread: out of memory or descriptors");
		ofi_thread_stop(sep);
		return CCI_ENOMEM;
	}
	ev_io_init(&sep->cq_w, cq_cb, sep->wait_fd, EV_READ);
	sep->cq_w.data = sep;
	if (cci__engine_start(&sep->eng) != CCI_SUCCESS) {
		OFI_ERR("ofi: cannot start the progress thread");
		ofi_thread_stop(sep);
		return CCI_ENOMEM;
	}
	return CCI_SUCCESS;
}

/* Join the thread and free the loop; the pid watches it had stay for
 * ofi_conns_free_all to close. */
void ofi_thread_stop(struct ofi_ep *sep)
{
	cci__engine_stop(&sep->eng);
	cci__engine_timer_fini(&sep->eng, &sep->poll_t);
	cci__engine_fini(&sep->eng);
}

/* The application is about to sleep on its OS handle: the thread takes
 * over progress now rather than at its next tick. */
int ofi_arm(cci__ep_t *ep)
{
	struct ofi_ep *sep = ofi_ep_of(ep);

	__atomic_store_n(&sep->hot_ns, cci__now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&sep->app_armed, 1, __ATOMIC_RELAXED);
	cci__engine_cmd(&sep->eng, OFI_CMD_ARM);
	return CCI_SUCCESS;
}

void ofi_conn_timeouts_changed(cci__conn_t *conn)
{
	struct ofi_conn *oc = ofi_conn_of(conn);

	pthread_mutex_lock(&oc->lock);
	cci__ct_arm(&oc->timers, conn->keepalive_us, cci__now_ns());
	oc->send_to_us = conn->send_timeout_us;
	pthread_mutex_unlock(&oc->lock);
}
