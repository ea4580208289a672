/*
 * rpc_test - the RPC runtime under load, and under a dying server.
 *
 *   rpc_test [-c clients] [-n calls] [-w window] [-t seconds]
 *   rpc_test -k [-S] [-c clients] [-w window] [-t seconds]
 *
 * Forks one server process and `clients` client processes (each its own
 * CCI endpoint; the parent never initialises CCI, so nothing of the
 * library crosses a fork).  The server writes its URI to a file in a
 * fresh directory, the clients read it.  Load mode (default: 8 clients x
 * 10,000 calls, 64 in flight): every client checks every result and the
 * server checks it answered every call.  With -k the parent kills the
 * server with SIGKILL once the first client is warmed up; the clients
 * check that their pending calls fail, promptly, instead of hanging.
 * -S stops the server (SIGSTOP) instead: a server that is there but
 * answers nothing, which only the keepalive timeout reveals.
 * Each process passes or fails; the last line is "N passed, M failed".
 * Everything is bounded by -t (default 120 s): then stragglers are killed.
 */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ex_util.h"
#include "rpc_procs.h"
#include "rpc_test.h"

#define RPC_TEST_MAX_CLIENTS 64
#define RPC_URI_WAIT_MS 10000

struct test_opts {
	unsigned clients, calls, window, time_limit_s;
	bool kill_mode, stop_mode;
};

struct proc_slot {
	pid_t pid;
	char name[32];
	int status;      /* from waitpid; -1 until reaped */
	bool reaped;
};

/* The server process: serve until every client has come and gone. */
static int server_main(const char *uri_path, const struct test_opts *o)
{
	struct rpc_server_opts so = { .max_arg = RPC_TEST_MAX_ARG };
	uint64_t deadline = ex_deadline_ms(o->time_limit_s * 1000ull);
	uint64_t want = (uint64_t)o->clients * o->calls;
	struct rpc_server_stats st;
	struct rpc_server *s;
	int rc = rpc_server_create(&so, &s);

	if (rc == RPC_OK)
		rc = rpc_procs_register(s);
	if (rc != RPC_OK || ex_uri_write(uri_path, rpc_server_uri(s)) != 0) {
		fprintf(stderr, "server: cannot start: %s\n", rpc_strerror(rc));
		return EXIT_FAILURE;
	}
	do {
		rc = rpc_server_progress(s, 100);
		rpc_server_stats(s, &st);
	} while (rc == RPC_OK && ex_now_ns() < deadline &&
		 !(st.clients == o->clients && st.open == 0));
	rpc_server_destroy(s);
	printf("server: %u clients, %llu calls answered (%llu expected)\n",
	       st.clients, (unsigned long long)st.calls, (unsigned long long)want);
	return rc == RPC_OK && st.calls == want ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* A child's life: stdio is flushed by hand since _exit() skips it (and
 * skips the parent's atexit handlers, which are not the child's). */
static int child_run(int (*fn)(void *), void *arg)
{
	int rc = fn(arg);

	fflush(stdout);
	fflush(stderr);
	return rc;
}

static pid_t spawn(struct proc_slot *p, const char *name, int (*fn)(void *), void *arg)
{
	fflush(stdout);
	p->pid = fork();
	if (p->pid == 0)
		_exit(child_run(fn, arg));
	snprintf(p->name, sizeof(p->name), "%s", name);
	return p->pid;
}

struct server_arg { const char *uri_path; const struct test_opts *o; };

static int server_entry(void *arg)
{
	struct server_arg *a = arg;

	return server_main(a->uri_path, a->o);
}

static int client_entry(void *arg)
{
	return rpc_test_client(arg);
}

/* Wait for the children until the deadline; then kill what is left. */
static void reap_all(struct proc_slot *p, unsigned n, uint64_t deadline)
{
	const struct timespec nap = { .tv_nsec = 10000000L };
	unsigned left = 0;

	for (unsigned i = 0; i < n; i++)
		left += p[i].pid > 0;
	/* each by its pid: a child outside p must keep its status */
	while (left && ex_now_ns() < deadline) {
		nanosleep(&nap, NULL);
		for (unsigned i = 0; i < n; i++) {
			int st;

			if (p[i].pid <= 0 || p[i].reaped ||
			    waitpid(p[i].pid, &st, WNOHANG) != p[i].pid)
				continue;
			p[i].status = st;
			p[i].reaped = true;
			left--;
		}
	}
	for (unsigned i = 0; i < n; i++)
		if (p[i].pid > 0 && !p[i].reaped) {
			fprintf(stderr, "%s: still running at the time limit, killed\n",
				p[i].name);
			kill(p[i].pid, SIGKILL);
			waitpid(p[i].pid, NULL, 0);
		}
}

/* Kill mode: wait for a client's "warmed up" byte, then kill (or stop)
 * the server. */
static void kill_server_when_ready(int notify_fd, pid_t server, int sig,
				   uint64_t deadline)
{
	struct pollfd pfd = { .fd = notify_fd, .events = POLLIN };
	char b;

	while (ex_now_ns() < deadline)
		if (poll(&pfd, 1, 100) == 1)
			break;
	if (pfd.revents & POLLIN && read(notify_fd, &b, 1) == 1)
		printf("%s the server (pid %ld)\n",
		       sig == SIGSTOP ? "stopping" : "killing", (long)server);
	fflush(stdout);
	kill(server, sig);
}

/* A process passed when it exited 0, or, for a server in kill mode,
 * when it died of our SIGKILL. */
static unsigned count_passed(const struct proc_slot *p, unsigned n, bool kill_mode)
{
	unsigned passed = 0;

	for (unsigned i = 0; i < n; i++) {
		int st = p[i].status;
		bool killed = st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
		bool ok = i == 0 && kill_mode ? killed
			  : st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;

		if (!ok)
			fprintf(stderr, "%s: failed\n", p[i].name);
		passed += ok;
	}
	return passed;
}

static void parse_opts(struct test_opts *o, int argc, char **argv)
{
	int c;

	*o = (struct test_opts){ .clients = 8, .calls = 10000, .window = 64,
				 .time_limit_s = 120 };
	while ((c = getopt(argc, argv, "c:n:w:t:kS")) != -1) {
		switch (c) {
		case 'c': o->clients = (unsigned)atoi(optarg); break;
		case 'n': o->calls = (unsigned)atoi(optarg); break;
		case 'w': o->window = (unsigned)atoi(optarg); break;
		case 't': o->time_limit_s = (unsigned)atoi(optarg); break;
		case 'k': o->kill_mode = true; break;
		case 'S': o->stop_mode = true; break;
		default:
			fprintf(stderr, "usage: rpc_test [-k [-S]] [-c clients] [-n calls] "
				"[-w window] [-t seconds]\n");
			exit(EXIT_FAILURE);
		}
	}
	o->kill_mode = o->kill_mode || o->stop_mode;
	if (o->kill_mode && o->calls == 10000)
		o->calls = 1000000; /* until the server dies, or the time limit */
	if (!o->clients || o->clients > RPC_TEST_MAX_CLIENTS || !o->window ||
	    !o->time_limit_s) {
		fprintf(stderr, "rpc_test: 1..%d clients, a window and a time limit\n",
			RPC_TEST_MAX_CLIENTS);
		exit(EXIT_FAILURE);
	}
}

static void run(const struct test_opts *o, const char *dir, struct proc_slot *p)
{
	uint64_t deadline = ex_deadline_ms(o->time_limit_s * 1000ull);
	struct rpc_test_client_opts co[RPC_TEST_MAX_CLIENTS];
	char uri_path[512], name[32];
	char *uri = NULL;
	int notify[2] = { -1, -1 };

	snprintf(uri_path, sizeof(uri_path), "%s/server.uri", dir);
	spawn(&p[0], "server", server_entry, &(struct server_arg){ uri_path, o });
	if (ex_uri_read(uri_path, ex_deadline_ms(RPC_URI_WAIT_MS), &uri) != 0) {
		fprintf(stderr, "rpc_test: the server wrote no URI\n");
		kill(p[0].pid, SIGKILL);
		return;
	}
	if (o->kill_mode && pipe(notify) != 0)
		perror("pipe");
	for (unsigned i = 0; i < o->clients; i++) {
		co[i] = (struct rpc_test_client_opts){
			.uri = uri, .id = i, .calls = o->calls, .window = o->window,
			.kill_mode = o->kill_mode, .notify_fd = i == 0 ? notify[1] : -1,
			.time_limit_s = o->time_limit_s,
		};
		snprintf(name, sizeof(name), "client %u", i);
		spawn(&p[1 + i], name, client_entry, &co[i]);
	}
	if (o->kill_mode)
		kill_server_when_ready(notify[0], p[0].pid,
				       o->stop_mode ? SIGSTOP : SIGKILL, deadline);
	/* the clients first: a stopped server goes only once they are done */
	reap_all(p + 1, o->clients, deadline + 5000000000ull);
	if (o->kill_mode)
		kill(p[0].pid, SIGKILL);
	reap_all(p, 1, deadline + 5000000000ull);
	if (notify[0] >= 0) {
		close(notify[0]);
		close(notify[1]);
	}
	unlink(uri_path);
	free(uri);
}

int main(int argc, char **argv)
{
	struct proc_slot p[1 + RPC_TEST_MAX_CLIENTS] = { 0 };
	char dir[] = "/tmp/rpc-test-XXXXXX";
	struct test_opts o;
	uint64_t t0 = ex_now_ns();
	unsigned passed;

	parse_opts(&o, argc, argv);
	for (unsigned i = 0; i < 1 + o.clients; i++)
		p[i].status = -1;
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	run(&o, dir, p);
	rmdir(dir);
	passed = count_passed(p, 1 + o.clients, o.kill_mode);
	printf("rpc_test%s: %u clients, %.2f s\n", o.kill_mode ? " -k" : "",
	       o.clients, (double)(ex_now_ns() - t0) / 1e9);
	printf("%u passed, %u failed\n", passed, 1 + o.clients - passed);
	return passed == 1 + o.clients ? EXIT_SUCCESS : EXIT_FAILURE;
}
