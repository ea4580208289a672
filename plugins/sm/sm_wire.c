/*
 * sm_wire.c - the control messages on an endpoint's UNIX sockets: one
 * message per SOCK_SEQPACKET record, with the segments' descriptors
 * passed alongside (SCM_RIGHTS), and the peer's credentials.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sm.h"

/* The pid behind a connected UNIX socket; it must run as our user. */
int sm_peer_pid(int sock, pid_t *pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != geteuid())
		return CCI_EADDRNOTAVAIL;
	*pid = cr.pid;
	return CCI_SUCCESS;
}

int sm_ctl_send(int sock, uint16_t type, const struct sm_ctl_hello *body, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SM_HELLO_FDS)];
		struct cmsghdr align;
	} cm;
	struct sm_ctl_hello msg;
	struct iovec iov = { &msg, 0 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	iov.iov_len = sm_ctl_encode(type, body, &msg, sizeof(msg));
	if (iov.iov_len == 0)
		return CCI_EINVAL;
	if (nfds > 0) {
		struct cmsghdr *c;
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	if (sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		return cci__errno_status(errno);
	return CCI_SUCCESS;
}

int sm_hello_send(struct sm_conn *sc, int sock, uint16_t type, struct sm_ctl_hello *h)
{
	const int fds[SM_HELLO_FDS] = { sc->rx_fd, sc->sep->bell_fd, sc->sep->page_fd,
		                        sc->sep->inbox_fd };

	h->core.mss = sc->sep->mss;
	h->pid = (uint32_t)getpid();
	h->ring_size = sc->rx.size;
	return sm_ctl_send(sock, type, h, fds, SM_HELLO_FDS);
}

/* Collect the descriptors of one message into fds (max), closing the
 * others; how many came. */
static int ctl_take_fds(struct msghdr *mh, int *fds, int *nfds, int max)
{
	int seen = 0;

	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		int n, *p;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		p = (int *)CMSG_DATA(c);
		for (int i = 0; i < n; i++, seen++) {
			int fd;
			memcpy(&fd, p + i, sizeof(fd));
			if (*nfds < max)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	return seen;
}

/*
 * One control message: > 0 bytes, 0 at EOF, -1 when none is waiting, -2
 * on an error.  A message whose descriptors did not all arrive keeps none
 * of them: SM_CTL_RECV_TOOMANY when the peer sent more than any message
 * carries (the control buffer, room for a few more than a hello's, came
 * back full: the kernel installs descriptors in order until one fails or
 * the room ends), SM_CTL_RECV_NOFDS when the kernel could not install
 * them (this process is out of descriptors).
 */
int sm_ctl_recv(int sock, void *buf, size_t len, int *fds, int *nfds)
{
	enum { ROOM = (CMSG_SPACE(sizeof(int) * (SM_HELLO_FDS + 2)) - sizeof(struct cmsghdr)) /
	              sizeof(int) };
	union {
		char buf[CMSG_SPACE(sizeof(int) * (SM_HELLO_FDS + 2))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
	                     .msg_controllen = sizeof(cm.buf) };
	ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	int seen;

	*nfds = 0;
	if (n < 0)
		return (errno == EAGAIN || errno == EINTR) ? -1 : -2;
	if (mh.msg_flags & MSG_TRUNC) { /* longer than any message: an error */
		ctl_take_fds(&mh, fds, nfds, 0);
		return -2;
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		seen = ctl_take_fds(&mh, fds, nfds, 0);
		return seen >= ROOM ? SM_CTL_RECV_TOOMANY : SM_CTL_RECV_NOFDS;
	}
	seen = ctl_take_fds(&mh, fds, nfds, SM_HELLO_FDS);
	if (seen > SM_HELLO_FDS) {
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return SM_CTL_RECV_TOOMANY;
	}
	return n > INT32_MAX ? -2 : (int)n;
}
