/*
 * sm_path.c - where endpoints live in the file system, and their URIs.
 *
 *   <base>            0700, owned by us (default /tmp/cci-sm-<uid>, ini path=)
 *   <base>/<pid>      0700, one per process
 *   <base>/<pid>/<id> 0600, the endpoint's listening SOCK_SEQPACKET socket
 *
 * URI: sm://<base>/<pid>/<id>.  Directories of processes that died without
 * cleaning up are removed when an endpoint is created (plugins/common/leftover.h).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "leftover.h"
#include "sm.h"
#include "uri.h"

#define SM_ID_MAX 999999u

/* Ids bound by this process: a socket file at another id of our own
 * pid directory is a leftover of a dead process that had our pid.  The
 * flags are zero-fill pages: only those of ids in use become memory. */
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char ids_used[SM_ID_MAX + 1];

static int id_claim(unsigned id)
{
	int rc = CCI_EBUSY;

	pthread_mutex_lock(&ids_lock);
	if (!ids_used[id]) {
		ids_used[id] = 1;
		rc = CCI_SUCCESS;
	}
	pthread_mutex_unlock(&ids_lock);
	return rc;
}

static void id_drop(unsigned id)
{
	pthread_mutex_lock(&ids_lock);
	ids_used[id] = 0;
	pthread_mutex_unlock(&ids_lock);
}

/* Create dir 0700 if missing; it must be a directory of ours, private. */
static int dir_prepare(const char *dir)
{
	struct stat st;

	if (mkdir(dir, 0700) == 0) {
		if (chmod(dir, 0700) != 0) /* mkdir obeyed the umask */
			goto err_errno;
	} else if (errno != EEXIST) {
		goto err_errno;
	}
	if (lstat(dir, &st) != 0)
		goto err_errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		SM_ERR("sm: %s must be a directory owned by uid %u with no group/other access "
		       "(it is %s, uid %u, mode %03o); fix it or set path= in the config",
		       dir, (unsigned)geteuid(), S_ISDIR(st.st_mode) ? "a directory" : "not a directory",
		       (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
		return CCI_EADDRNOTAVAIL;
	}
	return CCI_SUCCESS;

err_errno:
	SM_ERR("sm: cannot create directory %s: %s", dir, strerror(errno));
	return CCI_EADDRNOTAVAIL;
}

static int all_digits(const char *s, size_t n)
{
	if (n == 0 || n > 10)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* Said once per leftover: what a dead process left, removed or not. */
static void stale_report(const struct leftover *lo, int err, void *arg)
{
	(void)arg;
	if (err == 0)
		SM_LOG(CCI_LOG_EP, "sm: removed %s, left by pid %d, which is gone", lo->path,
		       (int)lo->pid);
	else
		SM_LOG(CCI_LOG_EP, "sm: cannot remove %s, left by pid %d, which is gone: %s",
		       lo->path, (int)lo->pid, strerror(err));
}

/* Bind and listen at <dir>/<id>; CCI_EBUSY if the id is taken. */
static int bind_id(struct sm_ep *sep, const char *dir, unsigned id)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, rc;

	rc = id_claim(id);
	if (rc != CCI_SUCCESS)
		return rc;
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%u", dir, id) >= SM_SUN_PATH) {
		rc = CCI_EADDRNOTAVAIL;
		goto err_drop;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = cci__errno_status(errno);
		goto err_drop;
	}
	/* Not bound by this process (id_claim succeeded): a leftover. */
	unlink(sa.sun_path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(sa.sun_path, 0600) != 0 ||
	    listen(fd, SM_BACKLOG) != 0) {
		SM_ERR("sm: cannot listen at %s: %s", sa.sun_path, strerror(errno));
		rc = errno == EADDRINUSE ? CCI_EBUSY : CCI_EADDRNOTAVAIL;
		close(fd);
		goto err_drop;
	}
	sep->listen_fd = fd;
	sep->id = id;
	memcpy(sep->sock_path, sa.sun_path, sizeof(sa.sun_path));
	return CCI_SUCCESS;

err_drop:
	id_drop(id);
	return rc;
}

int sm_path_listen(struct sm_ep *sep, const char *service)
{
	char dir[SM_SUN_PATH];
	unsigned id;
	int rc;

	if (service && (!all_digits(service, strlen(service)) ||
	                strtoul(service, NULL, 10) > SM_ID_MAX)) {
		SM_LOG(CCI_LOG_EP, "sm: service \"%s\" is not an endpoint id (0..%u)", service,
		       SM_ID_MAX);
		return CCI_EINVAL;
	}
	rc = dir_prepare(sep->dev->base);
	if (rc != CCI_SUCCESS)
		return rc;
	/* Directories of dead processes, pid and start time checked (leftover.h). */
	leftover_sweep(LEFTOVER_SM_DIR, sep->dev->base, stale_report, NULL);
	if (snprintf(dir, sizeof(dir), "%s/%ld", sep->dev->base, (long)getpid()) >= SM_SUN_PATH - 8) {
		SM_ERR("sm: base directory %s is too long for a socket path", sep->dev->base);
		return CCI_EADDRNOTAVAIL;
	}
	rc = dir_prepare(dir);
	if (rc != CCI_SUCCESS)
		return rc;
	if (service)
		return bind_id(sep, dir, (unsigned)strtoul(service, NULL, 10));
	for (id = 0; id <= SM_ID_MAX; id++) {
		rc = bind_id(sep, dir, id);
		if (rc != CCI_EBUSY)
			return rc;
	}
	return CCI_EBUSY;
}

void sm_path_unlisten(struct sm_ep *sep)
{
	char *slash;

	if (sep->listen_fd < 0)
		return;
	close(sep->listen_fd);
	sep->listen_fd = -1;
	unlink(sep->sock_path);
	id_drop(sep->id);
	slash = strrchr(sep->sock_path, '/');
	if (slash) {
		*slash = '\0';
		rmdir(sep->sock_path); /* fails while other endpoints of ours live there */
		*slash = '/';
	}
}

/* "sm://<dir>/<pid>/<id>": the socket path, absolute, ending in two numbers. */
int sm_uri_parse(const char *uri, char *path, size_t pathlen)
{
	char scheme[8];
	const char *rest, *last, *prev;
	size_t n;

	if (uri_split_scheme(uri, scheme, sizeof(scheme), &rest) != 0 || strcmp(scheme, "sm") != 0)
		return CCI_EINVAL;
	n = strlen(rest);
	if (rest[0] != '/' || n >= pathlen || n >= (size_t)SM_SUN_PATH)
		return CCI_EINVAL;
	last = strrchr(rest, '/');
	if (!all_digits(last + 1, strlen(last + 1)) || last == rest)
		return CCI_EINVAL;
	for (prev = last - 1; prev > rest && *prev != '/'; prev--)
		;
	if (*prev != '/' || !all_digits(prev + 1, (size_t)(last - prev - 1)))
		return CCI_EINVAL;
	memcpy(path, rest, n + 1);
	return CCI_SUCCESS;
}
