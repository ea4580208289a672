/*
 * fault.h - the reliability suite: what the library promises when a peer
 * dies, freezes or cannot be reached, under load, and at every order of
 * teardown.  It runs on the conformance harness (tests/conformance/
 * harness.h): each test in its own process with a hard time limit, peers
 * forked before the test's own cci_init().
 */
#ifndef FAULT_FAULT_H
#define FAULT_FAULT_H

#include "harness.h"

/*
 * The slack allowed on top of a keepalive or connect timeout before a
 * failure must be reported (docs/reliability.md): the time a loaded 2-core
 * machine may take to schedule the processes involved.
 */
#define F_SLACK_MS 3000u

/* Built with AddressSanitizer or ThreadSanitizer (gcc defines the
 * __SANITIZE_ macros, clang answers __has_feature). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define F_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define F_SANITIZED 1
#endif
#endif
#ifndef F_SANITIZED
#define F_SANITIZED 0
#endif
/* ThreadSanitizer alone: it slows every process several times more. */
#if defined(__SANITIZE_THREAD__)
#define F_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define F_TSAN 1
#endif
#endif
#ifndef F_TSAN
#define F_TSAN 0
#endif

/* A child process that will leave memory on purpose (a forked child
 * ending without teardown): LeakSanitizer's check at its exit is off from
 * this call on (its hook, fault.c).  A no-op without the sanitizer. */
void f_lsan_off(void);

/* Under AddressSanitizer (its quarantine keeps freed memory) or
 * ThreadSanitizer (its shadow) RSS says nothing about leaks: the tests
 * then check descriptors only. */
#define F_RSS_CHECKED (!F_SANITIZED)

H_TABLE(t_death)
H_TABLE(t_frozen)
H_TABLE(t_connfail)
H_TABLE(t_blackhole)
H_TABLE(t_teardown)
H_TABLE(t_load)
H_TABLE(t_blocking)
H_TABLE(t_storm)
H_TABLE(t_fork)
H_TABLE(t_signal)

/* What was posted to a stopped peer and how it ended (f_flight_*). */
struct f_flight {
	uint32_t sends, writes, reads;  /* accepted by the calls */
	uint32_t done_before;           /* completed before the kill */
	uint64_t detect_ms;             /* kill to the first failed completion */
	uint64_t all_ms;                /* kill to the last completion */
	int first_err;
};

/*
 * With the peer of c already stopped (SIGSTOP): post up to 100 sends and
 * 8 RMA writes and 8 reads of 64 KiB between lh and rh (rh NULL: sends
 * only), then SIGKILL pid and wait up to bound_ms for every operation to
 * complete.  Checks that each completes exactly once, that those pending
 * at the kill fail, and that the last one came within bound_ms.
 */
void f_flight_kill(cci_endpoint_t *ep, cci_connection_t *c, cci_rma_handle_t *lh,
                   const cci_rma_handle_t *rh, pid_t pid, unsigned bound_ms,
                   struct f_flight *f);


#endif /* FAULT_FAULT_H */
