/*
 * leftover.c - see leftover.h.
 */
#include "leftover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 4608 /* a /proc/<pid>/maps or /proc/net/unix line, path included */

/* "<digits>" with a value that can be a pid; 0 otherwise.  *end is left
 * after the digits. */
static pid_t digits_pid(const char *s, const char **end)
{
	long v = 0;
	const char *p = s;

	while (*p >= '0' && *p <= '9' && p - s < 10)
		v = v * 10 + (*p++ - '0');
	*end = p;
	return (p == s || v <= 0 || v > INT_MAX) ? 0 : (pid_t)v;
}

pid_t leftover_name_pid(enum leftover_kind kind, const char *name)
{
	const char *p;
	pid_t pid = digits_pid(name, &p);

	if (!pid)
		return 0;
	if (kind == LEFTOVER_SM_DIR)
		return *p ? 0 : pid;
	if (*p != ':')
		return 0;
	while (*p == ':') { /* libfabric 1.17: <pid>:<domain>:<endpoint> */
		const char *digits = ++p;

		while (*p >= '0' && *p <= '9')
			p++;
		if (p == digits)
			return 0;
	}
	return *p ? 0 : pid;
}

static int64_t ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* The start of pid on the wall clock, and whether it is a zombie: 0, or
 * ENOENT when there is no such process, or another errno when /proc does
 * not say.  /proc gives the start in ticks since boot. */
static int proc_start(pid_t pid, int64_t *start_ns, int *zombie)
{
	char path[64], buf[1024], state;
	unsigned long long ticks;
	struct timespec real, boot;
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n == 0 ? ENOENT : errno; /* ESRCH reads as gone below */
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
	                        "%*d %*d %*d %*d %llu", &state, &ticks) != 2)
		return EIO;
	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	*zombie = state == 'Z' || state == 'X';
	*start_ns = (int64_t)(ticks * (1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK))) +
	            ts_ns(real) - ts_ns(boot);
	return 0;
}

int leftover_judge(int exists, int64_t start_ns, int64_t made_ns, int holds)
{
	if (!exists)
		return 1;
	return start_ns > made_ns + LEFTOVER_CLOCK_SLACK_NS && !holds;
}

int leftover_owner_gone(pid_t pid, int64_t made_ns, int (*holds)(pid_t, const void *),
                        const void *arg)
{
	int64_t start = 0;
	int zombie = 0, rc;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 1;
	rc = proc_start(pid, &start, &zombie);
	if (rc == ENOENT || rc == ESRCH)
		return 1; /* it ended since kill() */
	if (rc != 0)
		return 0; /* /proc hidden or unreadable: cannot tell, so it runs */
	if (zombie)
		return 1;
	if (!leftover_judge(1, start, made_ns, 0))
		return 0; /* it started first: the entry is its own, no need to read holds() */
	return leftover_judge(1, start, made_ns, holds(pid, arg));
}

/* Whether a line of the file at path ends with suffix (after a space);
 * unreadable counts as yes, the cautious answer. */
static int file_has_line_ending(const char *path, const char *suffix, int prefix_only)
{
	char line[LINE_MAX_BYTES];
	size_t len = strlen(suffix);
	int found = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return 1;
	while (!found && fgets(line, sizeof(line), f)) {
		char *sp = strrchr(line, ' ');

		line[strcspn(line, "\n")] = '\0';
		if (sp && strcmp(sp + 1, "(deleted)") == 0) { /* maps: "<path> (deleted)" */
			*sp = '\0';
			sp = strrchr(line, ' ');
		}
		if (sp)
			found = prefix_only ? strncmp(sp + 1, suffix, len) == 0
			                    : strcmp(sp + 1, suffix) == 0;
	}
	fclose(f);
	return found;
}

/* A region is held while its process maps it (libfabric maps it for the
 * endpoint's whole life). */
static int holds_region(pid_t pid, const void *path)
{
	char maps[64];

	snprintf(maps, sizeof(maps), "/proc/%d/maps", (int)pid);
	return file_has_line_ending(maps, path, 0);
}

/* A directory is held while a socket is bound in it, by any process. */
static int holds_dir(pid_t pid, const void *dir)
{
	char prefix[PATH_MAX + 1];

	(void)pid;
	snprintf(prefix, sizeof(prefix), "%s/", (const char *)dir);
	return file_has_line_ending("/proc/net/unix", prefix, 1);
}

/* Whether any process, in any pid namespace, has the region open or
 * mapped for writing (every user of a region maps it so): a write lease
 * is refused then.  1 in use, 0 not, -1 cannot tell (leases disabled). */
static int region_in_use(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fcntl(fd, F_SETLEASE, F_WRLCK);
	if (rc == 0)
		fcntl(fd, F_SETLEASE, F_UNLCK);
	else
		rc = errno == EAGAIN ? 1 : -1;
	close(fd);
	return rc;
}

/* A region also needs nobody to use it: a process of another pid
 * namespace sharing /dev/shm has pids we cannot see. */
static int owner_gone(const struct leftover *lo)
{
	if (lo->kind == LEFTOVER_SM_DIR)
		return leftover_owner_gone(lo->pid, lo->made_ns, holds_dir, lo->path);
	return leftover_owner_gone(lo->pid, lo->made_ns, holds_region, lo->path) &&
	       region_in_use(lo->path) != 1;
}

/* Sum of the sizes of dir's entries (sockets are 0 bytes; anything else
 * found there counts). */
static uint64_t dir_bytes(int dirfd_)
{
	int fd = openat(dirfd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t sum = 0;
	struct dirent *e;
	struct stat st;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			sum += (uint64_t)st.st_size;
	closedir(d);
	return sum;
}

/* Fill lo from what dirfd_/name is now; 0, or an errno (ENOENT: gone,
 * EPERM: not ours, EINVAL: not of the kind's type). */
static int entry_stat(int dirfd_, const char *name, struct leftover *lo)
{
	struct statx sx;

	if (statx(dirfd_, name, AT_SYMLINK_NOFOLLOW,
	          STATX_TYPE | STATX_UID | STATX_INO | STATX_SIZE | STATX_BTIME | STATX_CTIME,
	          &sx) != 0)
		return errno;
	if (sx.stx_uid != geteuid())
		return EPERM;
	if (lo->kind == LEFTOVER_SHM_REGION ? !S_ISREG(sx.stx_mode) : !S_ISDIR(sx.stx_mode))
		return EINVAL;
	lo->ino = sx.stx_ino;
	lo->bytes = sx.stx_size;
	if (sx.stx_mask & STATX_BTIME)
		lo->made_ns = (int64_t)sx.stx_btime.tv_sec * 1000000000ll + sx.stx_btime.tv_nsec;
	else /* the change time is later than the birth: the cautious side */
		lo->made_ns = (int64_t)sx.stx_ctime.tv_sec * 1000000000ll + sx.stx_ctime.tv_nsec;
	return 0;
}

int leftover_scan(enum leftover_kind kind, const char *dir, leftover_fn fn, void *arg)
{
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return errno;
	while ((e = readdir(d)) != NULL) {
		struct leftover lo = { .kind = kind };

		lo.pid = leftover_name_pid(kind, e->d_name);
		if (!lo.pid || entry_stat(dirfd(d), e->d_name, &lo) != 0)
			continue;
		if (snprintf(lo.path, sizeof(lo.path), "%s/%s", dir, e->d_name) >=
		    (int)sizeof(lo.path))
			continue;
		if (kind == LEFTOVER_SM_DIR) {
			int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			                O_CLOEXEC);

			lo.bytes = fd >= 0 ? dir_bytes(fd) : 0;
			if (fd >= 0)
				close(fd);
		}
		lo.owner_alive = !owner_gone(&lo);
		if (fn(&lo, arg))
			break;
	}
	closedir(d);
	return 0;
}

/* Empty and remove a dead process's sm directory: it holds socket files
 * only, so nothing deeper is descended into (a subdirectory makes the
 * rmdir fail with ENOTEMPTY, reported). */
static int dir_remove(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), err = 0;
	struct dirent *e;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		err = errno;
		if (fd >= 0)
			close(fd);
		return err;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
		    unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT && !err)
			err = errno;
	closedir(d);
	if (rmdir(path) != 0)
		return errno == ENOTEMPTY && err ? err : errno;
	return 0;
}

int leftover_remove(const struct leftover *lo)
{
	struct leftover now = { .kind = lo->kind, .pid = lo->pid };
	int rc;

	memcpy(now.path, lo->path, sizeof(now.path));
	rc = entry_stat(AT_FDCWD, lo->path, &now);
	if (rc != 0)
		return rc;
	if (now.ino != lo->ino)
		return ESTALE;
	if (!owner_gone(&now))
		return EBUSY;
	if (lo->kind == LEFTOVER_SM_DIR)
		return dir_remove(lo->path);
	return unlink(lo->path) == 0 ? 0 : errno;
}

struct sweep {
	leftover_report_fn report;
	void *arg;
	int removed;
};

static int sweep_one(const struct leftover *lo, void *arg)
{
	struct sweep *s = arg;
	int err;

	if (lo->owner_alive)
		return 0;
	err = leftover_remove(lo);
	if (err == ENOENT)
		return 0; /* another process swept it first */
	s->removed += err == 0;
	if (s->report)
		s->report(lo, err, s->arg);
	return 0;
}

int leftover_sweep(enum leftover_kind kind, const char *dir, leftover_report_fn report,
                   void *arg)
{
	struct sweep s = { .report = report, .arg = arg };

	leftover_scan(kind, dir, sweep_one, &s);
	return s.removed;
}
