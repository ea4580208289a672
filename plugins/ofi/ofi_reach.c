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
 * only its log.  A plain TCP connect to the address (the rxm endpoint's
 * listening socket) tells: refused, or accepted (and closed at once).
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

#include "ofi.h"

#define SHM_DIR "/dev/shm/"
#define SHM_PID_OFFSET 4

static int shm_layout; /* atomic: 1 once our own region showed its pid at SHM_PID_OFFSET */

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

	if (__atomic_load_n(&shm_layout, __ATOMIC_RELAXED) ||
	    shm_path(addr, len, path, sizeof(path)) != CCI_SUCCESS)
		return;
	if (shm_region_pid(path) == (int)getpid())
		__atomic_store_n(&shm_layout, 1, __ATOMIC_RELAXED);
	else
		OFI_LOG(CCI_LOG_EP, "ofi: %s does not hold our pid where libfabric 1.17 puts it: "
		        "connects to shm peers that are gone wait for their timeout", path);
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
	if (pid < 0 || !__atomic_load_n(&shm_layout, __ATOMIC_RELAXED))
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

/* ---- tcp: a connect to the listener ---- */

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
