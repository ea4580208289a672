/*
 * ofi_reach.c - is anybody at a peer address?  Asked before a connect
 * waits for an answer that cannot come, because the providers do not say.
 *
 * shm (libfabric 1.17): an address names a region in /dev/shm that its
 * owner created and unlinks when it closes the endpoint; a process that
 * exits without closing it, or is killed, leaves the region behind.  The
 * provider accepts any name at fi_av_insert: a missing region is mapped
 * later, at the first send, which then returns -FI_EAGAIN for ever; a
 * region whose owner is dead swallows every send.  Worse, an address
 * removed from the address vector and inserted again while its region is
 * missing crashes the process at the next send (the provider takes the
 * entry for one it already knows, and locks the region it never mapped).
 * So before an shm address is inserted we look at its region: missing,
 * not initialised, or owned by a process that is gone means nobody is
 * there.  The owner's pid is in the region's header, at the offset of
 * the 1.17 layout ({u8 version, u8 resv, u16 flags, i32 pid}, the pid
 * written last, once the region is ready); the offset is trusted only
 * after our own region was read there and held our pid.
 *
 * tcp (tcp;ofi_rxm in 1.17): a send to an address where nothing listens
 * returns -FI_EAGAIN for ever; rxm sees its connection refused but tells
 * only its log.  The address is the rxm endpoint's listening socket.  For
 * an address of this host the kernel lists its listening sockets
 * (sock_diag): nothing is sent anywhere.  For another host, a plain TCP
 * connect tells: refused, or accepted (and closed at once); the tcp
 * provider of 1.17 keeps about 400 bytes for each such connection it
 * accepted, so the connect is only tried while rxm has no connection
 * there itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>

#include "ofi.h"

#define SHM_DIR "/dev/shm/"
#define SHM_PID_OFFSET 4

static _Atomic int shm_layout; /* atomic: 1 once our own region showed its pid at SHM_PID_OFFSET */

/* /dev/shm/<name> of an shm address ("fi_shm://4242:0:0", "fi_ns://foo"):
 * the name after the scheme, as the provider strips it. */
static int shm_path(const uint8_t *addr, size_t len, char *path, size_t cap)
{
	const char *a = (const char *)addr, *name;

	if (len == 0 || memchr(a, '\0', len) == NULL)
		return CCI_EINVAL;
	name = strstr(a, "://");
	name = name ? name + 3 : a;
	if (*name == '\0' || strchr(name, '/') || strlen(name) > NAME_MAX)
		return CCI_EINVAL;
	return snprintf(path, cap, "%s%s", SHM_DIR, name) < (int)cap ? CCI_SUCCESS : CCI_EINVAL;
}

/* The pid in the header of the region at path: > 0, 0 when the region is
 * missing or not initialised, -1 when it cannot be read. */
static int shm_region_pid(const char *path)
{
	int32_t hdr[2];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	n = pread(fd, hdr, sizeof(hdr), 0);
	close(fd);
	if (n < 0)
		return -1;
	return n == (ssize_t)sizeof(hdr) && hdr[SHM_PID_OFFSET / 4] > 0 ? hdr[SHM_PID_OFFSET / 4] : 0;
}

void ofi_reach_shm_self(const uint8_t *addr, size_t len)
{
	char path[sizeof(SHM_DIR) + NAME_MAX + 1];

	if (atomic_load_explicit(&shm_layout, memory_order_relaxed) ||
	    shm_path(addr, len, path, sizeof(path)) != CCI_SUCCESS)
		return;
	if (shm_region_pid(path) == (int)getpid())
		atomic_store_explicit(&shm_layout, 1, memory_order_relaxed);
	else
		OFI_LOG(CCI_LOG_EP, "ofi: %s does not hold our pid where libfabric 1.17 puts it: "
		        "connects to shm peers that are gone wait for their timeout", path);
}

/* The process exits with this endpoint of its own open: its region's name
 * goes, as shm's signal handler would have removed it (peers that mapped
 * it keep their mapping); libfabric unlinks it only when the endpoint is
 * closed.  Only a region that holds our pid, where the layout is known. */
void ofi_reach_shm_unlink_own(const uint8_t *addr, size_t len)
{
	char path[sizeof(SHM_DIR) + NAME_MAX + 1];

	if (!atomic_load_explicit(&shm_layout, memory_order_relaxed) ||
	    shm_path(addr, len, path, sizeof(path)) != CCI_SUCCESS ||
	    shm_region_pid(path) != (int)getpid())
		return;
	if (unlink(path) != 0 && errno != ENOENT)
		OFI_LOG(CCI_LOG_EP, "ofi: cannot remove %s at exit: %s", path, strerror(errno));
}

/* Does process pid map the file at path (not an unlinked one of that
 * name)?  1 yes, 0 no, -1 cannot tell. */
static int proc_maps_file(uint32_t pid, const char *path)
{
	char maps[64], *line = NULL;
	size_t cap = 0, plen = strlen(path);
	ssize_t n;
	int found = 0;
	FILE *f;

	snprintf(maps, sizeof(maps), "/proc/%u/maps", pid);
	f = fopen(maps, "re");
	if (!f)
		return errno == ENOENT ? 0 : -1;
	while (!found && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		found = (size_t)n > plen && line[n - (ssize_t)plen - 1] == ' ' &&
		        strcmp(line + n - (ssize_t)plen, path) == 0;
	}
	free(line);
	fclose(f);
	return found;
}

int ofi_reach_shm(const uint8_t *addr, size_t len, uint32_t *pid_p)
{
	char path[sizeof(SHM_DIR) + NAME_MAX + 1];
	int pid;

	if (shm_path(addr, len, path, sizeof(path)) != CCI_SUCCESS)
		return OFI_REACH_UNKNOWN; /* the provider refuses it */
	pid = shm_region_pid(path);
	if (pid == 0)
		return OFI_REACH_NOBODY;
	if (pid < 0 || !atomic_load_explicit(&shm_layout, memory_order_relaxed))
		return OFI_REACH_UNKNOWN;
	if (pid != (int)getpid()) {
		if (kill(pid, 0) != 0 && errno == ESRCH)
			return OFI_REACH_NOBODY;
		/* A live process with that pid may be another one since the
		 * owner died: the owner maps its region. */
		if (proc_maps_file((uint32_t)pid, path) == 0)
			return OFI_REACH_NOBODY;
	}
	*pid_p = (uint32_t)pid;
	return OFI_REACH_THERE;
}

/* ---- tcp: the kernel's listeners, or a connect ---- */

/* Is sa an address of this host (one a socket can be bound to)? */
static int addr_local(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr_storage ss;
	int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0 || len > sizeof(ss)) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	memcpy(&ss, sa, len);
	((struct sockaddr_in *)&ss)->sin_port = 0; /* same offset in sockaddr_in6 */
	ok = bind(fd, (struct sockaddr *)&ss, len) == 0;
	close(fd);
	return ok;
}

/* Does listener m (family fam) take connections to sa? */
static int listener_takes(const struct inet_diag_msg *m, int fam, const struct sockaddr *sa)
{
	static const uint32_t any[4];

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		if (m->id.idiag_sport != in->sin_port)
			return 0;
		if (fam == AF_INET)
			return m->id.idiag_src[0] == 0 || m->id.idiag_src[0] == in->sin_addr.s_addr;
		return memcmp(m->id.idiag_src, any, 16) == 0; /* [::] takes IPv4 too */
	} else {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		return m->id.idiag_sport == in6->sin6_port &&
		       (memcmp(m->id.idiag_src, any, 16) == 0 ||
		        memcmp(m->id.idiag_src, &in6->sin6_addr, 16) == 0);
	}
}

/* The kernel's TCP listeners of family fam: one takes sa (1), none (0),
 * or it would not say (-1). */
static int listeners_scan(int fam, const struct sockaddr *sa)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} q = { .nlh = { .nlmsg_len = sizeof(q), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
	                 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP },
	        .req = { .sdiag_family = (uint8_t)fam, .sdiag_protocol = IPPROTO_TCP,
	                 .idiag_states = 1u << 10 /* TCP_LISTEN */ } };
	long buf[2048];
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	int found = 0, done = 0, err = fd < 0;
	ssize_t n;

	if (!err && send(fd, &q, sizeof(q), 0) != (ssize_t)sizeof(q))
		err = 1;
	while (!err && !done && !found && (n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		for (struct nlmsghdr *h = (void *)buf; !done && !err && NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				done = 1;
			else if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
				err = 1; /* NLMSG_ERROR */
			else
				found |= listener_takes(NLMSG_DATA(h), fam, sa);
		}
	}
	if (fd >= 0)
		close(fd);
	return found ? 1 : done && !err ? 0 : -1;
}

int ofi_reach_listener(const uint8_t *addr, size_t len)
{
	const struct sockaddr *sa = (const void *)addr;
	int r;

	if (len < sizeof(struct sockaddr_in) || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    (sa->sa_family == AF_INET6 && len < sizeof(struct sockaddr_in6)) ||
	    !addr_local(sa, (socklen_t)len))
		return OFI_REACH_UNKNOWN;
	r = listeners_scan(sa->sa_family, sa);
	if (r == 0 && sa->sa_family == AF_INET)
		r = listeners_scan(AF_INET6, sa);
	return r < 0 ? OFI_REACH_UNKNOWN : r ? OFI_REACH_THERE : OFI_REACH_NOBODY;
}

static int probe_status(int err)
{
	if (err == 0)
		return OFI_REACH_THERE;
	return err == ECONNREFUSED ? OFI_REACH_NOBODY : OFI_REACH_UNKNOWN;
}

/* Closed with a reset: the listener's side sees an error at once and we
 * keep no socket in TIME_WAIT. */
static void probe_close(int fd)
{
	struct linger l = { 1, 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

int ofi_reach_probe(const uint8_t *addr, size_t len, int *fd_p)
{
	const struct sockaddr *sa = (const void *)addr;
	int fd, st;

	if (len < sizeof(sa->sa_family) || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
		return OFI_REACH_UNKNOWN;
	fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return OFI_REACH_UNKNOWN;
	st = connect(fd, sa, (socklen_t)len) == 0 ? 0 : errno;
	if (st == EINPROGRESS) {
		*fd_p = fd;
		return OFI_REACH_PENDING;
	}
	st = probe_status(st);
	probe_close(fd);
	return st;
}

int ofi_reach_probe_poll(int *fd_p)
{
	struct pollfd pfd = { .fd = *fd_p, .events = POLLOUT };
	socklen_t sl = sizeof(int);
	int err = 0;

	if (poll(&pfd, 1, 0) == 0)
		return OFI_REACH_PENDING;
	if (getsockopt(*fd_p, SOL_SOCKET, SO_ERROR, &err, &sl) != 0)
		err = errno;
	probe_close(*fd_p);
	*fd_p = -1;
	return probe_status(err);
}

void ofi_reach_probe_cancel(int *fd_p)
{
	if (*fd_p >= 0)
		probe_close(*fd_p);
	*fd_p = -1;
}
