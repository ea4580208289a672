/*
 * conn_timers.c - see conn_timers.h.
 */
#include "conn_timers.h"

enum cci__ka_due cci__ct_keepalive_due(struct cci__conn_timers *t, uint64_t now)
{
	uint64_t ka = (uint64_t)t->ka_us * 1000ull, idle;

	if (ka == 0)
		return CCI__KA_IDLE;
	idle = cci__ns_since(t->last_heard_ns, now);
	if (idle >= ka) {
		t->ka_us = 0; /* once, until the application sets it again */
		return CCI__KA_EXPIRED;
	}
	if (idle >= ka / 4 && cci__ns_since(t->last_ping_ns, now) >= ka / 4) {
		t->last_ping_ns = now;
		return CCI__KA_PING;
	}
	return CCI__KA_IDLE;
}

enum cci__ka_due cci__ct_keepalive(struct cci__conn_timers *t, const struct cci_core *core,
                                   cci__conn_t *conn, uint64_t now)
{
	uint32_t period_us = t->ka_us;
	enum cci__ka_due due = cci__ct_keepalive_due(t, now);

	if (due == CCI__KA_EXPIRED) {
		CCI__LOG(core, CCI_LOG_CONN, "%s: keepalive: nothing heard on connection %p for %u us",
		         conn->ep->dev->pub.transport, (void *)conn, period_us);
		core->post_keepalive_timedout(conn);
	}
	return due;
}
