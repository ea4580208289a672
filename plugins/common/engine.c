/*
 * engine.c - see engine.h.
 */
#include <signal.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cci.h"
#include "clock.h"
#include "engine.h"

static void l_release(struct ev_loop *loop)
{
	struct cci__engine *e = ev_userdata(loop);

	pthread_mutex_unlock(&e->lock);
}

static void l_acquire(struct ev_loop *loop)
{
	struct cci__engine *e = ev_userdata(loop);

	pthread_mutex_lock(&e->lock);
}

static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct cci__engine *e = w->data;
	unsigned cmd = atomic_exchange(&e->cmd, 0);

	(void)revents;
	if (cmd & CCI__ENGINE_STOP) {
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	if (e->on_cmd)
		e->on_cmd(e->owner, cmd);
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct cci__engine *e = w->data;

	uint64_t now = cci__now_ns();
	int app_polled = atomic_exchange(&e->app_polled, 0);

	(void)loop;
	(void)revents;
	atomic_store_explicit(&e->now_ns, now, memory_order_relaxed);
	cci__engine_mode_set(e, !app_polled);
	if (e->on_tick)
		e->on_tick(e->owner, now, app_polled);
}

void cci__engine_mode_set(struct cci__engine *e, int thread)
{
	if (!e->on_mode || (thread && !e->threaded) ||
	    atomic_load(&e->thread_polls) == thread)
		return;
	/* Published before the plugin looks at its queues (its senders do the
	 * reverse), so queued work is never left without a watcher. */
	atomic_store(&e->thread_polls, thread);
	e->on_mode(e->owner, thread);
}

int cci__engine_init(struct cci__engine *e, void *owner, double tick_s, int threaded,
                     void (*on_cmd)(void *owner, unsigned cmd),
                     void (*on_tick)(void *owner, uint64_t now, int app_polled))
{
	memset(e, 0, sizeof(*e));
	e->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOSIGMASK);
	if (!e->loop)
		return CCI_ENOMEM;
	pthread_mutex_init(&e->lock, NULL);
	e->owner = owner;
	e->threaded = threaded;
	e->on_cmd = on_cmd;
	e->on_tick = on_tick;
	atomic_store_explicit(&e->now_ns, cci__now_ns(), memory_order_relaxed);
	ev_set_userdata(e->loop, e);
	if (threaded)
		ev_set_loop_release_cb(e->loop, l_release, l_acquire);
	ev_async_init(&e->async_w, async_cb);
	e->async_w.data = e;
	ev_async_start(e->loop, &e->async_w);
	ev_timer_init(&e->tick_w, tick_cb, tick_s, tick_s);
	e->tick_w.data = e;
	ev_timer_start(e->loop, &e->tick_w);
	return CCI_SUCCESS;
}

static void *engine_main(void *arg)
{
	struct cci__engine *e = arg;

	pthread_mutex_lock(&e->lock);
	ev_run(e->loop, 0);
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int cci__engine_start(struct cci__engine *e)
{
	sigset_t all, old;
	int err;

	if (!e->threaded)
		return CCI_SUCCESS;
	/* The thread takes no signals: they belong to the application. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&e->thread, NULL, engine_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return CCI_ENOMEM;
	e->thread_started = 1;
	return CCI_SUCCESS;
}

void cci__engine_stop(struct cci__engine *e)
{
	if (!e->thread_started)
		return;
	cci__engine_cmd(e, CCI__ENGINE_STOP);
	pthread_join(e->thread, NULL);
	e->thread_started = 0;
}

void cci__engine_fini(struct cci__engine *e)
{
	if (!e->loop)
		return;
	ev_loop_destroy(e->loop);
	e->loop = NULL;
	pthread_mutex_destroy(&e->lock);
}

void cci__engine_cmd(struct cci__engine *e, unsigned cmd)
{
	if (cmd)
		atomic_fetch_or(&e->cmd, cmd);
	ev_async_send(e->loop, &e->async_w);
}

int cci__engine_run_nowait(struct cci__engine *e)
{
	if (pthread_mutex_trylock(&e->lock) != 0)
		return 0;
	ev_run(e->loop, EVRUN_NOWAIT);
	pthread_mutex_unlock(&e->lock);
	return 1;
}

void cci__engine_tick(struct cci__engine *e, int on)
{
	if (on && !ev_is_active(&e->tick_w))
		ev_timer_start(e->loop, &e->tick_w);
	else if (!on && ev_is_active(&e->tick_w))
		ev_timer_stop(e->loop, &e->tick_w);
}

static void timer_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct cci__engine_timer *t = w->data;
	uint64_t expiries;

	(void)loop;
	(void)revents;
	/* Nothing to read: the timer was set again or stopped since it
	 * expired, and that expiry no longer counts. */
	if (read(t->fd, &expiries, sizeof(expiries)) != (ssize_t)sizeof(expiries))
		return;
	t->cb(t->arg);
}

int cci__engine_timer_init(struct cci__engine *e, struct cci__engine_timer *t,
                           void (*cb)(void *arg), void *arg)
{
	t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (t->fd < 0)
		return CCI_ENOMEM;
	t->cb = cb;
	t->arg = arg;
	ev_io_init(&t->io_w, timer_cb, t->fd, EV_READ);
	t->io_w.data = t;
	ev_io_start(e->loop, &t->io_w);
	return CCI_SUCCESS;
}

static struct timespec ns_timespec(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
	                          .tv_nsec = (long)(ns % 1000000000ull) };
}

void cci__engine_timer_set(struct cci__engine_timer *t, uint64_t first_ns, uint64_t every_ns)
{
	/* An it_value of zero would disarm it: "at once" is a nanosecond. */
	struct itimerspec its = { .it_value = ns_timespec(first_ns ? first_ns : 1),
	                          .it_interval = ns_timespec(every_ns) };

	timerfd_settime(t->fd, 0, &its, NULL);
}

void cci__engine_timer_stop(struct cci__engine_timer *t)
{
	struct itimerspec its = { 0 };

	timerfd_settime(t->fd, 0, &its, NULL);
}

void cci__engine_timer_fini(struct cci__engine *e, struct cci__engine_timer *t)
{
	if (!t->cb)
		return;
	if (e->loop)
		ev_io_stop(e->loop, &t->io_w);
	close(t->fd);
	t->cb = NULL;
	t->fd = -1;
}
