/*
 * spin - a process that only computes, the load of perf/compare --busy.
 *
 * It stands for an application busy with its own work beside its
 * communication: a tight loop in user space, no system calls, in the
 * ordinary time-sharing class at the caller's nice value, so the scheduler
 * shares a core between it and a benchmark as it would with any computing
 * process.  A real-time class inherited from the caller is dropped: a
 * real-time spinner would not share its core at all.  The cores it may
 * use are set from outside (taskset).
 *
 * It ends on SIGTERM or SIGINT (a background job of a script inherits
 * SIGINT ignored; a Ctrl-C must reach it all the same), and it is killed
 * with its parent: a spinner left behind by a script that was itself
 * killed (SIGKILL, no trap runs) would burn a core of a shared machine
 * for ever.  PARENT_PID is the pid of that script; a spinner whose parent
 * is already gone when it starts exits at once.
 *
 * usage: spin PARENT_PID
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sched_param sp = { .sched_priority = 0 };
	volatile uint64_t work = 0;
	char *end;
	long parent;
	int policy;

	if (argc != 2) {
		fprintf(stderr, "usage: spin PARENT_PID\n");
		return 2;
	}
	errno = 0;
	parent = strtol(argv[1], &end, 10);
	if (errno || *end || end == argv[1] || parent <= 1) {
		fprintf(stderr, "spin: PARENT_PID: not a process id: %s\n", argv[1]);
		return 2;
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
		fprintf(stderr, "spin: prctl(PR_SET_PDEATHSIG): %s\n", strerror(errno));
		return 1;
	}
	/* The parent may have died before the prctl: then nobody would ever
	 * kill us, and we have been reparented already. */
	if (getppid() != (pid_t)parent)
		return 0;

	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);

	policy = sched_getscheduler(0);
	if (policy == SCHED_FIFO || policy == SCHED_RR) {
		/* Lowering one's own class needs no privilege. */
		if (sched_setscheduler(0, SCHED_OTHER, &sp) != 0) {
			fprintf(stderr, "spin: sched_setscheduler(SCHED_OTHER): %s\n",
				strerror(errno));
			return 1;
		}
	}

	for (;;)
		work++;
}
