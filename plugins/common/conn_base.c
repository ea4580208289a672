/*
 * conn_base.c - see conn_base.h.
 */
#include <stddef.h>

#include "conn_base.h"
#include "clock.h"

/* legal[from] is the set of states reachable from "from". */
static const unsigned legal[CCI__CONN_NSTATES] = {
	[CCI__CONN_CONNECTING] = 1u << CCI__CONN_OPEN | 1u << CCI__CONN_FAILED | 1u << CCI__CONN_CLOSED,
	[CCI__CONN_OPEN] = 1u << CCI__CONN_BROKEN | 1u << CCI__CONN_CLOSED,
	[CCI__CONN_FAILED] = 1u << CCI__CONN_CLOSED,
	[CCI__CONN_BROKEN] = 1u << CCI__CONN_CLOSED,
	[CCI__CONN_CLOSED] = 0,
};

int cci__conn_can_move(int from, int to)
{
	if (from < 0 || from >= CCI__CONN_NSTATES || to < 0 || to >= CCI__CONN_NSTATES)
		return 0;
	return (legal[from] >> to) & 1u;
}

const char *cci__conn_state_name(int state)
{
	static const char *const names[CCI__CONN_NSTATES] = {
		"connecting", "open", "failed", "broken", "closed"
	};

	return state >= 0 && state < CCI__CONN_NSTATES ? names[state] : "?";
}

void cci__conn_move(struct cci__conn_base *b, int to, const struct cci_core *core,
                    const cci__conn_t *conn)
{
	int from = cci__conn_state(b);

	if (!cci__conn_can_move(from, to))
		CCI__LOG(core, CCI_LOG_CTP, "connection %p: %s -> %s is not a legal move",
		         (const void *)conn, cci__conn_state_name(from), cci__conn_state_name(to));
	atomic_store_explicit(&b->state, to, memory_order_release);
}

void cci__conn_keepalive_changed(struct cci__conn_base *b, cci__conn_t *conn,
                                 pthread_mutex_t *lock)
{
	pthread_mutex_lock(lock);
	cci__ct_arm(&b->timers, conn->keepalive_us, cci__now_ns());
	pthread_mutex_unlock(lock);
}

/* What the timers of an open connection asked for this tick (conn_tick). */
enum open_step { STEP_OPEN, STEP_BROKE };

static enum open_step open_step(struct cci__conn_base *b, cci__conn_t *conn,
                                const struct cci_core *core, const struct cci__conn_tick_ops *ops,
                                void *pc, uint64_t oldest_ns, uint64_t now)
{
	if (cci__ct_send_expired(conn->send_timeout_us, oldest_ns, now)) {
		ops->send_expired(pc);
		return STEP_BROKE;
	}
	if (cci__ct_keepalive(&b->timers, core, conn, now) == CCI__KA_PING)
		ops->ping(pc);
	return cci__conn_is_open(b) ? STEP_OPEN : STEP_BROKE;
}

void cci__conn_timeouts_changed(struct cci__conn_base *b, cci__conn_t *conn,
                                pthread_mutex_t *lock, struct cci__due_heap *h)
{
	uint64_t now = cci__now_ns();

	pthread_mutex_lock(lock);
	cci__ct_arm(&b->timers, conn->keepalive_us, now);
	cci__conn_due_note(h, b, conn, now);
	pthread_mutex_unlock(lock);
}

int cci__conn_tick(struct cci__conn_base *b, cci__conn_t *conn, const struct cci_core *core,
                   const struct cci__conn_tick_ops *ops, void *pc, uint64_t now)
{
	switch (cci__conn_state(b)) {
	case CCI__CONN_CONNECTING:
		if (ops->connect_expired && cci__ct_connect_expired(&b->timers, now))
			ops->connect_expired(pc);
		return 0;
	case CCI__CONN_OPEN:
		return open_step(b, conn, core, ops, pc, ops->oldest_send_ns(pc), now) == STEP_OPEN;
	default:
		return 0;
	}
}

static uint64_t due_min(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The keepalive's next probe (cci__ct_keepalive_due: quiet for a quarter
 * period since the last probe) or its expiry. */
static uint64_t keepalive_next(const struct cci__conn_timers *t)
{
	uint64_t ka = (uint64_t)t->ka_us * 1000ull;
	uint64_t quiet_since = t->last_heard_ns > t->last_ping_ns ? t->last_heard_ns : t->last_ping_ns;

	if (ka == 0)
		return CCI__DUE_NEVER;
	return due_min(t->last_heard_ns + ka, quiet_since + ka / 4);
}

uint64_t cci__conn_next_due(const struct cci__conn_base *b, const cci__conn_t *conn,
                            uint64_t oldest_ns, uint64_t now)
{
	uint64_t next, timeout_ns = (uint64_t)conn->send_timeout_us * 1000ull;

	switch (cci__conn_state(b)) {
	case CCI__CONN_CONNECTING:
		return b->timers.deadline_ns ? b->timers.deadline_ns : CCI__DUE_NEVER;
	case CCI__CONN_OPEN:
		break;
	default:
		return CCI__DUE_NEVER;
	}
	next = keepalive_next(&b->timers);
	if (timeout_ns) /* just past the time cci__ct_send_expired says yes */
		next = due_min(next, (oldest_ns == UINT64_MAX ? now : oldest_ns) + timeout_ns + 1);
	return next;
}

void cci__conn_due_note(struct cci__due_heap *h, struct cci__conn_base *b,
                        const cci__conn_t *conn, uint64_t now)
{
	uint64_t next = conn->send_timeout_us && cci__conn_is_open(b) ?
	                now : cci__conn_next_due(b, conn, UINT64_MAX, now);

	cci__due_by(h, &b->due, next);
}

uint64_t cci__conn_due_tick(struct cci__due_heap *h, const struct cci_core *core,
                            const struct cci__conn_tick_ops *ops, uint64_t now)
{
	/* Each at most once: one filed again as due now waits for the next
	 * tick. */
	uint32_t budget = h->n;
	struct cci__due *d;

	while (budget-- > 0 && (d = cci__due_take(h, now)) != NULL) {
		struct cci__conn_base *b = (struct cci__conn_base *)((char *)d -
		                                                      offsetof(struct cci__conn_base, due));
		void *pc = b; /* the plugin's connection begins with its base */
		cci__conn_t *conn = ops->conn_of(pc);
		uint64_t oldest, next;

		switch (cci__conn_state(b)) {
		case CCI__CONN_CONNECTING:
			if (!cci__ct_connect_expired(&b->timers, now)) {
				cci__due_set(h, d, cci__conn_next_due(b, conn, UINT64_MAX, now));
			} else if (ops->connect_expired) {
				ops->connect_expired(pc); /* pc may be gone */
			} else {
				cci__due_set(h, d, b->timers.deadline_ns); /* the next tick acts */
			}
			continue;
		case CCI__CONN_OPEN:
			break;
		default:
			continue;
		}
		oldest = ops->oldest_send_ns(pc);
		if (open_step(b, conn, core, ops, pc, oldest, now) != STEP_OPEN)
			continue;
		next = cci__conn_next_due(b, conn, oldest, now);
		if (ops->visit)
			next = due_min(next, ops->visit(pc, now));
		cci__due_set(h, d, next);
	}
	return cci__due_first(h);
}
