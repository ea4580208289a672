/*
 * t_cci2.c - what programs written for CCI 2 do and rely on: flags that
 * mean nothing to a call are ignored, as CCI 2 ignored them (CCI 2's own
 * pingpong sends its last message with CCI_FLAG_WRITE or CCI_FLAG_READ
 * set), while combinations that cannot be honoured are still refused.
 */
#include "tests.h"

#include "proto.h"
#include "server.h"

#include <string.h>

#define CTX ((void *)(uintptr_t)0xB1E)
#define UNDEFINED_FLAG (1 << 12)

static void expect_send_ok(cci_endpoint_t *ep, const char *what)
{
	cci_event_t *ev = EXPECT_EVENT(ep, CCI_EVENT_SEND, 5000);

	if (CHECKF(ev != NULL, "no SEND event for %s", what)) {
		CHECKF(ev->send.status == CCI_SUCCESS, "%s completed with %s", what,
		       h_status_name(ev->send.status));
		CHECK(ev->send.context == CTX);
		cci_return_event(ev);
	}
}

static void sends_ignore_flags_without_meaning(void)
{
	static const int extra[] = { CCI_FLAG_WRITE, CCI_FLAG_READ, CCI_FLAG_FENCE,
	                             UNDEFINED_FLAG };
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint8_t msg[64];
	struct iovec iov = { msg, sizeof(msg) };
	uint32_t seq = 0;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		proto_build(msg, sizeof(msg), 0, seq++, PROTO_DATA);
		CHECK_RC(cci_send(c, msg, sizeof(msg), CTX, extra[i]), CCI_SUCCESS);
		expect_send_ok(ep, "a cci_send with a flag it has no use for");
		proto_build(msg, sizeof(msg), 0, seq++, PROTO_DATA);
		CHECK_RC(cci_sendv(c, &iov, 1, CTX, extra[i]), CCI_SUCCESS);
		expect_send_ok(ep, "a cci_sendv with a flag it has no use for");
	}
	/* Blocking still means blocking under the extra bits. */
	proto_build(msg, sizeof(msg), 0, seq++, PROTO_DATA);
	CHECK_RC(cci_send(c, msg, sizeof(msg), CTX, CCI_FLAG_BLOCKING | CCI_FLAG_WRITE),
	         CCI_SUCCESS);
	EXPECT_QUIET(ep, 200);
	srv_stop_and_teardown(&s, &st, ep);
	CHECKF(st.recvs == seq, "the server received %llu of %u messages",
	       (unsigned long long)st.recvs, seq);
	CHECK(st.corrupt == 0 && st.order_errors == 0);
}

static void endpoint_connect_and_arm_ignore_flags(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	cci_device_t *dev;
	cci_endpoint_t *ep = NULL, *other = NULL;
	cci_os_handle_t fd = -1;
	cci_event_t *ev;
	int rc;

	srv_start(&s, &o);
	dev = h_setup();
	REQUIRE_RC(cci_create_endpoint(dev, CCI_EP_ROUTING, &ep, &fd), CCI_SUCCESS);
	CHECK_RC(cci_create_endpoint_at(dev, NULL, UNDEFINED_FLAG, &other, NULL), CCI_SUCCESS);
	rc = cci_arm_os_handle(ep, UNDEFINED_FLAG);
	CHECK_RC2(rc, CCI_SUCCESS, CCI_EAGAIN);
	REQUIRE_RC(cci_connect(ep, s.uri, NULL, 0, CCI_CONN_ATTR_RO, CTX, UNDEFINED_FLAG, NULL),
	           CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_CONNECT, 10000);
	if (ev) {
		CHECK_RC(ev->connect.status, CCI_SUCCESS);
		CHECK(ev->connect.context == CTX);
		cci_return_event(ev);
	}
	if (other)
		CHECK_RC(cci_destroy_endpoint(other), CCI_SUCCESS);
	srv_stop_and_teardown(&s, NULL, ep);
}

static void rma_ignores_flags_without_meaning(void)
{
	static uint8_t local[4096];
	struct srv s;
	struct srv_opts o = { .rma_len = sizeof(local),
	                      .rma_flags = CCI_FLAG_READ | CCI_FLAG_WRITE };
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_rma_handle_t *lh = NULL, *wo = NULL;
	struct proto_note note;
	struct srv_stats st;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	/* CCI 2's rma_threaded passes CCI_FLAG_BLOCKING or NO_COPY here. */
	REQUIRE_RC(cci_rma_register(ep, local, sizeof(local), CCI_FLAG_BLOCKING, &lh),
	           CCI_SUCCESS);
	proto_fill(local, sizeof(local), 0x2C, 0);
	/* The note tells the server what its memory now holds; it checks. */
	memset(&note, 0, sizeof(note));
	note.hdr = (struct proto_hdr){ PROTO_MAGIC, 0, 0, PROTO_RMA_NOTE, PROTO_NOTE_LEN(1) };
	note.n = 1;
	note.w[0] = (struct proto_write){ .roff = 0, .len = sizeof(local), .srcoff = 0,
	                                  .seed = 0x2C };
	CHECK_RC(cci_rma(c, &note, PROTO_NOTE_LEN(1), lh, 0, &s.handle, 0, sizeof(local), CTX,
	                 CCI_FLAG_WRITE | CCI_FLAG_BLOCKING | UNDEFINED_FLAG), CCI_SUCCESS);
	memset(local, 0, sizeof(local));
	CHECK_RC(cci_rma(c, NULL, 0, lh, 0, &s.handle, 0, sizeof(local), CTX,
	                 CCI_FLAG_READ | CCI_FLAG_BLOCKING | UNDEFINED_FLAG), CCI_SUCCESS);
	CHECKF(proto_diff(local, sizeof(local), 0x2C, 0) == sizeof(local),
	       "RMA with an undefined flag bit: the bytes read back differ from those written");
	/* What cannot be honoured is still refused. */
	CHECK_RC(cci_rma(c, NULL, 0, lh, 0, &s.handle, 0, 8, CTX,
	                 CCI_FLAG_READ | CCI_FLAG_WRITE | UNDEFINED_FLAG), CCI_EINVAL);
	CHECK_RC(cci_rma(c, NULL, 0, lh, 0, &s.handle, 0, 8, CTX, UNDEFINED_FLAG), CCI_EINVAL);
	/* The bits that mean something to a registration still count. */
	REQUIRE_RC(cci_rma_register(ep, local, sizeof(local), CCI_FLAG_WRITE | UNDEFINED_FLAG,
	                            &wo), CCI_SUCCESS);
	CHECK((wo->stuff[3] & 0xffffffffu) == (uint64_t)CCI_FLAG_WRITE);
	CHECK_RC(cci_rma_deregister(ep, wo), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(ep, lh), CCI_SUCCESS);
	srv_stop_and_teardown(&s, &st, ep);
	CHECKF(st.rma_notes == 1 && st.rma_bad == 0, "the server checked %llu RMA note(s), "
	       "%llu bad", (unsigned long long)st.rma_notes, (unsigned long long)st.rma_bad);
}

const struct h_test t_cci2_tests[] = {
	{ "cci_send and cci_sendv ignore RMA and undefined flags and deliver, as CCI 2 did",
	  sends_ignore_flags_without_meaning, H_NEEDS_DEVICE, 0 },
	{ "cci_create_endpoint, cci_connect and cci_arm_os_handle ignore flags they do not "
	  "define (CCI_EP_ROUTING included)", endpoint_connect_and_arm_ignore_flags,
	  H_NEEDS_DEVICE, 0 },
	{ "cci_rma and cci_rma_register ignore flags without meaning, still refuse READ with "
	  "WRITE", rma_ignores_flags_without_meaning, H_NEEDS_DEVICE, 0 },
};
const size_t t_cci2_count = sizeof(t_cci2_tests) / sizeof(t_cci2_tests[0]);
