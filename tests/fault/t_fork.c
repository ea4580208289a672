/*
 * t_fork.c - fork() under a live endpoint, as programs that start helpers
 * do.  The contract is api/cci.h's "Processes": the parent's endpoints and
 * connections keep working while a child runs, execs or exits without
 * calling the library; every descriptor the library opens is
 * close-on-exec; in the child, the parent's objects answer CCI_EINVAL
 * (CCI_ERROR for calls that take none) and nothing of the parent's is
 * touched; the child may cci_init() afresh and open endpoints of its own.
 */
#include "fault.h"

#include "proto.h"
#include "server.h"
#include "proc_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FDS 4096

static int fd_in(int fd, const int *set, int n)
{
	for (int i = 0; i < n; i++)
		if (set[i] == fd)
			return 1;
	return 0;
}

/* n messages to the echoing server, each waiting for its echo. */
static void roundtrips(cci_endpoint_t *ep, cci_connection_t *c, uint32_t *seq, uint32_t n,
                       const char *when)
{
	uint8_t msg[64];

	for (uint32_t i = 0; i < n; i++) {
		cci_event_t *ev = NULL;

		proto_build(msg, sizeof(msg), 0, (*seq)++, PROTO_DATA);
		if (!CHECKF(cci_send(c, msg, sizeof(msg), NULL, CCI_FLAG_SILENT) == CCI_SUCCESS,
		            "a send %s failed", when))
			return;
		for (uint64_t stop = h_now_ms() + 10000; !ev && h_now_ms() < stop;)
			if (cci_get_event(ep, &ev) == CCI_SUCCESS && ev->type != CCI_EVENT_RECV) {
				CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
				ev = NULL;
			}
		if (!CHECKF(ev != NULL, "no echo of message %u of %u %s", i + 1, n, when))
			return;
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
}

/*
 * The sanitizers are not made for a child forked from a process with
 * threads: their allocator's locks may be held by a thread the child does
 * not have (a malloc in the child then waits for good), and LeakSanitizer
 * still lists the parent's threads, cannot stop them, and reports what
 * only they referenced.  Under them the children below turn LeakSanitizer
 * off (f_lsan_off) and end by _exit(), allocating nothing; what the
 * child's own exit() does to the parent, and a child's own session, are
 * checked in the plain build.
 */
#if F_SANITIZED
#define LSAN_OFF_IN_CHILD() f_lsan_off()
#define CHILD_EXIT() h_exit_now()
#else
#define LSAN_OFF_IN_CHILD() ((void)0)
#define CHILD_EXIT() h_exit()
#endif

/* Fork a child that runs body; returns its pid. */
static pid_t fork_child(void (*body)(void *), void *arg)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		LSAN_OFF_IN_CHILD();
		alarm(20); /* a child that hangs in the library dies, and the test fails */
		h_role_prefix = "[child] ";
		body(arg);
		CHILD_EXIT();
	}
	return pid;
}

/* The child exited 0 within timeout_ms (else it is killed). */
static void child_finish(pid_t pid, unsigned timeout_ms, const char *what)
{
	int status = 0;
	pid_t r = 0;

	for (uint64_t stop = h_now_ms() + timeout_ms; r == 0 && h_now_ms() < stop;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == 0)
			h_sleep_ms(5);
	}
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	CHECKF(r == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "the child that %s %s (status 0x%x)", what, r == 0 ? "hung" : "failed", status);
}

/* ---- the parent works while children run, exec and exit ---------------- */

static void child_sleeps_then_exits(void *arg)
{
	(void)arg;
	h_sleep_ms(200);
	if (F_SANITIZED)
		_exit(0); /* see CHILD_EXIT */
	exit(0); /* atexit handlers and destructors run, in a copy of the parent */
}

static void child_execs(void *arg)
{
	(void)arg;
	execl("/bin/sh", "sh", "-c", "sleep 0.1", (char *)NULL);
	_exit(127);
}

static void child_waits(void *arg)
{
	(void)arg;
	pause();
}

/* A process that connects to the parent's endpoint once told its URI:
 * what a child's exit must not take away from the parent. */
static void late_client(int rfd, int wfd, const void *arg)
{
	char uri[512];
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint8_t msg[64];

	(void)wfd;
	(void)arg;
	if (!CHECK(h_msg_recv(rfd, uri, sizeof(uri), 30000) > 0))
		return;
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	proto_build(msg, sizeof(msg), 0, 0, PROTO_DATA);
	CHECK_RC(cci_send(c, msg, sizeof(msg), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	h_teardown(ep);
}

/* The late client's connection reaches the parent's endpoint. */
static void accept_late_client(cci_endpoint_t *ep, struct h_peer *late)
{
	char *uri = h_uri(ep);
	int recvs = 0, accepts = 0;

	h_msg_send(late->wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	for (uint64_t stop = h_now_ms() + 15000; !recvs && h_now_ms() < stop;) {
		cci_event_t *ev;

		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
		accepts += ev->type == CCI_EVENT_ACCEPT && ev->accept.status == CCI_SUCCESS;
		recvs += ev->type == CCI_EVENT_RECV;
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	CHECKF(accepts == 1 && recvs == 1, "after its children ended, a new connection to the "
	       "parent's endpoint: %d accepted, %d message(s)", accepts, recvs);
	/* The client's blocking send completes once this side acknowledges
	 * it, which under manual progress needs this side's calls. */
	for (uint64_t stop = h_now_ms() + 15000; !h_msg_ready(late->rfd) && h_now_ms() < stop;) {
		cci_event_t *ev;

		if (cci_get_event(ep, &ev) == CCI_SUCCESS)
			CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	h_peer_finish(late, 15000);
}

static void parent_works_while_children_run(void)
{
	struct srv s;
	struct srv_opts o = { .echo = 1 };
	struct srv_stats st;
	struct h_peer late;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint32_t seq = 0;
	pid_t pid;

	h_spawn(&late, late_client, NULL);
	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	roundtrips(ep, c, &seq, 50, "before any fork");
	pid = fork_child(child_sleeps_then_exits, NULL);
	roundtrips(ep, c, &seq, 200, "while a child runs");
	child_finish(pid, 10000, "slept and exited");
	roundtrips(ep, c, &seq, 50, "after a child exited");
	pid = fork_child(child_execs, NULL);
	roundtrips(ep, c, &seq, 200, "while a child execs");
	child_finish(pid, 10000, "exec'd a shell");
	pid = fork_child(child_waits, NULL);
	roundtrips(ep, c, &seq, 50, "while a child waits");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	roundtrips(ep, c, &seq, 50, "after a child was killed");
	accept_late_client(ep, &late);
	srv_stop(&s, &st);
	CHECKF(st.recvs == seq && st.order_errors == 0 && st.dups == 0 && st.corrupt == 0,
	       "the server received %llu of %u messages (%llu out of order, %llu twice, %llu "
	       "corrupt)", (unsigned long long)st.recvs, seq, (unsigned long long)st.order_errors,
	       (unsigned long long)st.dups, (unsigned long long)st.corrupt);
	h_teardown(ep);
}

/* ---- close-on-exec --------------------------------------------------------- */

static void library_descriptors_close_on_exec(void)
{
	static uint8_t region[4096];
	int before[MAX_FDS], after[MAX_FDS], nb, na, bad = 0;
	struct srv s;
	struct srv_opts o = { .echo = 1 };
	cci_endpoint_t *ep, *ep2;
	cci_connection_t *c;
	cci_rma_handle_t *h = NULL;
	cci_os_handle_t fd;
	uint32_t seq = 0;

	srv_start(&s, &o);
	nb = proc_fds_after_exec(before, MAX_FDS);
	CHECKF(nb >= 0, "the shell exec'd before the endpoints failed");
	ep = h_endpoint(h_setup(), &fd);
	ep2 = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	REQUIRE_RC(cci_rma_register(ep, region, sizeof(region), CCI_FLAG_READ, &h), CCI_SUCCESS);
	roundtrips(ep, c, &seq, 20, "with an OS handle");
	na = proc_fds_after_exec(after, MAX_FDS);
	CHECKF(na >= 0, "the shell exec'd with the endpoints open failed");
	for (int i = 0; i < na; i++) {
		char link[64], path[256] = "?";
		ssize_t n;

		if (fd_in(after[i], before, nb))
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", after[i]);
		n = readlink(link, path, sizeof(path) - 1);
		path[n > 0 ? n : 1] = '\0';
		CHECKF(0, "descriptor %d (%s here) reached a program exec'd by a child: "
		       "FD_CLOEXEC was not set", after[i], path);
		bad++;
	}
	h_note("an exec'd program inherited %d descriptor(s) before the library, %d after",
	       nb, na);
	CHECK_RC(cci_rma_deregister(ep, h), CCI_SUCCESS);
	srv_stop(&s, NULL);
	CHECK_RC(cci_destroy_endpoint(ep2), CCI_SUCCESS);
	h_teardown(ep);
}

/* ---- a child that calls into the parent's objects ---------------------------- */

struct inherited {
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_rma_handle_t *h;
	const char *uri;
};

static void child_uses_parent_objects(void *arg)
{
	const struct inherited *in = arg;
	static uint8_t buf[64];
	cci_device_t *const *devs;
	cci_rma_handle_t *h2 = NULL;
	cci_event_t *ev = NULL;
	uint32_t v = 0;

	CHECK_RC(cci_send(in->c, buf, sizeof(buf), NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_get_event(in->ep, &ev), CCI_EINVAL);
	CHECK_RC(cci_get_opt(in->ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_rma_register(in->ep, buf, sizeof(buf), 0, &h2), CCI_EINVAL);
	CHECK_RC(cci_rma(in->c, NULL, 0, in->h, 0, in->h, 0, 8, NULL, CCI_FLAG_WRITE),
	         CCI_EINVAL);
	CHECK_RC(cci_rma_deregister(in->ep, in->h), CCI_EINVAL);
	CHECK_RC(cci_connect(in->ep, in->uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	         CCI_EINVAL);
	CHECK_RC(cci_disconnect(in->c), CCI_EINVAL);
	CHECK_RC(cci_destroy_endpoint(in->ep), CCI_EINVAL);
	CHECK_RC(cci_get_devices(&devs), CCI_ERROR);
	CHECK_RC(cci_finalize(), CCI_ERROR);
}

static void child_calls_into_parent_objects(void)
{
	static uint8_t region[4096];
	struct srv s;
	struct srv_opts o = { .echo = 1 };
	struct srv_stats st;
	struct inherited in;
	uint32_t seq = 0;

	srv_start(&s, &o);
	in.ep = h_endpoint(h_setup(), NULL);
	in.c = h_connect(in.ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	in.uri = s.uri;
	REQUIRE_RC(cci_rma_register(in.ep, region, sizeof(region), CCI_FLAG_WRITE, &in.h),
	           CCI_SUCCESS);
	roundtrips(in.ep, in.c, &seq, 20, "before the fork");
	child_finish(fork_child(child_uses_parent_objects, &in), 15000,
	             "called into the parent's objects");
	roundtrips(in.ep, in.c, &seq, 100, "after the child's calls");
	CHECK_RC(cci_rma_deregister(in.ep, in.h), CCI_SUCCESS);
	srv_stop(&s, &st);
	CHECKF(st.recvs == seq && st.corrupt == 0 && st.bad_conn == 0 && st.order_errors == 0,
	       "the server received %llu of %u messages, %llu corrupt, %llu on unknown "
	       "connections", (unsigned long long)st.recvs, seq, (unsigned long long)st.corrupt,
	       (unsigned long long)st.bad_conn);
	h_teardown(in.ep);
}

/* ---- a child that starts the library afresh ------------------------------------ */

/* A child's child: the endpoint its parent opened is its parent's. */
static void grandchild_is_refused(void *arg)
{
	cci_event_t *ev = NULL;

	CHECK_RC(cci_get_event(arg, &ev), CCI_EINVAL);
	CHECK_RC(cci_finalize(), CCI_ERROR);
}

static void child_starts_afresh(void *arg)
{
	const char *uri = arg;
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	cci_connection_t *c = h_connect(ep, uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	uint32_t seq = 100000;

	roundtrips(ep, c, &seq, 20, "from the child's own endpoint");
	child_finish(fork_child(grandchild_is_refused, (void *)ep), 10000,
	             "was forked by a child with an endpoint of its own");
	roundtrips(ep, c, &seq, 20, "from the child's endpoint after its own child");
	h_teardown(ep);
}

static void child_may_init_afresh(void)
{
	struct srv s;
	struct srv_opts o = { .echo = 1 };
	struct srv_stats st;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint32_t seq = 0;

	if (F_SANITIZED)
		h_skip("a child of a process with threads cannot allocate under a sanitizer "
		       "(see CHILD_EXIT); the plain build runs this test");

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	roundtrips(ep, c, &seq, 20, "before the fork");
	child_finish(fork_child(child_starts_afresh, s.uri), 15000,
	             "initialised the library afresh");
	roundtrips(ep, c, &seq, 50, "after the child's own session");
	srv_stop(&s, &st);
	CHECKF(st.accepts == 2 && st.corrupt == 0, "the server accepted %llu connection(s), "
	       "%llu corrupt message(s)", (unsigned long long)st.accepts,
	       (unsigned long long)st.corrupt);
	h_teardown(ep);
}

const struct h_test t_fork_tests[] = {
	{ "the parent's endpoint and connection keep working while children run, exec, "
	  "exit and are killed; a new client connects after", parent_works_while_children_run,
	  H_NEEDS_DEVICE, 60 },
	{ "a program exec'd by a child inherits no descriptor of the library",
	  library_descriptors_close_on_exec, H_NEEDS_DEVICE, 30 },
	{ "in a child, calls on the parent's endpoint, connection and registration fail with "
	  "CCI_EINVAL and the parent's connection is untouched",
	  child_calls_into_parent_objects, H_NEEDS_DEVICE, 40 },
	{ "a child may cci_init afresh and connect from an endpoint of its own; its own "
	  "child gets CCI_EINVAL on that endpoint, which keeps working",
	  child_may_init_afresh, H_NEEDS_DEVICE, 40 },
};
const size_t t_fork_count = sizeof(t_fork_tests) / sizeof(t_fork_tests[0]);
