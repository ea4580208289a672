/*
 * sock_conn.c - the connection state machine of the socket transports
 * (see sock_conn.h).
 */
#include "cci.h"
#include "sock_conn.h"

/* legal[from] is the set of states reachable from "from". */
static const unsigned legal[SOCK_CONN_NSTATES] = {
	[SOCK_CONN_CONNECTING] = 1u << SOCK_CONN_HELLO_SENT | 1u << SOCK_CONN_FAILED |
	                         1u << SOCK_CONN_CLOSED,
	[SOCK_CONN_HELLO_SENT] = 1u << SOCK_CONN_OPEN | 1u << SOCK_CONN_FAILED |
	                         1u << SOCK_CONN_CLOSED,
	[SOCK_CONN_OPEN] = 1u << SOCK_CONN_BROKEN | 1u << SOCK_CONN_CLOSED,
	[SOCK_CONN_FAILED] = 1u << SOCK_CONN_CLOSED,
	[SOCK_CONN_BROKEN] = 1u << SOCK_CONN_CLOSED,
	[SOCK_CONN_CLOSED] = 0,
};

int sock_conn_can_move(int from, int to)
{
	if (from < 0 || from >= SOCK_CONN_NSTATES || to < 0 || to >= SOCK_CONN_NSTATES)
		return 0;
	return (legal[from] >> to) & 1u;
}

const char *sock_conn_state_name(int state)
{
	static const char *const names[SOCK_CONN_NSTATES] = {
		"connecting", "hello-sent", "open", "failed", "broken", "closed"
	};

	return state >= 0 && state < SOCK_CONN_NSTATES ? names[state] : "?";
}
