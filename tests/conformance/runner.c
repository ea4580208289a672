/*
 * runner.c - runs each registered test in its own process under CUnit.
 *
 * The runner never initialises the library.  For each test it forks a
 * process (a new process group) that runs the body; the body's checks come
 * back over a pipe as lines ("F file:line: message", "P count",
 * "S reason") and become CUnit assertions of the current test.  A test that
 * crashes, exits with a failure or outlives its timeout fails; its whole
 * process group (peers included) is killed afterwards.
 */
#include "harness.h"
#include "shm_sweep.h"

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SUITES 32
#define MAX_TESTS 512

struct suite_reg {
	const char *name;
	const struct h_test *tests;
	size_t n;
};

struct test_reg {
	CU_pTest cu;
	const struct h_test *t;
	uint64_t took_ms; /* wall time of its process, for the closing list */
};

static struct suite_reg suites[MAX_SUITES];
static size_t nsuites;
static struct test_reg regs[MAX_TESTS];
static size_t nregs;
static const char *skipped[MAX_TESTS];
static size_t nskipped;

const struct h_test *h_current;

void h_add_suite(const char *name, const struct h_test *tests, size_t n)
{
	if (nsuites < MAX_SUITES)
		suites[nsuites++] = (struct suite_reg){ name, tests, n };
}

/* What one test process reported. */
struct outcome {
	const struct h_test *t;
	unsigned failures;       /* "F" lines */
	int skipped;
	char buf[4096];          /* partial line */
	size_t len;
};

static void handle_line(struct outcome *o, char *line)
{
	if (line[0] == 'F' && line[1] == ' ') {
		char *file = line + 2, *colon = strchr(file, ':');
		unsigned ln = 0;
		char *msg = file;

		if (colon) {
			*colon = '\0';
			ln = (unsigned)strtoul(colon + 1, &msg, 10);
			if (*msg == ':')
				msg++;
			while (*msg == ' ')
				msg++;
		}
		o->failures++;
		CU_assertImplementation(CU_FALSE, ln, msg, file, "", CU_FALSE);
	} else if (line[0] == 'P' && line[1] == ' ') {
		unsigned long n = strtoul(line + 2, NULL, 10);

		for (unsigned long i = 0; i < n; i++)
			CU_assertImplementation(CU_TRUE, 0, "", "", "", CU_FALSE);
	} else if (line[0] == 'S' && line[1] == ' ') {
		printf("\nSKIP %s: %s\n", o->t->name, line + 2);
		if (!o->skipped && nskipped < MAX_TESTS)
			skipped[nskipped++] = o->t->name;
		o->skipped = 1;
	} else {
		printf("%s\n", line);
	}
}

static void feed(struct outcome *o, const char *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (data[i] == '\n' || o->len == sizeof(o->buf) - 1) {
			o->buf[o->len] = '\0';
			handle_line(o, o->buf);
			o->len = 0;
			if (data[i] == '\n')
				continue;
		}
		o->buf[o->len++] = data[i];
	}
}

static void fail_with(const struct h_test *t, const char *msg)
{
	CU_assertImplementation(CU_FALSE, 0, msg, t->name, "", CU_FALSE);
}

/*
 * CCI_TEST_TIMEOUT_MULTIPLIER (a whole number, 1 when unset or invalid)
 * stretches every test's time limit, as meson's --timeout-multiplier does
 * the programs': for sanitizer builds, whose code runs several times
 * slower.  The tests' own bounds on the library's behaviour stay as they
 * are.
 */
static int timeout_multiplier(void)
{
	const char *v = getenv("CCI_TEST_TIMEOUT_MULTIPLIER");
	char *end = NULL;
	long n;

	if (!v || !*v)
		return 1;
	n = strtol(v, &end, 10);
	return *end || n < 1 || n > 100 ? 1 : (int)n;
}

/* Read the test's lines until it and its peers are gone or time is up. */
static void collect(int fd, pid_t pid, struct outcome *o)
{
	int tmo = (o->t->timeout_s ? o->t->timeout_s : H_DEFAULT_TIMEOUT_S) * timeout_multiplier();
	uint64_t deadline = h_now_ms() + (uint64_t)tmo * 1000u, grace = 0;
	int status = 0, exited = 0, eof = 0, timed_out = 0;
	char msg[256] = "";

	while (!(eof && exited) && !(exited && h_now_ms() > grace)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		char data[4096];

		if (!eof && poll(&pfd, 1, 20) > 0) {
			ssize_t n = read(fd, data, sizeof(data));

			if (n > 0)
				feed(o, data, (size_t)n);
			else if (n == 0 || errno != EINTR)
				eof = 1;
		} else if (eof) {
			h_sleep_ms(5);
		}
		if (!exited && waitpid(pid, &status, WNOHANG) == pid)
			exited = 1;
		else if (!exited && h_now_ms() > deadline) {
			timed_out = exited = 1;
			kill(-pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		if (exited && !grace) {
			kill(-pid, SIGKILL); /* peers left behind */
			grace = h_now_ms() + 2000;
		}
	}
	test_shm_sweep(); /* what killed peers left in /dev/shm */
	if (timed_out)
		snprintf(msg, sizeof(msg), "test timed out after %d s", tmo);
	else if (WIFSIGNALED(status))
		snprintf(msg, sizeof(msg), "test process killed by signal %d (%s)",
		         WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WEXITSTATUS(status) != 0 && !o->failures)
		snprintf(msg, sizeof(msg), "test process exited with status %d",
		         WEXITSTATUS(status));
	if (msg[0])
		fail_with(o->t, msg);
}

static void run_one(const struct h_test *t)
{
	static struct outcome o;
	int fds[2];
	pid_t pid;

	o = (struct outcome){ .t = t };
	if (pipe(fds) < 0) {
		CU_FAIL("pipe() failed");
		return;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		signal(SIGPIPE, SIG_IGN); /* a dead peer's pipe fails a check instead */
		close(fds[0]);
		h_result_fd = fds[1];
		h_current = t;
		t->body();
		h_exit();
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		CU_FAIL("fork() failed");
		return;
	}
	setpgid(pid, pid);
	collect(fds[0], pid, &o);
	close(fds[0]);
}

static void trampoline(void)
{
	CU_pTest cur = CU_get_current_test();

	for (size_t i = 0; i < nregs; i++)
		if (regs[i].cu == cur) {
			uint64_t t0 = h_now_ms();

			run_one(regs[i].t);
			regs[i].took_ms = h_now_ms() - t0;
			return;
		}
	CU_FAIL("test not registered");
}

/* Into why: the note of the loaded plugin serving the transport (why it
 * offers no device), if it left one. */
static void plugin_note(char *why, size_t len)
{
	cci_plugin_info_t *const *plugins;

	if (cci_get_plugins(&plugins) != CCI_SUCCESS)
		return;
	for (int i = 0; plugins[i]; i++) {
		if (plugins[i]->status != CCI_PLUGIN_LOADED || !plugins[i]->note[0])
			continue;
		for (int t = 0; plugins[i]->transports[t]; t++)
			if (strcmp(plugins[i]->transports[t], h_transport_name()) == 0)
				snprintf(why, len, "%s", plugins[i]->note);
	}
}

/* In a child: is there a device of the transport?  Returns NULL when
 * there is, else the reason to skip device tests. */
static const char *probe_device(void)
{
	static char reason[512];
	char why[256] = "";
	int fds[2];
	char c = 0;
	pid_t pid;

	if (pipe(fds) < 0)
		return NULL;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		cci_device_t *down = NULL;
		c = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS ? 'i'
		    : h_find_device() ? 'y' : 'n';
		if (c == 'n' && (down = h_find_down_device()))
			snprintf(why, sizeof(why), "%s: %s", down->name,
			         down->info ? down->info : "no reason given");
		else if (c == 'n')
			plugin_note(why, sizeof(why));
		if (c == 'n' && !down && why[0])
			c = 'p'; /* no device, and the plugin said why */
		if (write(fds[1], &c, 1) < 0 || write(fds[1], why, strlen(why)) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (pid > 0) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };

		if (poll(&pfd, 1, 10000) <= 0 || read(fds[0], &c, 1) != 1)
			c = 0;
		else if ((c == 'n' || c == 'p') && read(fds[0], why, sizeof(why) - 1) < 0)
			why[0] = '\0';
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	close(fds[0]);
	if (c != 'n' && c != 'p')
		return NULL;
	if (c == 'p')
		snprintf(reason, sizeof(reason), "transport %s offers no device here: %s",
		         h_transport_name(), why);
	else if (why[0])
		snprintf(reason, sizeof(reason), "the device of transport %s is down here (%s)",
		         h_transport_name(), why);
	else
		snprintf(reason, sizeof(reason), "no device of transport %s (check CCI_CTP "
		         "and CCI_CONFIG)", h_transport_name());
	return reason;
}

static int register_all(const char *filter)
{
	for (size_t s = 0; s < nsuites; s++) {
		CU_pSuite cs = CU_add_suite(suites[s].name, NULL, NULL);

		if (!cs)
			return -1;
		for (size_t i = 0; i < suites[s].n && nregs < MAX_TESTS; i++) {
			const struct h_test *t = &suites[s].tests[i];
			CU_pTest ct;

			if (filter && !strstr(t->name, filter))
				continue;
			ct = CU_add_test(cs, t->name, trampoline);
			if (!ct)
				return -1;
			regs[nregs++] = (struct test_reg){ ct, t };
		}
	}
	return 0;
}

/* Repeat every failure at the very end: a CI log shows only the tail of a
 * long run, where the verbose lines of an early test are already gone. */
static void print_failures(void)
{
	const CU_FailureRecord *f = CU_get_failure_list();

	if (!f)
		return;
	printf("\nFailures:\n");
	for (; f; f = f->pNext)
		printf("  FAIL %s: %s:%u: %s\n", f->pTest ? f->pTest->pName : "?",
		       f->strFileName ? f->strFileName : "?", f->uiLineNumber,
		       f->strCondition ? f->strCondition : "");
}

static int slower_first(const void *a, const void *b)
{
	uint64_t x = (*(const struct test_reg *const *)a)->took_ms;
	uint64_t y = (*(const struct test_reg *const *)b)->took_ms;

	return (x < y) - (x > y);
}

/* The slowest tests, at the end: where a suite's time goes, for whoever
 * keeps CI within its budget (five, or CCI_TEST_SLOWEST of them). */
static void print_slowest(void)
{
	static const struct test_reg *by_time[MAX_TESTS];
	const char *env = getenv("CCI_TEST_SLOWEST");
	size_t show = env && atoi(env) > 0 ? (size_t)atoi(env) : 5;

	for (size_t i = 0; i < nregs; i++)
		by_time[i] = &regs[i];
	qsort(by_time, nregs, sizeof(by_time[0]), slower_first);
	printf("\nSlowest tests:\n");
	for (size_t k = 0; k < nregs && k < show; k++)
		printf("  %6.1f s  %s\n", (double)by_time[k]->took_ms / 1000.0, by_time[k]->t->name);
}

/*
 * Exit statuses: 0 all passed, 1 a failure, 2 a usage or set-up error, 77
 * (meson's "skipped") when the transport has no device here or every test
 * skipped itself, so that a summary never shows a pass for a transport
 * that did not run.
 */
int h_run(const char *filter)
{
	const char *no_device = probe_device();
	unsigned failures;

	if (no_device) {
		printf("SKIP: %s\n", no_device);
		return 77;
	}
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_set_fail_on_inactive(CU_FALSE);
	if (register_all(filter) < 0) {
		fprintf(stderr, "%s\n", CU_get_error_msg());
		CU_cleanup_registry();
		return 2;
	}
	if (nregs == 0) {
		fprintf(stderr, "no test name contains \"%s\"\n", filter);
		CU_cleanup_registry();
		return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	if (nskipped) {
		printf("\n%zu test(s) skipped at run time:\n", nskipped);
		for (size_t i = 0; i < nskipped; i++)
			printf("  SKIP %s\n", skipped[i]);
	}
	print_slowest();
	print_failures();
	failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	if (CU_get_error() != CUE_SUCCESS)
		failures++;
	printf("\n");
	CU_cleanup_registry();
	if (!failures && nskipped == nregs) {
		printf("SKIP: every test skipped itself (see the reasons above)\n");
		return 77;
	}
	return failures ? 1 : 0;
}

/*
 * CCI_TEST_PRELOAD names shared libraries (separated by ':') that the
 * runner loads once, before it forks any test, so that each test process
 * and peer inherits them with their constructors already run.  The ofi
 * runs name libfabric.so.1: on Debian it pulls in libinfinipath, whose
 * constructor calibrates the CPU clock with about 0.3 s of sleeps in every
 * process that loads it, and these suites fork several processes a test.
 * The library under test still loads and initialises its plugins, and
 * libfabric its providers, in every test process.
 */
static int preload_libraries(void)
{
	const char *list = getenv("CCI_TEST_PRELOAD");
	char name[256];

	while (list && *list) {
		size_t n = strcspn(list, ":");

		if (n >= sizeof(name)) {
			fprintf(stderr, "CCI_TEST_PRELOAD: a name of %zu characters is too long\n", n);
			return -1;
		}
		if (n > 0) {
			memcpy(name, list, n);
			name[n] = '\0';
			if (!dlopen(name, RTLD_NOW | RTLD_GLOBAL)) {
				fprintf(stderr, "CCI_TEST_PRELOAD: cannot load %s: %s\n", name, dlerror());
				return -1;
			}
		}
		list += n + (list[n] == ':');
	}
	return 0;
}

int h_main(const char *what, int argc, char **argv, const struct h_suite *suites,
           size_t n)
{
	const char *filter = NULL;
	int list = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc) {
			h_transport = argv[++i];
		} else if (strcmp(argv[i], "--run") == 0 && i + 1 < argc) {
			filter = argv[++i];
		} else if (strcmp(argv[i], "--list") == 0) {
			list = 1;
		} else {
			fprintf(stderr, "usage: %s [--transport NAME] [--run SUBSTRING] [--list]\n",
			        argv[0]);
			return 2;
		}
	}
	for (size_t s = 0; list && s < n; s++)
		for (size_t i = 0; i < suites[s].n; i++)
			printf("%s\n", suites[s].tests[i].name);
	if (list)
		return 0;
	if (preload_libraries() < 0)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("%s: transport %s\n", what, h_transport ? h_transport : "(first device)");
	for (size_t s = 0; s < n; s++)
		h_add_suite(suites[s].name, suites[s].tests, suites[s].n);
	return h_run(filter);
}
