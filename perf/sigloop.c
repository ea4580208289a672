/*
 * sigloop.c - how processes end when a signal comes at a random moment:
 * N times, fork a process that runs cci_init and opens an endpoint on the
 * default device (-p init), or also connects a second endpoint of its own
 * to it and streams messages (-p traffic), send it the signal at a random
 * moment of the first W ms, and count how each ended.  The environment
 * chooses the transports (CCI_CONFIG, CCI_CTP; neither set: every plugin).
 *
 *   sigloop [-n runs] [-s TERM|INT|HUP] [-w window_ms] [-p init|traffic]
 *           [-d default|handler] [-t bound_ms] [-S seed]
 *
 * A process still alive bound_ms after its signal is killed (SIGKILL) and
 * counted; every run is bounded, so the loop always ends.  With -d handler
 * the process installs a handler that sets a flag and exits with status
 * 100 + the signal once it sees it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cci.h"
#include "perf_util.h"

#define SIGLOOP_CHILD_MS 10000u /* a child that got no signal by then exits 3 */

static volatile sig_atomic_t seen;

static void on_signal(int sig)
{
	seen = sig;
}

static uint64_t now_ms(void)
{
	return perf_now_ns() / 1000000u;
}

/* The process under test; never returns.  Exits 100 + signal when its
 * handler saw one, 3 at its own bound, 4 when a call failed. */
static void child_run(int traffic, int handled, int ready_fd)
{
	struct sigaction sa = { .sa_handler = handled ? on_signal : SIG_DFL };
	cci_endpoint_t *a = NULL, *b = NULL;
	cci_connection_t *conn = NULL;
	uint64_t end = now_ms() + SIGLOOP_CHILD_MS;
	char *uri = NULL;
	cci_event_t *ev;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* The moment 0 of the window: the dispositions are the application's. */
	if (write(ready_fd, "R", 1) != 1)
		_exit(4);
	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS ||
	    cci_create_endpoint(NULL, 0, &a, NULL) != CCI_SUCCESS)
		_exit(seen ? 100 + seen : 4);
	if (traffic && (cci_get_opt(a, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS ||
	                cci_create_endpoint(NULL, 0, &b, NULL) != CCI_SUCCESS ||
	                cci_connect(b, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0,
	                            &(struct timeval){ .tv_sec = 5 }) != CCI_SUCCESS))
		_exit(seen ? 100 + seen : 4);
	while (!seen && now_ms() < end) {
		if (cci_get_event(a, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT_REQUEST)
				cci_accept(ev, NULL);
			cci_return_event(ev);
		}
		if (b && cci_get_event(b, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_SUCCESS)
				conn = ev->connect.connection;
			cci_return_event(ev);
		}
		if (conn)
			cci_send(conn, "sigloop", 8, NULL, CCI_FLAG_SILENT);
	}
	if (b)
		cci_destroy_endpoint(b);
	cci_destroy_endpoint(a);
	cci_finalize();
	_exit(seen ? 100 + seen : 3);
}

struct tally {
	unsigned by_signal, handler_exit, exit0, exit1, other, killed;
	uint64_t slowest_ms;
};

static void one_run(int sig, unsigned window, int traffic, int handled, unsigned bound,
                    struct tally *t)
{
	int status = 0, p[2];
	uint64_t t0, ms;
	char c;
	pid_t r, pid;

	fflush(stdout);
	if (pipe(p) != 0 || (pid = fork()) < 0)
		perf_die("pipe or fork failed");
	if (pid == 0)
		child_run(traffic, handled, p[1]);
	close(p[1]);
	if (read(p[0], &c, 1) != 1)
		c = 0; /* the child died before it was ready: judged below all the same */
	close(p[0]);
	usleep((useconds_t)(drand48() * window * 1000.0));
	t0 = now_ms();
	kill(pid, sig);
	while ((r = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() - t0 < bound)
		usleep(2000);
	if (r != pid) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		t->killed++;
		return;
	}
	ms = now_ms() - t0;
	t->slowest_ms = ms > t->slowest_ms ? ms : t->slowest_ms;
	if (WIFSIGNALED(status) && WTERMSIG(status) == sig)
		t->by_signal++;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 100 + sig)
		t->handler_exit++;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		t->exit0++;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 1)
		t->exit1++;
	else
		t->other++;
}

static int parse_signal(const char *s)
{
	if (strcmp(s, "TERM") == 0)
		return SIGTERM;
	if (strcmp(s, "INT") == 0)
		return SIGINT;
	if (strcmp(s, "HUP") == 0)
		return SIGHUP;
	perf_die("-s: TERM, INT or HUP, not \"%s\"", s);
}

int main(int argc, char **argv)
{
	unsigned runs = 20, window = 400, bound = 5000;
	int sig = SIGTERM, traffic = 0, handled = 0, opt;
	long seed = (long)getpid() ^ (long)time(NULL);
	struct tally t = { 0 };

	perf_set_prog("sigloop");
	while ((opt = getopt(argc, argv, "n:s:w:p:d:t:S:")) != -1) {
		if (opt == 'n')
			runs = perf_parse_count(optarg, 1, 10000);
		else if (opt == 's')
			sig = parse_signal(optarg);
		else if (opt == 'w')
			window = perf_parse_count(optarg, 0, 60000);
		else if (opt == 'p' && (!strcmp(optarg, "init") || !strcmp(optarg, "traffic")))
			traffic = !strcmp(optarg, "traffic");
		else if (opt == 'd' && (!strcmp(optarg, "default") || !strcmp(optarg, "handler")))
			handled = !strcmp(optarg, "handler");
		else if (opt == 't')
			bound = perf_parse_count(optarg, 100, 600000);
		else if (opt == 'S')
			seed = strtol(optarg, NULL, 10);
		else
			perf_die("usage: sigloop [-n runs] [-s TERM|INT|HUP] [-w window_ms] "
			         "[-p init|traffic] [-d default|handler] [-t bound_ms] [-S seed]");
	}
	srand48(seed);
	for (unsigned i = 0; i < runs; i++)
		one_run(sig, window, traffic, handled, bound, &t);
	printf("%u runs (SIG%s within %u ms of the start, %s, %s, seed %ld):\n"
	       "  as decided (%s): %u\n  by the signal: %u\n  handler's exit: %u\n"
	       "  exit 0: %u\n  exit 1: %u\n  other: %u\n  alive %u ms after the signal "
	       "(killed): %u\n  slowest end: %llu ms after the signal\n",
	       runs, sigabbrev_np(sig), window, traffic ? "traffic" : "init",
	       handled ? "with a handler" : "no handler", seed,
	       handled ? "handler's exit" : "by the signal", handled ? t.handler_exit : t.by_signal,
	       t.by_signal, t.handler_exit, t.exit0, t.exit1, t.other, bound, t.killed,
	       (unsigned long long)t.slowest_ms);
	return (handled ? t.handler_exit : t.by_signal) == runs ? 0 : 1;
}
