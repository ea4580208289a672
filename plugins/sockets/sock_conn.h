/*
 * sock_conn.h - what the socket transports share about connections: the
 * state machine and the raw socket calls.
 *
 * Connection states and the only legal moves between them:
 *
 *   CONNECTING --(TCP connected / first datagram)--> HELLO_SENT
 *   HELLO_SENT --(ACCEPT)--> OPEN        (client)
 *   (request)  --(cci_accept)--> OPEN    (server)
 *   CONNECTING, HELLO_SENT --(REJECT, timeout, error)--> FAILED
 *   OPEN --(peer gone, garbage, send timeout)--> BROKEN
 *   any --(cci_disconnect, endpoint destroyed)--> CLOSED
 *
 * FAILED ends a connect attempt (one CONNECT event with the error);
 * BROKEN keeps the connection object for the application, failing every
 * operation with the status that broke it; CLOSED is final.
 */
#ifndef CCI_SOCK_CONN_H
#define CCI_SOCK_CONN_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

enum sock_conn_state {
	SOCK_CONN_CONNECTING = 0,
	SOCK_CONN_HELLO_SENT,
	SOCK_CONN_OPEN,
	SOCK_CONN_FAILED,
	SOCK_CONN_BROKEN,
	SOCK_CONN_CLOSED,
	SOCK_CONN_NSTATES
};

/*
 * Socket I/O of the transports.  Raw system calls rather than the libc
 * wrappers: these are not cancellation points (a thread cancelled inside
 * the library would leave its locks held), and they skip the cancellation
 * bookkeeping libc adds to every call once a process has threads, which
 * is measurable on a polled path that makes one call per message.
 */
static inline ssize_t sock_recv(int fd, void *buf, size_t len, int flags)
{
	return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static inline ssize_t sock_send(int fd, const void *buf, size_t len, int flags)
{
	return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static inline ssize_t sock_sendmsg(int fd, const struct msghdr *mh, int flags)
{
	return syscall(SYS_sendmsg, fd, mh, flags);
}

/* Is from -> to a legal move? */
int sock_conn_can_move(int from, int to);
const char *sock_conn_state_name(int state);

#endif /* CCI_SOCK_CONN_H */
