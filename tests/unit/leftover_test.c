/*
 * leftover_test.c - plugins/common/leftover.h: which names are leftovers,
 * when their owner counts as gone (pid and start time), and that a sweep
 * removes exactly the leftovers of dead processes: never one of a live
 * process, of another uid or of another name.
 *
 * Regions are made in a private directory under /dev/shm (named for pids
 * of this test's own children) and sm directories under a private
 * temporary base.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "leftover.h"
#include "unit_run.h"

#define SEC 1000000000ll

/* Regions are made in a directory of this test's own under /dev/shm, where
 * the sweeps of other processes of the library (other tests running at
 * the same time) do not look: a tmpfs like /dev/shm itself. */
static char shm_dir[] = "/dev/shm/cci-leftover-test-XXXXXX";

/* A pid that named a process which is gone now (a reaped child). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

/* A child that waits until its pipe closes; if map is given it maps that
 * file first and says so by closing its end of ready. */
static pid_t live_child(int *hold_fd, const char *map)
{
	int hold[2], ready[2];
	char c;
	pid_t pid;

	if (pipe(hold) != 0 || pipe(ready) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(hold[1]);
		close(ready[0]);
		if (map) {
			int fd = open(map, O_RDWR);
			if (fd < 0 || mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED)
				_exit(1);
		}
		close(ready[1]);
		(void)!read(hold[0], &c, 1);
		_exit(0);
	}
	close(hold[0]);
	close(ready[1]);
	(void)!read(ready[0], &c, 1); /* EOF once it mapped the file */
	close(ready[0]);
	*hold_fd = hold[1];
	return pid;
}

/* Killed rather than let go: a later child holds a copy of hold_fd. */
static void child_end(pid_t pid, int hold_fd)
{
	close(hold_fd);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static int make_file(const char *path, off_t size)
{
	int fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	int rc;

	if (fd < 0)
		return -1;
	rc = ftruncate(fd, size);
	close(fd);
	return rc;
}

static void names_of_each_kind(void)
{
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SHM_REGION, "4242:0:0"), 4242);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SHM_REGION, "4242:1:2:3"), 4242);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SHM_REGION, "4242:x"), 0);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SHM_REGION, "4242:"), 0);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SHM_REGION, "4242"), 0);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SHM_REGION, "0:0:0"), 0);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SHM_REGION, "99999999999:0:0"), 0);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SHM_REGION, "sem.4242:0:0"), 0);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SM_DIR, "4242"), 4242);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SM_DIR, "4242:0:0"), 0);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SM_DIR, "4242x"), 0);
	CU_ASSERT_EQUAL(leftover_name_pid(LEFTOVER_SM_DIR, ""), 0);
}

static void owner_gone_by_pid_and_start_time(void)
{
	int64_t made = 1000 * SEC;

	CU_ASSERT_TRUE(leftover_judge(0, 0, made, 0));            /* no such pid */
	CU_ASSERT_FALSE(leftover_judge(1, made - SEC, made, 0));  /* started first: its own */
	CU_ASSERT_FALSE(leftover_judge(1, made + SEC / 2, made, 0)); /* within the clocks' error */
	CU_ASSERT_TRUE(leftover_judge(1, made + 2 * SEC, made, 0)); /* a later process, same pid */
	CU_ASSERT_FALSE(leftover_judge(1, made + 2 * SEC, made, 1)); /* ... that holds it */
}

struct found {
	const char *path;
	int seen, alive;
	uint64_t bytes;
};

static int find_one(const struct leftover *lo, void *arg)
{
	struct found *f = arg;

	if (strcmp(lo->path, f->path) != 0)
		return 0;
	f->seen = 1;
	f->alive = lo->owner_alive;
	f->bytes = lo->bytes;
	return 1;
}

static struct found scan_for(enum leftover_kind kind, const char *dir, const char *path)
{
	struct found f = { .path = path };

	leftover_scan(kind, dir, find_one, &f);
	return f;
}

/* Dead (reaped and zombie) owners' regions go; live ones', other names
 * and other uids' stay. */
static void sweep_regions(void)
{
	char dead[64], zombie[64], live[64], other[64], near[64], foreign[64], open_[64];
	pid_t gone = dead_pid(), zpid = fork();
	struct found f;
	int open_fd;

	if (zpid == 0)
		_exit(0);
	CU_ASSERT_FATAL(zpid > 0);
	waitid(P_PID, (id_t)zpid, &(siginfo_t){ 0 }, WEXITED | WNOWAIT); /* a zombie now */
	snprintf(dead, sizeof(dead), "%s/%d:0:0", shm_dir, (int)gone);
	snprintf(zombie, sizeof(zombie), "%s/%d:0:1", shm_dir, (int)zpid);
	snprintf(live, sizeof(live), "%s/%d:0:0", shm_dir, (int)getpid());
	snprintf(other, sizeof(other), "%s/cci-leftover-test-%d", shm_dir, (int)getpid());
	snprintf(near, sizeof(near), "%s/%d:x", shm_dir, (int)gone);
	snprintf(foreign, sizeof(foreign), "%s/%d:1:1", shm_dir, (int)gone);
	CU_ASSERT_FATAL(!make_file(dead, 8192) && !make_file(zombie, 0) && !make_file(live, 0) &&
	                !make_file(other, 0) && !make_file(near, 0) && !make_file(foreign, 0));
	if (geteuid() == 0)
		CU_ASSERT_EQUAL(chown(foreign, 4242, 4242), 0);
	/* Named for a dead pid but open for writing, as by a process of another
	 * pid namespace whose pids we do not see. */
	snprintf(open_, sizeof(open_), "%s/%d:2:2", shm_dir, (int)gone);
	CU_ASSERT_FATAL(make_file(open_, 0) == 0);
	open_fd = open(open_, O_RDWR | O_CLOEXEC);
	CU_ASSERT_FATAL(open_fd >= 0);
	f = scan_for(LEFTOVER_SHM_REGION, shm_dir, dead);
	CU_ASSERT(f.seen && !f.alive && f.bytes == 8192);
	f = scan_for(LEFTOVER_SHM_REGION, shm_dir, live);
	CU_ASSERT(f.seen && f.alive);
	CU_ASSERT(leftover_sweep(LEFTOVER_SHM_REGION, shm_dir, NULL, NULL) >= 2);
	CU_ASSERT_NOT_EQUAL(access(dead, F_OK), 0);
	CU_ASSERT_NOT_EQUAL(access(zombie, F_OK), 0); /* a zombie holds nothing */
	CU_ASSERT_EQUAL(access(live, F_OK), 0);       /* its process runs */
	CU_ASSERT_EQUAL(access(other, F_OK), 0);      /* not a region's name */
	CU_ASSERT_EQUAL(access(near, F_OK), 0);       /* nor this */
	if (geteuid() == 0)
		CU_ASSERT_EQUAL(access(foreign, F_OK), 0); /* another uid's */
	CU_ASSERT_EQUAL(access(open_, F_OK), 0);      /* in use */
	close(open_fd);
	leftover_sweep(LEFTOVER_SHM_REGION, shm_dir, NULL, NULL);
	CU_ASSERT_NOT_EQUAL(access(open_, F_OK), 0);  /* no longer */
	waitpid(zpid, NULL, 0);
	unlink(dead);
	unlink(zombie);
	unlink(live);
	unlink(other);
	unlink(near);
	unlink(foreign);
	unlink(open_);
}

#define DIR_KEEP_BOUND 1 /* the socket stays open, listening (else closed: its file stays) */
#define DIR_EXISTS 2     /* the directory is there already */

/* <base>/<pid> with a socket file bound in it: the listening socket when
 * DIR_KEEP_BOUND, else 0; -1 on failure. */
static int make_sm_dir(const char *base, pid_t pid, int flags, char *dir, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	snprintf(dir, len, "%s/%d", base, (int)pid);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/0", dir);
	if (!(flags & DIR_EXISTS) && mkdir(dir, 0700) != 0)
		return -1;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1) != 0)
		return -1;
	if (flags & DIR_KEEP_BOUND)
		return fd;
	close(fd);
	return 0;
}

struct failed {
	int count, err;
	char path[PATH_MAX];
};

static void note_failure(const struct leftover *lo, int err, void *arg)
{
	struct failed *f = arg;

	if (err) {
		f->count++;
		f->err = err;
		snprintf(f->path, sizeof(f->path), "%s", lo->path);
	}
}

/* sm directories: a dead pid's goes with its socket files; a live pid's
 * stays; one that cannot be emptied is reported with its errno. */
static void sweep_sm_dirs(void)
{
	char base[] = "/tmp/cci-leftover-test-XXXXXX", dead[PATH_MAX], mine[PATH_MAX],
	     stuck[PATH_MAX], sub[PATH_MAX + 8];
	struct failed fail = { 0 };
	pid_t gone = dead_pid(), gone2 = dead_pid();
	int listen_fd;

	CU_ASSERT_FATAL(mkdtemp(base) != NULL);
	CU_ASSERT_FATAL(make_sm_dir(base, gone, 0, dead, sizeof(dead)) == 0);
	listen_fd = make_sm_dir(base, getpid(), DIR_KEEP_BOUND, mine, sizeof(mine));
	CU_ASSERT_FATAL(listen_fd > 0);
	CU_ASSERT_FATAL(make_sm_dir(base, gone2, 0, stuck, sizeof(stuck)) == 0);
	snprintf(sub, sizeof(sub), "%s/sub", stuck);
	CU_ASSERT_FATAL(mkdir(sub, 0700) == 0);
	CU_ASSERT_EQUAL(leftover_sweep(LEFTOVER_SM_DIR, base, note_failure, &fail), 1);
	CU_ASSERT_NOT_EQUAL(access(dead, F_OK), 0);
	CU_ASSERT_EQUAL(access(mine, F_OK), 0);
	CU_ASSERT_EQUAL(fail.count, 1);
	CU_ASSERT_STRING_EQUAL(fail.path, stuck);
	CU_ASSERT(fail.err == EISDIR || fail.err == EPERM || fail.err == ENOTEMPTY);
	close(listen_fd);
	snprintf(sub, sizeof(sub), "%s/0", mine);
	unlink(sub);
	rmdir(mine);
	snprintf(sub, sizeof(sub), "%s/sub", stuck);
	rmdir(sub);
	snprintf(sub, sizeof(sub), "%s/0", stuck);
	unlink(sub);
	rmdir(stuck);
	rmdir(base);
}

/*
 * Entries older than the process that has their pid now, made first and
 * renamed to that pid's names once it runs (a rename keeps the birth
 * time): a region goes unless that process maps it; an sm directory goes
 * unless a socket is bound in it (bound after the rename: /proc/net/unix
 * shows the path a socket was bound at).  One wait of the clock slack
 * for all of them.
 */
static void sweep_entries_of_reused_pids(void)
{
	char base[] = "/tmp/cci-leftover-test-XXXXXX", reused[64], held[64], dir[PATH_MAX],
	     bound[PATH_MAX], tmp[3][PATH_MAX], sock[PATH_MAX + 8];
	pid_t a, b;
	int ha, hb, listen_fd;

	CU_ASSERT_FATAL(mkdtemp(base) != NULL);
	snprintf(tmp[0], PATH_MAX, "%s/cci-leftover-test-a-%d", shm_dir, (int)getpid());
	snprintf(tmp[1], PATH_MAX, "%s/cci-leftover-test-b-%d", shm_dir, (int)getpid());
	snprintf(tmp[2], PATH_MAX, "%s/older", base);
	CU_ASSERT_FATAL(make_file(tmp[0], 4096) == 0 && make_file(tmp[1], 4096) == 0 &&
	                mkdir(tmp[2], 0700) == 0);
	usleep((useconds_t)(LEFTOVER_CLOCK_SLACK_NS / 1000 + 200000));
	a = live_child(&ha, NULL);
	b = live_child(&hb, tmp[1]); /* maps the second region */
	CU_ASSERT_FATAL(a > 0 && b > 0);
	snprintf(reused, sizeof(reused), "%s/%d:0:0", shm_dir, (int)a);
	snprintf(held, sizeof(held), "%s/%d:0:0", shm_dir, (int)b);
	snprintf(dir, sizeof(dir), "%s/%d", base, (int)a);
	CU_ASSERT_FATAL(rename(tmp[0], reused) == 0 && rename(tmp[1], held) == 0 &&
	                rename(tmp[2], dir) == 0);
	listen_fd = make_sm_dir(base, a, DIR_KEEP_BOUND | DIR_EXISTS, bound, sizeof(bound));
	CU_ASSERT_FATAL(listen_fd > 0);
	leftover_sweep(LEFTOVER_SHM_REGION, shm_dir, NULL, NULL);
	leftover_sweep(LEFTOVER_SM_DIR, base, NULL, NULL);
	CU_ASSERT_NOT_EQUAL(access(reused, F_OK), 0);
	CU_ASSERT_EQUAL(access(held, F_OK), 0);
	CU_ASSERT_EQUAL(access(dir, F_OK), 0); /* a socket is bound in it */
	close(listen_fd);
	leftover_sweep(LEFTOVER_SM_DIR, base, NULL, NULL);
	CU_ASSERT_NOT_EQUAL(access(dir, F_OK), 0); /* no longer */
	child_end(a, ha);
	child_end(b, hb);
	unlink(reused);
	unlink(held);
	snprintf(sock, sizeof(sock), "%s/0", dir);
	unlink(sock);
	rmdir(dir);
	rmdir(base);
}

/* leftover_remove checks again: a live owner's entry is EBUSY, an entry
 * replaced since the scan is ESTALE. */
static void remove_checks_again(void)
{
	char path[64];
	struct found f;
	struct leftover lo = { .kind = LEFTOVER_SHM_REGION };

	snprintf(path, sizeof(path), "%s/%d:7:7", shm_dir, (int)getpid());
	CU_ASSERT_FATAL(make_file(path, 0) == 0);
	f = scan_for(LEFTOVER_SHM_REGION, shm_dir, path);
	CU_ASSERT(f.seen && f.alive);
	snprintf(lo.path, sizeof(lo.path), "%s", path);
	lo.pid = getpid();
	lo.ino = 1; /* not its inode */
	CU_ASSERT_EQUAL(leftover_remove(&lo), ESTALE);
	{
		struct stat st;
		CU_ASSERT_FATAL(stat(path, &st) == 0);
		lo.ino = st.st_ino;
	}
	CU_ASSERT_EQUAL(leftover_remove(&lo), EBUSY);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	unlink(path);
	CU_ASSERT_EQUAL(leftover_remove(&lo), ENOENT);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "names: <pid>:<n>:<m> regions and <pid> directories only", names_of_each_kind },
		{ "an owner is gone without its pid, or when a later process has it and does not "
		  "hold the entry", owner_gone_by_pid_and_start_time },
		{ "a sweep removes dead and zombie owners' regions, never a live one's, one in "
		  "use, another name or another uid's", sweep_regions },
		{ "an entry older than its pid's process goes, unless that process holds it",
		  sweep_entries_of_reused_pids },
		{ "sm directories: a dead pid's goes, a live one's stays, a failure is "
		  "reported", sweep_sm_dirs },
		{ "removal checks the owner and the inode again", remove_checks_again },
	};

	int rc;

	if (!mkdtemp(shm_dir)) {
		printf("SKIP: cannot make %s: /dev/shm is not writable here\n", shm_dir);
		return 77;
	}
	rc = UNIT_RUN("leftover", tests);
	rmdir(shm_dir);
	return rc;
}
