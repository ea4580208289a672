/*
 * proc_probe.c - see proc_probe.h.
 */
#include "proc_probe.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the state follows the command's name */
	return p && p[1] == ' ' ? p[2] : 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int proc_wait_stopped(pid_t pid, unsigned ms)
{
	struct timespec tick = { 0, 1000000 };

	for (uint64_t stop = now_ms() + ms;; nanosleep(&tick, NULL)) {
		char st = proc_state(pid);

		if (st == 'T' || st == 't')
			return 0;
		if (now_ms() >= stop)
			return -1;
	}
}

int proc_fds_after_exec(int *out, int max)
{
	char buf[8192], *p, *end;
	int pfd[2], n = 0, status = 0;
	size_t got = 0;
	ssize_t r;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) != 0)
		return -1;
	if ((pid = fork()) < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(pfd[1], 1); /* fd 1 stays what it was to the caller: inherited anyway */
		execl("/bin/sh", "sh", "-c", "ls /proc/$$/fd", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (got < sizeof(buf) - 1 && (r = read(pfd[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)r;
	buf[got] = '\0';
	close(pfd[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	for (p = buf; n < max && *p; p = end) {
		long fd = strtol(p, &end, 10);

		if (end == p)
			break;
		out[n++] = (int)fd;
	}
	return n;
}
