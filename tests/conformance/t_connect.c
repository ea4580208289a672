/*
 * t_connect.c - cci_connect, cci_accept, cci_reject: payloads, attributes,
 * connection fields, refusals, timeouts and bad addresses.
 */
#include "tests.h"

#include "proto.h"
#include "server.h"

#include <stdlib.h>
#include <string.h>

#define CTX ((void *)(uintptr_t)0xC0FFEE)

static void connect_with_payload(uint32_t len, int null_ptr)
{
	struct srv s;
	struct srv_opts o = { .check_payload = 1 };
	struct srv_stats st;
	static uint8_t payload[CCI_CONN_REQ_LEN];
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_event_t *ev;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	proto_fill(payload, len, PROTO_PAYLOAD_SEED, 0);
	REQUIRE_RC(cci_connect(ep, s.uri, null_ptr ? NULL : payload, len, CCI_CONN_ATTR_RO,
	                       CTX, 0, NULL), CCI_SUCCESS);
	memset(payload, 0xEE, sizeof(payload)); /* copied by cci_connect */
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 10000);
	REQUIRE(ev != NULL);
	REQUIRE_RC(ev->connect.status, CCI_SUCCESS);
	c = ev->connect.connection;
	REQUIRE(c != NULL);
	CHECK(ev->connect.context == CTX);
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	CHECK(c->context == CTX);
	CHECK(c->endpoint == ep);
	CHECK(c->attribute == CCI_CONN_ATTR_RO);
	srv_stop_and_teardown(&s, &st, ep);
	CHECK(st.requests == 1 && st.accepts == 1);
	CHECKF(st.last_req_len == len, "server saw a payload of %u bytes, sent %u",
	       st.last_req_len, len);
	CHECK(st.payload_bad == 0);
}

static void payload_0_null_ptr(void)
{
	connect_with_payload(0, 1);
}

static void payload_1(void)
{
	connect_with_payload(1, 0);
}

static void payload_1024(void)
{
	connect_with_payload(CCI_CONN_REQ_LEN, 0);
}

static void payload_1025_is_einval(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	static uint8_t payload[CCI_CONN_REQ_LEN + 1];
	cci_endpoint_t *ep;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	CHECK_RC(cci_connect(ep, s.uri, payload, CCI_CONN_REQ_LEN + 1, CCI_CONN_ATTR_RO,
	                     CTX, 0, NULL), CCI_EINVAL);
	EXPECT_QUIET(ep, 200);
	srv_stop_and_teardown(&s, &st, ep);
	CHECK(st.requests == 0);
}

static void attributes_reach_the_server(void)
{
	static const cci_conn_attribute_t attrs[] = { CCI_CONN_ATTR_RO, CCI_CONN_ATTR_RU,
	                                              CCI_CONN_ATTR_UU };
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	cci_endpoint_t *ep;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	for (int i = 0; i < 3; i++) {
		cci_connection_t *c = h_connect(ep, s.uri, attrs[i], NULL, 0, CTX);

		CHECKF(c->attribute == attrs[i], "client connection has attribute %d, "
		       "asked %d", c->attribute, attrs[i]);
		srv_snapshot(&s, &st);
		CHECKF(st.last_req_attr == attrs[i] && st.conn_attr == attrs[i],
		       "server saw attribute %u (request) / %u (connection), asked %d",
		       st.last_req_attr, st.conn_attr, attrs[i]);
	}
	srv_stop_and_teardown(&s, &st, ep);
	CHECK(st.accepts == 3);
}

static void max_send_size_is_the_smaller_side(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint32_t want;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RU, NULL, 0, CTX);
	srv_snapshot(&s, &st);
	want = ep->device->max_send_size < st.dev_mss ? ep->device->max_send_size : st.dev_mss;
	CHECKF(c->max_send_size == want, "client max_send_size %u, expected %u",
	       c->max_send_size, want);
	CHECKF(st.conn_mss == want, "server max_send_size %u, expected %u",
	       st.conn_mss, want);
	CHECK(c->max_send_size > 0);
	srv_stop_and_teardown(&s, NULL, ep);
}

static void refused_by(enum srv_action action)
{
	struct srv s;
	struct srv_opts o = { .action = action };
	struct srv_stats st;
	cci_endpoint_t *ep;
	cci_event_t *ev;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	REQUIRE_RC(cci_connect(ep, s.uri, "x", 1, CCI_CONN_ATTR_RO, CTX, 0, NULL),
	           CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 10000);
	if (ev) {
		CHECK_RC(ev->connect.status, CCI_ECONNREFUSED);
		CHECK(ev->connect.connection == NULL);
		CHECK(ev->connect.context == CTX);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	srv_stop_and_teardown(&s, &st, ep);
	CHECK(st.requests == 1 && st.accepts == 0);
}

static void reject_gives_econnrefused(void)
{
	refused_by(SRV_REJECT);
}

/* Well before any timeout: the client is told no, not left waiting. */
static void request_returned_unanswered_is_rejected(void)
{
	refused_by(SRV_RETURN);
}

static void second_decision_is_einval(void)
{
	struct srv acc, rej;
	struct srv_opts oa = { .decide_twice = 1 };
	struct srv_opts orj = { .action = SRV_REJECT, .decide_twice = 1 };
	cci_endpoint_t *ep;
	cci_event_t *ev;

	srv_start(&acc, &oa);
	srv_start(&rej, &orj);
	ep = h_endpoint(h_setup(), NULL);
	h_connect(ep, acc.uri, CCI_CONN_ATTR_RO, NULL, 0, CTX);
	REQUIRE_RC(cci_connect(ep, rej.uri, NULL, 0, CCI_CONN_ATTR_RO, CTX, 0, NULL),
	           CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 10000);
	if (ev) {
		CHECK_RC(ev->connect.status, CCI_ECONNREFUSED);
		cci_return_event(ev);
	}
	srv_stop(&acc, NULL);
	srv_stop_and_teardown(&rej, NULL, ep);
}

/* cci_connect to a dead address: an immediate error or an error event. */
static void expect_connect_failure(cci_endpoint_t *ep, const char *uri)
{
	struct timeval tv = { .tv_sec = 3 };
	cci_event_t *ev;
	int rc = cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, CTX, 0, &tv);

	if (rc != CCI_SUCCESS)
		return; /* refused at once: fine */
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 6000);
	if (ev) {
		CHECKF(ev->connect.status != CCI_SUCCESS, "connected to %s where nobody "
		       "listens", uri);
		CHECK(ev->connect.status == CCI_SUCCESS || ev->connect.connection == NULL);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
}

static void connect_to_destroyed_endpoint_fails(void)
{
	cci_device_t *dev = h_setup();
	cci_endpoint_t *ep = h_endpoint(dev, NULL), *gone = h_endpoint(dev, NULL);
	char *uri = h_uri(gone);

	CHECK_RC(cci_destroy_endpoint(gone), CCI_SUCCESS);
	expect_connect_failure(ep, uri);
	free(uri);
	h_teardown(ep);
}

static void connect_to_killed_process_fails(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	cci_endpoint_t *ep;

	srv_start(&s, &o);
	/* Opened before the kill: after it, the kernel could give this
	 * endpoint the server's freed port, and it would connect to itself. */
	ep = h_endpoint(h_setup(), NULL);
	h_peer_kill(&s.peer);
	expect_connect_failure(ep, s.uri);
	h_teardown(ep);
}

static void unanswered_request_times_out(void)
{
	struct srv s;
	struct srv_opts o = { .action = SRV_IGNORE };
	struct srv_stats st;
	struct timeval tv = { .tv_usec = 500000 };
	cci_endpoint_t *ep;
	cci_event_t *ev;
	uint64_t t0, dt;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	t0 = h_now_ms();
	REQUIRE_RC(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, CTX, 0, &tv),
	           CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 8000);
	dt = h_now_ms() - t0;
	if (ev) {
		CHECK_RC(ev->connect.status, CCI_ETIMEDOUT);
		CHECK(ev->connect.connection == NULL);
		CHECK(ev->connect.context == CTX);
		CHECKF(dt >= 400 && dt <= 5000, "timed out after %llu ms, asked 500 ms",
		       (unsigned long long)dt);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	srv_snapshot(&s, &st);
	CHECKF(st.requests == 1, "the server got %llu requests",
	       (unsigned long long)st.requests);
	srv_stop_and_teardown(&s, NULL, ep);
}

static void slow_accept_connects(const struct timeval *tv)
{
	struct srv s;
	struct srv_opts o = { .accept_delay_ms = 1000 };
	cci_endpoint_t *ep;
	cci_event_t *ev;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	REQUIRE_RC(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, CTX, 0, tv),
	           CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 10000);
	if (ev) {
		CHECK_RC(ev->connect.status, CCI_SUCCESS);
		CHECK(ev->connect.connection != NULL);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	srv_stop_and_teardown(&s, NULL, ep);
}

static void null_timeout_waits_for_slow_accept(void)
{
	slow_accept_connects(NULL);
}

static void long_timeout_waits_for_slow_accept(void)
{
	struct timeval tv = { .tv_sec = 5 };

	slow_accept_connects(&tv);
}

static void unparsable_uri_is_einval(void)
{
	static const char *bad[] = { "", "no-scheme-here", "://nohost", "sm:/x", "sm//x" };
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECKF(cci_connect(ep, bad[i], NULL, 0, CCI_CONN_ATTR_RO, CTX, 0, NULL) ==
		       CCI_EINVAL, "cci_connect(\"%s\") is not CCI_EINVAL", bad[i]);
	EXPECT_QUIET(ep, 100);
	h_teardown(ep);
}

static void other_transport_uri_is_refused(void)
{
	cci_device_t *dev = h_setup();
	cci_endpoint_t *ep = h_endpoint(dev, NULL);
	const char *other = strcmp(dev->transport, "sm") ? "sm:///tmp/nowhere/1/1"
	                                                 : "tcp://127.0.0.1:1";
	const char *uris[] = { other, "nonsense://x" };

	for (int i = 0; i < 2; i++) {
		int rc = cci_connect(ep, uris[i], NULL, 0, CCI_CONN_ATTR_RO, CTX, 0, NULL);

		CHECKF(rc == CCI_EINVAL || rc == CCI_EADDRNOTAVAIL, "cci_connect(\"%s\") on "
		       "%s returned %s", uris[i], dev->transport, h_status_name(rc));
	}
	EXPECT_QUIET(ep, 100);
	h_teardown(ep);
}

static void several_connections_to_one_server(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	cci_connection_t *c[4];
	cci_endpoint_t *ep;
	uint8_t buf[32];

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	for (int i = 0; i < 4; i++) {
		c[i] = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, h_ctx(i));
		CHECK(c[i]->context == h_ctx(i));
		for (int k = 0; k < i; k++)
			CHECK(c[k] != c[i]);
	}
	for (int i = 0; i < 4; i++) {
		proto_build(buf, sizeof(buf), (uint16_t)i, 0, PROTO_DATA);
		CHECK_RC(cci_send(c[i], buf, sizeof(buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	}
	srv_stop_and_teardown(&s, &st, ep);
	CHECK(st.accepts == 4 && st.recvs == 4 && st.bad_conn == 0 && st.corrupt == 0);
}

/* Two endpoints of one process: connect and exchange one message. */
static void endpoints_of_one_process_connect(void)
{
	cci_device_t *dev = h_setup();
	cci_endpoint_t *a = h_endpoint(dev, NULL), *b = h_endpoint(dev, NULL);
	char *uri = h_uri(b);
	cci_connection_t *ca = NULL;
	cci_event_t *ev = NULL;
	uint64_t stop = h_now_ms() + 10000;

	REQUIRE_RC(cci_connect(a, uri, "hi", 2, CCI_CONN_ATTR_RO, CTX, 0, NULL), CCI_SUCCESS);
	while (!ca && h_now_ms() < stop) {
		if (cci_get_event(b, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT_REQUEST)
				CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
			CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
		}
		if (cci_get_event(a, &ev) == CCI_SUCCESS) {
			CHECK(ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_SUCCESS);
			ca = ev->connect.connection;
			CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
		}
	}
	REQUIRE(ca != NULL);
	CHECK_RC(cci_send(ca, "ping", 4, NULL, CCI_FLAG_SILENT), CCI_SUCCESS);
	while ((ev = NULL, h_poll_event(b, &ev, 5000)) == CCI_SUCCESS &&
	       ev->type != CCI_EVENT_RECV)
		cci_return_event(ev);
	if (CHECKF(ev && ev->type == CCI_EVENT_RECV, "the message did not arrive")) {
		CHECK(ev->recv.len == 4 && memcmp(ev->recv.ptr, "ping", 4) == 0);
		cci_return_event(ev);
	}
	free(uri);
	CHECK_RC(cci_destroy_endpoint(b), CCI_SUCCESS);
	h_teardown(a);
}

const struct h_test t_connect_tests[] = {
	{ "a connect payload of 0 bytes with a NULL data_ptr is accepted",
	  payload_0_null_ptr, H_NEEDS_DEVICE, 0 },
	{ "a connect payload of 1 byte reaches the server intact", payload_1, H_NEEDS_DEVICE, 0 },
	{ "a connect payload of 1024 bytes reaches the server intact, copied by cci_connect",
	  payload_1024, H_NEEDS_DEVICE, 0 },
	{ "a connect payload of 1025 bytes fails with CCI_EINVAL and sends nothing",
	  payload_1025_is_einval, H_NEEDS_DEVICE, 0 },
	{ "RO, RU and UU requests reach the server with their attribute",
	  attributes_reach_the_server, H_NEEDS_DEVICE, 0 },
	{ "connection max_send_size is the smaller side's, the same on both sides",
	  max_send_size_is_the_smaller_side, H_NEEDS_DEVICE, 0 },
	{ "a rejected request gives the client CCI_ECONNREFUSED and no connection",
	  reject_gives_econnrefused, H_NEEDS_DEVICE, 0 },
	{ "a request whose event is returned unanswered gives the client CCI_ECONNREFUSED",
	  request_returned_unanswered_is_rejected, H_NEEDS_DEVICE, 0 },
	{ "accepting or rejecting a request a second time fails with CCI_EINVAL",
	  second_decision_is_einval, H_NEEDS_DEVICE, 0 },
	{ "connect to the URI of a destroyed endpoint fails without hanging",
	  connect_to_destroyed_endpoint_fails, H_NEEDS_DEVICE, 0 },
	{ "connect to the URI of a killed process fails without hanging",
	  connect_to_killed_process_fails, H_NEEDS_DEVICE, 0 },
	{ "an unanswered request ends with CCI_ETIMEDOUT after the connect timeout",
	  unanswered_request_times_out, H_NEEDS_DEVICE, 0 },
	{ "a NULL connect timeout waits for a server that accepts after 1 s",
	  null_timeout_waits_for_slow_accept, H_NEEDS_DEVICE, 0 },
	{ "a 5 s connect timeout waits for a server that accepts after 1 s",
	  long_timeout_waits_for_slow_accept, H_NEEDS_DEVICE, 0 },
	{ "an unparsable URI fails cci_connect with CCI_EINVAL",
	  unparsable_uri_is_einval, H_NEEDS_DEVICE, 0 },
	{ "a URI of another transport fails with CCI_EINVAL or CCI_EADDRNOTAVAIL",
	  other_transport_uri_is_refused, H_NEEDS_DEVICE, 0 },
	{ "a client opens four connections to one server, each with its own context",
	  several_connections_to_one_server, H_NEEDS_DEVICE, 0 },
	{ "two endpoints of one process connect and exchange a message",
	  endpoints_of_one_process_connect, H_NEEDS_DEVICE, 0 },
};
const size_t t_connect_count = sizeof(t_connect_tests) / sizeof(t_connect_tests[0]);
