/*
 * harness.h - what every conformance test uses: checks that work in any
 * process of a test, bounded waits for events, and peer processes.
 *
 * Each test runs in a child process of the runner (its own process group),
 * so a crash or a hang in the library fails that test only, and each test
 * starts with the library uninitialised.  A test that needs a peer forks it
 * with h_spawn() *before* its own first cci_init(); checks made in the peer
 * reach the runner directly through the inherited result pipe.
 */
#ifndef CONFORMANCE_HARNESS_H
#define CONFORMANCE_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cci.h"

/* ---- tests and suites ---------------------------------------------------- */

#define H_NEEDS_DEVICE 1u      /* uses a device (with none, the run exits 77) */
#define H_DEFAULT_TIMEOUT_S 20 /* the runner kills a test after this */

struct h_test {
	const char *name;      /* what the test proves */
	void (*body)(void);
	unsigned needs;        /* H_NEEDS_* bits */
	int timeout_s;         /* 0 means H_DEFAULT_TIMEOUT_S */
	const void *arg;       /* for bodies shared by several tests (h_current) */
};

/* The test the calling process runs (NULL in the runner). */
extern const struct h_test *h_current;

/* The --transport argument, or NULL for "the first device". */
extern const char *h_transport;

/* The transport under test: h_transport, or "sm" when none was given. */
const char *h_transport_name(void);

/* A positive count from the environment variable name (a suite's size
 * knob), or def when it is unset, empty, zero or not a whole number. */
unsigned long h_env_count(const char *name, unsigned long def);

/* Does the run say (CCI_TEST_HANDLE_POLLS=1) that an armed OS handle
 * wakes the application to poll even with nothing to hand out?  So it is
 * with progress = manual over a device without a wait object (libfabric's
 * shm provider): only the application's calls read it, and only a timer
 * can bring them.  Checks that an idle handle stays quiet are then
 * skipped, with a note. */
int h_handle_polls(void);

/* ---- checks -------------------------------------------------------------- */

/*
 * Record one check.  On failure the message (printf format) goes to the
 * runner, which turns it into a CUnit failure of the current test.
 * Returns ok.  Thread-safe.
 */
int h_check(int ok, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int h_check_rc(int rc, int want, const char *file, int line, const char *expr);
int h_check_rc2(int rc, int want1, int want2, const char *file, int line,
                const char *expr);

#define CHECK(c) h_check(!!(c), __FILE__, __LINE__, "%s", #c)
#define CHECKF(c, ...) h_check(!!(c), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_RC(rc, want) h_check_rc((rc), (want), __FILE__, __LINE__, #rc)
#define CHECK_RC2(rc, a, b) h_check_rc2((rc), (a), (b), __FILE__, __LINE__, #rc)
#define REQUIRE(c) do { if (!CHECK(c)) h_bail(); } while (0)
#define REQUIRE_RC(rc, want) do { if (!CHECK_RC(rc, want)) h_bail(); } while (0)

/* End the calling process now, as failed (after a failed REQUIRE). */
_Noreturn void h_bail(void);
/* End the calling process normally: reports the passed checks, then exits
 * 0, or 1 if a check of this process failed. */
_Noreturn void h_exit(void);
/* The same through _exit(): no atexit handler or destructor runs.  For a
 * child forked from a process with threads under a sanitizer, whose
 * allocator a thread the child does not have may have held at the fork. */
_Noreturn void h_exit_now(void);
/* Skip the current test with a reason the runner prints ("SKIP name: why"). */
_Noreturn void h_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The name of a status, e.g. "CCI_EINVAL". */
const char *h_status_name(int status);

/* ---- time ---------------------------------------------------------------- */

uint64_t h_now_ms(void);
void h_sleep_ms(unsigned ms);

/* Open file descriptors of this process (-1 if /proc is missing). */
int h_count_fds(void);
/* Threads of this process (/proc/self/task), -1 if it cannot tell. */
int h_count_threads(void);
/* Is dev configured with progress = manual (no thread of the transport's)? */
int h_device_manual(const cci_device_t *dev);
/* The resident set of this process in KiB, from /proc (-1 if missing). */
long h_rss_kb(void);
long h_rss_shared_kb(void);  /* the part of it that is shared mappings */

/* A line of figures for the test's output (not a check), e.g. a measured
 * time; printed by the runner under the test's name. */
void h_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- library set-up ------------------------------------------------------ */

/* cci_init() (REQUIREd to succeed) and the device of the transport under
 * test; skips the test when there is none. */
cci_device_t *h_setup(void);
/* The first device of the transport under test that is up, after
 * cci_init(), or NULL. */
cci_device_t *h_find_device(void);
/* The first of the transport, up or down (a down one says why in info). */
cci_device_t *h_find_down_device(void);
/* An endpoint on dev (REQUIREd to succeed); fd may be NULL. */
cci_endpoint_t *h_endpoint(cci_device_t *dev, cci_os_handle_t *fd);
/* The endpoint's URI, malloc'd (REQUIREd to succeed). */
char *h_uri(cci_endpoint_t *ep);
/* Destroy ep (if not NULL) and finalize, checking both succeed. */
void h_teardown(cci_endpoint_t *ep);

/* ---- events -------------------------------------------------------------- */

/*
 * Poll for the next event for up to timeout_ms.  Returns CCI_SUCCESS with
 * *ev set, or CCI_ETIMEDOUT; CCI_ENOBUFS keeps polling; any other status
 * is a failed check and is returned.
 */
int h_poll_event(cci_endpoint_t *ep, cci_event_t **ev, unsigned timeout_ms);

/* The next event, which must be of type within timeout_ms; else a failed
 * check (the wrong event is returned to the library) and NULL. */
cci_event_t *h_expect(cci_endpoint_t *ep, cci_event_type_t type,
                      unsigned timeout_ms, const char *file, int line);
#define EXPECT_EVENT(ep, type, ms) h_expect((ep), (type), (ms), __FILE__, __LINE__)

/* Check that no event arrives within ms (events that do are returned). */
void h_expect_quiet(cci_endpoint_t *ep, unsigned ms, const char *file, int line);
#define EXPECT_QUIET(ep, ms) h_expect_quiet((ep), (ms), __FILE__, __LINE__)

/* Connect and wait (10 s) for a successful CONNECT event; REQUIREd. */
cci_connection_t *h_connect(cci_endpoint_t *ep, const char *uri,
                            cci_conn_attribute_t attr, const void *data,
                            uint32_t len, const void *context);
/* The same with a connect timeout of the given seconds. */
cci_connection_t *h_connect_within(cci_endpoint_t *ep, const char *uri,
                                   cci_conn_attribute_t attr, const void *data,
                                   uint32_t len, const void *context, unsigned seconds);

/*
 * Completion bookkeeping for tests that send many messages: contexts are
 * h_ctx(i) for i < n, and each must complete once.
 */
struct h_sendctr {
	uint64_t ok, err, dup, foreign, recvs, others;
	int first_err;          /* status of the first failed completion */
	uint8_t *status_seen;   /* n entries: 0 = none, else status + 1 */
	uint64_t n;
};
#define h_ctx(i) ((void *)(uintptr_t)((uint64_t)(i) + 1))
void h_sendctr_init(struct h_sendctr *c, uint64_t n);
void h_sendctr_free(struct h_sendctr *c);
/* Handle one event (SEND: counted; others counted) and return it. */
void h_sendctr_event(struct h_sendctr *c, cci_event_t *ev);
/* Process the events available now (at most 64).  Returns how many. */
int h_pump(cci_endpoint_t *ep, struct h_sendctr *c);
/* cci_send, retrying on CCI_ENOBUFS (pumping events) for up to 10 s. */
int h_send(cci_endpoint_t *ep, cci_connection_t *conn, const void *buf,
           uint32_t len, const void *ctx, int flags, struct h_sendctr *c);
/* Pump until ok + err reaches total or timeout_ms passes. */
void h_drain(cci_endpoint_t *ep, struct h_sendctr *c, uint64_t total,
             unsigned timeout_ms);

/* ---- peer processes ------------------------------------------------------ */

struct h_peer {
	pid_t pid;
	int rfd;                /* reads what the peer sends */
	int wfd;                /* writes to the peer */
};

/* A peer's body: rfd/wfd talk to the test process. */
typedef void (*h_role_t)(int rfd, int wfd, const void *arg);

/* Fork a peer running role(arg); it exits through h_exit() when role
 * returns.  Call before this process's first cci_init(). */
void h_spawn(struct h_peer *p, h_role_t role, const void *arg);
/* Wait up to timeout_ms for the peer to exit and check it exited 0. */
void h_peer_finish(struct h_peer *p, unsigned timeout_ms);
/* Wait (5 s, checked) until process pid is stopped (SIGSTOP). */
void h_wait_stopped(pid_t pid);
/* SIGKILL the peer and reap it (no check). */
void h_peer_kill(struct h_peer *p);

/* Framed messages over a pipe.  recv returns the length, or -1 on EOF or
 * after timeout_ms. */
void h_msg_send(int fd, const void *buf, uint32_t len);
int h_msg_recv(int fd, void *buf, uint32_t cap, unsigned timeout_ms);
/* Non-zero when fd has data (or EOF) to read now. */
int h_msg_ready(int fd);

/* ---- runner (runner.c) ---------------------------------------------------- */

/* The pipe to the runner in test processes, -1 in the runner. */
extern int h_result_fd;
/* A prefix for messages of this process ("" or "[server] "). */
extern const char *h_role_prefix;

void h_add_suite(const char *name, const struct h_test *tests, size_t n);

/* Declares a file's test table: name_tests[] and name_count. */
#define H_TABLE(name) \
	extern const struct h_test name##_tests[]; \
	extern const size_t name##_count;

struct h_suite {
	const char *name;
	const struct h_test *tests;
	size_t n;
};
#define H_SUITE(title, table) { title, table##_tests, table##_count }

/*
 * The main of a test program ("what" names it in its first line of
 * output):  prog [--transport NAME] [--run SUBSTRING] [--list]
 * --transport picks the first device of that transport (device tests are
 * skipped, with the reason printed, when there is none); --run keeps only
 * the tests whose name contains SUBSTRING; --list prints the test names.
 */
int h_main(const char *what, int argc, char **argv, const struct h_suite *suites,
           size_t n);
/* Run the registered suites; filter (a substring of test names) may be
 * NULL.  Returns the process exit status. */
int h_run(const char *filter);

#endif /* CONFORMANCE_HARNESS_H */
