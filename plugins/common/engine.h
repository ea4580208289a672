/*
 * engine.h - the progress engine of an endpoint, shared by the plugins:
 * one libev loop per endpoint, run by a thread of its own or, when the
 * plugin has no thread (progress = manual), by the application's progress
 * calls through cci__engine_run_nowait().
 *
 * Locking.  e->lock guards the loop and every watcher on it.  The engine's
 * thread holds it while it runs callbacks and gives it up only while it
 * sleeps (ev_set_loop_release_cb), so callbacks run with it held.  Another
 * thread that starts or stops a watcher takes it first (before any lock of
 * the plugin's, which the callbacks take inside it), then wakes the loop
 * with cci__engine_cmd(e, 0) so the change takes effect.
 *
 * Commands.  cci__engine_cmd() may be called from any thread without the
 * lock: it ORs bits into e->cmd and wakes the loop, which costs a system
 * call only when no wake-up is pending; the loop hands the bits to on_cmd.
 *
 * The tick.  Every tick_s seconds (while the tick runs, cci__engine_tick)
 * on_tick gets the time and whether the application called the plugin
 * since the previous tick (cci__engine_app_active, from its progress and
 * send paths).  Before it, the tick sets the coarse clock
 * (cci__engine_now: the time of the last tick, for what needs a time but
 * not a precise one, as a send's queueing time) and decides who polls.
 *
 * Who polls.  A plugin that sets on_mode after init lets the engine decide
 * who reads its sockets or device: the application while it calls the
 * plugin, the engine's thread when a tick finds it did not (it computes,
 * or sleeps on the OS handle).  cci__engine_mode_set switches at once (an
 * on_cmd of a plugin whose application is about to sleep); on_mode(owner,
 * thread) then starts or stops the plugin's watchers.  Without a thread
 * (progress = manual) the application always polls.  A tick that finds
 * the plugin's lock taken (the application polls and holds it nearly all
 * the time) can leave its work to the next progress() with
 * cci__engine_tick_defer.
 *
 * Precise timers.  libev's epoll backend sleeps in whole milliseconds, too
 * coarse for a thread that polls a device every few microseconds.  A
 * struct cci__engine_timer runs its callback after a delay given in
 * nanoseconds, as precisely as the kernel's timers: a timerfd
 * (CLOCK_MONOTONIC, armed with timerfd_settime) read through an ev_io of
 * the loop.  The callback runs like any watcher's, in the loop with
 * e->lock held.  Init it before cci__engine_start or with e->lock held;
 * set and stop it with e->lock held (a callback of the loop holds it);
 * fini it after cci__engine_stop.  Setting it costs one system call.
 *
 * Lifetime.  The struct lives in the plugin's endpoint; init, then start,
 * then (at ep_stop) stop, which joins the thread, then (at ep_free) fini.
 */
#ifndef CCI_COMMON_ENGINE_H
#define CCI_COMMON_ENGINE_H

#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define CCI__ENGINE_STOP (1u << 31) /* a command bit of the engine's own */

struct cci__engine {
	struct ev_loop *loop;
	pthread_mutex_t lock; /* the loop and its watchers, see above */
	ev_async async_w;
	ev_timer tick_w;
	_Atomic unsigned cmd;
	_Atomic int app_polled;
	int threaded;         /* a thread of its own runs the loop */
	int thread_started;
	pthread_t thread;
	void *owner;          /* the plugin's endpoint, handed to the callbacks */
	void (*on_cmd)(void *owner, unsigned cmd);
	void (*on_tick)(void *owner, uint64_t now, int app_polled);
	/* Who polls; see above.  on_mode is set by the plugin after init
	 * (NULL: the plugin decides by itself). */
	void (*on_mode)(void *owner, int thread);
	_Atomic int thread_polls;  /* the engine's thread holds the plugin's I/O */
	_Atomic int tick_due;      /* a tick left its work to progress() */
	_Atomic uint64_t now_ns;   /* the coarse clock */
};

/*
 * Create the loop (epoll), its command watcher and its tick (running from
 * now).  threaded: cci__engine_start() will run it in a thread; otherwise
 * the lock stays held for each whole cci__engine_run_nowait().  Returns
 * CCI_SUCCESS or CCI_ENOMEM.
 */
int cci__engine_init(struct cci__engine *e, void *owner, double tick_s, int threaded,
                     void (*on_cmd)(void *owner, unsigned cmd),
                     void (*on_tick)(void *owner, uint64_t now, int app_polled));

/* Start the thread (a no-op unless threaded); it takes no signals.
 * CCI_SUCCESS or CCI_ENOMEM. */
int cci__engine_start(struct cci__engine *e);

/* Stop and join the thread (if started); the loop stays, watchers too. */
void cci__engine_stop(struct cci__engine *e);

/* Destroy the loop; every watcher must be stopped or forgotten. */
void cci__engine_fini(struct cci__engine *e);

/* Queue command bits for on_cmd (0: just wake the loop); any thread. */
void cci__engine_cmd(struct cci__engine *e, unsigned cmd);

/* Run the loop once without waiting, unless another thread runs it now
 * (then 0).  For engines without a thread. */
int cci__engine_run_nowait(struct cci__engine *e);

/* Start (on != 0) or stop the tick; e->lock held. */
void cci__engine_tick(struct cci__engine *e, int on);

/* A precise timer of an engine; see "Precise timers" above. */
struct cci__engine_timer {
	ev_io io_w;               /* the timerfd, watched from init to fini */
	int fd;
	void (*cb)(void *arg);
	void *arg;
};

/* Create the timerfd and watch it on e's loop; the timer is not set.
 * CCI_SUCCESS or CCI_ENOMEM (no timerfd to be had). */
int cci__engine_timer_init(struct cci__engine *e, struct cci__engine_timer *t,
                           void (*cb)(void *arg), void *arg);

/* Run the callback first_ns from now (0: at once), then every every_ns
 * (0: once); replaces an earlier setting.  e->lock held. */
void cci__engine_timer_set(struct cci__engine_timer *t, uint64_t first_ns, uint64_t every_ns);

/* Disarm; an expiry not yet handled is dropped.  e->lock held. */
void cci__engine_timer_stop(struct cci__engine_timer *t);

/* Stop watching and close the timerfd (a no-op on zeroed memory never
 * initialised, or twice); after cci__engine_stop, before
 * cci__engine_fini. */
void cci__engine_timer_fini(struct cci__engine *e, struct cci__engine_timer *t);

/* Who polls from now: the thread (thread != 0; ignored without one) or
 * the application.  In the loop (a callback, or e->lock held); calls
 * on_mode when it changes. */
void cci__engine_mode_set(struct cci__engine *e, int thread);

/* Let the engine decide who polls, starting with the thread (thread != 0,
 * with one) or the application; after init, before start.  on_mode is not
 * called for this first mode: the plugin starts its watchers for it. */
static inline void cci__engine_mode_init(struct cci__engine *e,
                                         void (*on_mode)(void *owner, int thread), int thread)
{
	e->on_mode = on_mode;
	atomic_store(&e->thread_polls, thread && e->threaded);
}

/* Does the engine's thread poll now (else the application)?  Any thread;
 * 0 on a zeroed engine never initialised.  Sequentially consistent: a
 * sender stores its queue, then asks; the switch stores the mode, then
 * looks at the queues. */
static inline int cci__engine_thread_polls(const struct cci__engine *e)
{
	return atomic_load(&e->thread_polls);
}

/* The coarse clock: the time of the last tick (of init before any). */
static inline uint64_t cci__engine_now(const struct cci__engine *e)
{
	return atomic_load_explicit(&e->now_ns, memory_order_relaxed);
}

/* A plugin whose loop reads the clock anyway between ticks sets the
 * coarse clock to it (any thread). */
static inline void cci__engine_now_set(struct cci__engine *e, uint64_t now)
{
	atomic_store_explicit(&e->now_ns, now, memory_order_relaxed);
}

/* The tick could not take the plugin's lock: its work waits for the
 * application's next progress(), which asks cci__engine_tick_due() and,
 * having done it, cci__engine_tick_done(). */
static inline void cci__engine_tick_defer(struct cci__engine *e)
{
	atomic_store_explicit(&e->tick_due, 1, memory_order_relaxed);
}

static inline int cci__engine_tick_due(const struct cci__engine *e)
{
	return atomic_load_explicit(&e->tick_due, memory_order_relaxed);
}

static inline void cci__engine_tick_done(struct cci__engine *e)
{
	atomic_store_explicit(&e->tick_due, 0, memory_order_relaxed);
}

/* Is a command or wake-up waiting for the loop? */
static inline int cci__engine_cmd_pending(struct cci__engine *e)
{
	return ev_async_pending(&e->async_w);
}

/* The application called in (polled or sent): the next tick is told.  No
 * store when the flag is already up, so the line stays shared. */
static inline void cci__engine_app_active(struct cci__engine *e)
{
	if (!atomic_load_explicit(&e->app_polled, memory_order_relaxed))
		atomic_store_explicit(&e->app_polled, 1, memory_order_relaxed);
}

/* Has the application called in since the last tick?  (The flag the next
 * tick hands to on_tick, read without clearing it.) */
static inline int cci__engine_app_recent(struct cci__engine *e)
{
	return atomic_load_explicit(&e->app_polled, memory_order_relaxed);
}

#endif /* CCI_COMMON_ENGINE_H */
