/*
 * sm_storm_test.c - many connects at once on sm, and the limits of a
 * process.  A server endpoint runs in a child process; this process is
 * the client endpoint.
 *
 * More connects than the listening backlog holds, made while the server
 * is stopped, wait and then all connect (or time out with CCI_ETIMEDOUT
 * when given a timeout), never fail otherwise.  A connection holds one
 * descriptor and two mappings on each side.  A process out of
 * descriptors, or of locked memory for a ring, fails a connect with
 * CCI_ENOMEM at once; a server out of descriptors neither spins nor
 * refuses: its clients wait, and connect once it has descriptors again.
 * After a send timeout, the sends queued longer than the timeout complete
 * with CCI_ETIMEDOUT, the younger ones with CCI_ERR_DISCONNECTED.  Among
 * hundreds of idle connections with a keepalive (each visited only when
 * its probe or expiry is due), a live peer's raise nothing, a frozen
 * peer's each raise KEEPALIVE_TIMEDOUT once, on time.
 *
 * A case this host cannot run prints "SKIP <test>: <why>"; when every
 * case that ran skipped, the run exits 77 (skipped), never a silent pass.
 */
#include <CUnit/Basic.h>
#include <linux/capability.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cci.h"
#include "harness.h" /* h_count_fds, h_now_ms, h_sleep_ms */
#include "sm_ctl_wire.h" /* SM_BACKLOG */

#define WAIT_MS 20000u /* bound of every wait; far above what is needed */

static unsigned skips;

/* CUnit has no skip: say which case skipped and why, and count it. */
static void skip(const char *why)
{
	printf("\n    SKIP %s: %s\n", CU_get_current_test()->pName, why);
	skips++;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* the library's clock */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What the server child reports when told to quit. */
struct srv_report {
	long accepted, failed, requests;
	long fds0, fds, maps0, maps;
	double cpu_s;
};

struct srv {
	pid_t pid;
	int cmd, rep; /* our ends of its pipes */
	char uri[256];
};

static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Raise the soft descriptor limit to want (at most the hard one). */
static rlim_t nofile_raise(rlim_t want)
{
	struct rlimit rl;

	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want) {
		rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	return rl.rlim_cur;
}

/* The server's events: accept every request (or keep them all, held),
 * count the outcomes. */
static void srv_event(cci_event_t *ev, int accept, struct srv_report *r)
{
	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		r->requests++;
		if (!accept)
			return; /* held: its socket stays open */
		cci_accept(ev, NULL);
		break;
	case CCI_EVENT_ACCEPT:
		if (ev->accept.status == CCI_SUCCESS)
			r->accepted++;
		else
			r->failed++;
		break;
	default:
		break;
	}
	cci_return_event(ev);
}

/* The child: serve until told to quit ('q'), then report.  spare > 0
 * leaves it that many descriptors (its soft limit), until told 'r'. */
static _Noreturn void srv_main(int cmd, int rep, int accept, int spare)
{
	struct srv_report r = { 0 };
	struct pollfd p = { .fd = cmd, .events = POLLIN };
	struct rlimit saved;
	cci_endpoint_t *ep;
	cci_event_t *ev;
	char *uri, c = 0;
	double c0;

	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS ||
	    cci_create_endpoint(NULL, 0, &ep, NULL) != CCI_SUCCESS ||
	    cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS)
		_exit(2);
	r.fds0 = h_count_fds();
	r.maps0 = count_maps();
	getrlimit(RLIMIT_NOFILE, &saved);
	if (spare > 0) {
		struct rlimit rl = { (rlim_t)(r.fds0 + spare), saved.rlim_max };
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (write(rep, uri, strlen(uri) + 1) < 0)
		_exit(2);
	c0 = cpu_s();
	while (c != 'q') {
		if (poll(&p, 1, 0) == 1) {
			if (read(cmd, &c, 1) != 1)
				break;
			if (c == 'r') /* descriptors again */
				setrlimit(RLIMIT_NOFILE, &saved);
			continue;
		}
		if (cci_get_event(ep, &ev) == CCI_SUCCESS)
			srv_event(ev, accept, &r);
		else if (!accept)
			usleep(1000); /* only the control thread works: its time shows */
	}
	r.cpu_s = cpu_s() - c0;
	r.fds = h_count_fds();
	r.maps = count_maps();
	if (write(rep, &r, sizeof(r)) < 0)
		_exit(2);
	_exit(0);
}

static void srv_start(struct srv *s, int accept, int spare)
{
	int c[2], r[2];
	ssize_t n;

	CU_ASSERT_FATAL(pipe(c) == 0 && pipe(r) == 0);
	s->pid = fork();
	CU_ASSERT_FATAL(s->pid >= 0);
	if (s->pid == 0) {
		close(c[1]);
		close(r[0]);
		srv_main(c[0], r[1], accept, spare);
	}
	close(c[0]);
	close(r[1]);
	s->cmd = c[1];
	s->rep = r[0];
	n = read(s->rep, s->uri, sizeof(s->uri) - 1);
	CU_ASSERT_FATAL(n > 0);
	s->uri[n] = '\0';
}

static void srv_stop(struct srv *s, struct srv_report *r)
{
	kill(s->pid, SIGCONT);
	CU_ASSERT(write(s->cmd, "q", 1) == 1);
	memset(r, 0, sizeof(*r));
	CU_ASSERT(read(s->rep, r, sizeof(*r)) == (ssize_t)sizeof(*r));
	waitpid(s->pid, NULL, 0);
	close(s->cmd);
	close(s->rep);
}

/* Stop the server and wait until it is stopped (its threads may run a
 * moment after kill returns). */
static void srv_freeze(struct srv *s)
{
	char path[64], buf[512], *p = NULL;

	kill(s->pid, SIGSTOP);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)s->pid);
	for (uint64_t stop = h_now_ms() + WAIT_MS; h_now_ms() < stop; h_sleep_ms(1)) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f)
			fclose(f);
		buf[n] = '\0';
		p = strrchr(buf, ')'); /* the state follows the command's name */
		if (p && p[1] == ' ' && p[2] == 'T')
			return;
	}
	CU_FAIL("the server did not stop");
}

/* Collect CONNECT events until n have come or ms have passed; statuses
 * counted in st[status & 255].  Returns how many came. */
static long connects_collect(cci_endpoint_t *ep, long n, unsigned ms, long *st)
{
	long got = 0;

	for (uint64_t stop = h_now_ms() + ms; got < n && h_now_ms() < stop;) {
		cci_event_t *ev;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT) {
			st[ev->connect.status & 255]++;
			got++;
		}
		cci_return_event(ev);
	}
	return got;
}

/* Collect n CONNECT events within WAIT_MS. */
static long connects_wait(cci_endpoint_t *ep, long n, long *st)
{
	return connects_collect(ep, n, WAIT_MS, st);
}

/* More connects than the server's backlog holds (SM_BACKLOG, capped by
 * net.core.somaxconn: the listen(2) the endpoint makes); 0 if this host
 * cannot afford them (descriptor limit), the case then skipped. */
static long storm_size(void)
{
	FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
	long backlog = SM_BACKLOG, n;
	char why[128];

	if (f) {
		long somax;
		if (fscanf(f, "%ld", &somax) == 1 && somax < backlog)
			backlog = somax;
		fclose(f);
	}
	n = backlog + 400;
	if (nofile_raise((rlim_t)(2 * n + 200)) < (rlim_t)(2 * n + 200)) {
		snprintf(why, sizeof(why), "%ld connects need %ld descriptors", n, 2 * n + 200);
		skip(why);
		return 0;
	}
	return n;
}

/* n connects at once to a stopped server, each with timeout (NULL: none);
 * none may complete while it is stopped, unless it timed out. */
static void storm_stopped(cci_endpoint_t *ep, struct srv *s, long n, const struct timeval *tv)
{
	cci_event_t *ev;

	srv_freeze(s);
	for (long i = 0; i < n; i++)
		CU_ASSERT_EQUAL_FATAL(cci_connect(ep, s->uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, tv),
		                      CCI_SUCCESS);
	if (tv)
		return;
	h_sleep_ms(200);
	CU_ASSERT_EQUAL(cci_get_event(ep, &ev), CCI_EAGAIN); /* no refusal: they wait */
}

static void test_backlog_full_waits(void)
{
	long n = storm_size(), st[256] = { 0 };
	struct srv s;
	struct srv_report r;
	cci_endpoint_t *ep;
	int fds0;

	if (n == 0)
		return;
	srv_start(&s, 1, 0);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL) == CCI_SUCCESS);
	fds0 = h_count_fds();
	storm_stopped(ep, &s, n, NULL);
	kill(s.pid, SIGCONT);
	CU_ASSERT_EQUAL(connects_wait(ep, n, st), n);
	CU_ASSERT_EQUAL(st[CCI_SUCCESS], n);
	CU_ASSERT(h_count_fds() - fds0 <= n + 8);
	cci_destroy_endpoint(ep);
	srv_stop(&s, &r);
	CU_ASSERT_EQUAL(r.accepted, n);
}

static void test_backlog_full_times_out(void)
{
	long n = storm_size(), st[256] = { 0 };
	struct timeval tv = { 0, 300000 };
	struct srv s;
	struct srv_report r;
	cci_endpoint_t *ep;
	uint64_t t0;

	if (n == 0)
		return;
	srv_start(&s, 1, 0);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL) == CCI_SUCCESS);
	t0 = h_now_ms();
	storm_stopped(ep, &s, n, &tv);
	CU_ASSERT_EQUAL(connects_wait(ep, n, st), n);
	CU_ASSERT_EQUAL(st[CCI_ETIMEDOUT], n);
	CU_ASSERT(h_now_ms() - t0 >= 300);
	kill(s.pid, SIGCONT);
	/* The server, flooded with requests whose clients left, still serves. */
	CU_ASSERT_EQUAL(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                CCI_SUCCESS);
	memset(st, 0, sizeof(st));
	CU_ASSERT_EQUAL(connects_wait(ep, 1, st), 1);
	CU_ASSERT_EQUAL(st[CCI_SUCCESS], 1);
	cci_destroy_endpoint(ep);
	srv_stop(&s, &r);
}

/* One descriptor and two mappings (the two rings) per connection, on
 * each side: the peer's doorbell and page are held once per peer. */
static void test_one_descriptor_per_connection(void)
{
	const long n = 500;
	long st[256] = { 0 };
	struct srv s;
	struct srv_report r;
	cci_endpoint_t *ep;
	int fds0, maps0;

	if (nofile_raise(4 * n) < (rlim_t)(4 * n)) {
		skip("500 connections need 2000 descriptors");
		return;
	}
	srv_start(&s, 1, 0);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL) == CCI_SUCCESS);
	fds0 = h_count_fds();
	maps0 = count_maps();
	for (long i = 0; i < n; i++)
		CU_ASSERT_EQUAL_FATAL(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0,
		                                  NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(connects_wait(ep, n, st), n);
	CU_ASSERT_EQUAL(st[CCI_SUCCESS], n);
	printf("\n    client: %d descriptors and %d mappings more for %ld connections ",
	       h_count_fds() - fds0, count_maps() - maps0, n);
	CU_ASSERT(h_count_fds() - fds0 <= n + 2);
	CU_ASSERT(count_maps() - maps0 <= 2 * n + n / 10); /* malloc's own mappings besides */
	srv_stop(&s, &r);
	printf("\n    server: %ld descriptors and %ld mappings more ", r.fds - r.fds0,
	       r.maps - r.maps0);
	CU_ASSERT_EQUAL(r.accepted, n);
	CU_ASSERT(r.fds - r.fds0 <= n + 2);
	CU_ASSERT(r.maps - r.maps0 <= 2 * n + n / 10);
	cci_destroy_endpoint(ep);
}

/* This process out of descriptors: each connect succeeds or fails with
 * CCI_ENOMEM (from cci_connect or in its event), at once. */
static void test_client_out_of_descriptors(void)
{
	const long n = 80;
	long st[256] = { 0 }, ok = 0, nomem = 0, events = 0;
	struct rlimit saved, rl;
	struct srv s;
	struct srv_report r;
	cci_endpoint_t *ep;

	srv_start(&s, 1, 0);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL) == CCI_SUCCESS);
	getrlimit(RLIMIT_NOFILE, &saved);
	rl = saved;
	rl.rlim_cur = (rlim_t)h_count_fds() + 40;
	CU_ASSERT_FATAL(setrlimit(RLIMIT_NOFILE, &rl) == 0);
	for (long i = 0; i < n; i++) {
		int rc = cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL);
		CU_ASSERT(rc == CCI_SUCCESS || rc == CCI_ENOMEM);
		events += rc == CCI_SUCCESS;
		nomem += rc == CCI_ENOMEM;
	}
	CU_ASSERT_EQUAL(connects_wait(ep, events, st), events);
	setrlimit(RLIMIT_NOFILE, &saved);
	ok = st[CCI_SUCCESS];
	nomem += st[CCI_ENOMEM];
	printf("\n    %ld connected, %ld CCI_ENOMEM ", ok, nomem);
	CU_ASSERT_EQUAL(ok + nomem, n);
	CU_ASSERT(ok >= 20 && nomem >= 20);
	cci_destroy_endpoint(ep);
	srv_stop(&s, &r);
}

/* A server out of descriptors, its application holding every request:
 * its thread does not spin on the listening socket, and every connect
 * waits until its timeout (CCI_ETIMEDOUT), none refused nor failed with
 * CCI_ENOMEM for the server's shortage. */
static void test_server_out_of_descriptors(void)
{
	const long n = 200;
	struct timeval tv = { 1, 0 };
	long st[256] = { 0 };
	struct srv s;
	struct srv_report r;
	cci_endpoint_t *ep;

	srv_start(&s, 0, 40);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL) == CCI_SUCCESS);
	for (long i = 0; i < n; i++)
		CU_ASSERT_EQUAL_FATAL(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0,
		                                  &tv), CCI_SUCCESS);
	CU_ASSERT_EQUAL(connects_wait(ep, n, st), n);
	srv_stop(&s, &r);
	printf("\n    %ld timed out, %ld CCI_ENOMEM; server: %ld requests held, %.2f s of CPU ",
	       st[CCI_ETIMEDOUT], st[CCI_ENOMEM], r.requests, r.cpu_s);
	CU_ASSERT_EQUAL(st[CCI_ETIMEDOUT], n);
	CU_ASSERT(r.requests >= 20 && r.requests < n);
	CU_ASSERT(r.cpu_s < 0.5);
	cci_destroy_endpoint(ep);
}

/*
 * A server short of descriptors for a moment, its application accepting
 * every request: a server with a few descriptors accepts sockets whose
 * requests it then cannot receive (each needs three more).  No connect
 * fails meanwhile; they wait, and all connect once it has descriptors
 * again.
 */
static void test_server_short_for_a_moment(void)
{
	const long n = 200;
	struct timeval tv = { WAIT_MS / 2000, 0 };
	long st[256] = { 0 }, early;
	struct srv s;
	struct srv_report r;
	cci_endpoint_t *ep;

	srv_start(&s, 1, 40);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL) == CCI_SUCCESS);
	for (long i = 0; i < n; i++)
		CU_ASSERT_EQUAL_FATAL(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0,
		                                  &tv), CCI_SUCCESS);
	early = connects_collect(ep, LONG_MAX, 500, st);
	printf("\n    %ld connected while the server was short, %ld failed ", st[CCI_SUCCESS],
	       early - st[CCI_SUCCESS]);
	CU_ASSERT_EQUAL(early, st[CCI_SUCCESS]); /* none failed */
	CU_ASSERT(early < n);                     /* the shortage was real */
	CU_ASSERT(write(s.cmd, "r", 1) == 1);
	CU_ASSERT_EQUAL(connects_wait(ep, n - early, st), n - early);
	CU_ASSERT_EQUAL(st[CCI_SUCCESS], n);
	cci_destroy_endpoint(ep);
	srv_stop(&s, &r);
	CU_ASSERT_EQUAL(r.accepted, n);
	CU_ASSERT_EQUAL(r.failed, 0);
}

/* Take CAP_IPC_LOCK out of this process's effective set (root would
 * bypass RLIMIT_MEMLOCK); 0 on success. */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) != 0)
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	return (int)syscall(SYS_capset, &h, d);
}

/* The child of test_ring_mapping_refused: its exit status is 0 when
 * cci_connect failed with CCI_ENOMEM, 77 when it could not set up the
 * limit, else 1. */
static _Noreturn void memlock_child(const char *uri)
{
	struct rlimit rl = { 768 << 10, 768 << 10 }; /* less than a ring (1 MiB) */
	cci_endpoint_t *ep;
	int rc;

	/* A child of fork() finds the library uninitialised. */
	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS ||
	    cci_create_endpoint(NULL, 0, &ep, NULL) != CCI_SUCCESS)
		_exit(1);
	/* The system call itself: a sanitizer makes mlockall() a no-op. */
	if (drop_ipc_lock() != 0 || setrlimit(RLIMIT_MEMLOCK, &rl) != 0 ||
	    syscall(SYS_mlockall, MCL_FUTURE) != 0)
		_exit(77);
	rc = cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &(struct timeval){ 2, 0 });
	_exit(rc == CCI_ENOMEM ? 0 : 1);
}

/*
 * Under mlockall(MCL_FUTURE), a mapping past RLIMIT_MEMLOCK fails with
 * EAGAIN.  A connect whose ring cannot be mapped so fails with CCI_ENOMEM
 * at once; it must not read EAGAIN as "the backlog is full" and wait.
 */
static void test_ring_mapping_refused(void)
{
	struct srv s;
	struct srv_report r;
	pid_t pid;
	int status = -1;

	srv_start(&s, 1, 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		memlock_child(s.uri);
	CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
	srv_stop(&s, &r);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		skip("cannot lower RLIMIT_MEMLOCK under mlockall here");
		return;
	}
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* More sends than the peer's ring holds (64 records, its default
 * recv_buf_count), fewer than it and our queue (send_buf_count, 64) do;
 * each send's call is timed: [t[i][0], t[i][1]] holds its enqueue. */
static void send_burst(cci_connection_t *c, long *ctx, long count, uint64_t (*t)[3])
{
	static char msg[64];

	for (long i = 0; i < count; i++, (*ctx)++) {
		t[*ctx][0] = now_ns();
		CU_ASSERT_EQUAL(cci_send(c, msg, sizeof(msg), (void *)*ctx, 0), CCI_SUCCESS);
		t[*ctx][1] = now_ns();
	}
}

/* Check the statuses of the sends, by what their times allow: a send that
 * got CCI_ETIMEDOUT waited longer than the timeout (to ns, its event was
 * there by t[i][2]); one that got CCI_ERR_DISCONNECTED was queued after
 * every one that timed out began; the oldest queued send timed out. */
static void send_statuses_check(const int *status, uint64_t (*t)[3], long sent, uint64_t to_ns)
{
	uint64_t late_start = 0;
	long first_failed = -1;

	for (long i = 0; i < sent; i++) {
		if (status[i] == CCI_SUCCESS)
			continue;
		if (first_failed < 0)
			first_failed = i;
		if (status[i] == CCI_ETIMEDOUT) {
			CU_ASSERT(t[i][2] - t[i][0] > to_ns);
			if (t[i][0] > late_start)
				late_start = t[i][0];
		} else {
			CU_ASSERT_EQUAL(status[i], CCI_ERR_DISCONNECTED);
		}
	}
	CU_ASSERT_FATAL(first_failed >= 0);
	CU_ASSERT_EQUAL(status[first_failed], CCI_ETIMEDOUT);
	for (long i = first_failed; i < sent; i++)
		if (status[i] == CCI_ERR_DISCONNECTED)
			CU_ASSERT(t[i][1] > late_start);
}

/*
 * The peer stopped: its ring fills, then sends queue.  With a send
 * timeout of 1 s, the sends queued at once wait past it and complete with
 * CCI_ETIMEDOUT; the ones queued 0.5 s later complete with
 * CCI_ERR_DISCONNECTED (they fail because the connection broke).  What
 * each status must be is judged from the measured times of its send and
 * event (send_statuses_check), so a slow machine makes no false failure.
 */
static void test_send_timeout_statuses(void)
{
	enum { BURST = 80, LATE = 3 };
	uint32_t to = 1000000;
	uint64_t t[BURST + LATE][3];
	int status[BURST + LATE];
	long st[256] = { 0 }, ctx = 0, done = 0;
	struct srv s;
	struct srv_report r;
	cci_endpoint_t *ep;
	cci_connection_t *c = NULL;
	cci_event_t *ev;

	srv_start(&s, 1, 0);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL) == CCI_SUCCESS);
	CU_ASSERT_FATAL(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &to) == CCI_SUCCESS);
	CU_ASSERT_FATAL(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL) ==
	                CCI_SUCCESS);
	for (uint64_t stop = h_now_ms() + WAIT_MS; !c && h_now_ms() < stop;) {
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT)
			c = ev->connect.connection;
		cci_return_event(ev);
	}
	CU_ASSERT_FATAL(c != NULL);
	srv_freeze(&s);
	send_burst(c, &ctx, BURST, t);
	h_sleep_ms(500);
	send_burst(c, &ctx, LATE, t);
	for (uint64_t stop = h_now_ms() + WAIT_MS; done < ctx && h_now_ms() < stop;) {
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_SEND) {
			long i = (long)ev->send.context;
			t[i][2] = now_ns();
			status[i] = ev->send.status;
			st[ev->send.status & 255]++;
			done++;
		}
		cci_return_event(ev);
	}
	printf("\n    %ld delivered, %ld CCI_ETIMEDOUT, %ld CCI_ERR_DISCONNECTED ", st[CCI_SUCCESS],
	       st[CCI_ETIMEDOUT], st[CCI_ERR_DISCONNECTED]);
	CU_ASSERT_EQUAL_FATAL(done, ctx);
	CU_ASSERT_EQUAL(st[CCI_SUCCESS], 64); /* placed in the ring at once */
	CU_ASSERT_EQUAL(st[CCI_SUCCESS] + st[CCI_ETIMEDOUT] + st[CCI_ERR_DISCONNECTED], ctx);
	send_statuses_check(status, t, ctx, (uint64_t)to * 1000u);
	cci_destroy_endpoint(ep);
	srv_stop(&s, &r);
}

enum { KA_LIVE = 256 };       /* connections to the server that stays live at first */
#define KA_LIVE_US 1000000u   /* their keepalive, the endpoint's */
#define KA_LONE_US 500000u    /* the lone connection's, set once it is open */
#define KA_SLACK_MS 2000u     /* a loaded machine's lateness */
#define KA_PROBE_LATE_MS 100u /* how late a loaded machine's tick may send a probe */

/* Pump events for up to ms, counting KEEPALIVE_TIMEDOUT events per
 * connection (its context is its index in n[]) and the time of the
 * first and last since t0; stops early once want have come. */
static unsigned ka_collect(cci_endpoint_t *ep, unsigned *n, uint64_t t0, unsigned ms,
                           unsigned want, uint64_t *first, uint64_t *last)
{
	unsigned got = 0;

	for (uint64_t stop = h_now_ms() + ms; got < want && h_now_ms() < stop;) {
		cci_event_t *ev;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_KEEPALIVE_TIMEDOUT) {
			uint64_t at = h_now_ms() - t0;
			n[(long)ev->keepalive.connection->context]++;
			if (got++ == 0)
				*first = at;
			*last = at;
		}
		cci_return_event(ev);
	}
	return got;
}

/* A frozen peer's connection times out by its deadline, never before the
 * peer could have been heard last: a quarter period before the freeze (the
 * probe's answer), earlier by as much as the tick sent that probe late.
 * at_ms counts from just before the freeze, so it is never short. */
static void ka_check_time(const char *who, uint64_t at_ms, uint32_t ka_us)
{
	uint32_t ka_ms = ka_us / 1000u;

	printf("\n    %s: KEEPALIVE_TIMEDOUT %llu ms after the freeze (keepalive %u ms) ", who,
	       (unsigned long long)at_ms, ka_ms);
	CU_ASSERT(at_ms + KA_PROBE_LATE_MS >= ka_ms * 3 / 4 && at_ms <= ka_ms + KA_SLACK_MS);
}

/*
 * KA_LIVE idle connections to server A with the endpoint's keepalive
 * (armed as each opens) and one to server B whose keepalive is set once
 * it is open.  B frozen: its connection alone raises KEEPALIVE_TIMEDOUT,
 * once, while A's, probed and answered, raise nothing for two and a half
 * of their periods.  Then A frozen: each of its connections raises one.
 */
static void test_keepalive_among_idle_connections(void)
{
	static unsigned n[KA_LIVE + 1];
	uint32_t ka_live = KA_LIVE_US, ka_lone = KA_LONE_US;
	long st[256] = { 0 };
	cci_connection_t *lone = NULL;
	struct srv a, b;
	struct srv_report r;
	cci_endpoint_t *ep;
	uint64_t t0, first = 0, last = 0;
	unsigned got, once = 0;

	if (nofile_raise(4 * KA_LIVE) < (rlim_t)(4 * KA_LIVE)) {
		skip("the connections need 1024 descriptors");
		return;
	}
	memset(n, 0, sizeof(n));
	srv_start(&a, 1, 0);
	srv_start(&b, 1, 0);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL) == CCI_SUCCESS);
	CU_ASSERT_FATAL(cci_set_opt(ep, CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT, &ka_live) == CCI_SUCCESS);
	for (long i = 0; i < KA_LIVE; i++)
		CU_ASSERT_EQUAL_FATAL(cci_connect(ep, a.uri, NULL, 0, CCI_CONN_ATTR_RO, (void *)i, 0,
		                                  NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_connect(ep, b.uri, NULL, 0, CCI_CONN_ATTR_RO,
	                                  (void *)(long)KA_LIVE, 0, NULL), CCI_SUCCESS);
	for (uint64_t stop = h_now_ms() + WAIT_MS; st[CCI_SUCCESS] < KA_LIVE + 1 &&
	     h_now_ms() < stop;) {
		cci_event_t *ev;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT) {
			st[ev->connect.status & 255]++;
			if ((long)ev->connect.context == KA_LIVE)
				lone = ev->connect.connection;
		}
		cci_return_event(ev);
	}
	CU_ASSERT_EQUAL_FATAL(st[CCI_SUCCESS], KA_LIVE + 1);
	CU_ASSERT_FATAL(lone != NULL);
	CU_ASSERT_FATAL(cci_set_opt(lone, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &ka_lone) ==
	                CCI_SUCCESS);

	t0 = h_now_ms();
	srv_freeze(&b);
	got = ka_collect(ep, n, t0, KA_LIVE_US / 1000u * 5 / 2, UINT_MAX, &first, &last);
	CU_ASSERT_EQUAL(got, 1);
	CU_ASSERT_EQUAL(n[KA_LIVE], 1);
	if (n[KA_LIVE] == 1)
		ka_check_time("the frozen peer's", first, ka_lone);

	t0 = h_now_ms();
	srv_freeze(&a);
	got = ka_collect(ep, n, t0, KA_LIVE_US / 1000u + KA_SLACK_MS, KA_LIVE, &first, &last);
	CU_ASSERT_EQUAL(got, KA_LIVE);
	for (long i = 0; i < KA_LIVE; i++)
		once += n[i] == 1;
	CU_ASSERT_EQUAL(once, KA_LIVE);
	if (got == KA_LIVE) {
		ka_check_time("the first of the others", first, ka_live);
		ka_check_time("the last", last, ka_live);
	}
	/* Once each: the keepalives are off until set again. */
	CU_ASSERT_EQUAL(ka_collect(ep, n, t0, 300, UINT_MAX, &first, &last), 0);
	cci_destroy_endpoint(ep);
	srv_stop(&a, &r);
	CU_ASSERT_EQUAL(r.accepted, KA_LIVE);
	srv_stop(&b, &r);
	CU_ASSERT_EQUAL(r.accepted, 1);
}

int main(void)
{
	CU_pSuite s;
	unsigned ran;
	int failed;

	signal(SIGPIPE, SIG_IGN);
	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("sm connect storms and limits", NULL, NULL);
	CU_add_test(s, "more connects than the backlog, server stopped: all wait, then connect",
	            test_backlog_full_waits);
	CU_add_test(s, "the same with a timeout: all CCI_ETIMEDOUT, the server still serves",
	            test_backlog_full_times_out);
	CU_add_test(s, "a connection holds one descriptor and two mappings on each side",
	            test_one_descriptor_per_connection);
	CU_add_test(s, "a client out of descriptors: connected or CCI_ENOMEM at once",
	            test_client_out_of_descriptors);
	CU_add_test(s, "a server out of descriptors: no spin, every connect waits (CCI_ETIMEDOUT)",
	            test_server_out_of_descriptors);
	CU_add_test(s, "a server short of descriptors for a moment: no connect fails, all connect",
	            test_server_short_for_a_moment);
	CU_add_test(s, "a ring past RLIMIT_MEMLOCK: CCI_ENOMEM at once, no wait",
	            test_ring_mapping_refused);
	CU_add_test(s, "send timeout: queued past it CCI_ETIMEDOUT, younger CCI_ERR_DISCONNECTED",
	            test_send_timeout_statuses);
	CU_add_test(s, "among 257 idle connections with a keepalive, a frozen peer's time out once, "
	            "on time, a live peer's never", test_keepalive_among_idle_connections);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = (int)(CU_get_number_of_failures() + CU_get_number_of_tests_failed());
	ran = CU_get_number_of_tests_run();
	CU_cleanup_registry();
	cci_finalize();
	if (skips)
		printf("%u of %u test(s) skipped (SKIP lines above)\n", skips, ran);
	if (!failed && skips == ran)
		return 77; /* nothing could run here: meson reports a skip */
	return failed ? 1 : 0;
}
