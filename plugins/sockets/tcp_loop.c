/*
 * tcp_loop.c - the endpoint's progress thread: a libev loop with the
 * listening socket, handshake sockets, a tick for timers and, in thread
 * mode, the connections' sockets.
 *
 * Other threads touch the loop's watchers only with loop_lock held (the
 * loop releases it while it sleeps, see ev_set_loop_release_cb) and then
 * wake it with the async watcher.  The data path never does: it leaves a
 * command bit in sep->cmd and calls ev_async_send(), which costs a system
 * call only when the loop is not already being woken.
 *
 * Modes.  While the application polls, progress() reads the sockets and
 * the loop leaves them alone (no thread wake-up per message; with few
 * sockets and no OS handle they are not even in rx_epfd, see
 * tcp_rx_watch_update).  When a whole
 * tick passes without a poll, the loop watches the readable-connection set
 * (an epoll descriptor of its own) and the sockets with queued bytes, so
 * that messages, acks and requests keep moving while the application
 * computes.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "tcp.h"

static void l_release(struct ev_loop *loop)
{
	struct tcp_ep *sep = ev_userdata(loop);

	pthread_mutex_unlock(&sep->loop_lock);
}

static void l_acquire(struct ev_loop *loop)
{
	struct tcp_ep *sep = ev_userdata(loop);

	pthread_mutex_lock(&sep->loop_lock);
}

void tcp_loop_cmd(struct tcp_ep *sep, unsigned cmd)
{
	if (cmd)
		atomic_fetch_or(&sep->cmd, cmd);
	ev_async_send(sep->loop, &sep->async_w);
}

static void ww_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct tcp_conn *tc = w->data;
	struct tcp_ep *sep = tc->sep;
	struct tcp_op *done = NULL;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&sep->lock);
	if (tcp_state(tc) == SOCK_CONN_OPEN) {
		pthread_mutex_lock(&tc->tx_lock);
		tcp_tx_flush(tc, &done);
		pthread_mutex_unlock(&tc->tx_lock);
		tcp_ops_complete(sep, done);
	}
	tcp_ww_update(tc);
	if (atomic_load(&sep->nfaults))
		tcp_faults_process(sep);
	pthread_mutex_unlock(&sep->lock);
}

/* Loop thread, sep->lock held: watch tc for writability iff it has queued
 * bytes in thread mode. */
void tcp_ww_update(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;
	int want = atomic_load(&sep->thread_mode) &&
	           atomic_load_explicit(&tc->tx_queued, memory_order_relaxed) &&
	           tcp_state(tc) == SOCK_CONN_OPEN;

	if (want == tc->w_on)
		return;
	if (want) {
		ev_io_init(&tc->w_w, ww_cb, tc->fd, EV_WRITE);
		tc->w_w.data = tc;
		ev_io_start(sep->loop, &tc->w_w);
	} else {
		ev_io_stop(sep->loop, &tc->w_w);
	}
	tc->w_on = want;
}

static void ww_update_all(struct tcp_ep *sep)
{
	for (uint32_t i = 0; i < sep->nopen; i++)
		tcp_ww_update(sep->open[i]);
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

static void mode_thread(struct tcp_ep *sep)
{
	if (atomic_load(&sep->thread_mode))
		return;
	/* Publish the mode before looking at the queues (senders do the
	 * reverse), so a queued byte is never left without a watcher. */
	atomic_store(&sep->thread_mode, 1);
	TCP_LOG(CCI_LOG_CTP, "tcp: %s: the application is idle, the progress thread "
	        "takes the sockets", sep->ep->uri);
	ev_io_start(sep->loop, &sep->rx_w);
	pthread_mutex_lock(&sep->lock);
	tcp_rx_watch_update(sep);
	if (sep->acks_pending)
		tcp_rx_acks_all(sep);
	if (atomic_load(&sep->rx_starved))
		tcp_rx_resume(sep);
	tcp_rx_ready(sep);
	ww_update_all(sep);
	pthread_mutex_unlock(&sep->lock);
}

static void mode_app(struct tcp_ep *sep)
{
	if (!atomic_load(&sep->thread_mode))
		return;
	atomic_store(&sep->thread_mode, 0);
	TCP_LOG(CCI_LOG_CTP, "tcp: %s: the application polls, the progress thread "
	        "leaves the sockets", sep->ep->uri);
	ev_io_stop(sep->loop, &sep->rx_w);
	pthread_mutex_lock(&sep->lock);
	tcp_rx_watch_update(sep);
	ww_update_all(sep);
	pthread_mutex_unlock(&sep->lock);
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct tcp_ep *sep = w->data;
	unsigned cmd = atomic_exchange(&sep->cmd, 0);

	(void)revents;
	if (cmd & TCP_CMD_STOP) {
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	if (cmd & TCP_CMD_WAKE)
		mode_thread(sep);
	if (!(cmd & (TCP_CMD_TX | TCP_CMD_RX | TCP_CMD_FAULT)))
		return;
	pthread_mutex_lock(&sep->lock);
	if (cmd & TCP_CMD_FAULT)
		tcp_faults_process(sep);
	if ((cmd & TCP_CMD_RX) && atomic_load(&sep->thread_mode))
		tcp_rx_resume(sep);
	if (cmd & TCP_CMD_TX)
		ww_update_all(sep);
	pthread_mutex_unlock(&sep->lock);
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct tcp_ep *sep = w->data;
	uint64_t now = sock_now_ns();

	(void)loop;
	(void)revents;
	atomic_store(&sep->now_ns, now);
	if (atomic_exchange(&sep->app_polled, 0))
		mode_app(sep);
	else
		mode_thread(sep);
	/* A polling application holds the lock nearly all the time: waiting
	 * for it would cost it a wake-up call per unlock.  Leave the timers to
	 * its next progress() instead. */
	if (pthread_mutex_trylock(&sep->lock) != 0) {
		atomic_store(&sep->tick_due, 1);
		return;
	}
	tcp_timers_run(sep, now, 1);
	pthread_mutex_unlock(&sep->lock);
}

/* The tick's work; sep->lock held, and loop_lock when with_loop (the
 * handshake timers stop watchers). */
void tcp_timers_run(struct tcp_ep *sep, uint64_t now, int with_loop)
{
	if (atomic_load(&sep->nfaults))
		tcp_faults_process(sep);
	if (sep->acks_pending)
		tcp_rx_acks_all(sep);
	tcp_conn_timers(sep, now, with_loop);
	if (with_loop)
		tcp_hs_timers(sep, now);
}

/* progress() found the tick's work left to it; sep->lock held. */
void tcp_timers_in_app(struct tcp_ep *sep)
{
	int with_loop = pthread_mutex_trylock(&sep->loop_lock) == 0;

	atomic_store(&sep->tick_due, !with_loop);
	tcp_timers_run(sep, atomic_load(&sep->now_ns), with_loop);
	if (with_loop) {
		pthread_mutex_unlock(&sep->loop_lock);
		tcp_loop_cmd(sep, 0); /* watchers may have stopped */
	}
}

static void *loop_main(void *arg)
{
	struct tcp_ep *sep = arg;

	pthread_mutex_lock(&sep->loop_lock);
	ev_run(sep->loop, 0);
	pthread_mutex_unlock(&sep->loop_lock);
	return NULL;
}

static void watchers_init(struct tcp_ep *sep)
{
	ev_async_init(&sep->async_w, async_cb);
	sep->async_w.data = sep;
	ev_async_start(sep->loop, &sep->async_w);
	ev_io_init(&sep->listen_w, tcp_listen_cb, sep->listen_fd, EV_READ);
	sep->listen_w.data = sep;
	ev_io_start(sep->loop, &sep->listen_w);
	ev_io_init(&sep->rx_w, rx_cb, sep->rx_epfd, EV_READ);
	sep->rx_w.data = sep;
	ev_timer_init(&sep->tick_w, tick_cb, TCP_TICK_S, TCP_TICK_S);
	sep->tick_w.data = sep;
	ev_timer_start(sep->loop, &sep->tick_w);
	/* Until the application polls, the thread does the reading. */
	atomic_store(&sep->thread_mode, 1);
	ev_io_start(sep->loop, &sep->rx_w);
}

int tcp_loop_start(struct tcp_ep *sep)
{
	sigset_t all, old;
	int err;

	sep->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOSIGMASK);
	if (!sep->loop) {
		TCP_ERR("tcp: cannot create the event loop (libev)");
		return CCI_ENOMEM;
	}
	ev_set_userdata(sep->loop, sep);
	ev_set_loop_release_cb(sep->loop, l_release, l_acquire);
	watchers_init(sep);
	/* The thread takes no signals: they belong to the application. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&sep->thread, NULL, loop_main, sep);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		TCP_ERR("tcp: cannot start the progress thread: %s", strerror(err));
		ev_loop_destroy(sep->loop);
		sep->loop = NULL;
		return CCI_ENOMEM;
	}
	sep->thread_started = 1;
	return CCI_SUCCESS;
}

void tcp_loop_stop(struct tcp_ep *sep)
{
	if (!sep->thread_started)
		return;
	tcp_loop_cmd(sep, TCP_CMD_STOP);
	pthread_join(sep->thread, NULL);
	sep->thread_started = 0;
}
