/*
 * shm_sweep.c - see shm_sweep.h.
 */
#include "shm_sweep.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The pid of a name "<pid>:<digits>[:<digits>...]", or 0 for any other. */
static long region_pid(const char *name)
{
	char *end;
	long pid = strtol(name, &end, 10);

	if (end == name || *end != ':' || pid <= 0)
		return 0;
	while (*end == ':') {
		const char *digits = ++end;

		while (*end >= '0' && *end <= '9')
			end++;
		if (end == digits)
			return 0;
	}
	return *end ? 0 : pid;
}

int test_shm_sweep(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int removed = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		long pid = region_pid(e->d_name);
		char path[300];

		if (!pid || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		if (unlink(path) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
