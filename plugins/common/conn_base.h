/*
 * conn_base.h - what every transport's connection shares: its state
 * machine and its timers (conn_timers.h), and the tick that drives them.
 *
 * A plugin embeds a struct cci__conn_base first in its connection.  The
 * state moves only along the legal edges below (cci__conn_move logs any
 * other move under the ctp category, so a protocol bug shows in
 * CCI_DEBUG=ctp), and it is atomic: the data path reads it without the
 * lock that writers hold.  Once a tick, under the lock that guards the
 * connection's timers, the plugin calls cci__conn_due_tick() over its due
 * heap (conn_due.h: only the connections whose timers are due), or
 * cci__conn_tick() for one connection; either applies the connect
 * deadline, the send timeout and the keepalive through the plugin's
 * callbacks; what only the plugin knows (how to ping, which send is the
 * oldest, how to break) stays in the plugin.
 */
#ifndef CCI_COMMON_CONN_BASE_H
#define CCI_COMMON_CONN_BASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cci_plugin.h"
#include "conn_due.h"
#include "conn_timers.h"

enum cci__conn_state {
	CCI__CONN_CONNECTING = 0, /* client: the attempt runs (a plugin may have sub-steps) */
	CCI__CONN_OPEN,
	CCI__CONN_FAILED,         /* client: the attempt failed, it never opened */
	CCI__CONN_BROKEN,         /* peer gone, disconnected us or timed out: sends fail */
	CCI__CONN_CLOSED,         /* disconnected here, or the endpoint is closing */
	CCI__CONN_NSTATES
};
/* Legal moves: CONNECTING -> OPEN | FAILED | CLOSED, OPEN -> BROKEN |
 * CLOSED, FAILED and BROKEN -> CLOSED.  A zeroed base is CONNECTING, on
 * either side: a server's connection opens when it is accepted. */

struct cci__conn_base {
	_Atomic int state;              /* enum cci__conn_state */
	struct cci__conn_timers timers; /* under the plugin's timer lock */
	struct cci__due due;            /* its place in the endpoint's due heap (same lock) */
};

/* Is from -> to a legal move? */
int cci__conn_can_move(int from, int to);
const char *cci__conn_state_name(int state);

static inline int cci__conn_state(const struct cci__conn_base *b)
{
	return atomic_load_explicit(&b->state, memory_order_acquire);
}

static inline int cci__conn_is_open(const struct cci__conn_base *b)
{
	return cci__conn_state(b) == CCI__CONN_OPEN;
}

/* Move b to state to, under the plugin's lock for state changes; an
 * illegal move is made all the same and logged, naming conn (may be NULL). */
void cci__conn_move(struct cci__conn_base *b, int to, const struct cci_core *core,
                    const cci__conn_t *conn);

/* The conn_timeouts_changed entry point's work: the application set a new
 * keepalive or send timeout on conn, so b's keepalive restarts from now,
 * under lock (the plugin's lock over the connection's timers).  For a
 * plugin whose tick walks its connections (ofi, verbs). */
void cci__conn_keepalive_changed(struct cci__conn_base *b, cci__conn_t *conn,
                                 pthread_mutex_t *lock);

/* The same for a plugin whose tick runs over a due heap (h, guarded by
 * lock): the connection is filed in h for its next visit. */
void cci__conn_timeouts_changed(struct cci__conn_base *b, cci__conn_t *conn,
                                pthread_mutex_t *lock, struct cci__due_heap *h);

/* The plugin's side of a tick.  Each gets the plugin's connection (pc). */
struct cci__conn_tick_ops {
	/* When the oldest unfinished send or RMA was queued (cci__now_ns), or
	 * UINT64_MAX when nothing is waiting on the peer. */
	uint64_t (*oldest_send_ns)(void *pc);
	/* Probe the quiet peer; its answer counts as hearing from it. */
	void (*ping)(void *pc);
	/* The connect deadline passed: fail the attempt with CCI_ETIMEDOUT.
	 * It may free pc.  NULL when connect deadlines cannot be acted on in
	 * this tick. */
	void (*connect_expired)(void *pc);
	/* The oldest send outlived the send timeout: break the connection
	 * with CCI_ETIMEDOUT.  Neither this nor ping frees pc. */
	void (*send_expired)(void *pc);
	/* The core's connection of pc (for cci__conn_due_tick). */
	cci__conn_t *(*conn_of)(void *pc);
	/* The plugin's own work on an open connection after the timers' step
	 * (cci__conn_due_tick; NULL for none): returns when the connection
	 * next needs it, CCI__DUE_NEVER for not until something files it. */
	uint64_t (*visit)(void *pc, uint64_t now);
};

/*
 * One tick of one connection: a connecting one past its deadline gets
 * connect_expired; an open one gets send_expired when its oldest send is
 * too old (conn->send_timeout_us), else the keepalive step (a
 * KEEPALIVE_TIMEDOUT event, posted here, or ping).  Returns 1 when the
 * connection is open and was not broken by this tick (the plugin's own
 * periodic work may follow), 0 otherwise.
 */
int cci__conn_tick(struct cci__conn_base *b, cci__conn_t *conn, const struct cci_core *core,
                   const struct cci__conn_tick_ops *ops, void *pc, uint64_t now);

/*
 * When b's timers next need a visit (CCI__DUE_NEVER: none runs): a
 * connecting one at its deadline; an open one at its keepalive's next
 * probe or expiry and, with a send timeout, when the oldest send
 * (oldest_ns, UINT64_MAX for none) would outlive it, or one timeout from
 * now when nothing waits (a send queued meanwhile is seen before it can
 * expire, and its own time taken then).  Never later than needed; earlier
 * when the peer was heard since.
 */
uint64_t cci__conn_next_due(const struct cci__conn_base *b, const cci__conn_t *conn,
                            uint64_t oldest_ns, uint64_t now);

/* b's timers may be due sooner than filed: a connect started, the
 * connection opened, or its keepalive or send timeout was set.  Files b
 * in h for its next visit (the next tick, when a send timeout is set: its
 * oldest send is the plugin's to tell).  Under h's lock. */
void cci__conn_due_note(struct cci__due_heap *h, struct cci__conn_base *b,
                        const cci__conn_t *conn, uint64_t now);

/*
 * The tick over h, a heap of the plugin's connections (each with its
 * struct cci__conn_base first): every one due by now is visited once, as
 * cci__conn_tick does, then by ops->visit while it is still open, and
 * filed again for its next visit; a connection that left the open state
 * is not filed again (a connect that expired is not touched again:
 * connect_expired may free it).  Returns when the next visit is due.
 * Under h's lock.
 */
uint64_t cci__conn_due_tick(struct cci__due_heap *h, const struct cci_core *core,
                            const struct cci__conn_tick_ops *ops, uint64_t now);

#endif /* CCI_COMMON_CONN_BASE_H */
