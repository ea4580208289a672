/*
 * cci_wire_launch - start N ranks of a program on this host for the local
 * backend of libcci_wire, as mpirun would on a cluster.
 *
 *   cci_wire_launch -n N [-t SECS] PROGRAM [ARGS...]
 *
 * Makes a fresh directory, forks N processes with CCI_WIRE_DIR,
 * CCI_WIRE_RANK and CCI_WIRE_SIZE set, and waits for them, at most SECS
 * seconds (default 300), then kills what is left.  Unlike mpirun it does
 * not kill the job when one rank dies: the others learn it from their
 * next collective call.  Exits 0 when every rank exited 0, else 1, with
 * one line on stderr for each rank that failed.  The directory is removed.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void usage(void)
{
	fprintf(stderr, "usage: cci_wire_launch -n N [-t SECS] PROGRAM [ARGS...]\n");
	exit(2);
}

static void dir_remove(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d = opendir(dir);

	while (d && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static pid_t spawn(const char *dir, int rank, int n, char **argv)
{
	pid_t pid = fork();
	char r[16], s[16];

	if (pid != 0)
		return pid;
	snprintf(r, sizeof(r), "%d", rank);
	snprintf(s, sizeof(s), "%d", n);
	if (setenv("CCI_WIRE_DIR", dir, 1) || setenv("CCI_WIRE_RANK", r, 1) ||
	    setenv("CCI_WIRE_SIZE", s, 1))
		_exit(127);
	execvp(argv[0], argv);
	fprintf(stderr, "cci_wire_launch: rank %d: cannot run %s: %s\n", rank, argv[0],
	        strerror(errno));
	_exit(127);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wait for the ranks until the deadline, then kill the rest; failures. */
static int reap(pid_t *pids, int n, double deadline)
{
	const struct timespec nap = { .tv_nsec = 5000000L };
	int failed = 0, left = 0;

	for (int i = 0; i < n; i++)
		left += pids[i] > 0;
	while (left > 0 && now_s() < deadline) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);

		if (pid == 0) {
			nanosleep(&nap, NULL);
			continue;
		}
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			break;
		for (int i = 0; i < n; i++) {
			if (pids[i] != pid)
				continue;
			pids[i] = 0;
			left--;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
				break;
			failed++;
			if (WIFSIGNALED(st))
				fprintf(stderr, "cci_wire_launch: rank %d (pid %d) killed by signal %d\n",
				        i, (int)pid, WTERMSIG(st));
			else
				fprintf(stderr, "cci_wire_launch: rank %d (pid %d) exited %d\n", i,
				        (int)pid, WEXITSTATUS(st));
		}
	}
	for (int i = 0; i < n; i++)
		if (pids[i] > 0) {
			fprintf(stderr, "cci_wire_launch: rank %d (pid %d) still running at the "
			        "time limit: killed\n", i, (int)pids[i]);
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
			failed++;
		}
	return failed;
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/cci-wire-XXXXXX";
	int n = 0, secs = 300, c, failed = 0;
	pid_t *pids;

	while ((c = getopt(argc, argv, "+n:t:")) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 't': secs = atoi(optarg); break;
		default: usage();
		}
	}
	if (n < 1 || secs < 1 || optind >= argc)
		usage();
	if (!mkdtemp(dir)) {
		fprintf(stderr, "cci_wire_launch: mkdtemp %s: %s\n", dir, strerror(errno));
		return 1;
	}
	pids = calloc((size_t)n, sizeof(*pids));
	if (!pids) {
		rmdir(dir);
		return 1;
	}
	fflush(NULL);
	for (int i = 0; i < n; i++) {
		pids[i] = spawn(dir, i, n, argv + optind);
		if (pids[i] < 0) {
			fprintf(stderr, "cci_wire_launch: fork of rank %d: %s\n", i, strerror(errno));
			pids[i] = 0;
			failed++;
		}
	}
	failed += reap(pids, n, now_s() + secs);
	dir_remove(dir);
	free(pids);
	return failed ? 1 : 0;
}
