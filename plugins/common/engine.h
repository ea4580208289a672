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
 * send paths).  Before it, the tick sets the coarse clock to its time
 * (cci__engine_now, for what needs a time but not a precise one, as a
 * send's queueing time) and decides who polls.
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
 * progress = manual.  An engine made without a thread (threaded = 0) is
 * run by the application: the plugin's progress() calls
 * cci__engine_poll() before it takes any lock of its own, which runs the
 * loop without waiting (watchers, the tick, commands) at once when a
 * command or an OS handle's wake-up waits, else at most every
 * CCI__ENGINE_MANUAL_NS.  Timers (connect timeouts, keepalives, send
 * timeouts, retransmissions, deferred work) then run from the
 * application's calls, and nothing moves between them.  An application
 * that sleeps on the OS handle instead of polling still gets every event:
 * cci__engine_handle_join() puts the loop's own epoll descriptor in the
 * handle (readable while any watcher's descriptor is: a listening socket,
 * a control socket, a completion channel) and a timerfd of the engine's
 * that every command fires at once and that the plugin's arm() sets for
 * when its next timer is due (cci__engine_handle_arm).  The plugin adds
 * what it reads outside the loop (a doorbell, a socket progress() reads).
 * Such an application wakes for messages, requests, answers and hang-ups,
 * and, while something is timed (a connect, a keepalive, a send in
 * flight), once per tick or at the time the plugin asked for; an idle
 * endpoint leaves it asleep.
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

#include "clock.h"

#define CCI__ENGINE_STOP (1u << 31) /* command bits of the engine's own */
#define CCI__ENGINE_ARM (1u << 30)

struct cci__engine {
	struct ev_loop *loop;
	pthread_mutex_t lock; /* the loop and its watchers, see above */
	ev_async async_w;
	ev_timer tick_w;
	_Atomic unsigned cmd;
	_Atomic int app_polled;    /* the application called in since the last tick */
	_Atomic int app_armed;     /* ... and then went to sleep on its OS handle */
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
	/* progress = manual (threaded == 0), see above. */
	_Atomic uint32_t manual_polls;   /* progress calls, counted to read the clock seldom */
	_Atomic uint64_t manual_next_ns; /* the loop runs again from this time */
	uint32_t invoked;          /* callbacks run (no thread); e->lock */
	int handle_on;             /* handle_tfd is in the OS handle */
	int handle_tfd;
};

/* progress = manual: the loop runs from the application's progress calls
 * at most this often (unless a command waits), the clock being read
 * every CCI__ENGINE_MANUAL_CLOCK_EVERY calls to know. */
#define CCI__ENGINE_MANUAL_NS 100000ull
#define CCI__ENGINE_MANUAL_CLOCK_EVERY 16u

/* The application called in (polled or sent): the next tick is told, and
 * it no longer sleeps on its OS handle.  No store when the flags already
 * say so, so the line stays shared. */
static inline void cci__engine_app_active(struct cci__engine *e)
{
	if (!atomic_load_explicit(&e->app_polled, memory_order_relaxed))
		atomic_store_explicit(&e->app_polled, 1, memory_order_relaxed);
	if (atomic_load_explicit(&e->app_armed, memory_order_relaxed))
		atomic_store_explicit(&e->app_armed, 0, memory_order_relaxed);
}

/* Has the application called in since the last tick?  (The flag the next
 * tick hands to on_tick, read without clearing it.) */
static inline int cci__engine_app_recent(const struct cci__engine *e)
{
	return atomic_load_explicit(&e->app_polled, memory_order_relaxed);
}

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

/* progress = manual: the loop's work, from the plugin's progress() with
 * no lock of the plugin's held (callbacks take them); see above.  A no-op
 * for an engine with a thread.  Another application thread running it
 * now makes it a no-op too. */
void cci__engine_poll_manual(struct cci__engine *e);

static inline void cci__engine_poll(struct cci__engine *e)
{
	if (!e->threaded)
		cci__engine_poll_manual(e);
}

/* Is the engine run by the application (progress = manual)? */
static inline int cci__engine_manual(const struct cci__engine *e)
{
	return !e->threaded;
}

/* progress = manual with an OS handle: put the loop's descriptor and a
 * timerfd of the engine's in the handle's epoll set epfd; after init and
 * the watchers the endpoint starts with (it runs the loop once).  A
 * no-op with a thread.  CCI_SUCCESS, CCI_ERR_NOT_IMPLEMENTED (a libev
 * backend other than epoll) or the status of the failed system call. */
int cci__engine_handle_join(struct cci__engine *e, int epfd);

/* progress = manual, from the plugin's arm(): the application is about to
 * sleep on its OS handle; wake it in ns (0: for commands only).  Any
 * thread; a no-op without a joined handle. */
void cci__engine_handle_arm(struct cci__engine *e, uint64_t ns);

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

/* The application is about to sleep on its OS handle (the plugin's
 * arm()): the thread polls from now, switched by the loop before on_cmd
 * gets cmd, and until the application calls in again
 * (cci__engine_app_active).  Any thread. */
void cci__engine_app_arm(struct cci__engine *e, unsigned cmd);

/* Does the application sleep on its OS handle (armed, no call since)? */
static inline int cci__engine_app_armed(const struct cci__engine *e)
{
	return atomic_load_explicit(&e->app_armed, memory_order_relaxed);
}

/* Does the engine's thread poll now (else the application)?  Any thread;
 * 0 on a zeroed engine never initialised.  Sequentially consistent: a
 * sender stores its queue, then asks; the switch stores the mode, then
 * looks at the queues. */
static inline int cci__engine_thread_polls(const struct cci__engine *e)
{
	return atomic_load(&e->thread_polls);
}

/* In the loop, between ticks: who polls from what the application did
 * since the last tick; the thread if it made no call or sleeps on its OS
 * handle (calls on_mode when that changes).  Returns whether the thread
 * polls.  For a plugin whose loop comes round often (a precise timer, a
 * device's wait fd) and that wants the thread off the device as soon as
 * the application polls again rather than at the next tick. */
static inline int cci__engine_who_polls(struct cci__engine *e)
{
	cci__engine_mode_set(e, !cci__engine_app_recent(e) || cci__engine_app_armed(e));
	return cci__engine_thread_polls(e);
}

/* The coarse clock: the later of the last tick's time (of init before
 * any) and the kernel's coarse clock.  Never earlier than the time the
 * tick judged its timers by, so what they fail is judged alike; and at
 * most a jiffy behind the true time even when the tick runs late (a
 * loaded machine leaves the thread unscheduled), so that a send stamped
 * with it does not look older than it is and time out early. */
static inline uint64_t cci__engine_now(const struct cci__engine *e)
{
	uint64_t tick = atomic_load_explicit(&e->now_ns, memory_order_relaxed);
	uint64_t kernel = cci__now_coarse_ns();

	return kernel > tick ? kernel : tick;
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


#endif /* CCI_COMMON_ENGINE_H */
