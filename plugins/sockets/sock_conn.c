/*
 * sock_conn.c - the connection state machine and the small functions
 * shared by the socket transports (see sock_conn.h).
 */
#include <errno.h>
#include <sys/random.h>
#include <time.h>

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

uint64_t sock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sock_tv_ns(const struct timeval *tv)
{
	if (!tv)
		return 0;
	if ((uint64_t)tv->tv_sec > UINT64_MAX / 2000000000u)
		return UINT64_MAX / 2;
	return (uint64_t)tv->tv_sec * 1000000000u + (uint64_t)tv->tv_usec * 1000u;
}

int sock_random64(uint64_t *v)
{
	uint64_t r = 0;

	while (r == 0) {
		ssize_t n = getrandom(&r, sizeof(r), 0);
		if (n < 0 && errno != EINTR)
			return CCI_ERROR;
		if (n != (ssize_t)sizeof(r))
			r = 0;
	}
	*v = r;
	return CCI_SUCCESS;
}

int sock_errno_status(int err)
{
	switch (err) {
	case ECONNREFUSED:
		return CCI_ECONNREFUSED;
	case ETIMEDOUT:
		return CCI_ETIMEDOUT;
	case ENOMEM:
	case ENOBUFS:
		return CCI_ENOMEM;
	case EADDRINUSE:
		return CCI_EBUSY;
	case EADDRNOTAVAIL:
	case EAFNOSUPPORT:
		return CCI_EADDRNOTAVAIL;
	case ENETDOWN:
	case ENETUNREACH:
	case EHOSTUNREACH:
		return CCI_ENETDOWN;
	case EPIPE:
	case ECONNRESET:
	case ECONNABORTED:
	case ENOTCONN:
		return CCI_ERR_DISCONNECTED;
	case EINVAL:
		return CCI_EINVAL;
	default:
		return CCI_ERROR;
	}
}
