/*
 * engine.c - see engine.h.
 */
#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cci.h"
#include "clock.h"
#include "engine.h"
#include "status.h"

static void tfd_set(int fd, uint64_t ns);
static void invoke_counted(struct ev_loop *loop);

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
	if (cmd & CCI__ENGINE_ARM) {
		cci__engine_mode_set(e, 1);
		cmd &= ~CCI__ENGINE_ARM;
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
	/* An application asleep on its OS handle does not poll, whatever it
	 * did before it armed. */
	cci__engine_mode_set(e, !app_polled || cci__engine_app_armed(e));
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
	else
		ev_set_invoke_pending_cb(e->loop, invoke_counted);
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
	if (e->handle_on) {
		close(e->handle_tfd);
		e->handle_on = 0;
	}
	if (!e->loop)
		return;
	ev_loop_destroy(e->loop);
	e->loop = NULL;
	pthread_mutex_destroy(&e->lock);
}

static struct timespec ns_timespec(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
	                          .tv_nsec = (long)(ns % 1000000000ull) };
}

/* Set the timerfd fd to expire once in ns (0 disarms it). */
static void tfd_set(int fd, uint64_t ns)
{
	struct itimerspec its = { .it_value = ns_timespec(ns) };

	timerfd_settime(fd, 0, &its, NULL);
}

void cci__engine_cmd(struct cci__engine *e, unsigned cmd)
{
	if (cmd)
		atomic_fetch_or(&e->cmd, cmd);
	ev_async_send(e->loop, &e->async_w);
	/* An application asleep on its OS handle comes to run the loop. */
	if (e->handle_on)
		tfd_set(e->handle_tfd, 1);
}

void cci__engine_app_arm(struct cci__engine *e, unsigned cmd)
{
	atomic_store_explicit(&e->app_armed, 1, memory_order_relaxed);
	cci__engine_cmd(e, cmd | (e->threaded ? CCI__ENGINE_ARM : 0));
}

void cci__engine_poll_manual(struct cci__engine *e)
{
	/* With an OS handle, a wake-up may have come from the loop's
	 * descriptors or the handle's timerfd: always look. */
	if (!cci__engine_cmd_pending(e) && !e->handle_on) {
		/* A count, not a lock: calls of several threads may merge. */
		uint32_t n = atomic_load_explicit(&e->manual_polls, memory_order_relaxed) + 1;

		atomic_store_explicit(&e->manual_polls, n, memory_order_relaxed);
		if (n % CCI__ENGINE_MANUAL_CLOCK_EVERY != 0 ||
		    cci__now_ns() < atomic_load_explicit(&e->manual_next_ns, memory_order_relaxed))
			return;
	}
	if (cci__engine_run_nowait(e))
		atomic_store_explicit(&e->manual_next_ns, cci__now_ns() + CCI__ENGINE_MANUAL_NS,
		                      memory_order_relaxed);
}

/*
 * The loop's own epoll descriptor, readable while one of its watchers'
 * descriptors is.  libev hands it out only to an embed watcher (its io
 * member is set to it by ev_embed_start), so a throw-away loop embeds this
 * one for a moment.  -1 when the backend cannot be embedded.
 */
static int loop_backend_fd(struct ev_loop *loop)
{
	struct ev_loop *outer;
	ev_embed w;
	int fd;

	if (!(ev_backend(loop) & ev_embeddable_backends()))
		return -1;
	outer = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV | EVFLAG_NOSIGMASK);
	if (!outer)
		return -1;
	ev_embed_init(&w, NULL, loop);
	ev_embed_start(outer, &w);
	fd = w.io.fd;
	ev_embed_stop(outer, &w);
	ev_loop_destroy(outer);
	return fd;
}

int cci__engine_handle_join(struct cci__engine *e, int epfd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int loop_fd, fd, err;

	if (e->threaded || e->handle_on)
		return CCI_SUCCESS;
	loop_fd = loop_backend_fd(e->loop);
	if (loop_fd < 0)
		return CCI_ERR_NOT_IMPLEMENTED;
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0)
		return cci__errno_status(errno);
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, loop_fd, &ev) != 0) {
		err = errno;
		close(fd);
		return cci__errno_status(err);
	}
	e->handle_tfd = fd;
	e->handle_on = 1;
	/* The watchers started so far reach the loop's descriptor. */
	cci__engine_run_nowait(e);
	return CCI_SUCCESS;
}

void cci__engine_handle_arm(struct cci__engine *e, uint64_t ns)
{
	/* A command since the loop last ran (pending) wakes it at once. */
	if (e->handle_on)
		tfd_set(e->handle_tfd, cci__engine_cmd_pending(e) ? 1 : ns);
}

/* The loop's callbacks are counted (e->invoked) on an engine without a
 * thread: see run_rounds. */
static void invoke_counted(struct ev_loop *loop)
{
	struct cci__engine *e = ev_userdata(loop);

	e->invoked += ev_pending_count(loop);
	ev_invoke_pending(loop);
}

/*
 * Run the loop without waiting; e->lock held.  libev hands the kernel the
 * descriptors of watchers started by callbacks only at the start of its
 * next run, so with an OS handle (whose application sleeps on the loop's
 * descriptor) it runs again until a run calls nobody: a few rounds at
 * most, and the handle's timer brings the application back for the rest.
 */
#define RUN_ROUNDS 4

static void run_rounds(struct cci__engine *e)
{
	for (int round = 0;; round++) {
		uint32_t before = e->invoked;

		ev_run(e->loop, EVRUN_NOWAIT);
		if (!e->handle_on || e->invoked == before)
			return;
		if (round == RUN_ROUNDS - 1) {
			tfd_set(e->handle_tfd, 1);
			return;
		}
	}
}

int cci__engine_run_nowait(struct cci__engine *e)
{
	if (pthread_mutex_trylock(&e->lock) != 0)
		return 0;
	run_rounds(e);
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
