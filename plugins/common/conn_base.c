/*
 * conn_base.c - see conn_base.h.
 */
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
                                 pthread_mutex_t *lock, void (*armed)(void *pc), void *pc)
{
	pthread_mutex_lock(lock);
	cci__ct_arm(&b->timers, conn->keepalive_us, cci__now_ns());
	if (armed && conn->keepalive_us)
		armed(pc);
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
		break;
	default:
		return 0;
	}
	if (cci__ct_send_expired(conn->send_timeout_us, ops->oldest_send_ns(pc), now)) {
		ops->send_expired(pc);
		return 0;
	}
	if (cci__ct_keepalive(&b->timers, core, conn, now) == CCI__KA_PING)
		ops->ping(pc);
	return cci__conn_is_open(b);
}
