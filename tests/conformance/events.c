/*
 * events.c - bounded event waiting and send bookkeeping for the tests.
 * Every loop here ends by a deadline: a library that hangs fails a check
 * instead of stalling the suite.
 */
#include "harness.h"

#include <sched.h>
#include <stdlib.h>

int h_poll_event(cci_endpoint_t *ep, cci_event_t **ev, unsigned timeout_ms)
{
	uint64_t deadline = h_now_ms() + timeout_ms;

	for (;;) {
		int rc = cci_get_event(ep, ev);

		if (rc == CCI_SUCCESS) {
			if (!CHECKF(*ev != NULL, "cci_get_event succeeded with a NULL event"))
				return CCI_ERROR;
			return rc;
		}
		if (rc != CCI_EAGAIN && rc != CCI_ENOBUFS) {
			CHECKF(0, "cci_get_event returned %s (%d)", h_status_name(rc), rc);
			return rc;
		}
		if (h_now_ms() >= deadline)
			return CCI_ETIMEDOUT;
		sched_yield();
	}
}

cci_event_t *h_expect(cci_endpoint_t *ep, cci_event_type_t type,
                      unsigned timeout_ms, const char *file, int line)
{
	cci_event_t *ev = NULL;
	int rc = h_poll_event(ep, &ev, timeout_ms);

	if (rc == CCI_ETIMEDOUT) {
		h_check(0, file, line, "no %s event within %u ms",
		        cci_event_type_str(type), timeout_ms);
		return NULL;
	}
	if (rc != CCI_SUCCESS)
		return NULL;
	if (ev->type != type) {
		h_check(0, file, line, "expected %s, got %s", cci_event_type_str(type),
		        cci_event_type_str(ev->type));
		cci_return_event(ev);
		return NULL;
	}
	return ev;
}

void h_expect_quiet(cci_endpoint_t *ep, unsigned ms, const char *file, int line)
{
	uint64_t deadline = h_now_ms() + ms;

	while (h_now_ms() < deadline) {
		cci_event_t *ev = NULL;

		if (h_poll_event(ep, &ev, 10) != CCI_SUCCESS)
			continue;
		h_check(0, file, line, "unexpected %s event", cci_event_type_str(ev->type));
		cci_return_event(ev);
	}
}

cci_connection_t *h_connect(cci_endpoint_t *ep, const char *uri,
                            cci_conn_attribute_t attr, const void *data,
                            uint32_t len, const void *context)
{
	return h_connect_within(ep, uri, attr, data, len, context, 10);
}

cci_connection_t *h_connect_within(cci_endpoint_t *ep, const char *uri,
                                   cci_conn_attribute_t attr, const void *data,
                                   uint32_t len, const void *context, unsigned seconds)
{
	struct timeval tv = { .tv_sec = seconds };
	cci_connection_t *conn;
	cci_event_t *ev;

	REQUIRE_RC(cci_connect(ep, uri, data, len, attr, context, 0, &tv), CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, seconds * 1000 + 2000);
	REQUIRE(ev != NULL);
	if (!CHECK_RC(ev->connect.status, CCI_SUCCESS) ||
	    !CHECK(ev->connect.connection != NULL)) {
		cci_return_event(ev);
		h_bail();
	}
	CHECK(ev->connect.context == context);
	conn = ev->connect.connection;
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	return conn;
}

void h_sendctr_init(struct h_sendctr *c, uint64_t n)
{
	*c = (struct h_sendctr){ .n = n, .first_err = CCI_SUCCESS };
	c->status_seen = calloc(n ? n : 1, 1);
	REQUIRE(c->status_seen != NULL);
}

void h_sendctr_free(struct h_sendctr *c)
{
	free(c->status_seen);
	c->status_seen = NULL;
}

void h_sendctr_event(struct h_sendctr *c, cci_event_t *ev)
{
	if (ev->type == CCI_EVENT_SEND) {
		uint64_t i = (uint64_t)(uintptr_t)ev->send.context - 1;
		int st = ev->send.status;

		if (st == CCI_SUCCESS) {
			c->ok++;
		} else {
			if (!c->err)
				c->first_err = st;
			c->err++;
		}
		if (i >= c->n)
			c->foreign++;
		else if (c->status_seen[i])
			c->dup++;
		else
			c->status_seen[i] = (uint8_t)(st + 1);
	} else if (ev->type == CCI_EVENT_RECV) {
		c->recvs++;
	} else {
		c->others++;
	}
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

int h_pump(cci_endpoint_t *ep, struct h_sendctr *c)
{
	int n = 0;

	while (n < 64) {
		cci_event_t *ev = NULL;
		int rc = cci_get_event(ep, &ev);

		if (rc == CCI_EAGAIN || rc == CCI_ENOBUFS)
			break;
		if (!CHECK_RC(rc, CCI_SUCCESS) || !CHECK(ev != NULL))
			break;
		h_sendctr_event(c, ev);
		n++;
	}
	return n;
}

int h_send(cci_endpoint_t *ep, cci_connection_t *conn, const void *buf,
           uint32_t len, const void *ctx, int flags, struct h_sendctr *c)
{
	uint64_t deadline = h_now_ms() + 10000;

	for (;;) {
		int rc = cci_send(conn, buf, len, ctx, flags);

		if (rc != CCI_ENOBUFS || h_now_ms() >= deadline)
			return rc;
		if (!h_pump(ep, c))
			sched_yield();
	}
}

void h_drain(cci_endpoint_t *ep, struct h_sendctr *c, uint64_t total,
             unsigned timeout_ms)
{
	uint64_t deadline = h_now_ms() + timeout_ms;

	while (c->ok + c->err < total && h_now_ms() < deadline)
		if (!h_pump(ep, c))
			sched_yield();
}
