/*
 * listen_guard.h - a listening socket that accept(2) cannot serve for a
 * while.  When accept fails for want of descriptors or memory the socket
 * stays readable, so an event loop watching it would spin: the guard
 * stops watching it, tries again after a while (or at the next tick once
 * the endpoint closed a descriptor of its own), warns once per shortage
 * (at most once per interval, log_due.h) and, when an accept works again,
 * says so with the count of attempts that failed.  Meanwhile connection
 * requests wait in the kernel's listen backlog.
 *
 * Pause reasons are bits: CCI__LISTEN_NOFD is the guard's own, a plugin
 * adds its own reasons from CCI__LISTEN_OWN up (tcp: too many handshakes
 * wait).  The socket is watched exactly while no bit is set: the guard
 * calls watch(arg, 0) when the first bit comes and watch(arg, 1) when the
 * last one goes (the plugin starts or stops its watcher there, and
 * whatever else follows the socket, such as its place in an OS handle).
 *
 * Locking: every call under the lock that guards the plugin's watcher of
 * the listening socket (the engine's loop lock, engine.h); paused may be
 * read without it.  Nothing here allocates.
 */
#ifndef CCI_COMMON_LISTEN_GUARD_H
#define CCI_COMMON_LISTEN_GUARD_H

#include <stdatomic.h>
#include <stdint.h>

#include "cci_plugin.h"

#define CCI__LISTEN_NOFD 1u /* accept(2) failed for want of descriptors or memory */
#define CCI__LISTEN_OWN 2u  /* the first bit a plugin may use for its own reasons */

struct cci__listen_guard {
	_Atomic unsigned paused;    /* reasons set; the socket is watched when 0 */
	uint64_t retry_ns;          /* NOFD: accept again at this time (0: at the next tick) */
	uint64_t since_ns;          /* the shortage began (0: none now) */
	uint64_t fails;             /* accepts refused for want of descriptors since */
	int warned;                 /* this shortage was reported */
	_Atomic uint64_t warned_ns; /* the last report (cci__log_due_at) */
	/* Set by cci__listen_guard_init. */
	uint64_t retry_every_ns, warn_every_ns;
	const struct cci_core *core;
	const char *transport, *where; /* names in the log lines: "tcp", the endpoint's URI */
	void (*watch)(void *arg, int on);
	void *arg;
};

/*
 * g starts watched, with no shortage.  After a shortage began, accept is
 * tried again every retry_every_ns; the warning comes at most once per
 * warn_every_ns.  transport and where are the plugin's strings, alive as
 * long as g.
 */
void cci__listen_guard_init(struct cci__listen_guard *g, const struct cci_core *core,
                            const char *transport, const char *where,
                            uint64_t retry_every_ns, uint64_t warn_every_ns,
                            void (*watch)(void *arg, int on), void *arg);

/* Set or clear a reason (a no-op if it is already so). */
void cci__listen_pause(struct cci__listen_guard *g, unsigned why);
void cci__listen_resume(struct cci__listen_guard *g, unsigned why);

static inline unsigned cci__listen_paused(struct cci__listen_guard *g)
{
	return atomic_load_explicit(&g->paused, memory_order_relaxed);
}

/*
 * accept(2) failed with err at now.  For a shortage (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM) the socket is paused (NOFD) until the retry time, the
 * first failure of a shortage warns if the interval allows, and 1 is
 * returned: stop accepting for now.  Any other error returns 0 (EAGAIN:
 * nothing more waits; EINTR, ECONNABORTED or a network error of that one
 * connection: the next may be fine).
 */
int cci__listen_accept_failed(struct cci__listen_guard *g, int err, uint64_t now);

/* The recovery line of cci__listen_accepted. */
void cci__listen_recovered(struct cci__listen_guard *g, uint64_t now);

/* An accept worked at now: a shortage, if any, is over. */
static inline void cci__listen_accepted(struct cci__listen_guard *g, uint64_t now)
{
	if (g->since_ns)
		cci__listen_recovered(g, now);
}

/* The endpoint closed a descriptor of its own: a shortage's next try
 * comes at the next tick rather than at its retry time. */
static inline void cci__listen_fd_freed(struct cci__listen_guard *g)
{
	g->retry_ns = 0;
}

/* The tick at now: once the retry time of a shortage passed, the socket
 * is watched again (unless another reason holds it), and the loop calls
 * the plugin's accept callback if requests wait. */
void cci__listen_tick(struct cci__listen_guard *g, uint64_t now);

#endif /* CCI_COMMON_LISTEN_GUARD_H */
