/*
 * rpc_test_client.c - one client process of the RPC test.
 *
 * Load mode: `calls` calls, a tenth of them synchronous (the first 100 of
 * every thousand, and every 97th, made while the window of asynchronous
 * calls is full), the others asynchronous with `window` in flight, the
 * oldest collected first (rpc_test, then rpc_wait).  Every outcome is
 * checked against the call's exact expected status and bytes.
 *
 * Kill mode: slow calls, `window` in flight, until the server dies (the
 * launcher kills it once we say we are warmed up).  Each call must either
 * succeed with the right result or fail with RPC_EDEAD/RPC_ETIMEDOUT, no
 * call issued after one that failed may succeed (calls issued before it
 * may: their replies can arrive before the death is seen, and calls are
 * judged oldest first except one that fails at its start), a new call
 * must then fail at once, and everything must be over within
 * RPC_KILL_BOUND_S of the signal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ex_util.h"
#include "rpc_test.h"

#define RPC_KILL_WARMUP 200     /* calls completed before the kill */
#define RPC_KILL_BOUND_S 10
#define RPC_KILL_KEEPALIVE_MS 500
#define RPC_LOAD_CALL_TIMEOUT_MS 60000

struct load {
	const struct rpc_test_client_opts *o;
	struct rpc_client *cli;
	struct rpc_test_call *ring;
	unsigned head, count;
	unsigned done, wrong, sync, async, rma;
	unsigned failed;            /* kill mode: calls that saw the death */
	unsigned first_fail_seq;    /* ... the earliest issued of them */
	uint64_t notify_ns, first_fail_ns, deadline_ns;
};

static bool is_sync(unsigned i)
{
	return i % 1000 < 100 || i % 97 == 0;
}

/* Kill mode: what a completed call may show. */
static void judge_kill(struct load *l, struct rpc_test_call *c, int status,
		       const struct rpc_reply *reply)
{
	if (status == RPC_EDEAD || status == RPC_ETIMEDOUT) {
		if (!l->failed++)
			l->first_fail_ns = ex_now_ns();
		if (l->failed == 1 || c->seq < l->first_fail_seq)
			l->first_fail_seq = c->seq;
		return;
	}
	if (l->failed && c->seq > l->first_fail_seq) {
		fprintf(stderr, "client %u: call %u ended with \"%s\" after call %u saw the "
			"server's death\n", l->o->id, c->seq, rpc_strerror(status),
			l->first_fail_seq);
		l->wrong++;
	} else if (!rpc_test_call_check(c, status, reply)) {
		l->wrong++;
	}
}

static void judge(struct load *l, struct rpc_test_call *c, int status,
		  const struct rpc_reply *reply)
{
	l->done++;
	if (l->o->kill_mode)
		judge_kill(l, c, status, reply);
	else if (!rpc_test_call_check(c, status, reply))
		l->wrong++;
	if (rpc_test_call_uses_rma(c))
		l->rma++;
	rpc_test_call_free(c);
}

static void complete_oldest(struct load *l)
{
	struct rpc_test_call *c = &l->ring[l->head];
	struct rpc_reply reply = { 0 };
	int status = rpc_test(l->cli, c->id, &reply);

	if (status == RPC_EAGAIN)
		status = rpc_wait(l->cli, c->id, &reply);
	judge(l, c, status, &reply);
	l->head = (l->head + 1) % l->o->window;
	l->count--;
}

/* Start call c asynchronously into the window; false when it could not
 * start (it is judged then). */
static bool start_async(struct load *l, struct rpc_test_call *c)
{
	struct rpc_reply none = { 0 };
	int rc;

	if (l->count == l->o->window)
		complete_oldest(l);
	rc = rpc_call_async(l->cli, c->proc, c->arg, c->arg_len, c->res,
			    c->res_cap, &c->id);
	if (rc != RPC_OK) {
		judge(l, c, rc, &none);
		return false;
	}
	l->ring[(l->head + l->count) % l->o->window] = *c;
	l->count++;
	l->async++;
	return true;
}

static void run_sync(struct load *l, struct rpc_test_call *c)
{
	struct rpc_reply reply = { 0 };
	int status = rpc_call(l->cli, c->proc, c->arg, c->arg_len, c->res,
			      c->res_cap, &reply);

	l->sync++;
	judge(l, c, status, &reply);
}

static void maybe_notify(struct load *l)
{
	if (l->o->notify_fd < 0 || l->notify_ns || l->done < RPC_KILL_WARMUP)
		return;
	l->notify_ns = ex_now_ns();
	if (write(l->o->notify_fd, "k", 1) != 1)
		perror("notify");
}

/* The calls; false when the time limit ran out. */
static bool run_calls(struct load *l)
{
	for (unsigned i = 0; i < l->o->calls; i++) {
		struct rpc_test_call c;

		if (ex_now_ns() > l->deadline_ns)
			return false;
		if (!rpc_test_call_make(&c, l->o->id, i, l->o->kill_mode)) {
			l->wrong++;
			return true;
		}
		c.seq = i;
		if (l->o->kill_mode) {
			maybe_notify(l);
			if (!start_async(l, &c) && l->failed)
				break; /* dead: the new call failed at once */
		} else if (is_sync(i)) {
			run_sync(l, &c);
		} else {
			start_async(l, &c);
		}
	}
	while (l->count)
		complete_oldest(l);
	return true;
}

/* The client that asked for the kill times from its request; the others
 * do not know when it came and time from their first failed call. */
static bool kill_verdict(struct load *l)
{
	uint64_t since = l->notify_ns ? l->notify_ns : l->first_fail_ns;
	double bound = (double)(ex_now_ns() - since) / 1e9;
	bool ok = since && l->failed && !l->wrong && bound < RPC_KILL_BOUND_S;

	printf("client %u: %u calls completed, %u failed after the server's death, "
	       "all done %.3f s after %s: %s\n", l->o->id, l->done, l->failed, bound,
	       l->notify_ns ? "the kill request" : "the first failure",
	       ok ? "ok" : "FAILED");
	return ok;
}

static bool load_verdict(struct load *l, uint64_t t0)
{
	bool ok = !l->wrong && l->done == l->o->calls;

	printf("client %u: %u calls (%u sync, %u async, %u by RMA), %u wrong, %.2f s: %s\n",
	       l->o->id, l->done, l->sync, l->async, l->rma, l->wrong,
	       (double)(ex_now_ns() - t0) / 1e9, ok ? "ok" : "FAILED");
	return ok;
}

int rpc_test_client(const struct rpc_test_client_opts *o)
{
	struct rpc_client_opts co = {
		.max_inflight = o->window + 1,
		.keepalive_ms = o->kill_mode ? RPC_KILL_KEEPALIVE_MS : 0,
		.call_timeout_ms = o->kill_mode ? 0 : RPC_LOAD_CALL_TIMEOUT_MS,
	};
	struct load l = { .o = o, .deadline_ns = ex_deadline_ms(o->time_limit_s * 1000ull) };
	uint64_t t0 = ex_now_ns();
	bool ok;
	int rc;

	l.ring = calloc(o->window, sizeof(*l.ring));
	rc = l.ring ? rpc_client_open(o->uri, &co, &l.cli) : RPC_ENOMEM;
	if (rc != RPC_OK) {
		fprintf(stderr, "client %u: %s\n", o->id, rpc_strerror(rc));
		free(l.ring);
		return EXIT_FAILURE;
	}
	ok = run_calls(&l);
	if (!ok)
		fprintf(stderr, "client %u: time limit reached\n", o->id);
	ok = (o->kill_mode ? kill_verdict(&l) : load_verdict(&l, t0)) && ok;
	rpc_client_close(l.cli);
	free(l.ring);
	return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
