/*
 * leftover_kill.c - processes killed with SIGKILL mid-traffic leave
 * nothing behind once the next process of the library creates an
 * endpoint (issue: "nothing left behind").
 *
 * The test runs on the transport its environment selects (CCI_CTP,
 * CCI_CONFIG), on the default device.  It execs KILL_PAIRS pairs of
 * children, WINDOW pairs at a time: a server that accepts and receives,
 * and a client that connects to it and sends without pause.  Once the
 * client has had a send complete, both are killed with SIGKILL and
 * reaped, and the next pair starts in their place.  Pairs talk among themselves, never to
 * this process, which holds no endpoint: a peer killed inside a send
 * (libfabric shm takes the receiver's lock to send) hangs nobody that
 * lives on.
 *
 * Then it counts what the dead left: shm regions /dev/shm/<pid>:* and sm
 * directories /tmp/cci-sm-<uid>/<pid>.  With --expect-leftovers (sm, ofi
 * over shm) there must be some, or the test proved nothing.  It execs one
 * more process, the "next" one, which only creates an endpoint and
 * finalizes; after it, nothing of any killed pid may remain, nor of the
 * next process itself.
 *
 * Modes (argv[1]): none (the test), --server, --client URI, --next.
 * Every wait is bounded (WAIT_S seconds, times CCI_TEST_TIMEOUT_MULTIPLIER).
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cci.h"

#define KILL_PAIRS 50 /* 100 processes */
#define WINDOW 10     /* pairs on their way at once */
#define WAIT_S 30     /* for a pair to reach traffic; for a child on its own */
#define MSG_LEN 1024
#define LINE_LEN 512
/* A child with nothing to do sleeps this long: 100 children spinning on a
 * few cores would starve the ones still connecting. */
#define IDLE_US 1000

static unsigned multiplier(void)
{
	const char *v = getenv("CCI_TEST_TIMEOUT_MULTIPLIER");
	long m = v ? strtol(v, NULL, 10) : 1;

	return m >= 1 && m <= 100 ? (unsigned)m : 1;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ children */

static cci_endpoint_t *child_endpoint(const char *who)
{
	cci_endpoint_t *ep = NULL;
	uint32_t caps = 0;
	int rc = cci_init(CCI_ABI_VERSION, 0, &caps);

	if (rc == CCI_SUCCESS)
		rc = cci_create_endpoint(NULL, 0, &ep, NULL);
	if (rc != CCI_SUCCESS) {
		fprintf(stderr, "leftover_kill %s (pid %d): no endpoint: %s\n", who, (int)getpid(),
		        cci_strerror(NULL, (enum cci_status)rc));
		exit(1);
	}
	return ep;
}

/* Accept every request and return every event until killed (or WAIT_S
 * later, should the test be gone). */
static int run_server(void)
{
	cci_endpoint_t *ep = child_endpoint("server");
	double end = now_s() + WAIT_S * multiplier();
	char *uri = NULL;
	cci_event_t *ev;

	if (cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS)
		return 1;
	printf("uri %s\n", uri);
	fflush(stdout);
	free(uri);
	while (now_s() < end) {
		if (cci_get_event(ep, &ev) != CCI_SUCCESS) {
			usleep(IDLE_US);
			continue;
		}
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			cci_accept(ev, NULL);
		cci_return_event(ev);
	}
	return 1;
}

/* The client's events: the connection, and whether a send completed. */
static void client_event(cci_event_t *ev, cci_connection_t **conn, int *sent_ok)
{
	if (ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_SUCCESS)
		*conn = ev->connect.connection;
	else if (ev->type == CCI_EVENT_CONNECT)
		fprintf(stderr, "leftover_kill client (pid %d): connect failed: %s\n",
		        (int)getpid(), cci_strerror(NULL, ev->connect.status));
	if (ev->type == CCI_EVENT_SEND && ev->send.status == CCI_SUCCESS && !*sent_ok) {
		*sent_ok = 1;
		printf("sending\n"); /* the test kills us from now on */
		fflush(stdout);
	}
	cci_return_event(ev);
}

/* Connect to uri and send without pause until killed. */
static int run_client(const char *uri)
{
	cci_endpoint_t *ep = child_endpoint("client");
	struct timeval tv = { .tv_sec = WAIT_S * (long)multiplier() };
	double end = now_s() + WAIT_S * multiplier();
	cci_connection_t *conn = NULL;
	static char msg[MSG_LEN];
	const uint32_t len = MSG_LEN;
	int sent_ok = 0;
	cci_event_t *ev;

	if (cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &tv) != CCI_SUCCESS)
		return 1;
	while (now_s() < end) {
		int rc = CCI_EAGAIN, events = 0;

		if (conn) /* no room (EAGAIN, ENOBUFS): progress first */
			rc = cci_send(conn, msg, len < conn->max_send_size ? len : conn->max_send_size,
			              NULL, 0);
		for (; cci_get_event(ep, &ev) == CCI_SUCCESS; events++)
			client_event(ev, &conn, &sent_ok);
		if (rc != CCI_SUCCESS && !events)
			usleep(IDLE_US);
	}
	return 1;
}

/* The next process of the library: it only makes an endpoint, which is
 * where the plugins sweep, and leaves cleanly. */
static int run_next(void)
{
	cci_endpoint_t *ep = child_endpoint("next");

	if (cci_destroy_endpoint(ep) != CCI_SUCCESS || cci_finalize() != CCI_SUCCESS)
		return 1;
	return 0;
}

/* ---------------------------------------------------------------- test */

struct child {
	pid_t pid;           /* 0: none */
	int out;             /* its stdout, -1 when none */
	char line[LINE_LEN]; /* its first line, once it ends in '\n' */
	size_t len;
};

/* A pair on its way: the server starts, gives its URI, the client starts
 * and says it is sending; then both are killed. */
struct pair {
	struct child srv, cli;
	double end; /* its deadline */
};

struct run {
	struct pair slot[WINDOW];
	pid_t killed[2 * KILL_PAIRS];
	int started, nkilled, traffic, before;
	char sm_base[64];
};

static int spawn(struct child *c, const char *mode, const char *arg)
{
	int p[2];

	memset(c, 0, sizeof(*c));
	c->out = -1;
	if (pipe(p) != 0)
		return -1;
	c->pid = fork();
	if (c->pid == 0) {
		dup2(p[1], STDOUT_FILENO);
		close(p[0]);
		close(p[1]);
		execl("/proc/self/exe", "leftover_kill", mode, arg, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	c->out = p[0];
	return c->pid > 0 ? 0 : -1;
}

static int has_line(const struct child *c)
{
	return c->len > 0 && c->line[c->len - 1] == '\n';
}

/* Read what c wrote; a child that died without a line gets an empty one. */
static void child_read(struct child *c)
{
	ssize_t r = read(c->out, c->line + c->len, sizeof(c->line) - 1 - c->len);
	char *nl;

	if (r <= 0) {
		c->line[c->len++] = '\n';
		return;
	}
	c->len += (size_t)r;
	nl = memchr(c->line, '\n', c->len);
	if (nl)
		c->len = (size_t)(nl - c->line) + 1; /* the first line is all we need */
	else if (c->len == sizeof(c->line) - 1)
		c->line[c->len++] = '\n';
}

/* Whether pid has a shm region or an sm directory; lists them. */
static int has_leftovers(pid_t pid, const char *sm_base, int verbose)
{
	char prefix[32], path[300];
	struct dirent *e;
	DIR *d = opendir("/dev/shm");
	int found = 0;

	snprintf(prefix, sizeof(prefix), "%d:", (int)pid);
	while (d && (e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		found++;
		if (verbose)
			fprintf(stderr, "  left: /dev/shm/%s (pid %d)\n", e->d_name, (int)pid);
	}
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/%d", sm_base, (int)pid);
	if (access(path, F_OK) == 0) {
		found++;
		if (verbose)
			fprintf(stderr, "  left: %s (pid %d)\n", path, (int)pid);
	}
	return found;
}

static void child_kill(struct child *c, struct run *r)
{
	int status = 0;

	if (c->pid <= 0)
		return;
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &status, 0);
	/* One that ended before the kill says how: the test then fails on
	 * the traffic count, and this is why. */
	if (WIFEXITED(status))
		fprintf(stderr, "leftover_kill: pid %d ended before the kill: exit status %d\n",
		        (int)c->pid, WEXITSTATUS(status));
	else if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
		fprintf(stderr, "leftover_kill: pid %d ended before the kill: signal %d (%s)\n",
		        (int)c->pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
	close(c->out);
	r->killed[r->nkilled++] = c->pid;
	/* Counted at once, before another process's sweep can remove it. */
	r->before += has_leftovers(c->pid, r->sm_base, 0) > 0;
	c->pid = 0;
	c->out = -1;
}

/* Start the next pair in slot p, if pairs remain. */
static int pair_start(struct run *r, struct pair *p)
{
	if (r->started == KILL_PAIRS)
		return 0;
	r->started++;
	p->end = now_s() + WAIT_S * multiplier();
	p->cli = (struct child){ .pid = 0, .out = -1 };
	return spawn(&p->srv, "--server", NULL);
}

/* Move p on by what its children wrote; kill it once the client sends,
 * or at its deadline, and start the next. */
static int pair_step(struct run *r, struct pair *p)
{
	if (p->srv.pid > 0 && !p->cli.pid && has_line(&p->srv)) {
		p->srv.line[p->srv.len - 1] = '\0';
		if (strncmp(p->srv.line, "uri ", 4) != 0 ||
		    spawn(&p->cli, "--client", p->srv.line + 4) != 0) {
			fprintf(stderr, "leftover_kill: server pid %d gave no URI\n",
			        (int)p->srv.pid);
			p->end = 0; /* give it up */
		}
	}
	if (p->srv.pid <= 0)
		return 0;
	if (p->cli.pid > 0 && has_line(&p->cli) && strncmp(p->cli.line, "sending", 7) == 0)
		r->traffic += 2;
	else if (now_s() < p->end && !(p->cli.pid > 0 && has_line(&p->cli)))
		return 0;
	child_kill(&p->srv, r);
	child_kill(&p->cli, r);
	return pair_start(r, p);
}

/* The pipes of the children whose line is still to come. */
static nfds_t poll_set(struct run *r, struct pollfd *pf, struct child **who)
{
	nfds_t n = 0;

	for (int i = 0; i < WINDOW; i++) {
		struct child *c[2] = { &r->slot[i].srv, &r->slot[i].cli };

		for (int k = 0; k < 2; k++) {
			if (c[k]->pid <= 0 || has_line(c[k]))
				continue;
			pf[n] = (struct pollfd){ .fd = c[k]->out, .events = POLLIN };
			who[n++] = c[k];
		}
	}
	return n;
}

/* Every pair started, brought to traffic and killed, WINDOW at a time. */
static int kill_all(struct run *r)
{
	struct pollfd pf[2 * WINDOW];
	struct child *who[2 * WINDOW];

	for (int i = 0; i < WINDOW; i++)
		if (pair_start(r, &r->slot[i]) != 0)
			return -1;
	while (r->nkilled < 2 * KILL_PAIRS) {
		nfds_t n = poll_set(r, pf, who);

		if (n && poll(pf, n, 100) < 0 && errno != EINTR)
			return -1;
		for (nfds_t i = 0; i < n; i++)
			if (pf[i].revents)
				child_read(who[i]);
		for (int i = 0; i < WINDOW; i++)
			if (pair_step(r, &r->slot[i]) != 0)
				return -1;
		if (!n && r->started == KILL_PAIRS && r->nkilled < 2 * KILL_PAIRS)
			break; /* nothing left to wait for: a pair lost its server */
	}
	return 0;
}

static int run_next_process(pid_t *next_pid)
{
	struct child c;
	int status;

	if (spawn(&c, "--next", NULL) != 0)
		return -1;
	*next_pid = c.pid;
	waitpid(c.pid, &status, 0);
	close(c.out);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int run_test(int expect_leftovers)
{
	static struct run r;
	pid_t next_pid = 0;
	double t0 = now_s();
	int after = 0;

	snprintf(r.sm_base, sizeof(r.sm_base), "/tmp/cci-sm-%u", (unsigned)geteuid());
	if (kill_all(&r) != 0) {
		fprintf(stderr, "leftover_kill: cannot fork or exec /proc/self/exe: %s\n",
		        strerror(errno));
		return 1;
	}
	printf("%d processes killed (%d of them mid-traffic) in %.1f s; %d left something\n",
	       r.nkilled, r.traffic, now_s() - t0, r.before);
	if (r.traffic < 2 * KILL_PAIRS) {
		fprintf(stderr, "FAIL: only %d of %d processes reached traffic before the kill\n",
		        r.traffic, 2 * KILL_PAIRS);
		return 1;
	}
	if (expect_leftovers && r.before == 0) {
		fprintf(stderr, "FAIL: no killed process left anything on this transport: the "
		        "check after the next process proves nothing\n");
		return 1;
	}
	if (run_next_process(&next_pid) != 0) {
		fprintf(stderr, "FAIL: the next process (pid %d) could not create an endpoint\n",
		        (int)next_pid);
		return 1;
	}
	for (int i = 0; i < r.nkilled; i++)
		after += has_leftovers(r.killed[i], r.sm_base, 1) > 0;
	after += has_leftovers(next_pid, r.sm_base, 1) > 0;
	printf("after the next process (pid %d): %d processes left something\n", (int)next_pid,
	       after);
	if (after)
		fprintf(stderr, "FAIL: %d processes' leftovers remain (listed above)\n", after);
	return after ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "--server") == 0)
		return run_server();
	if (argc >= 3 && strcmp(argv[1], "--client") == 0)
		return run_client(argv[2]);
	if (argc >= 2 && strcmp(argv[1], "--next") == 0)
		return run_next();
	return run_test(argc >= 2 && strcmp(argv[1], "--expect-leftovers") == 0);
}
