/*
 * ofi_loop.c - the endpoint's progress thread: timers (connect
 * timeouts, keepalive, send timeouts, late credits), peer processes that
 * die, and progress while the application does not make any.
 *
 * libfabric's providers here progress data only when called (manual
 * progress), so someone must read the completion queue while the
 * application computes or sleeps on its OS handle.  The application's
 * own polling is the fast path, and the thread stays off the queue while
 * it sees the application poll (a counter every progress() bumps): it
 * wakes once a tick (OFI_TICK_NS) for the timers only.  When a tick
 * passes without progress(), or the application armed its OS handle, the
 * thread takes over: it sleeps on the queue's wait fd (fi_trywait first)
 * when the provider has one, else it polls, every few microseconds right
 * after activity when the application waits, backing off to a tick.
 * Everything it finds it posts as events; the core rings the OS handle.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ofi.h"

#define OFI_POLL_MIN_NS 10000ull     /* polling after activity, no wait fd */
#define OFI_POLL_MAX_NS 1000000ull
#define OFI_POLL_HOT_NS 500000ull    /* poll at the minimum this long after activity */
#define OFI_EXPIRED_MAX 32
#define OFI_PROBE_NS 1000000000ull   /* blocked on credits this long: is the peer there? */

void ofi_thread_wake(struct ofi_ep *sep)
{
	uint64_t one = 1;

	if (write(sep->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		OFI_LOG(CCI_LOG_EP, "ofi: waking the progress thread: %s", strerror(errno));
}

int ofi_pidw_watch(struct ofi_ep *sep, struct ofi_pidw *w)
{
	struct epoll_event ev = { .events = EPOLLIN };

	w->tag = OFI_TAG_PID;
	ev.data.ptr = w;
	return epoll_ctl(sep->epfd, EPOLL_CTL_ADD, w->fd, &ev);
}

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
static void pid_died(struct ofi_ep *sep, struct ofi_pidw *w)
{
	struct ofi_pidw *x;

	pthread_mutex_lock(&sep->lock);
	for (x = sep->pidws; x && x != w; x = x->next)
		;
	if (!x) { /* let go of while its event was on the way */
		pthread_mutex_unlock(&sep->lock);
		return;
	}
	w->dead = 1;
	epoll_ctl(sep->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	OFI_LOG(CCI_LOG_CONN, "ofi: peer process %u exited", w->pid);
	for (struct ofi_conn *oc = sep->conns; oc; oc = oc->next) {
		pthread_mutex_lock(&oc->lock); /* pidw is set under it */
		if (oc->pidw == w)
			ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
		pthread_mutex_unlock(&oc->lock);
	}
	pthread_mutex_unlock(&sep->lock);
}

/* Progress for an absent application; returns the completions seen. */
static uint64_t thread_progress(struct ofi_ep *sep)
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

static void cq_fd_watch(struct ofi_ep *sep, int on)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &sep->tag_cq };

	if (on == sep->cq_fd_on)
		return;
	if (epoll_ctl(sep->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, sep->wait_fd, &ev) == 0)
		sep->cq_fd_on = on;
}

/* How long to sleep (ns), arming the CQ's wait fd when we may use it.
 * Without one, a waiting application is polled for at the minimum
 * interval for a while after anything happened (an answer usually comes
 * soon), then less and less often. */
static uint64_t wait_plan(struct ofi_ep *sep, int idle, int armed, uint64_t now,
                          uint64_t *poll_ns)
{
	struct fid *f = &sep->cq->fid;
	uint64_t hot = __atomic_load_n(&sep->hot_ns, __ATOMIC_RELAXED);

	if (idle && sep->wait_fd >= 0) {
		if (fi_trywait(sep->fabric, &f, 1) != FI_SUCCESS)
			return 0;
		cq_fd_watch(sep, 1);
		return OFI_TICK_NS;
	}
	if (sep->wait_fd >= 0)
		cq_fd_watch(sep, 0);
	if (!idle || !armed)
		return OFI_TICK_NS;
	if ((int64_t)(now - hot) < (int64_t)OFI_POLL_HOT_NS)
		*poll_ns = OFI_POLL_MIN_NS;
	else
		*poll_ns = *poll_ns * 2 > OFI_POLL_MAX_NS ? OFI_POLL_MAX_NS : *poll_ns * 2;
	return *poll_ns;
}

static void thread_wait(struct ofi_ep *sep, uint64_t ns)
{
	struct epoll_event evs[16];
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
	                       .tv_nsec = (long)(ns % 1000000000ull) };
	uint64_t v;
	int n = epoll_pwait2(sep->epfd, evs, 16, &ts, NULL);

	for (int i = 0; i < n; i++) {
		int tag = *(int *)evs[i].data.ptr;

		if (tag == OFI_TAG_WAKE) {
			if (read(sep->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				OFI_LOG(CCI_LOG_EP, "ofi: wake fd: %s", strerror(errno));
		} else if (tag == OFI_TAG_PID) {
			pid_died(sep, evs[i].data.ptr);
		}
	}
}

static void *thread_main(void *arg)
{
	struct ofi_ep *sep = arg;
	uint32_t last = __atomic_load_n(&sep->activity, __ATOMIC_RELAXED);
	uint64_t next_tick = 0, poll_ns = OFI_POLL_MIN_NS;

	/* Short polling sleeps must not stretch to the default 50 us slack. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (!__atomic_load_n(&sep->stopping, __ATOMIC_ACQUIRE)) {
		uint64_t now = cci__now_ns();
		uint32_t act = __atomic_load_n(&sep->activity, __ATOMIC_RELAXED);
		int armed = __atomic_load_n(&sep->app_armed, __ATOMIC_RELAXED);
		int idle;

		__atomic_store_n(&sep->now_ns, now, __ATOMIC_RELAXED);
		if (now >= next_tick) {
			timers(sep, now);
			idle = armed || act == last;
			last = act;
			next_tick = now + OFI_TICK_NS;
		} else {
			idle = armed || act == last;
		}
		if (idle && thread_progress(sep) > 0)
			__atomic_store_n(&sep->hot_ns, now, __ATOMIC_RELAXED);
		thread_wait(sep, wait_plan(sep, idle, armed, now, &poll_ns));
	}
	return NULL;
}

int ofi_thread_start(struct ofi_ep *sep)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &sep->tag_wake };
	sigset_t all, old;
	int rc;

	sep->tag_wake = OFI_TAG_WAKE;
	sep->tag_cq = OFI_TAG_CQ;
	sep->now_ns = cci__now_ns();
	sep->epfd = epoll_create1(EPOLL_CLOEXEC);
	sep->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sep->epfd < 0 || sep->wake_fd < 0 ||
	    epoll_ctl(sep->epfd, EPOLL_CTL_ADD, sep->wake_fd, &ev) != 0) {
		OFI_ERR("ofi: cannot set up the progress thread: %s", strerror(errno));
		ofi_thread_stop(sep);
		return CCI_ENOMEM;
	}
	/* The thread takes no signals: they belong to the application. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&sep->thread, NULL, thread_main, sep);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		OFI_ERR("ofi: cannot start the progress thread: %s", strerror(rc));
		ofi_thread_stop(sep);
		return CCI_ENOMEM;
	}
	sep->thread_started = 1;
	return CCI_SUCCESS;
}

void ofi_thread_stop(struct ofi_ep *sep)
{
	if (sep->thread_started) {
		__atomic_store_n(&sep->stopping, 1, __ATOMIC_RELEASE);
		ofi_thread_wake(sep);
		pthread_join(sep->thread, NULL);
		sep->thread_started = 0;
	}
	if (sep->epfd >= 0)
		close(sep->epfd);
	if (sep->wake_fd >= 0)
		close(sep->wake_fd);
	sep->epfd = sep->wake_fd = -1;
	sep->cq_fd_on = 0;
}

/* The application is about to sleep on its OS handle: the thread takes
 * over progress now rather than at its next tick. */
int ofi_arm(cci__ep_t *ep)
{
	struct ofi_ep *sep = ofi_ep_of(ep);

	__atomic_store_n(&sep->hot_ns, cci__now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&sep->app_armed, 1, __ATOMIC_RELAXED);
	ofi_thread_wake(sep);
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
