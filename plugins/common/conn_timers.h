/*
 * conn_timers.h - the timers every connection runs, written once: the
 * connect deadline, the keepalive and the send timeout.
 *
 * A plugin embeds a struct cci__conn_timers in its connection and calls
 * these from its tick (and where it hears from the peer) under whatever
 * lock guards that connection; none of them locks or allocates.  The
 * keepalive rule (cci_set_opt CCI_OPT_CONN_KEEPALIVE_TIMEOUT): when nothing
 * has been heard from the peer for the period, one KEEPALIVE_TIMEDOUT event
 * is posted and the keepalive turns off until the option is set again; a
 * quiet peer is probed (the plugin sends its ping, whose answer counts as
 * hearing from it) once a quarter period, so a live idle peer never times
 * out.  Times are cci__now_ns() values; a "last heard" set by another
 * thread a little after the tick read the clock counts as just now.
 */
#ifndef CCI_COMMON_CONN_TIMERS_H
#define CCI_COMMON_CONN_TIMERS_H

#include <stdint.h>
#include <sys/time.h>

#include "cci_plugin.h"
#include "clock.h"

struct cci__conn_timers {
	uint64_t deadline_ns;   /* the connect attempt fails at this time, 0 = never */
	uint64_t last_heard_ns; /* the last sign of life from the peer */
	uint64_t last_ping_ns;  /* the last probe sent */
	uint32_t ka_us;         /* keepalive period armed, 0 = off */
};

/* Nanoseconds from then to now, 0 if then is later (set by another thread). */
static inline uint64_t cci__ns_since(uint64_t then, uint64_t now)
{
	return now > then ? now - then : 0;
}

/* A connect attempt starts: timeout is cci_connect's (NULL for none). */
static inline void cci__ct_connecting(struct cci__conn_timers *t,
                                      const struct timeval *timeout, uint64_t now)
{
	t->deadline_ns = timeout ? now + cci__tv_ns(timeout) : 0;
}

static inline int cci__ct_connect_expired(const struct cci__conn_timers *t, uint64_t now)
{
	return t->deadline_ns != 0 && now >= t->deadline_ns;
}

/* The connection opened, or its keepalive option changed: the period
 * counts from now. */
static inline void cci__ct_arm(struct cci__conn_timers *t, uint32_t keepalive_us, uint64_t now)
{
	t->ka_us = keepalive_us;
	t->last_heard_ns = now;
	t->last_ping_ns = 0;
}

static inline void cci__ct_heard(struct cci__conn_timers *t, uint64_t now)
{
	t->last_heard_ns = now;
}

enum cci__ka_due {
	CCI__KA_IDLE = 0, /* nothing to do */
	CCI__KA_PING,     /* the peer is quiet: probe it (last_ping_ns is set) */
	CCI__KA_EXPIRED   /* the period passed in silence (the keepalive is off now) */
};

/* The keepalive decision alone, for tests and for cci__ct_keepalive. */
enum cci__ka_due cci__ct_keepalive_due(struct cci__conn_timers *t, uint64_t now);

/*
 * The keepalive step of a tick for conn: posts KEEPALIVE_TIMEDOUT through
 * core when the period passed, and returns CCI__KA_PING when the plugin
 * must probe the peer now.
 */
enum cci__ka_due cci__ct_keepalive(struct cci__conn_timers *t, const struct cci_core *core,
                                   cci__conn_t *conn, uint64_t now);

/*
 * Has the oldest unfinished send or RMA of conn, queued at oldest_ns
 * (UINT64_MAX when there is none), waited longer than the connection's
 * send timeout (conn->send_timeout_us, 0 = none)?  The plugin then breaks
 * the connection with CCI_ETIMEDOUT, and completes each pending operation
 * with cci__ct_send_fail_status.
 */
static inline int cci__ct_send_expired(uint32_t send_timeout_us, uint64_t oldest_ns,
                                       uint64_t now)
{
	return send_timeout_us != 0 && oldest_ns != UINT64_MAX &&
	       cci__ns_since(oldest_ns, now) > (uint64_t)send_timeout_us * 1000ull;
}

/*
 * The status of a send or RMA still pending, queued at queued_ns, when its
 * connection broke at now because a send outlived the timeout
 * (cci__ct_send_expired): CCI_ETIMEDOUT if it too waited past the timeout
 * (it was not delivered in time either), else CCI_ERR_DISCONNECTED (it
 * fails only because the connection broke).  Given the timeout and the
 * now that broke the connection, the send that broke it gets
 * CCI_ETIMEDOUT; a caller that reads the connection's timeout again
 * after a cci_set_opt() changed it judges by the new one.
 */
static inline int cci__ct_send_fail_status(uint32_t send_timeout_us, uint64_t queued_ns,
                                           uint64_t now)
{
	return cci__ct_send_expired(send_timeout_us, queued_ns, now) ? CCI_ETIMEDOUT
	                                                             : CCI_ERR_DISCONNECTED;
}

#endif /* CCI_COMMON_CONN_TIMERS_H */
