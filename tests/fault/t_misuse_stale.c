/*
 * t_misuse_stale.c - objects used after their end: an RMA handle after
 * cci_rma_deregister, an event after cci_return_event, a connection
 * request answered twice, a connection after cci_disconnect, an endpoint
 * after cci_destroy_endpoint.  The library keeps closed objects' memory
 * mapped with a dead mark (core/shell.c), so each call returns a status;
 * under AddressSanitizer none of them reads freed memory.
 */
#include "misuse.h"

#include "rmafix.h"
#include "server.h"

#include <stdlib.h>
#include <string.h>

static void rma_handle_after_deregister(void)
{
	struct rfix r;
	struct srv_stats st;
	cci_rma_handle_t *h = NULL;
	struct cci_rma_handle copy;
	uint8_t before[4096];
	static uint8_t mem[8192];

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	REQUIRE_RC(cci_rma_register(r.ep, mem, sizeof(mem), CCI_FLAG_READ | CCI_FLAG_WRITE, &h),
	           CCI_SUCCESS);
	memcpy(&copy, h, sizeof(copy)); /* what a peer would hold */
	CHECK_RC(cci_rma_deregister(r.ep, h), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(r.ep, h), CCI_EINVAL);
	memcpy(before, r.local, sizeof(before));
	/* as the local handle */
	CHECK_RC(cci_rma(r.c, NULL, 0, h, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_ERR_RMA_HANDLE);
	CHECK_RC(cci_rma(r.c, NULL, 0, h, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_WRITE),
	         CCI_ERR_RMA_HANDLE);
	/* the dead pointer itself as the remote handle: refused at the call */
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, h, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_ERR_RMA_HANDLE);
	/* its bytes as the peer's copy: a key the peer never issued */
	m_rma_refused(&r, r.lh, &copy, CCI_FLAG_WRITE, "a deregistered handle's bytes");
	/* the peer's handle after the peer deregistered it */
	srv_cmd(&r.s, SRV_CMD_DEREGISTER, 0);
	m_rma_refused(&r, r.lh, &r.s.handle, CCI_FLAG_WRITE, "the peer's deregistered handle");
	m_rma_refused(&r, r.lh, &r.s.handle, CCI_FLAG_READ, "the peer's deregistered handle");
	CHECK(memcmp(before, r.local, sizeof(before)) == 0);
	EXPECT_QUIET(r.ep, 100);
	rfix_close(&r, &st);
	CHECK(st.rma_bad == 0 && st.canary_bad == 0);
}

static void event_returned_twice(void)
{
	struct srv s;
	struct srv_opts o = { .greet = 1 };
	struct srv_stats st;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_event_t *ev, *sev;
	uint8_t buf[16];

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	ev = EXPECT_EVENT(ep, CCI_EVENT_RECV, 10000);
	REQUIRE(ev != NULL);
	proto_build(buf, sizeof(buf), 0, 0, PROTO_DATA);
	CHECK_RC(cci_send(c, buf, sizeof(buf), h_ctx(1), 0), CCI_SUCCESS);
	sev = EXPECT_EVENT(ep, CCI_EVENT_SEND, 10000);
	REQUIRE(sev != NULL);
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	CHECK_RC(cci_return_event(ev), CCI_EINVAL);
	CHECK_RC(cci_accept(ev, NULL), CCI_EINVAL);
	CHECK_RC(cci_return_event(sev), CCI_SUCCESS);
	CHECK_RC(cci_return_event(sev), CCI_EINVAL);
	CHECK_RC(cci_return_event(ev), CCI_EINVAL);
	/* the pool is sound: the next events come and go once each */
	proto_build(buf, sizeof(buf), 0, 1, PROTO_DATA);
	CHECK_RC(cci_send(c, buf, sizeof(buf), h_ctx(2), 0), CCI_SUCCESS);
	sev = EXPECT_EVENT(ep, CCI_EVENT_SEND, 10000);
	if (sev) {
		CHECK(sev->send.context == h_ctx(2) && sev->send.status == CCI_SUCCESS);
		CHECK_RC(cci_return_event(sev), CCI_SUCCESS);
	}
	EXPECT_QUIET(ep, 200);
	srv_stop(&s, &st);
	CHECKF(st.recvs == 2 && st.dups == 0 && st.order_errors == 0,
	       "the server got %llu messages, %llu twice, %llu out of order",
	       (unsigned long long)st.recvs, (unsigned long long)st.dups,
	       (unsigned long long)st.order_errors);
	h_teardown(ep);
}

/* A client: connect to the URI it is sent and report the CONNECT status. */
static void client_role(int rfd, int wfd, const void *arg)
{
	char uri[512];
	cci_endpoint_t *ep;
	cci_event_t *ev;
	int32_t status = -1;
	int n;

	(void)arg;
	n = h_msg_recv(rfd, uri, sizeof(uri) - 1, 10000);
	REQUIRE(n > 0);
	uri[n] = '\0';
	ep = h_endpoint(h_setup(), NULL);
	REQUIRE_RC(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 10000);
	if (ev) {
		status = ev->connect.status;
		cci_return_event(ev);
	}
	h_msg_send(wfd, &status, sizeof(status));
	/* wait for the test's word before leaving */
	h_msg_recv(rfd, uri, sizeof(uri), 10000);
	h_teardown(ep);
}

static void request_answered_twice(void)
{
	const int accept = h_current->arg != NULL;
	struct h_peer cl;
	cci_endpoint_t *ep;
	cci_event_t *req, *ev;
	int32_t status = -1;
	char *uri;

	h_spawn(&cl, client_role, NULL);
	ep = h_endpoint(h_setup(), NULL);
	uri = h_uri(ep);
	h_msg_send(cl.wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	req = EXPECT_EVENT(ep, CCI_EVENT_CONNECT_REQUEST, 10000);
	REQUIRE(req != NULL);
	if (accept)
		CHECK_RC(cci_accept(req, h_ctx(7)), CCI_SUCCESS);
	else
		CHECK_RC(cci_reject(req), CCI_SUCCESS);
	CHECK_RC(cci_accept(req, h_ctx(8)), CCI_EINVAL);
	CHECK_RC(cci_reject(req), CCI_EINVAL);
	CHECK_RC(cci_return_event(req), CCI_SUCCESS);
	CHECK_RC(cci_return_event(req), CCI_EINVAL);
	CHECK_RC(cci_accept(req, h_ctx(9)), CCI_EINVAL);
	CHECK_RC(cci_reject(req), CCI_EINVAL);
	if (accept) {
		ev = EXPECT_EVENT(ep, CCI_EVENT_ACCEPT, 10000);
		if (ev) {
			CHECK(ev->accept.status == CCI_SUCCESS && ev->accept.context == h_ctx(7));
			/* not a request */
			CHECK_RC(cci_accept(ev, NULL), CCI_EINVAL);
			CHECK_RC(cci_reject(ev), CCI_EINVAL);
			CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
		}
	}
	CHECK(h_msg_recv(cl.rfd, &status, sizeof(status), 10000) == sizeof(status));
	CHECKF(status == (accept ? CCI_SUCCESS : CCI_ECONNREFUSED),
	       "the client's CONNECT event had status %s", h_status_name(status));
	EXPECT_QUIET(ep, 200); /* one answer only: no second ACCEPT */
	h_msg_send(cl.wfd, "x", 1);
	h_peer_finish(&cl, 10000);
	h_teardown(ep);
}

/* Every call on a connection after cci_disconnect(). */
static void check_disconnected(struct rfix *r, cci_connection_t *c)
{
	uint8_t buf[16] = { 0 };
	struct iovec iov = { buf, sizeof(buf) };
	uint32_t v = 5;

	CHECK_RC(cci_send(c, buf, sizeof(buf), NULL, 0), CCI_ERR_DISCONNECTED);
	CHECK_RC(cci_send(c, buf, sizeof(buf), NULL, CCI_FLAG_BLOCKING), CCI_ERR_DISCONNECTED);
	CHECK_RC(cci_sendv(c, &iov, 1, NULL, 0), CCI_ERR_DISCONNECTED);
	CHECK_RC(cci_rma(c, NULL, 0, r->lh, 0, &r->s.handle, 0, 4096, NULL, CCI_FLAG_WRITE),
	         CCI_ERR_DISCONNECTED);
	CHECK_RC(cci_disconnect(c), CCI_EINVAL);
	CHECK_RC(cci_set_opt(c, CCI_OPT_CONN_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_get_opt(c, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &v), CCI_EINVAL);
	CHECK(v == 5);
}

static void connection_after_disconnect(void)
{
	struct rfix r;
	struct srv_stats st;
	cci_connection_t *c2;
	cci_event_t *held;
	uint8_t buf[16];

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	proto_build(buf, sizeof(buf), 0, 0, PROTO_DATA);
	/* freed at once: no event names it */
	CHECK_RC(cci_send(r.c, buf, sizeof(buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	CHECK_RC(cci_disconnect(r.c), CCI_SUCCESS);
	check_disconnected(&r, r.c);
	/* held by a SEND event still lent, then freed when it is returned */
	c2 = h_connect(r.ep, r.s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	CHECK_RC(cci_send(c2, buf, sizeof(buf), h_ctx(3), 0), CCI_SUCCESS);
	held = EXPECT_EVENT(r.ep, CCI_EVENT_SEND, 10000);
	REQUIRE(held != NULL);
	CHECK_RC(cci_disconnect(c2), CCI_SUCCESS);
	check_disconnected(&r, c2);
	CHECK(held->send.connection == c2 && held->send.context == h_ctx(3));
	CHECK_RC(cci_return_event(held), CCI_SUCCESS);
	check_disconnected(&r, c2);
	EXPECT_QUIET(r.ep, 200);
	/* the endpoint still connects */
	r.c = h_connect(r.ep, r.s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	CHECK_RC(cci_send(r.c, buf, sizeof(buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	rfix_close(&r, &st);
	CHECK(st.recvs == 3 && st.rma_bad == 0 && st.canary_bad == 0);
}

static void endpoint_after_destroy(void)
{
	struct srv s;
	struct srv_opts o = { .greet = 1 };
	cci_endpoint_t *ep, *ep2;
	cci_connection_t *c;
	cci_rma_handle_t *h = NULL;
	cci_event_t *held;
	static uint8_t mem[4096];
	uint32_t v = 5;
	char *uri;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	uri = h_uri(ep);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	held = EXPECT_EVENT(ep, CCI_EVENT_RECV, 10000); /* the greeting, kept */
	REQUIRE(held != NULL);
	REQUIRE_RC(cci_rma_register(ep, mem, sizeof(mem), CCI_FLAG_READ, &h), CCI_SUCCESS);
	CHECK_RC(cci_destroy_endpoint(ep), CCI_SUCCESS);
	CHECK_RC(cci_destroy_endpoint(ep), CCI_EINVAL);
	CHECK_RC(cci_get_event(ep, &(cci_event_t *){ NULL }), CCI_EINVAL);
	CHECK_RC(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_arm_os_handle(ep, 0), CCI_EINVAL);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_get_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_rma_register(ep, mem, sizeof(mem), 0, &(cci_rma_handle_t *){ NULL }),
	         CCI_EINVAL);
	CHECK_RC(cci_rma_deregister(ep, h), CCI_EINVAL);
	CHECK(strcmp(cci_strerror(ep, CCI_EINVAL), cci_strerror(NULL, CCI_EINVAL)) == 0);
	/* what it owned */
	CHECK_RC(cci_send(c, mem, 8, NULL, 0), CCI_ERR_DISCONNECTED);
	CHECK_RC(cci_disconnect(c), CCI_EINVAL);
	CHECK_RC(cci_return_event(held), CCI_EINVAL);
	CHECK_RC(cci_accept(held, NULL), CCI_EINVAL);
	CHECK(v == 5);
	/* the library goes on */
	ep2 = h_endpoint(h_find_device(), NULL);
	c = h_connect(ep2, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	held = EXPECT_EVENT(ep2, CCI_EVENT_RECV, 10000);
	if (held)
		CHECK_RC(cci_return_event(held), CCI_SUCCESS);
	CHECK_RC(cci_get_event(ep, &(cci_event_t *){ NULL }), CCI_EINVAL);
	free(uri);
	srv_stop(&s, NULL);
	h_teardown(ep2);
}

/*
 * A closed object's pointer stays recognised while up to M_QUARANTINE
 * other objects close after it: a connection, then that many
 * registrations opened and closed (they share the memory pool).
 */
static void quarantine_outlasts_later_closures(void)
{
	struct rfix r;
	struct srv_stats st;
	cci_rma_handle_t *h;
	static uint8_t mem[4096];

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	CHECK_RC(cci_disconnect(r.c), CCI_SUCCESS);
	for (unsigned i = 0; i < M_QUARANTINE; i++) {
		h = NULL;
		REQUIRE_RC(cci_rma_register(r.ep, mem, sizeof(mem), 0, &h), CCI_SUCCESS);
		CHECK_RC(cci_rma_deregister(r.ep, h), CCI_SUCCESS);
		CHECK_RC(cci_rma_deregister(r.ep, h), CCI_EINVAL);
	}
	check_disconnected(&r, r.c);
	rfix_close(&r, &st);
}

const struct h_test t_misuse_stale_tests[] = {
	{ "a deregistered handle: deregistering it again gives CCI_EINVAL, as the local or "
	  "remote handle CCI_ERR_RMA_HANDLE, its bytes or the peer's deregistered handle "
	  "are refused; no memory changes", rma_handle_after_deregister, H_NEEDS_DEVICE, 0 },
	{ "an event returned twice gives CCI_EINVAL and the pool stays sound",
	  event_returned_twice, H_NEEDS_DEVICE, 0 },
	{ "a request accepted, then accepted, rejected or returned again gives CCI_EINVAL; "
	  "accept/reject on an ACCEPT event too; the client sees one answer",
	  request_answered_twice, H_NEEDS_DEVICE, 30, (const void *)1 },
	{ "a request rejected, then accepted, rejected or returned again gives CCI_EINVAL; "
	  "the client sees CCI_ECONNREFUSED", request_answered_twice, H_NEEDS_DEVICE, 30, NULL },
	{ "after cci_disconnect, sends and RMA give CCI_ERR_DISCONNECTED, disconnect and "
	  "connection options CCI_EINVAL, whether an event still holds the connection or not",
	  connection_after_disconnect, H_NEEDS_DEVICE, 0 },
	{ "after cci_destroy_endpoint, every call on it gives CCI_EINVAL, on its connections "
	  "CCI_ERR_DISCONNECTED or CCI_EINVAL, its lent events CCI_EINVAL",
	  endpoint_after_destroy, H_NEEDS_DEVICE, 0 },
	{ "a disconnected connection is still recognised after 256 registrations closed "
	  "after it", quarantine_outlasts_later_closures, H_NEEDS_DEVICE, 0 },
};
const size_t t_misuse_stale_count = sizeof(t_misuse_stale_tests) / sizeof(t_misuse_stale_tests[0]);
