/*
 * t_exit.c - a program that exits with an endpoint open (it returns from
 * main, or calls exit(), without cci_finalize) and gets a signal while
 * exit() runs libfabric's destructor.  That destructor frees the array
 * from which the shm provider's signal handlers read the dispositions
 * they replaced, and leaves the handlers installed: a signal then ran
 * sigaction() and a "handler" from freed memory (a SIGSEGV once it was
 * reused).  So by then the module has put the application's dispositions
 * back, and removed the name of the process's shm region, which nothing
 * else would remove (plugins/ofi/ofi_live.c, ofi_signal.c).
 *
 * The child is this program exec'd with EXIT_AUDIT_CHILD_ARG under an
 * audit module of the dynamic loader (exit_audit.c), which runs right
 * after libfabric's destructor and raises SIGTERM there.
 */
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exit_audit.h"
#include "ofi_test.h"

#define EXIT_CHILD_BOUND_MS 60000u /* the child's cci_init loads libfabric (0.3 s) */

/* No CUnit here: the child runs no test. */
int ot_exit_child(void)
{
	cci_device_t *const *devs;
	cci_endpoint_t *ep = NULL;
	int rc;

	rc = ot_cci_init();
	if (rc == 0)
		rc = cci_get_devices(&devs);
	if (rc == 0)
		rc = devs[0] ? cci_create_endpoint(devs[0], 0, &ep, NULL) : CCI_ENODEV;
	if (rc != 0) {
		fprintf(stderr, "exit child: no endpoint: %s\n", cci_strerror(NULL, rc));
		return 2;
	}
	exit(0); /* with the endpoint open, on purpose */
}

/* The child's status, or -1 when it had to be killed at the bound. */
static int child_wait(pid_t pid)
{
	uint64_t stop = ot_now_ms() + EXIT_CHILD_BOUND_MS;
	int st;

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (ot_now_ms() > stop) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		ot_sleep_ms(5);
	}
	return st;
}

/* How many entries /dev/shm has for process pid (shm's "<pid>:<n>:<m>"). */
static size_t shm_regions_of(pid_t pid)
{
	char pattern[64];
	glob_t g;
	size_t n;

	snprintf(pattern, sizeof(pattern), "/dev/shm/%d:*", (int)pid);
	if (glob(pattern, 0, NULL, &g) != 0)
		return 0;
	n = g.gl_pathc;
	globfree(&g);
	return n;
}

static void exit_with_endpoint_open(void)
{
	const char *audit = getenv(EXIT_AUDIT_ENV);
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	pid_t pid;
	int st;

	if (!audit || !*audit || len <= 0) {
		printf("\n    %s names no audit module (meson.build sets it)\n", EXIT_AUDIT_ENV);
		CU_FAIL_FATAL("the audit module of this test is not named");
	}
	exe[len] = '\0';
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		const char *asan = getenv("ASAN_OPTIONS");
		char opts[512];

		/* The endpoint left open is not a leak to report. */
		snprintf(opts, sizeof(opts), "%s%sdetect_leaks=0", asan ? asan : "",
		         asan && *asan ? ":" : "");
		setenv("ASAN_OPTIONS", opts, 1);
		/* This program links libfabric, and with it libinfinipath, whose
		 * constructor would install a SIGTERM handler of its own (an
		 * application that loads libfabric through the module does not
		 * get it: ofi_signal.c). */
		setenv("IPATH_NO_BACKTRACE", "1", 1);
		setenv("LD_AUDIT", audit, 1);
		execl(exe, exe, "--provider", ot_provider, EXIT_AUDIT_CHILD_ARG, (char *)NULL);
		_exit(127);
	}
	st = child_wait(pid);
	if (st == -1 || !WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM)
		printf("\n    the child %s %d\n",
		       st == -1 ? "was killed at the bound, status" :
		       WIFSIGNALED(st) ? "died by signal" : "exited with status",
		       st == -1 ? -1 : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	CU_ASSERT(st != -1 && !(WIFEXITED(st) && WEXITSTATUS(st) == EXIT_AUDIT_STILL_HANDLED));
	CU_ASSERT(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	if (strcmp(ot_provider, "shm") == 0)
		CU_ASSERT_EQUAL(shm_regions_of(pid), 0);
}

int ot_add_exit_suite(void)
{
	CU_pSuite s = CU_add_suite("exit", NULL, NULL);

	return !s ||
	       !CU_add_test(s, "a signal after libfabric's destructor, at exit with an endpoint "
	                       "open, acts as the application set it (no provider's handler is "
	                       "left), and the process's shm region is gone",
	                    exit_with_endpoint_open);
}
