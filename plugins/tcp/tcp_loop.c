/*
 * tcp_loop.c - the endpoint's progress: the shared engine
 * (plugins/common/engine.h, a libev loop) with the listening socket,
 * handshake sockets, a tick for timers and, in thread mode, the
 * connections' sockets; progress(), the pass the application runs, and
 * arm(), before it sleeps on the OS handle.
 *
 * Other threads touch the loop's watchers only with the loop lock
 * (sep->eng.lock) held and then wake it.  The data path never does: it
 * leaves a command bit (TCP_CMD_*) with cci__engine_cmd(), which costs a
 * system call only when the loop is not already being woken.
 *
 * Modes.  While the application polls, progress() reads the sockets and
 * the loop leaves them alone (no thread wake-up per message; with few
 * sockets and no OS handle they are not even in rx_epfd, see
 * tcp_conn_watch_update).  When a whole
 * tick passes without a poll, the loop watches the readable-connection set
 * (an epoll descriptor of its own) and the sockets with queued bytes, so
 * that messages, acks and requests keep moving while the application
 * computes.
 *
 * progress=manual (an ini key) starts no thread: the endpoint stays in app
 * mode and progress() runs the loop without waiting (cci__engine_poll: at
 * most every CCI__ENGINE_MANUAL_NS, or at once when a command or the OS
 * handle's wake-up waits).  No thread shares
 * the process's descriptor table then, so the kernel takes no file
 * reference per socket system call (about 55 ns each here), but nothing
 * moves while the application makes no call.
 */
#include <sys/epoll.h>

#include "tcp.h"

static void ww_update(struct tcp_conn *tc);

static void ww_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *tc = w->data;
	struct tcp_ep *sep = tc->sep;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	if (cci__conn_is_open(&tc->base))
		tcp_tx_flush_now(tc, 0);
	ww_update(tc);
	if (atomic_load(&sep->nfaults))
		tcp_faults_process(sep);
	pthread_mutex_unlock(&sep->lock);
}

/* Loop thread, sep->lock held: watch tc for writability iff it has queued
 * bytes in thread mode. */
static void ww_update(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;
	int want = cci__engine_thread_polls(&sep->eng) &&
	           atomic_load_explicit(&tc->tx_queued, memory_order_relaxed) &&
	           cci__conn_is_open(&tc->base);

	assert(cci__mutex_held(&tc->sep->lock));
	if (want == tc->w_on)
		return;
	if (want) {
		ev_io_init(&tc->w_w, ww_cb, tc->fd, EV_WRITE);
		tc->w_w.data = tc;
		ev_io_start(sep->eng.loop, &tc->w_w);
	} else {
		ev_io_stop(sep->eng.loop, &tc->w_w);
	}
	tc->w_on = want;
}

static void ww_update_all(struct tcp_ep *sep)
{
	for (uint32_t i = 0; i < sep->nopen; i++)
		ww_update(sep->open[i]);
}

/* After a queue filled: the connections on sep->tx_due (tcp_tx.c), those
 * with bytes queued, not every open one.  Under sep->lock nothing takes
 * from that stack, and senders only push in front of the head read here. */
static void ww_update_due(struct tcp_ep *sep)
{
	for (struct tcp_conn *tc = atomic_load_explicit(&sep->tx_due, memory_order_acquire); tc;
	     tc = tc->tx_due_next)
		ww_update(tc);
}

static void rx_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_ep *sep = w->data;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	tcp_rx_ready(sep);
	if (atomic_load(&sep->nfaults))
		tcp_faults_process(sep);
	pthread_mutex_unlock(&sep->lock);
}

/* The engine's switch of who polls (engine.h): in thread mode the
 * application stopped polling and the loop takes the sockets; in app mode
 * it polls again and the loop leaves them. */
static void on_mode(void *owner, int thread)
{
	struct tcp_ep *sep = owner;

	TCP_LOG(CCI_LOG_CTP, "tcp: %s: %s", sep->ep->uri,
	        thread ? "the application is idle, the progress thread takes the sockets"
	               : "the application polls, the progress thread leaves the sockets");
	if (thread)
		ev_io_start(sep->eng.loop, &sep->rx_w);
	else
		ev_io_stop(sep->eng.loop, &sep->rx_w);
	pthread_mutex_lock(&sep->lock);
	tcp_conn_watch_update(sep);
	if (thread) {
		if (sep->ack_due)
			tcp_rx_acks_all(sep);
		if (atomic_load(&sep->rx_starved))
			tcp_rx_resume(sep);
		tcp_rx_ready(sep);
	}
	ww_update_all(sep);
	pthread_mutex_unlock(&sep->lock);
}

static void on_cmd(void *owner, unsigned cmd)
{
	struct tcp_ep *sep = owner;

	if (cmd & TCP_CMD_WAKE)
		cci__engine_mode_set(&sep->eng, 1);
	/* A polling application that holds the lock flushes by itself. */
	if ((cmd & TCP_CMD_FLUSH) && pthread_mutex_trylock(&sep->lock) == 0) {
		tcp_tx_flush_all(sep);
		pthread_mutex_unlock(&sep->lock);
	}
	if (!(cmd & (TCP_CMD_TX | TCP_CMD_RX | TCP_CMD_FAULT)))
		return;
	pthread_mutex_lock(&sep->lock);
	if (cmd & TCP_CMD_FAULT)
		tcp_faults_process(sep);
	if ((cmd & TCP_CMD_RX) && cci__engine_thread_polls(&sep->eng))
		tcp_rx_resume(sep);
	if (cmd & TCP_CMD_TX)
		ww_update_due(sep);
	pthread_mutex_unlock(&sep->lock);
}

/* The tick's work; sep->lock held, and the loop lock when with_loop (the
 * handshake timers stop watchers). */
static void timers_run(struct tcp_ep *sep, uint64_t now, int with_loop)
{
	assert(cci__mutex_held(&sep->lock));
	if (atomic_load(&sep->nfaults))
		tcp_faults_process(sep);
	if (sep->ack_due)
		tcp_rx_acks_all(sep);
	/* A burst held for an application that stopped polling (tcp_tx.c). */
	if (atomic_load_explicit(&sep->tx_busy, memory_order_relaxed))
		tcp_tx_flush_all(sep);
	tcp_conn_timers(sep, now, with_loop);
	if (with_loop) {
		tcp_hs_timers(sep, now);
		if (sep->gone)
			tcp_conn_release_gone(sep);
	}
}

/* progress() found the tick's work left to it; sep->lock held. */
static void timers_in_app(struct tcp_ep *sep)
{
	int with_loop = pthread_mutex_trylock(&sep->eng.lock) == 0;

	assert(cci__mutex_held(&sep->lock));
	if (with_loop)
		cci__engine_tick_done(&sep->eng);
	timers_run(sep, cci__engine_now(&sep->eng), with_loop);
	if (with_loop) {
		pthread_mutex_unlock(&sep->eng.lock);
		tcp_loop_cmd(sep, 0); /* watchers may have stopped */
	}
}

static void on_tick(void *owner, uint64_t now, int app_polled)
{
	struct tcp_ep *sep = owner;

	(void)app_polled; /* the engine decided who polls (on_mode) */
	/* A polling application holds the lock nearly all the time: waiting
	 * for it would cost it a wake-up call per unlock.  Leave the timers to
	 * its next progress() instead. */
	if (pthread_mutex_trylock(&sep->lock) != 0) {
		cci__engine_tick_defer(&sep->eng);
		return;
	}
	timers_run(sep, now, 1);
	pthread_mutex_unlock(&sep->lock);
}

/* Does anything on sep wait for the loop or a timer?  sep->lock held. */
static int manual_tick_wanted(struct tcp_ep *sep)
{
	assert(cci__mutex_held(&sep->lock));
	if (sep->reqs || (cci__listen_paused(&sep->lg) & CCI__LISTEN_NOFD) ||
	    atomic_load(&sep->tx_busy) || cci__op_pool_out(&sep->ops) > 0 ||
	    atomic_load(&sep->nfaults) ||
	    cci__engine_cmd_pending(&sep->eng))
		return 1;
	/* A timer, or an ack still owed (the peer's completions wait for it):
	 * both are in the due heap, which the tick visits (timers_run). */
	if (cci__due_first(&sep->due) != CCI__DUE_NEVER)
		return 1;
	for (struct tcp_conn *tc = sep->conns; tc; tc = tc->next)
		if (!cci__conn_is_open(&tc->base) || tc->nanswers)
			return 1;
	return 0;
}

/*
 * The ops table's arm: the application is about to sleep on the OS handle.
 * Socket bytes wake it by themselves (the readable set is in it); queued
 * bytes need the thread or, with progress=manual, the engine's timer in
 * the handle (engine.h): armed for one tick if anything waits, else for
 * commands only (either clears an expiry that woke the application).
 * Under sep->lock: a connection linked meanwhile (under that lock, its
 * tcp_loop_cmd after) is either seen here or wakes the handle after this
 * call.  Acks read but not
 * applied yet (rx_conn in tcp_rx.c leaves them to the next pass) and a
 * receive buffer returned while starved are work for cci_get_event now.
 */
int tcp_arm(cci__ep_t *ep)
{
	struct tcp_ep *sep = tcp_ep_of(ep);
	int pending;

	if (!sep->manual && atomic_load(&sep->tx_busy) && !cci__engine_thread_polls(&sep->eng))
		tcp_loop_cmd(sep, TCP_CMD_WAKE);
	pthread_mutex_lock(&sep->lock);
	if (sep->manual)
		cci__engine_handle_arm(&sep->eng,
		                       manual_tick_wanted(sep) ? (uint64_t)(TCP_TICK_S * 1e9) : 0);
	pending = sep->ack_due ||
	          (atomic_load(&sep->rx_starved) && tcp_rb_available(sep));
	pthread_mutex_unlock(&sep->lock);
	return pending ? CCI_EAGAIN : CCI_SUCCESS;
}

static void watchers_init(struct tcp_ep *sep)
{
	struct ev_loop *loop = sep->eng.loop;

	tcp_listen_init(sep);
	ev_io_init(&sep->rx_w, rx_cb, sep->rx_epfd, EV_READ);
	sep->rx_w.data = sep;
	/* Until the application polls, the thread does the reading. */
	cci__engine_mode_init(&sep->eng, on_mode, 1);
	if (cci__engine_thread_polls(&sep->eng))
		ev_io_start(loop, &sep->rx_w);
}

/* With progress=manual nothing sleeps in the loop (progress() runs it
 * without waiting), so the engine runs without a thread, and an OS handle
 * takes the loop's descriptor (the listening and handshake sockets) and
 * the engine's timer (cci__engine_handle_join); the readable connections
 * are in it already (rx_epfd). */
int tcp_loop_start(struct tcp_ep *sep)
{
	int rc;

	if (cci__engine_init(&sep->eng, sep, TCP_TICK_S, !sep->manual, on_cmd, on_tick) !=
	    CCI_SUCCESS) {
		TCP_ERR("tcp: cannot create the event loop (libev)");
		return CCI_ENOMEM;
	}
	watchers_init(sep);
	if (cci__engine_start(&sep->eng) != CCI_SUCCESS) {
		TCP_ERR("tcp: cannot start the progress thread of %s", sep->ep->uri);
		return CCI_ENOMEM; /* ep_release ends the engine */
	}
	if (sep->ep->os_epfd >= 0 &&
	    (rc = cci__engine_handle_join(&sep->eng, sep->ep->os_epfd)) != CCI_SUCCESS) {
		TCP_ERR("tcp: %s: cannot build the OS handle: %s", sep->ep->uri,
		        tcp_core->status_text(rc));
		return rc;
	}
	return CCI_SUCCESS;
}

/* The ops table's progress: one pass over the endpoint for the caller
 * (cci_get_event, or a sender short of ops), with what the tick or the
 * loop left to it first. */
int tcp_progress(cci__ep_t *ep)
{
	struct tcp_ep *sep = tcp_ep_of(ep);
	int starved;

	cci__engine_app_active(&sep->eng);
	atomic_fetch_add_explicit(&sep->progress_gen, 1, memory_order_relaxed);
	cci__engine_poll(&sep->eng); /* progress=manual: the loop's work */
	/* Wait for the progress thread if it holds the lock: it is reading
	 * or posting, and what it posts is what the caller wants next. */
	pthread_mutex_lock(&sep->lock);
	if (cci__engine_tick_due(&sep->eng))
		timers_in_app(sep);
	if (atomic_load_explicit(&sep->nfaults, memory_order_relaxed))
		tcp_faults_process(sep);
	if (atomic_load_explicit(&sep->rx_starved, memory_order_relaxed))
		tcp_rx_resume(sep);
	if (atomic_load_explicit(&sep->tx_busy, memory_order_relaxed))
		tcp_tx_flush_all(sep);
	if (sep->ack_due)
		tcp_rx_acks_all(sep);
	tcp_rx_poll(sep);
	starved = atomic_load_explicit(&sep->rx_starved, memory_order_relaxed);
	pthread_mutex_unlock(&sep->lock);
	return starved ? CCI_ENOBUFS : CCI_SUCCESS;
}
