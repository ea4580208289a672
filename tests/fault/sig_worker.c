/*
 * sig_worker.c - the phases a signal test interrupts (sig_worker.h).
 *
 * Every loop here is bounded by SIG_WORKER_BOUND_MS: a worker whose
 * signal never came, or whose handler's flag is never looked at because
 * a call does not return, is ended by the test (SIGKILL) and counted.
 */
#include "sig_worker.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "fault.h"

static volatile sig_atomic_t sig_seen;

struct worker {
	const struct sig_job *job;
	int inited;              /* cci_init done and not finalized */
	cci_endpoint_t *ep;
	cci_connection_t *conn;
	uint64_t deadline;
	uint32_t outstanding;    /* sends not completed yet */
};

static void sig_record(int sig)
{
	sig_seen = sig;
}

/* The application's decision, whatever the forking process had. */
static void dispositions_set(enum sig_mode mode)
{
	const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	struct sigaction sa = { .sa_handler = mode == SIG_MODE_HANDLER ? sig_record :
	                                      mode == SIG_MODE_IGNORED ? SIG_IGN : SIG_DFL };
	sigset_t set;

	sigemptyset(&sa.sa_mask);
	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sigaction(sigs[i], &sa, NULL);
		sigaddset(&set, sigs[i]);
	}
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/* Tear down what is open (the handler's decision: quit cleanly). */
_Noreturn static void worker_quit(struct worker *w, int code)
{
	if (w->ep)
		cci_destroy_endpoint(w->ep);
	if (w->inited)
		cci_finalize();
	_exit(code); /* no leak report or atexit handler changes the status */
}

/* Between two calls: has the handler seen a signal, is time up? */
static void worker_check(struct worker *w)
{
	if (sig_seen)
		worker_quit(w, SIG_EXIT_HANDLED + sig_seen);
	if (h_now_ms() > w->deadline)
		worker_quit(w, SIG_EXIT_IDLE);
}

_Noreturn static void worker_fail(struct worker *w, const char *what, int rc)
{
	fprintf(stderr, "signal worker (pid %d): %s failed: %s\n", (int)getpid(), what,
	        h_status_name(rc));
	if (sig_seen) /* the call failed after the signal: still the handler's exit */
		worker_quit(w, SIG_EXIT_HANDLED + sig_seen);
	_exit(SIG_EXIT_FAILED);
}

static void worker_ready(struct worker *w)
{
	if (w->job->ready_fd >= 0 && write(w->job->ready_fd, "R", 1) != 1)
		_exit(SIG_EXIT_FAILED);
}

static void worker_init(struct worker *w)
{
	int rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });

	if (rc != CCI_SUCCESS)
		worker_fail(w, "cci_init", rc);
	w->inited = 1;
	worker_check(w);
}

static void worker_endpoint(struct worker *w)
{
	cci_device_t *dev = w->job->default_config ? NULL : h_find_device();
	int rc;

	if (!w->job->default_config && !dev)
		worker_fail(w, "finding a device of the transport", CCI_ENODEV);
	rc = cci_create_endpoint(dev, 0, &w->ep, NULL);
	if (rc != CCI_SUCCESS)
		worker_fail(w, "cci_create_endpoint", rc);
	worker_check(w);
}

/* Hand back one event if there is one; counts send completions. */
static void worker_poll(struct worker *w)
{
	cci_event_t *ev;
	int rc = cci_get_event(w->ep, &ev);

	if (rc == CCI_EAGAIN || rc == CCI_ENOBUFS)
		return;
	if (rc != CCI_SUCCESS)
		worker_fail(w, "cci_get_event", rc);
	if (ev->type == CCI_EVENT_SEND && w->outstanding)
		w->outstanding--;
	else if (ev->type == CCI_EVENT_CONNECT)
		w->conn = ev->connect.status == CCI_SUCCESS ? ev->connect.connection : NULL;
	cci_return_event(ev);
}

static void worker_connect(struct worker *w)
{
	struct timeval tv = { .tv_sec = 3 };
	int rc = cci_connect(w->ep, w->job->uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &tv);

	if (rc != CCI_SUCCESS)
		worker_fail(w, "cci_connect", rc);
	w->conn = NULL;
	while (!w->conn) {
		worker_check(w);
		worker_poll(w);
	}
}

/* Keep up to 16 messages in flight; the server echoes each. */
static void worker_send(struct worker *w)
{
	static const char msg[64] = "a message the signal may catch in flight";
	int rc;

	if (w->outstanding >= 16)
		return;
	rc = cci_send(w->conn, msg, sizeof(msg), NULL, 0);
	if (rc == CCI_SUCCESS)
		w->outstanding++;
	else if (rc != CCI_ENOBUFS)
		worker_fail(w, "cci_send", rc);
}

/* Is the test's go byte there? */
static int worker_go(const struct worker *w)
{
	struct pollfd pfd = { .fd = w->job->go_fd, .events = POLLIN };

	return w->job->go_fd >= 0 && poll(&pfd, 1, 0) == 1;
}

_Noreturn void sig_new_peer_run(const char *uri, int default_config)
{
	struct sig_job job = { .default_config = default_config, .go_fd = -1, .ready_fd = -1 };
	struct worker peer = { .job = &job, .deadline = h_now_ms() + SIG_WORKER_BOUND_MS };
	int rc;

	if (default_config) {
		unsetenv("CCI_CONFIG");
		unsetenv("CCI_CTP");
	}
	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS ||
	    cci_create_endpoint(default_config ? NULL : h_find_device(), 0, &peer.ep,
	                        NULL) != CCI_SUCCESS ||
	    cci_connect(peer.ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0,
	                &(struct timeval){ .tv_sec = 3 }) != CCI_SUCCESS)
		_exit(1);
	while (!peer.conn && h_now_ms() < peer.deadline)
		worker_poll(&peer);
	rc = peer.conn ? cci_send(peer.conn, "still here", 10, NULL, 0) : CCI_ERROR;
	peer.outstanding = rc == CCI_SUCCESS;
	while (peer.outstanding && h_now_ms() < peer.deadline)
		worker_poll(&peer);
	rc = rc == CCI_SUCCESS && !peer.outstanding ? 0 : 1;
	cci_destroy_endpoint(peer.ep); /* leaves no region behind */
	cci_finalize();
	_exit(rc);
}

/* How many names in /dev/shm this process's libfabric shm regions have
 * ("<pid>:<uid>:<n>"); none on the other transports. */
static int worker_shm_regions(void)
{
	char prefix[32];
	struct dirent *d;
	DIR *dir = opendir("/dev/shm");
	int n = 0;

	snprintf(prefix, sizeof(prefix), "%d:", (int)getpid());
	while (dir && (d = readdir(dir)))
		n += strncmp(d->d_name, prefix, strlen(prefix)) == 0;
	if (dir)
		closedir(dir);
	return n;
}

/* After an ignored signal: the endpoint's region names are still there
 * (the regions new peers reach by name), and the new peer the test
 * started connects and its message arrives. */
_Noreturn static void worker_went_on(struct worker *w, int regions)
{
	int recvs = 0;

	if (worker_shm_regions() < regions) {
		fprintf(stderr, "signal worker (pid %d): %d of its %d regions in /dev/shm were "
		        "removed after the ignored signal\n", (int)getpid(),
		        regions - worker_shm_regions(), regions);
		worker_quit(w, SIG_EXIT_FAILED);
	}
	while (!recvs && h_now_ms() < w->deadline) {
		cci_event_t *ev;

		if (cci_get_event(w->ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			cci_accept(ev, NULL);
		recvs += ev->type == CCI_EVENT_RECV;
		cci_return_event(ev);
	}
	if (!recvs)
		fprintf(stderr, "signal worker (pid %d): no message from a new peer after the "
		        "ignored signal\n", (int)getpid());
	worker_quit(w, recvs ? SIG_EXIT_WENT_ON : SIG_EXIT_FAILED);
}

/* The ready byte, then (for a new peer) the endpoint's URI and its NUL. */
static void worker_ready_uri(struct worker *w)
{
	char *uri = NULL;
	int rc = cci_get_opt(w->ep, CCI_OPT_ENDPT_URI, &uri);
	size_t n;

	if (rc != CCI_SUCCESS)
		worker_fail(w, "cci_get_opt(CCI_OPT_ENDPT_URI)", rc);
	worker_ready(w);
	n = strlen(uri) + 1;
	if (write(w->job->ready_fd, uri, n) != (ssize_t)n)
		_exit(SIG_EXIT_FAILED);
	free(uri);
}

static void phase_init(struct worker *w)
{
	int ignoring = w->job->go_fd >= 0, regions = 0;

	/* Ignored, the signal matters once the libraries could have taken
	 * it: it comes once the endpoint is open. */
	if (!ignoring)
		worker_ready(w);
	worker_init(w);
	worker_endpoint(w);
	if (ignoring) {
		regions = worker_shm_regions();
		worker_ready_uri(w);
	}
	for (;;) {
		worker_poll(w);
		worker_check(w);
		if (worker_go(w))
			worker_went_on(w, regions);
	}
}

static void phase_traffic(struct worker *w)
{
	worker_init(w);
	worker_endpoint(w);
	worker_connect(w);
	worker_ready(w);
	for (;;) {
		worker_send(w);
		worker_poll(w);
		worker_check(w);
	}
}

/* Each round ends with work in flight: the endpoint is destroyed with
 * its connection open and sends not completed. */
static void phase_teardown(struct worker *w)
{
	worker_ready(w);
	for (;;) {
		worker_init(w);
		worker_endpoint(w);
		worker_connect(w);
		for (int i = 0; i < 4; i++)
			worker_send(w);
		cci_destroy_endpoint(w->ep);
		w->ep = NULL;
		w->conn = NULL;
		w->outstanding = 0;
		worker_check(w);
		cci_finalize();
		w->inited = 0;
		worker_check(w);
	}
}

/* A program that returns from main with its endpoint open and sends in
 * flight: exit() runs the library's destructors (and libfabric's), which
 * the signal may interrupt anywhere. */
_Noreturn static void phase_exit(struct worker *w)
{
	worker_init(w);
	worker_endpoint(w);
	worker_connect(w);
	for (int i = 0; i < 4; i++)
		worker_send(w);
	/* Its endpoint stays open on purpose: a leak report would change
	 * its exit status. */
	f_lsan_off();
	worker_ready(w);
	exit(SIG_EXIT_AT_EXIT);
}

_Noreturn void sig_worker_run(const struct sig_job *job)
{
	struct worker w = { .job = job, .deadline = h_now_ms() + SIG_WORKER_BOUND_MS * (F_SANITIZED ? 3u : 1u) };

	dispositions_set(job->mode);
	if (job->default_config) {
		unsetenv("CCI_CONFIG");
		unsetenv("CCI_CTP");
	}
	if (job->phase == SIG_PHASE_INIT)
		phase_init(&w);
	else if (job->phase == SIG_PHASE_TRAFFIC)
		phase_traffic(&w);
	else if (job->phase == SIG_PHASE_TEARDOWN)
		phase_teardown(&w);
	else
		phase_exit(&w);
	_exit(SIG_EXIT_FAILED); /* the phases do not return */
}
