/*
 * t_peer.c - tcp between processes: progress while the peer computes, a
 * peer killed in the middle of RMA, and two processes in two network
 * namespaces joined by a veth pair (as two hosts would be), over tcp and
 * over sock (UDP), IPv4 and IPv6.
 */
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcp_test.h"
#include "unit_run.h"

/* ---- a serving peer ------------------------------------------------------ */

struct srv_arg {
	const char *ip;
	const char *transport; /* "tcp", or "sock" (UDP) */
	const char *netns;     /* join this namespace first, or NULL */
	int compute_ms;        /* make no library call this long, twice */
	uint64_t region;       /* bytes registered for RMA, 0 for none */
};

static int join_netns(const char *name)
{
	char path[128];
	int fd, rc;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = setns(fd, CLONE_NEWNET);
	close(fd);
	return rc;
}

/* Accept one client, give it an RMA handle, then serve until told. */
/* Computing from the moment the client called cci_connect (it says "go"):
 * the request must then be queued already, by the progress thread. */
static cci_connection_t *accept_after_compute(cci_endpoint_t *ep, int rfd, int ms)
{
	cci_connection_t *c;
	cci_event_t *ev;
	char line[16];

	if (st_read_line(rfd, line, sizeof(line), 10000) != 0)
		return NULL;
	st_sleep_ms((unsigned)ms);
	if (cci_get_event(ep, &ev) != CCI_SUCCESS)
		return NULL;
	if (ev->type != CCI_EVENT_CONNECT_REQUEST) {
		cci_return_event(ev);
		return NULL;
	}
	cci_accept(ev, NULL);
	cci_return_event(ev);
	ev = st_wait(ep, CCI_EVENT_ACCEPT, 3000, NULL);
	c = ev && ev->accept.status == CCI_SUCCESS ? ev->accept.connection : NULL;
	if (ev)
		cci_return_event(ev);
	return c;
}

/* Echo every message until the parent says stop (20 s at most). */
static void serve_echo(cci_endpoint_t *ep, cci_connection_t *c, int rfd)
{
	struct pollfd pfd = { .fd = rfd, .events = POLLIN };
	cci_event_t *ev;
	char line[64];

	for (uint64_t stop = st_now_ms() + 20000; st_now_ms() < stop;) {
		if (cci_get_event(ep, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_RECV && ev->recv.len > 0)
				cci_send(c, ev->recv.ptr, ev->recv.len, NULL, 0);
			cci_return_event(ev);
		}
		if (poll(&pfd, 1, 0) == 1 && st_read_line(rfd, line, sizeof(line), 1000) == 0 &&
		    !strcmp(line, "stop"))
			break;
	}
}

static int srv_main(int rfd, int wfd, void *argp)
{
	const struct srv_arg *a = argp;
	cci_device_t *dev;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_rma_handle_t *h = NULL;
	uint8_t *mem = NULL;
	char *uri;

	if (a->netns && join_netns(a->netns) != 0)
		return 10;
	dev = st_init_as(a->transport, a->ip);
	if (!dev || !(ep = st_endpoint(dev)) || !(uri = st_uri(ep)))
		return 11;
	st_write_line(wfd, uri);
	free(uri);
	c = a->compute_ms ? accept_after_compute(ep, rfd, a->compute_ms) : st_accept(ep, 5000);
	if (!c)
		return a->compute_ms ? 12 : 13;
	if (a->region) {
		mem = calloc(1, a->region);
		if (!mem || cci_rma_register(ep, mem, a->region, CCI_FLAG_READ | CCI_FLAG_WRITE,
		                             &h) != CCI_SUCCESS)
			return 14;
		if (cci_send(c, h, sizeof(*h), NULL, CCI_FLAG_BLOCKING) != CCI_SUCCESS)
			return 15;
	}
	st_write_line(wfd, "accepted");
	if (a->compute_ms)
		st_sleep_ms((unsigned)a->compute_ms);
	serve_echo(ep, c, rfd);
	return 0;
}

/* Connect to a serving peer and get its handle (when it has one). */
static cci_connection_t *cli_open(cci_endpoint_t *ep, struct st_child *ch,
                                  struct cci_rma_handle *rh)
{
	char uri[128], line[32];
	cci_connection_t *c;
	cci_event_t *ev;
	int st;

	if (st_read_line(ch->rfd, uri, sizeof(uri), 10000) != 0)
		return NULL;
	st = cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	CU_ASSERT_EQUAL(st, CCI_SUCCESS);
	st_write_line(ch->wfd, "go"); /* a computing peer starts its clock now */
	ev = st_wait(ep, CCI_EVENT_CONNECT, 10000, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	st = ev->connect.status;
	c = ev->connect.connection;
	cci_return_event(ev);
	CU_ASSERT_EQUAL(st, CCI_SUCCESS);
	if (!c)
		return NULL;
	if (rh) {
		ev = st_wait(ep, CCI_EVENT_RECV, 10000, NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
		CU_ASSERT_EQUAL(ev->recv.len, sizeof(*rh));
		memcpy(rh, ev->recv.ptr, sizeof(*rh));
		cci_return_event(ev);
	}
	CU_ASSERT_EQUAL(st_read_line(ch->rfd, line, sizeof(line), 10000), 0);
	return c;
}

/* ---- progress while the peer computes ------------------------------------ */

static void progress_while_peer_computes(void)
{
	struct srv_arg a = { "127.0.0.1", "tcp", NULL, 600, 1u << 20 };
	struct cci_rma_handle rh;
	struct st_child ch;
	cci_rma_handle_t *lh;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_event_t *ev;
	static char buf[1u << 20];
	uint64_t t0;

	st_spawn(&ch, srv_main, &a);
	ep = st_endpoint(st_init("127.0.0.1"));
	c = cli_open(ep, &ch, &rh);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	/* The peer now computes for 600 ms without a library call. */
	t0 = st_now_ms();
	CU_ASSERT_EQUAL(cci_send(c, "work", 4, (void *)1, 0), CCI_SUCCESS);
	ev = st_wait(ep, CCI_EVENT_SEND, 1000, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	CU_ASSERT_EQUAL(ev->send.status, CCI_SUCCESS);
	printf("[send completed in %llu ms] ", (unsigned long long)(st_now_ms() - t0));
	CU_ASSERT(st_now_ms() - t0 < 100);
	cci_return_event(ev);
	CU_ASSERT_EQUAL_FATAL(cci_rma_register(ep, buf, sizeof(buf), 0, &lh), CCI_SUCCESS);
	t0 = st_now_ms();
	CU_ASSERT_EQUAL(cci_rma(c, NULL, 0, lh, 0, &rh, 0, sizeof(buf), (void *)2, CCI_FLAG_WRITE),
	                CCI_SUCCESS);
	ev = st_wait(ep, CCI_EVENT_SEND, 1000, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	CU_ASSERT_EQUAL(ev->send.status, CCI_SUCCESS);
	CU_ASSERT(st_now_ms() - t0 < 100);
	cci_return_event(ev);
	st_write_line(ch.wfd, "stop");
	CU_ASSERT_EQUAL(st_reap(&ch, 10000), 0);
	cci_rma_deregister(ep, lh);
	st_fini(ep);
}

static void connect_request_queued_while_server_computes(void)
{
	struct srv_arg a = { "127.0.0.1", "tcp", NULL, 600, 0 };
	struct st_child ch;
	cci_endpoint_t *ep;

	/* srv_main fails (12) unless its first cci_get_event after computing
	 * finds the request already queued. */
	st_spawn(&ch, srv_main, &a);
	ep = st_endpoint(st_init("127.0.0.1"));
	CU_ASSERT_PTR_NOT_NULL(cli_open(ep, &ch, NULL));
	st_write_line(ch.wfd, "stop");
	CU_ASSERT_EQUAL(st_reap(&ch, 10000), 0);
	st_fini(ep);
}

/* ---- a peer killed mid-RMA ----------------------------------------------- */

#define KILL_OPS 20
#define KILL_LEN (4u << 20)

static void killed_peer_fails_each_rma_once(void)
{
	struct srv_arg a = { "127.0.0.1", "tcp", NULL, 0, KILL_LEN * 4 };
	static char buf[KILL_LEN * 5]; /* writes from the first 4, reads into the last */
	int seen[KILL_OPS] = { 0 }, fails = 0, got = 0;
	struct cci_rma_handle rh;
	struct st_child ch;
	cci_rma_handle_t *lh;
	cci_endpoint_t *ep;
	cci_connection_t *c;

	st_spawn(&ch, srv_main, &a);
	ep = st_endpoint(st_init("127.0.0.1"));
	c = cli_open(ep, &ch, &rh);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL_FATAL(cci_rma_register(ep, buf, sizeof(buf), 0, &lh), CCI_SUCCESS);
	for (int i = 0; i < KILL_OPS; i++) {
		int flag = i % 5 == 4 ? CCI_FLAG_READ : CCI_FLAG_WRITE;
		uint64_t off = (uint64_t)(i % 4) * KILL_LEN;
		uint64_t loff = flag == CCI_FLAG_READ ? 4 * (uint64_t)KILL_LEN : off;
		CU_ASSERT_EQUAL(cci_rma(c, "done", 4, lh, loff, &rh, off, KILL_LEN,
		                        (void *)(uintptr_t)(i + 1), flag), CCI_SUCCESS);
	}
	st_sleep_ms(2);
	kill(ch.pid, SIGKILL);
	for (uint64_t stop = st_now_ms() + 10000; got < KILL_OPS && st_now_ms() < stop;) {
		cci_event_t *ev = st_wait(ep, CCI_EVENT_SEND, 100, NULL);
		uintptr_t i;
		if (!ev)
			continue;
		i = (uintptr_t)ev->send.context - 1;
		CU_ASSERT_FATAL(i < KILL_OPS);
		seen[i]++;
		got++;
		if (ev->send.status != CCI_SUCCESS) {
			CU_ASSERT_EQUAL(ev->send.status, CCI_ERR_DISCONNECTED);
			fails++;
		}
		cci_return_event(ev);
	}
	for (int i = 0; i < KILL_OPS; i++)
		CU_ASSERT_EQUAL(seen[i], 1);
	CU_ASSERT(fails > 0);
	CU_ASSERT_PTR_NULL(st_wait(ep, CCI_EVENT_SEND, 300, NULL));
	CU_ASSERT_EQUAL(cci_rma(c, NULL, 0, lh, 0, &rh, 0, 16, NULL, CCI_FLAG_WRITE),
	                CCI_ERR_DISCONNECTED);
	st_reap(&ch, 5000);
	cci_rma_deregister(ep, lh);
	st_fini(ep);
}

/* ---- two network namespaces ---------------------------------------------- */

static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), fmt, a, b, a, b);
	return system(cmd);
}

static int netns_setup(const char *na, const char *nb)
{
	if (sh("ip netns add %s 2>/dev/null && ip netns add %s 2>/dev/null", na, nb) != 0)
		return -1;
	return sh("ip link add va netns %s type veth peer name vb netns %s && "
	          "ip -n %s link set lo up && ip -n %s link set lo up", na, nb) ||
	       sh("ip -n %s addr add 169.254.77.1/24 dev va && "
	          "ip -n %s addr add 169.254.77.2/24 dev vb && "
	          "ip -n %s -6 addr add fd00:77::1/64 dev va nodad && "
	          "ip -n %s -6 addr add fd00:77::2/64 dev vb nodad", na, nb) ||
	       sh("ip -n %s link set va up && ip -n %s link set vb up", na, nb)
	       ? -2 : 0;
}

struct cli_arg {
	const char *netns;
	const char *ip;
	const char *transport;
};

/* In the client namespace: connect, 1000 messages echoed, an RMA write. */
static int cli_main(int rfd, int wfd, void *argp)
{
	const struct cli_arg *a = argp;
	static char buf[1u << 20];
	struct cci_rma_handle rh;
	char uri[128];
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_rma_handle_t *lh;
	cci_event_t *ev;
	int st, echoes = 0;

	(void)wfd;
	if (join_netns(a->netns) != 0 || st_read_line(rfd, uri, sizeof(uri), 10000) != 0)
		return 20;
	if (!(ep = st_endpoint(st_init_as(a->transport, a->ip))))
		return 21;
	c = st_connect(ep, uri, CCI_CONN_ATTR_RO, 10000, &st);
	ev = c ? st_wait(ep, CCI_EVENT_RECV, 10000, NULL) : NULL;
	if (!ev || ev->recv.len != sizeof(rh))
		return 22;
	memcpy(&rh, ev->recv.ptr, sizeof(rh));
	cci_return_event(ev);
	for (int i = 0; i < 1000; i++) {
		if (cci_send(c, &i, sizeof(i), NULL, CCI_FLAG_SILENT) != CCI_SUCCESS)
			return 23;
		ev = st_wait(ep, CCI_EVENT_RECV, 5000, NULL);
		if (ev && ev->recv.len == sizeof(i) && !memcmp(ev->recv.ptr, &i, sizeof(i)))
			echoes++;
		if (ev)
			cci_return_event(ev);
	}
	memset(buf, 0x77, sizeof(buf));
	if (cci_rma_register(ep, buf, sizeof(buf), 0, &lh) != CCI_SUCCESS ||
	    cci_rma(c, NULL, 0, lh, 0, &rh, 0, sizeof(buf), NULL,
	            CCI_FLAG_WRITE | CCI_FLAG_BLOCKING) != CCI_SUCCESS)
		return 24;
	memset(buf, 0, sizeof(buf));
	if (cci_rma(c, NULL, 0, lh, 0, &rh, 0, sizeof(buf), NULL,
	            CCI_FLAG_READ | CCI_FLAG_BLOCKING) != CCI_SUCCESS || buf[12345] != 0x77)
		return 25;
	return echoes == 1000 ? 0 : 26;
}

static void across_namespaces(const char *transport, const char *srv_ip, const char *cli_ip)
{
	char na[32], nb[32], uri[128];
	struct srv_arg sa = { srv_ip, transport, na, 0, 1u << 20 };
	struct cli_arg ca = { nb, cli_ip, transport };
	struct st_child s, c;
	int rc;

	snprintf(na, sizeof(na), "cci-st-%d-a", (int)getpid());
	snprintf(nb, sizeof(nb), "cci-st-%d-b", (int)getpid());
	rc = netns_setup(na, nb);
	if (rc == -1) {
		unit_skip("cannot create network namespaces here (ip netns add failed: needs root "
		          "or CAP_SYS_ADMIN)");
		return;
	}
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	st_spawn(&s, srv_main, &sa);
	st_spawn(&c, cli_main, &ca);
	CU_ASSERT_EQUAL(st_read_line(s.rfd, uri, sizeof(uri), 10000), 0);
	printf("[%s] ", uri);
	st_write_line(c.wfd, uri);
	CU_ASSERT_EQUAL(st_reap(&c, 30000), 0);
	st_write_line(s.wfd, "stop");
	CU_ASSERT_EQUAL(st_reap(&s, 10000), 0);
	sh("ip netns del %s; ip netns del %s", na, nb);
}

static void across_namespaces_ipv4(void)
{
	across_namespaces("tcp", "169.254.77.1", "169.254.77.2");
}

static void across_namespaces_ipv6(void)
{
	across_namespaces("tcp", "fd00:77::1", "fd00:77::2");
}

static void sock_across_namespaces_ipv4(void)
{
	across_namespaces("sock", "169.254.77.1", "169.254.77.2");
}

static void sock_across_namespaces_ipv6(void)
{
	across_namespaces("sock", "fd00:77::1", "fd00:77::2");
}

int st_add_peer_tests(void)
{
	CU_pSuite s = CU_add_suite_with_setup_and_teardown("peers", NULL, NULL, NULL,
	                                                   st_teardown);

	return !s ||
	       !CU_add_test(s, "a send and an RMA complete within 100 ms while the peer computes",
	                    progress_while_peer_computes) ||
	       !CU_add_test(s, "a connect request is queued while the server computes",
	                    connect_request_queued_while_server_computes) ||
	       !CU_add_test(s, "a peer killed mid-RMA fails each pending RMA exactly once",
	                    killed_peer_fails_each_rma_once) ||
	       !CU_add_test(s, "two processes in two network namespaces over IPv4 link-local",
	                    across_namespaces_ipv4) ||
	       !CU_add_test(s, "two processes in two network namespaces over IPv6 ULA",
	                    across_namespaces_ipv6) ||
	       !CU_add_test(s, "sock: two processes in two network namespaces over IPv4 link-local",
	                    sock_across_namespaces_ipv4) ||
	       !CU_add_test(s, "sock: two processes in two network namespaces over IPv6 ULA",
	                    sock_across_namespaces_ipv6);
}
