/*
 * bench_threads.c - the streaming client loop with several sender threads
 * on the one endpoint (msgrate --threads).  See bench.h.
 *
 * Thread t owns connections t, t + T, t + 2T, ... of the first k and is
 * the only one to post on them.  The endpoint has one event queue, so any
 * thread that finds its window full polls cci_get_event and takes
 * whatever comes: a SEND completion carries its connection's index in its
 * context, and the reaper counts it on that connection's atomic counter,
 * where the owner sees it.  No thread waits for another's event: each
 * keeps polling until its own connections have every completion, so the
 * last thread standing reaps its own and nothing is lost or counted
 * twice.  A thread that goes -t seconds without progress on its own
 * connections (nothing posted, nothing completed) stops them all; the
 * first error of any thread is reported once, by the main thread, after
 * every thread has returned (exit() under running threads could tear the
 * library down under them).
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/* One connection's counters, a cache line each: the owner writes posted,
 * every reaper adds to completed. */
struct conn_ctr {
	_Atomic uint64_t posted;    /* counted before cci_send, undone on failure */
	_Atomic uint64_t completed; /* SEND events seen, by any thread */
} __attribute__((aligned(64)));

struct tstream {
	struct bench *b;
	uint32_t nthreads, k, window;
	uint64_t size;
	struct conn_ctr *ctr;       /* k of them */
	pthread_barrier_t start;
	atomic_bool stop;           /* set with the first error */
	atomic_flag failed;
	char why[256];              /* the first error, written once */
};

struct sender {
	struct tstream *ts;
	uint32_t id;
	uint32_t nmine;             /* connections id, id + nthreads, ... below k */
	uint64_t n;                 /* this thread's share of the messages */
	pthread_t tid;
};

static void fail(struct tstream *ts, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail(struct tstream *ts, const char *fmt, ...)
{
	va_list ap;

	if (!atomic_flag_test_and_set(&ts->failed)) {
		va_start(ap, fmt);
		vsnprintf(ts->why, sizeof(ts->why), fmt, ap);
		va_end(ap);
	}
	atomic_store(&ts->stop, true);
}

static void fail_rc(struct tstream *ts, int rc, const char *what)
{
	fail(ts, "%s failed: %s", what, cci_strerror(ts->b->ep, (enum cci_status)rc));
}

/* Whatever the endpoint hands out while the threads stream: completions
 * of any thread's sends; nothing else is expected but an unwanted
 * connection request or a keepalive notice.  False on an error. */
static bool reap(struct tstream *ts, cci_event_t *ev)
{
	bool ok = true;
	uint32_t i;
	int rc;

	switch (ev->type) {
	case CCI_EVENT_SEND:
		i = (uint32_t)(uintptr_t)ev->send.context;
		if (ev->send.status != CCI_SUCCESS) {
			fail_rc(ts, ev->send.status, "send completion");
			ok = false;
		} else if (i >= ts->k ||
			   atomic_fetch_add(&ts->ctr[i].completed, 1) >=
				   atomic_load(&ts->ctr[i].posted)) {
			fail(ts, "SEND event with nothing in flight on connection %u", i);
			ok = false;
		}
		break;
	case CCI_EVENT_CONNECT_REQUEST:
		rc = cci_reject(ev); /* one client at a time */
		if (rc != CCI_SUCCESS) {
			fail_rc(ts, rc, "cci_reject");
			ok = false;
		}
		break;
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		fprintf(stderr, "%s: keepalive timed out\n", ts->b->prog);
		break;
	case CCI_EVENT_RECV:
		/* the server answers only END, which follows the threads */
		fail(ts, "protocol error: a message from the server while streaming");
		ok = false;
		break;
	default:
		fail(ts, "unexpected event %s", cci_event_type_str(ev->type));
		ok = false;
		break;
	}
	int rrc = cci_return_event(ev);

	if (rrc != CCI_SUCCESS) {
		fail_rc(ts, rrc, "cci_return_event");
		ok = false;
	}
	return ok;
}

/* Drains the events there are; how many, or -1 on an error. */
static int reap_all(struct tstream *ts)
{
	cci_event_t *ev;
	int n = 0, rc;

	while ((rc = cci_get_event(ts->b->ep, &ev)) == CCI_SUCCESS) {
		if (!reap(ts, ev))
			return -1;
		n++;
	}
	if (rc != CCI_EAGAIN) {
		fail_rc(ts, rc, "cci_get_event");
		return -1;
	}
	return n;
}

/* Posts round-robin on this thread's connections while a window has room
 * and messages are left; stops at ENOBUFS.  How many, or -1 on an error. */
static int64_t post_mine(struct sender *s, uint64_t *sent, uint32_t *next)
{
	struct tstream *ts = s->ts;
	struct bench *b = ts->b;
	uint32_t c = *next, full = 0;
	int64_t posted = 0;
	int flags = b->nocopy ? CCI_FLAG_NO_COPY : 0;

	while (*sent < s->n && full < s->nmine) {
		struct conn_ctr *ctr = &ts->ctr[c];
		uint64_t p = atomic_load_explicit(&ctr->posted, memory_order_relaxed);

		if (p - atomic_load(&ctr->completed) >= ts->window) {
			full++;
		} else {
			/* counted first: another thread may reap the
			 * completion before cci_send returns */
			atomic_fetch_add(&ctr->posted, 1);
			int rc = cci_send(b->conns[c], b->buf, (uint32_t)ts->size,
					  (void *)(uintptr_t)c, flags);

			if (rc != CCI_SUCCESS) {
				atomic_fetch_sub(&ctr->posted, 1);
				if (rc == CCI_ENOBUFS)
					break;
				fail_rc(ts, rc, "cci_send");
				return -1;
			}
			(*sent)++;
			posted++;
			full = 0;
		}
		c += ts->nthreads;
		if (c >= ts->k)
			c = s->id;
	}
	*next = c;
	return posted;
}

/* The completions on this thread's connections, reaped by any thread. */
static uint64_t completed_mine(const struct sender *s)
{
	const struct tstream *ts = s->ts;
	uint64_t done = 0;

	for (uint32_t i = s->id; i < ts->k; i += ts->nthreads)
		done += atomic_load(&ts->ctr[i].completed);
	return done;
}

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	struct tstream *ts = s->ts;
	struct bench *b = ts->b;
	uint64_t limit = (uint64_t)(b->timeout_s * 1e9), deadline = 0, sent = 0;
	uint64_t seen = 0; /* completions on my connections at the last progress */
	uint32_t next = s->id;
	unsigned spins = 0;

	pthread_barrier_wait(&ts->start);
	while (!atomic_load_explicit(&ts->stop, memory_order_relaxed)) {
		int64_t p = post_mine(s, &sent, &next);
		int r = p < 0 ? -1 : reap_all(ts);

		if (r < 0)
			break;
		uint64_t done = completed_mine(s);

		if (sent == s->n && done == s->n)
			break; /* every message of this thread has its completion */
		if (p || done != seen) {
			seen = done;
			deadline = 0;
			spins = 0;
			continue;
		}
		/* idle: the window is full and my completions are not in yet */
		if (b->blocking) {
			/* short sleeps: another thread may take the event
			 * that woke this one */
			perf_block_on_fd(b->ep, b->fd, perf_now_ns() + 10000000);
		} else if (++spins % 1024) {
			/* a sibling sharing this core may have room to post */
			if (!(spins % 64))
				sched_yield();
			continue;
		}
		if (!limit)
			continue;
		if (!deadline)
			deadline = perf_now_ns() + limit;
		else if (perf_now_ns() > deadline)
			fail(ts, "thread %u: no completion for %.0f s: the peer is gone or stuck",
			     s->id, b->timeout_s);
	}
	return NULL;
}

uint64_t bench_stream_threads(struct bench *b, uint32_t nthreads, uint32_t k,
			      uint32_t window, uint64_t size, uint64_t n)
{
	struct tstream ts = { .b = b, .nthreads = nthreads, .k = k, .window = window,
			      .size = size, .failed = ATOMIC_FLAG_INIT };
	struct sender *s;
	uint64_t t0;
	int rc;

	if (size > b->buf_len || k > b->nconns || !nthreads || k < nthreads || b->stash)
		perf_die("internal error: %u threads, %u connections", nthreads, k);
	/* the last END's completion would count as a thread's */
	bench_wait_idle(b);
	ts.ctr = aligned_alloc(64, sizeof(*ts.ctr) * k);
	s = calloc(nthreads, sizeof(*s));
	if (!ts.ctr || !s)
		perf_die("out of memory");
	for (uint32_t i = 0; i < k; i++) {
		atomic_init(&ts.ctr[i].posted, 0);
		atomic_init(&ts.ctr[i].completed, 0);
	}
	atomic_init(&ts.stop, false);
	/* the threads and this one: the clock starts when all are ready */
	if (pthread_barrier_init(&ts.start, NULL, nthreads + 1))
		perf_die("pthread_barrier_init failed");
	for (uint32_t t = 0; t < nthreads; t++) {
		s[t] = (struct sender){ .ts = &ts, .id = t,
					.nmine = (k - t + nthreads - 1) / nthreads,
					.n = n / nthreads + (t < n % nthreads) };
		rc = pthread_create(&s[t].tid, NULL, sender_main, &s[t]);
		if (rc)
			perf_die("pthread_create: error %d", rc);
	}
	pthread_barrier_wait(&ts.start);
	t0 = perf_now_ns();
	for (uint32_t t = 0; t < nthreads; t++)
		pthread_join(s[t].tid, NULL);
	pthread_barrier_destroy(&ts.start);
	if (atomic_flag_test_and_set(&ts.failed))
		perf_die("%s", ts.why);
	/* every thread returned with all its completions: count them again */
	uint64_t posted = 0, completed = 0;

	for (uint32_t i = 0; i < k; i++) {
		posted += atomic_load(&ts.ctr[i].posted);
		completed += atomic_load(&ts.ctr[i].completed);
	}
	if (posted != n || completed != n)
		perf_die("internal error: %" PRIu64 " posted, %" PRIu64 " completed of %" PRIu64,
			 posted, completed, n);
	free(s);
	free(ts.ctr);
	return bench_end_stream(b, n, t0);
}
