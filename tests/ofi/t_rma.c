/*
 * t_rma.c - RMA at the edges: registrations at odd addresses and of odd
 * lengths, a registration of 8 GiB of address space, a target that
 * deregisters while a write to it is in flight or while the peer that
 * learned the key is stopped, and a target killed while writes to it are
 * in flight.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ofi_test.h"
#include "proc_probe.h"
#include "shm_sweep.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)
#define ctx_of(i) ((void *)(uintptr_t)(0x1000u + (i)))

static void fill(uint8_t *p, uint64_t len, uint8_t seed)
{
	for (uint64_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

/* Two endpoints of this process, connected. */
struct pair {
	cci_endpoint_t *a, *b;
	cci_connection_t *ca, *cb;
};

static int pair_open(struct pair *p)
{
	cci_device_t *dev = ot_init();

	memset(p, 0, sizeof(*p));
	if (!dev)
		return -1;
	p->a = ot_endpoint(dev);
	p->b = ot_endpoint(dev);
	if (!p->a || !p->b || ot_pair(p->a, p->b, &p->ca, &p->cb) != 0) {
		CU_FAIL("no connection between two endpoints");
		return -1;
	}
	return 0;
}

static void pair_close(struct pair *p)
{
	if (p->b)
		CU_ASSERT_EQUAL(cci_destroy_endpoint(p->b), CCI_SUCCESS);
	ot_fini(p->a);
}

/* One RMA from a to b, waited for. */
static int rma(struct pair *p, cci_rma_handle_t *lh, uint64_t loff, cci_rma_handle_t *rh,
               uint64_t roff, uint64_t len, int flags)
{
	static uintptr_t n;
	void *ctx = ctx_of(++n);
	int rc = cci_rma(p->ca, NULL, 0, lh, loff, rh, roff, len, ctx, flags);

	/* b must make progress too for some providers: poll it while waiting */
	for (uint64_t stop = ot_now_ms() + 10000; rc == CCI_SUCCESS && ot_now_ms() < stop;) {
		cci_event_t *ev;
		if (cci_get_event(p->b, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		if (cci_get_event(p->a, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_SEND && ev->send.context == ctx) {
			rc = ev->send.status;
			cci_return_event(ev);
			return rc;
		}
		cci_return_event(ev);
	}
	return rc == CCI_SUCCESS ? CCI_ETIMEDOUT : rc;
}

static void misaligned_registrations_move_exact_bytes(void)
{
	uint8_t *src = malloc(20000), *dst = malloc(20000), *want = malloc(20000);
	cci_rma_handle_t *lh = NULL, *rh = NULL;
	struct pair p;

	if (!src || !dst || !want || pair_open(&p) != 0)
		goto out;
	fill(src, 20000, 1);
	fill(dst, 20000, 99);
	memcpy(want, dst, 20000);
	CU_ASSERT_EQUAL(cci_rma_register(p.a, src + 5, 9001, 0, &lh), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_rma_register(p.b, dst + 3, 10007, CCI_FLAG_READ | CCI_FLAG_WRITE, &rh),
	                CCI_SUCCESS);
	if (!lh || !rh)
		goto out_close;
	CU_ASSERT_EQUAL(rma(&p, lh, 7, rh, 11, 4093, CCI_FLAG_WRITE), CCI_SUCCESS);
	memcpy(want + 3 + 11, src + 5 + 7, 4093);
	CU_ASSERT(memcmp(dst, want, 20000) == 0);
	CU_ASSERT_EQUAL(rma(&p, lh, 2001, rh, 10007 - 777, 777, CCI_FLAG_READ), CCI_SUCCESS);
	CU_ASSERT(memcmp(src + 5 + 2001, dst + 3 + 10007 - 777, 777) == 0);
	CU_ASSERT_EQUAL(rma(&p, lh, 0, rh, 10000, 8, CCI_FLAG_WRITE), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_rma_deregister(p.a, lh), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_rma_deregister(p.b, rh), CCI_SUCCESS);
out_close:
	pair_close(&p);
out:
	free(src);
	free(dst);
	free(want);
}

static void huge_registration_serves_its_ends(void)
{
	const uint64_t len = 8 * GiB, offs[3] = { 0, 4 * GiB - 2048, 8 * GiB - 4096 };
	uint8_t *big = mmap(NULL, len, PROT_READ | PROT_WRITE,
	                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t buf[3 * 4096];
	cci_rma_handle_t *lh = NULL, *rh = NULL;
	struct pair p;

	if (big == MAP_FAILED) {
		ot_skip("cannot map 8 GiB of address space");
		return;
	}
	if (pair_open(&p) != 0)
		goto out;
	fill(buf, sizeof(buf), 42);
	CU_ASSERT_EQUAL(cci_rma_register(p.a, buf, sizeof(buf), 0, &lh), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_rma_register(p.b, big, len, CCI_FLAG_READ | CCI_FLAG_WRITE, &rh),
	                CCI_SUCCESS);
	for (int i = 0; lh && rh && i < 3; i++) {
		CU_ASSERT_EQUAL(rma(&p, lh, (uint64_t)i * 4096, rh, offs[i], 4096, CCI_FLAG_WRITE),
		                CCI_SUCCESS);
		CU_ASSERT(memcmp(big + offs[i], buf + i * 4096, 4096) == 0);
	}
	if (lh && rh) {
		memset(buf, 0, 4096);
		CU_ASSERT_EQUAL(rma(&p, lh, 0, rh, offs[2], 4096, CCI_FLAG_READ), CCI_SUCCESS);
		CU_ASSERT(memcmp(buf, big + offs[2], 4096) == 0);
		CU_ASSERT_EQUAL(rma(&p, lh, 0, rh, len - 100, 101, CCI_FLAG_WRITE), CCI_EINVAL);
	}
	if (lh)
		CU_ASSERT_EQUAL(cci_rma_deregister(p.a, lh), CCI_SUCCESS);
	if (rh)
		CU_ASSERT_EQUAL(cci_rma_deregister(p.b, rh), CCI_SUCCESS);
	pair_close(&p);
out:
	munmap(big, len);
}

/* ---- writes racing the target's deregistration ------------------------------ */

#define RACE_ROUNDS 10

/* A message from x to y, received by y (polling both): 0 if it arrived. */
static int msg_through(cci_endpoint_t *x, cci_connection_t *cx, cci_endpoint_t *y)
{
	cci_event_t *ev;
	int got = 0;

	if (cci_send(cx, "alive", 5, ctx_of(500), 0) != CCI_SUCCESS)
		return -1;
	for (uint64_t stop = ot_now_ms() + 5000; !got && ot_now_ms() < stop;) {
		if (cci_get_event(x, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		if (cci_get_event(y, &ev) != CCI_SUCCESS)
			continue;
		got = ev->type == CCI_EVENT_RECV && ev->recv.len == 5;
		cci_return_event(ev);
	}
	return got ? 0 : -1;
}

/*
 * The target deregisters its region while a write to it is in flight (a
 * key the initiator learned before).  The deregistration waits for the
 * initiator to confirm, so the write lands before it returns; later
 * RMAs naming the region are refused; the target and the connection
 * still carry messages, from the initiator and from a third endpoint.
 * (Without the wait, libfabric 1.17's shm left the initiator unable to
 * send to the target at all, and its tcp broke their connection.)
 */
static void write_racing_deregistration(void)
{
	static uint8_t src[4096], dst[4096];
	cci_rma_handle_t *lh = NULL, *rh = NULL;
	cci_connection_t *cc = NULL, *cb2 = NULL;
	cci_endpoint_t *c;
	struct pair p;

	if (pair_open(&p) != 0)
		return;
	c = ot_endpoint((cci_device_t *)p.a->device);
	CU_ASSERT_FATAL(c != NULL && ot_pair(c, p.b, &cc, &cb2) == 0);
	CU_ASSERT_FATAL(cci_rma_register(p.a, src, sizeof(src), 0, &lh) == CCI_SUCCESS);
	for (int i = 0; i < RACE_ROUNDS; i++) {
		CU_ASSERT_FATAL(cci_rma_register(p.b, dst, sizeof(dst), CCI_FLAG_WRITE, &rh) ==
		                CCI_SUCCESS);
		CU_ASSERT_EQUAL_FATAL(rma(&p, lh, 0, rh, 0, sizeof(src), CCI_FLAG_WRITE), CCI_SUCCESS);
		fill(src, sizeof(src), (uint8_t)(i + 1));
		CU_ASSERT_FATAL(cci_rma(p.ca, NULL, 0, lh, 0, rh, 0, sizeof(src), ctx_of(400 + i),
		                        CCI_FLAG_WRITE) == CCI_SUCCESS);
		CU_ASSERT_EQUAL(cci_rma_deregister(p.b, rh), CCI_SUCCESS);
		CU_ASSERT(memcmp(dst, src, sizeof(src)) == 0); /* landed before it returned */
		CU_ASSERT_EQUAL(ot_send_status(p.a, ctx_of(400 + i), 10000), CCI_SUCCESS);
		CU_ASSERT_EQUAL(rma(&p, lh, 0, rh, 0, sizeof(src), CCI_FLAG_WRITE), CCI_ERR_RMA_HANDLE);
		CU_ASSERT_EQUAL_FATAL(msg_through(c, cc, p.b), 0);
		CU_ASSERT_EQUAL_FATAL(msg_through(p.a, p.ca, p.b), 0);
	}
	CU_ASSERT_EQUAL(cci_rma_deregister(p.a, lh), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(c), CCI_SUCCESS);
	pair_close(&p);
}

/* ---- a target killed while writes are in flight -------------------------- */

#define KILL_REGION (64 * MiB)
#define KILL_WRITES 16

/* The target: registers KILL_REGION, publishes URI and handle, serves. */
static void target_role(int wfd)
{
	cci_device_t *dev = ot_init();
	cci_endpoint_t *ep = dev ? ot_endpoint(dev) : NULL;
	void *mem = calloc(1, KILL_REGION);
	cci_rma_handle_t *h = NULL;
	char *uri = NULL;

	if (!ep || !mem || cci_rma_register(ep, mem, KILL_REGION, CCI_FLAG_WRITE, &h) != 0 ||
	    cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri) != 0)
		_exit(1);
	if (write(wfd, h, sizeof(*h)) != sizeof(*h) ||
	    write(wfd, uri, strlen(uri) + 1) != (ssize_t)strlen(uri) + 1)
		_exit(1);
	for (uint64_t stop = ot_now_ms() + 30000; ot_now_ms() < stop;) {
		cci_event_t *ev;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			cci_accept(ev, NULL);
		cci_return_event(ev);
	}
	_exit(0);
}

/* Collect the SEND events of writes first..posted-1: each exactly once. */
static void collect_writes(cci_endpoint_t *ep, unsigned first, unsigned posted)
{
	unsigned seen[KILL_WRITES] = { 0 }, got = first;

	for (uint64_t stop = ot_now_ms() + 15000; got < posted && ot_now_ms() < stop;) {
		cci_event_t *ev;
		uintptr_t i;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		i = (uintptr_t)ev->send.context - 0x1000u;
		if (ev->type == CCI_EVENT_SEND && i < KILL_WRITES) {
			seen[i]++;
			got++;
		}
		cci_return_event(ev);
	}
	CU_ASSERT_EQUAL(got, posted);
	for (unsigned i = first; i < posted; i++)
		CU_ASSERT_EQUAL(seen[i], 1);
}

static cci_connection_t *connect_to(cci_endpoint_t *ep, const char *uri)
{
	cci_connection_t *c = NULL;
	cci_event_t *ev;

	if (cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL) != CCI_SUCCESS)
		return NULL;
	ev = ot_wait(ep, CCI_EVENT_CONNECT, 10000);
	if (ev) {
		c = ev->connect.status == CCI_SUCCESS ? ev->connect.connection : NULL;
		cci_return_event(ev);
	}
	return c;
}

/* After the kill: the connection fails, the endpoint still connects. */
static void check_after_kill(cci_endpoint_t *ep, cci_connection_t *c, cci_rma_handle_t *lh,
                             const struct cci_rma_handle *rh)
{
	int rc = CCI_SUCCESS;
	cci_endpoint_t *other;
	cci_connection_t *ca, *cb;

	for (uint64_t stop = ot_now_ms() + 5000; rc == CCI_SUCCESS && ot_now_ms() < stop;) {
		rc = cci_rma(c, NULL, 0, lh, 0, rh, 0, 4096, ctx_of(99), CCI_FLAG_WRITE);
		if (rc == CCI_SUCCESS)
			rc = ot_send_status(ep, ctx_of(99), 5000);
	}
	CU_ASSERT(rc == CCI_ERR_DISCONNECTED);
	other = ot_endpoint((cci_device_t *)ep->device);
	CU_ASSERT_FATAL(other != NULL);
	CU_ASSERT_EQUAL(ot_pair(ep, other, &ca, &cb), 0);
	if (ca)
		CU_ASSERT_EQUAL(cci_send(ca, "alive", 5, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(other), CCI_SUCCESS);
}

static void peer_killed_mid_rma(void)
{
	struct cci_rma_handle rh;
	cci_rma_handle_t *lh = NULL;
	char uri[512] = "";
	int fds[2], status;
	unsigned posted = 0;
	uint8_t *src = NULL;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	pid_t pid;

	CU_ASSERT_FATAL(pipe(fds) == 0);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		target_role(fds[1]);
	}
	close(fds[1]);
	CU_ASSERT_FATAL(read(fds[0], &rh, sizeof(rh)) == sizeof(rh) &&
	                read(fds[0], uri, sizeof(uri) - 1) > 0);
	ep = ot_endpoint(ot_init());
	c = ep ? connect_to(ep, uri) : NULL;
	src = calloc(1, KILL_REGION);
	CU_ASSERT_FATAL(c && src && cci_rma_register(ep, src, KILL_REGION, 0, &lh) == 0);
	for (unsigned i = 0; i < KILL_WRITES; i++)
		if (cci_rma(c, "done", 4, lh, i * 4 * MiB, &rh, i * 4 * MiB, 4 * MiB, ctx_of(i),
		            CCI_FLAG_WRITE) == CCI_SUCCESS)
			posted++;
	/* the first write landed: the others are with the provider now */
	CU_ASSERT_EQUAL(ot_send_status(ep, ctx_of(0), 10000), CCI_SUCCESS);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	test_shm_sweep(); /* its shm region, which it never removes */
	collect_writes(ep, 1, posted);
	check_after_kill(ep, c, lh, &rh);
	ot_fini(ep);
	free(src);
	close(fds[0]);
}

/* ---- a peer frozen while the target deregisters ---------------------------- */

/* The initiator, in a child: connects to the URI and handle read from
 * rfd, writes to the region once (it learns the key), says 'r', then
 * polls its endpoint until told: 's', it stops itself (between two
 * library calls, its progress thread off the queue); 'w', one more
 * write, whose status it sends back. */
static void frozen_initiator(int rfd, int wfd)
{
	static uint8_t src[4096];
	cci_device_t *dev = ot_init();
	cci_endpoint_t *ep = dev ? ot_endpoint(dev) : NULL;
	cci_rma_handle_t *lh = NULL;
	struct cci_rma_handle rh;
	cci_connection_t *c;
	char uri[512] = "", cmd = 0;
	int st;

	if (!ep || read(rfd, &rh, sizeof(rh)) != sizeof(rh) || read(rfd, uri, sizeof(uri) - 1) <= 0)
		_exit(1);
	c = connect_to(ep, uri);
	if (!c || cci_rma_register(ep, src, sizeof(src), 0, &lh) != CCI_SUCCESS ||
	    cci_rma(c, NULL, 0, lh, 0, &rh, 0, sizeof(src), NULL,
	            CCI_FLAG_WRITE | CCI_FLAG_BLOCKING) != CCI_SUCCESS || write(wfd, "r", 1) != 1)
		_exit(2);
	while (cmd != 'w') {
		struct pollfd pfd = { .fd = rfd, .events = POLLIN };
		cci_event_t *ev;

		if (cci_get_event(ep, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		if (poll(&pfd, 1, 0) != 1)
			continue;
		if (read(rfd, &cmd, 1) != 1)
			_exit(3);
		if (cmd == 's')
			raise(SIGSTOP);
	}
	st = cci_rma(c, NULL, 0, lh, 0, &rh, 0, sizeof(src), NULL,
	             CCI_FLAG_WRITE | CCI_FLAG_BLOCKING);
	if (write(wfd, &st, sizeof(st)) != sizeof(st))
		_exit(4);
	_exit(0);
}

/* Accept one connection on ep; NULL if none came within 10 s. */
static cci_connection_t *accept_one(cci_endpoint_t *ep)
{
	cci_connection_t *c = NULL;

	for (uint64_t stop = ot_now_ms() + 10000; !c && ot_now_ms() < stop;) {
		cci_event_t *ev;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST) {
			CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
		} else if (ev->type == CCI_EVENT_ACCEPT && ev->accept.status == CCI_SUCCESS) {
			c = ev->accept.connection;
		}
		cci_return_event(ev);
	}
	return c;
}

/*
 * A peer that learned the key is stopped (SIGSTOP) when the target
 * deregisters: the deregistration waits its bound (2 s) for the peer's
 * answer, breaks that connection and returns; the peer, continued,
 * cannot reach the region any more, and its RMA fails (never hangs).
 */
static void peer_frozen_during_deregistration(void)
{
	static uint8_t region[4096];
	cci_endpoint_t *ep = ot_endpoint(ot_init());
	cci_rma_handle_t *h = NULL;
	cci_connection_t *c;
	int to[2], from[2], st = CCI_SUCCESS, status;
	char *uri = NULL, ready = 0;
	uint64_t t0, ms;
	pid_t pid;

	CU_ASSERT_FATAL(ep && pipe(to) == 0 && pipe(from) == 0);
	CU_ASSERT_FATAL(cci_rma_register(ep, region, sizeof(region), CCI_FLAG_WRITE, &h) == 0 &&
	                cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri) == 0);
	pid = fork();
	if (pid == 0)
		frozen_initiator(to[0], from[1]);
	CU_ASSERT_FATAL(pid > 0 && write(to[1], h, sizeof(*h)) == sizeof(*h) &&
	                write(to[1], uri, strlen(uri) + 1) == (ssize_t)strlen(uri) + 1);
	c = accept_one(ep);
	CU_ASSERT(c != NULL && read(from[0], &ready, 1) == 1 && ready == 'r');
	CU_ASSERT_FATAL(write(to[1], "s", 1) == 1 && proc_wait_stopped(pid, 5000) == 0);
	t0 = ot_now_ms();
	CU_ASSERT_EQUAL(cci_rma_deregister(ep, h), CCI_SUCCESS);
	ms = ot_now_ms() - t0;
	printf("\n    the deregistration returned after %llu ms\n", (unsigned long long)ms);
	CU_ASSERT(ms >= 1900 && ms < 6000);
	if (c)
		CU_ASSERT_EQUAL(cci_send(c, "x", 1, NULL, CCI_FLAG_BLOCKING), CCI_ERR_DISCONNECTED);
	kill(pid, SIGCONT);
	CU_ASSERT(write(to[1], "w", 1) == 1 && read(from[0], &st, sizeof(st)) == sizeof(st));
	CU_ASSERT(st == CCI_ERR_DISCONNECTED || st == CCI_ERR_RMA_HANDLE);
	CU_ASSERT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	free(uri);
	close(to[0]);
	close(to[1]);
	close(from[0]);
	close(from[1]);
	ot_fini(ep);
}

int ot_add_rma_suite(void)
{
	CU_pSuite s = CU_add_suite("rma edges", NULL, NULL);

	return !s ||
	       !CU_add_test(s, "registrations at odd addresses and lengths move exactly the bytes "
	                       "asked", misaligned_registrations_move_exact_bytes) ||
	       !CU_add_test(s, "an 8 GiB registration serves RMA at its start, across 4 GiB and "
	                       "at its end", huge_registration_serves_its_ends) ||
	       !CU_add_test(s, "a write racing the target's deregistration lands before it "
	                       "returns, later RMA is refused, and the target and the "
	                       "connection still carry messages", write_racing_deregistration) ||
	       !CU_add_test(s, "a peer stopped when the target deregisters: the deregistration "
	                       "returns at its 2 s bound, that connection breaks, the peer cannot "
	                       "reach the region", peer_frozen_during_deregistration) ||
	       !CU_add_test(s, "a target killed during 16 writes of 4 MiB: each completes once, "
	                       "later RMA fails, the endpoint still connects", peer_killed_mid_rma);
}
