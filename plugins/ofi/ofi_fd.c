/*
 * ofi_fd.c - close-on-exec for the descriptors libfabric opens.
 *
 * libfabric 1.17's tcp provider opens its epoll sets, the socket pairs
 * that wake them and its TCP sockets (listening, accepted, connected)
 * without FD_CLOEXEC, so a program a child of the application exec's
 * would inherit them.  We cannot change libfabric, so:
 *
 *  - around the calls that open an endpoint (ofi_ep.c), the descriptors
 *    without FD_CLOEXEC are listed before and after, and the new ones get
 *    it (ofi_fds_snap, ofi_fds_cloexec_new); endpoint creation is rare,
 *    a scan of /proc/self/fd is cheap there;
 *  - the TCP sockets rxm opens later, during progress, when it connects
 *    to a peer or accepts one, are marked in the child of a fork, before
 *    it can exec (ofi_live.c's fork handler calls ofi_fds_cloexec_tcp):
 *    only sockets positively identified as an endpoint's, by their local
 *    address (listening and accepted ones) or their peer's (connected
 *    ones).  Nothing here runs on a message path or per connection.
 *
 * The scan in the child allocates nothing: /proc/self/fd is read with
 * getdents64 into a buffer on the stack.
 */
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "grow.h"
#include "ofi.h"

/* Call fn for every descriptor of this process (the listing's own
 * excepted).  -1 if /proc/self/fd cannot be read. */
static int fds_each(void (*fn)(int fd, void *arg), void *arg)
{
	char buf[2048] __attribute__((aligned(8)));
	int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ssize_t n;

	if (dfd < 0)
		return -1;
	while ((n = getdents64(dfd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *d = (const struct dirent64 *)(buf + off);
			char *end;
			long fd = strtol(d->d_name, &end, 10);

			off += d->d_reclen;
			if (end != d->d_name && *end == '\0' && fd >= 0 && fd != dfd && fd <= INT32_MAX)
				fn((int)fd, arg);
		}
	}
	close(dfd);
	return n < 0 ? -1 : 0;
}

static int fd_cloexec(int fd)
{
	int flags = fcntl(fd, F_GETFD);

	return flags < 0 || (flags & FD_CLOEXEC);
}

static void fd_set_cloexec(int fd)
{
	int flags = fcntl(fd, F_GETFD);

	if (flags >= 0)
		fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

/* fds_each's callback: fd on the list if it lacks FD_CLOEXEC. */
static void snap_one(int fd, void *arg)
{
	struct ofi_fds *s = arg;

	if (fd_cloexec(fd) || s->failed)
		return;
	if (cci__grow(&s->fd, s->n, &s->cap, 32, sizeof(*s->fd)) != CCI_SUCCESS) {
		s->failed = 1;
		return;
	}
	s->fd[s->n++] = fd;
}

static int fd_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* The list is sorted, for a process with thousands of descriptors. */
int ofi_fds_snap(struct ofi_fds *s)
{
	memset(s, 0, sizeof(*s));
	if (fds_each(snap_one, s) != 0 || s->failed) {
		free(s->fd);
		memset(s, 0, sizeof(*s));
		return CCI_ERROR;
	}
	if (s->n > 1)
		qsort(s->fd, s->n, sizeof(*s->fd), fd_cmp);
	return CCI_SUCCESS;
}

static int in_snap(const struct ofi_fds *s, int fd)
{
	return s->n > 0 && bsearch(&fd, s->fd, s->n, sizeof(*s->fd), fd_cmp) != NULL;
}

/* fds_each's callback: a descriptor without FD_CLOEXEC that was not
 * there before gets it. */
static void mark_new(int fd, void *arg)
{
	if (!fd_cloexec(fd) && !in_snap(arg, fd)) {
		OFI_LOG(CCI_LOG_EP, "ofi: descriptor %d opened by libfabric made close-on-exec", fd);
		fd_set_cloexec(fd);
	}
}

void ofi_fds_cloexec_new(struct ofi_fds *before)
{
	fds_each(mark_new, before);
	free(before->fd);
	memset(before, 0, sizeof(*before));
}

/* Same family, port and address; a wildcard address in b matches any
 * (b_any).  Lengths come from the kernel or the provider. */
int ofi_sa_match(const struct sockaddr *a, socklen_t alen, const void *b, size_t blen, int b_any)
{
	const struct sockaddr *sb = b;

	if (alen < sizeof(sa_family_t) || blen < sizeof(sa_family_t) ||
	    a->sa_family != sb->sa_family)
		return 0;
	if (a->sa_family == AF_INET && alen >= sizeof(struct sockaddr_in) &&
	    blen >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *x = (const void *)a, *y = b;

		return x->sin_port == y->sin_port &&
		       (x->sin_addr.s_addr == y->sin_addr.s_addr ||
		        (b_any && y->sin_addr.s_addr == htonl(INADDR_ANY)));
	}
	if (a->sa_family == AF_INET6 && alen >= sizeof(struct sockaddr_in6) &&
	    blen >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *x = (const void *)a, *y = b;

		return x->sin6_port == y->sin6_port &&
		       (memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0 ||
		        (b_any && memcmp(&y->sin6_addr, &in6addr_any, sizeof(in6addr_any)) == 0));
	}
	return 0;
}

struct tcp_scan {
	int (*ours)(const struct sockaddr *local, socklen_t llen, const struct sockaddr *peer,
	            socklen_t plen, void *arg);
	void *arg;
};

/* fds_each's callback, in a fork child: a TCP socket without FD_CLOEXEC
 * that scan->ours recognises gets it. */
static void mark_tcp(int fd, void *arg)
{
	const struct tcp_scan *scan = arg;
	struct sockaddr_storage local, peer;
	socklen_t llen = sizeof(local), plen = sizeof(peer), tlen = sizeof(int);
	int type = 0;

	if (fd_cloexec(fd) || getsockname(fd, (struct sockaddr *)&local, &llen) != 0 ||
	    (local.ss_family != AF_INET && local.ss_family != AF_INET6) ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM)
		return;
	if (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0)
		plen = 0;
	if (scan->ours((struct sockaddr *)&local, llen, plen ? (struct sockaddr *)&peer : NULL,
	               plen, scan->arg))
		fd_set_cloexec(fd);
}

void ofi_fds_cloexec_tcp(int (*ours)(const struct sockaddr *local, socklen_t llen,
                                     const struct sockaddr *peer, socklen_t plen, void *arg),
                         void *arg)
{
	struct tcp_scan scan = { ours, arg };

	fds_each(mark_tcp, &scan);
}
