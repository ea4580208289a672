/*
 * t_timeout.c - the send timeout (CCI_OPT_ENDPT_SEND_TIMEOUT) against a
 * peer that stops reading (SIGSTOP): when the oldest pending send
 * outlives the timeout the connection breaks, every pending send that
 * waited past the timeout completes with CCI_ETIMEDOUT and the younger
 * ones with CCI_ERR_DISCONNECTED (plugins/common/conn_timers.h,
 * cci__ct_send_fail_status), reported in the order the sends were made.
 * Ages are counted on the transport's clock, stamped once a tick (5 ms):
 * the last sends of the first burst may be younger than the first.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ofi_test.h"
#include "proc_probe.h"
#include "shm_sweep.h"

#define TIMEOUT_MS 1000u
#define OLD_SENDS 100u   /* sent at once: more than the credits (64) */
#define YOUNG_SENDS 20u  /* sent half a timeout later */
#define NSENDS (OLD_SENDS + YOUNG_SENDS)

/* The peer, in a child: accepts connections and reads messages until it
 * is told (a byte on go) to stop itself. */
static void stopping_server(int go, int out)
{
	cci_device_t *dev = ot_init();
	cci_endpoint_t *ep = dev ? ot_endpoint(dev) : NULL;
	char *uri = NULL;

	if (!ep || cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS ||
	    write(out, uri, strlen(uri) + 1) != (ssize_t)strlen(uri) + 1)
		_exit(3);
	for (uint64_t stop = ot_now_ms() + 30000; ot_now_ms() < stop;) {
		struct timeval tv = { 0, 0 };
		fd_set set;
		cci_event_t *ev;

		FD_ZERO(&set);
		FD_SET(go, &set);
		if (select(go + 1, &set, NULL, NULL, &tv) == 1) {
			if (write(out, "s", 1) != 1)
				_exit(4);
			raise(SIGSTOP);
		}
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			cci_accept(ev, NULL);
		cci_return_event(ev);
	}
	_exit(0);
}

struct reports {
	int status[NSENDS];     /* 1 + the status, 0 while not reported */
	unsigned order[NSENDS]; /* the sends, in the order of their reports */
	unsigned n;
};

/* Collect SEND events for ms, or until every send made was reported. */
static void collect(cci_endpoint_t *ep, struct reports *r, unsigned made, unsigned ms)
{
	for (uint64_t stop = ot_now_ms() + ms; r->n < made && ot_now_ms() < stop;) {
		cci_event_t *ev;
		uintptr_t i;

		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		i = (uintptr_t)ev->send.context - 1;
		if (ev->type == CCI_EVENT_SEND && i < NSENDS) {
			CU_ASSERT_EQUAL(r->status[i], 0); /* once */
			r->status[i] = ev->send.status + 1;
			r->order[r->n++] = (unsigned)i;
		}
		cci_return_event(ev);
	}
}

static void send_n(cci_connection_t *c, unsigned first, unsigned n)
{
	for (unsigned i = first; i < first + n; i++)
		CU_ASSERT_EQUAL(cci_send(c, "data", 4, (void *)(uintptr_t)(i + 1), 0), CCI_SUCCESS);
}

/* The reports: in call order, the failures are sends that timed out
 * then sends that were disconnected (younger ones), at least the oldest
 * send queued for credits timed out, the young sends were all
 * disconnected; the failures were reported in call order.  Not "every
 * old send queued for credits": sends are stamped with the coarse clock
 * (a jiffy, 4 ms here), so of a burst made within microseconds the later
 * ones may carry the next jiffy and be judged younger than the timeout
 * when the oldest breaks the connection (seen once: 1 of them timed
 * out).  The age rule itself is tested in tests/unit/conn_timers_test.c. */
static void check(const struct reports *r)
{
	unsigned timed_out = 0, last = 0;
	int seen_fail = 0, seen_disc = 0;

	CU_ASSERT_EQUAL(r->n, NSENDS);
	for (unsigned i = 0; i < NSENDS; i++) {
		int st = r->status[i] - 1;

		if (st != CCI_SUCCESS && st != CCI_ETIMEDOUT && st != CCI_ERR_DISCONNECTED)
			printf("\n    send %u gave %d\n", i, st);
		CU_ASSERT(st == CCI_SUCCESS || st == CCI_ETIMEDOUT || st == CCI_ERR_DISCONNECTED);
		CU_ASSERT(i < OLD_SENDS || st == CCI_ERR_DISCONNECTED);
		if (st == CCI_ETIMEDOUT && seen_disc)
			printf("\n    send %u timed out after a send made before it was disconnected\n", i);
		CU_ASSERT(st != CCI_ETIMEDOUT || !seen_disc);
		seen_disc |= st == CCI_ERR_DISCONNECTED;
		timed_out += st == CCI_ETIMEDOUT;
	}
	printf("\n    %u of %u sends timed out\n", timed_out, OLD_SENDS);
	CU_ASSERT(timed_out >= 1);
	for (unsigned k = 0; k < r->n; k++) {
		unsigned i = r->order[k];

		if (r->status[i] - 1 == CCI_SUCCESS)
			continue;
		CU_ASSERT(!seen_fail || i > last);
		seen_fail = 1;
		last = i;
	}
}

static void send_timeout_statuses(void)
{
	const uint32_t to_us = TIMEOUT_MS * 1000;
	int go[2], out[2], status;
	char uri[512] = "", ack = 0;
	struct reports *r = calloc(1, sizeof(*r));
	cci_endpoint_t *ep;
	cci_connection_t *c = NULL;
	cci_event_t *ev;
	pid_t pid;

	CU_ASSERT_FATAL(r && pipe(go) == 0 && pipe(out) == 0);
	pid = fork();
	if (pid == 0)
		stopping_server(go[0], out[1]);
	CU_ASSERT_FATAL(pid > 0 && read(out[0], uri, sizeof(uri) - 1) > 0);
	ep = ot_endpoint(ot_init());
	CU_ASSERT_FATAL(ep != NULL);
	CU_ASSERT_EQUAL(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &to_us), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                      CCI_SUCCESS);
	ev = ot_wait(ep, CCI_EVENT_CONNECT, 10000);
	if (ev && ev->connect.status == CCI_SUCCESS)
		c = ev->connect.connection;
	if (ev)
		cci_return_event(ev);
	CU_ASSERT_FATAL(c != NULL);
	CU_ASSERT_FATAL(write(go[1], "f", 1) == 1 && read(out[0], &ack, 1) == 1 &&
	                proc_wait_stopped(pid, 5000) == 0);
	send_n(c, 0, OLD_SENDS);
	collect(ep, r, NSENDS, TIMEOUT_MS / 2);
	send_n(c, OLD_SENDS, YOUNG_SENDS);
	collect(ep, r, NSENDS, 3 * TIMEOUT_MS);
	check(r);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	test_shm_sweep();
	close(go[0]);
	close(go[1]);
	close(out[0]);
	close(out[1]);
	free(r);
	ot_fini(ep);
}

int ot_add_timeout_suite(void)
{
	CU_pSuite s = CU_add_suite("send timeout", NULL, NULL);

	return !s ||
	       !CU_add_test(s, "a send timeout against a stopped peer: sends that waited past it "
	                       "give CCI_ETIMEDOUT, younger ones CCI_ERR_DISCONNECTED, in the "
	                       "order they were made", send_timeout_statuses);
}
