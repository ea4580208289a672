/*
 * shm_sweep_test.c - the test runners' sweep of /dev/shm
 * (tests/common/shm_sweep.h) removes the shm provider's regions of dead
 * processes, and nothing else.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "shm_sweep.h"
#include "unit_run.h"

/* A pid that named a process which is gone now (a reaped child). */
static pid_t dead_pid(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

static int make(const char *path)
{
	int fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static void removes_regions_of_dead_processes_only(void)
{
	char dead[64], dead3[64], live[64], other[64], near[64];
	pid_t gone = dead_pid();

	if (access("/dev/shm", W_OK) != 0) {
		printf("\n  SKIP: /dev/shm is not writable here ");
		return;
	}
	snprintf(dead, sizeof(dead), "/dev/shm/%d:0:0", (int)gone);
	snprintf(dead3, sizeof(dead3), "/dev/shm/%d:1:2:3", (int)gone);
	snprintf(live, sizeof(live), "/dev/shm/%d:0:0", (int)getpid());
	snprintf(other, sizeof(other), "/dev/shm/cci-sweep-test-%d", (int)getpid());
	snprintf(near, sizeof(near), "/dev/shm/%d:x", (int)gone);
	CU_ASSERT_FATAL(!make(dead) && !make(dead3) && !make(live) && !make(other) && !make(near));
	CU_ASSERT(test_shm_sweep() >= 2);
	CU_ASSERT_NOT_EQUAL(access(dead, F_OK), 0);
	CU_ASSERT_NOT_EQUAL(access(dead3, F_OK), 0);
	CU_ASSERT_EQUAL(access(live, F_OK), 0);  /* its process runs */
	CU_ASSERT_EQUAL(access(other, F_OK), 0); /* not a region's name */
	CU_ASSERT_EQUAL(access(near, F_OK), 0);  /* nor this */
	unlink(dead);
	unlink(dead3);
	unlink(live);
	unlink(other);
	unlink(near);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "the regions of a dead pid go; a live pid's and other names stay",
		  removes_regions_of_dead_processes_only },
	};

	return UNIT_RUN("shm_sweep", tests);
}
