/*
 * t_msg.c - active messages: delivery guarantees per attribute, sizes,
 * cci_sendv, the send flags, SEND event contents and receive events.
 */
#include "tests.h"

#include "proto.h"
#include "server.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

struct fix {
	struct srv s;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint8_t *buf;
};

static void fix_open(struct fix *f, const struct srv_opts *o, cci_conn_attribute_t attr)
{
	srv_start(&f->s, o);
	f->ep = h_endpoint(h_setup(), NULL);
	f->c = h_connect(f->ep, f->s.uri, attr, NULL, 0, NULL);
	f->buf = calloc(1, f->c->max_send_size + 64);
	REQUIRE(f->buf != NULL);
}

static void fix_close(struct fix *f, struct srv_stats *st)
{
	srv_stop_and_teardown(&f->s, st, f->ep);
	free(f->buf);
}

/* Send n messages of varied sizes (every 7th of max_send_size); returns
 * how many were accepted. */
static uint32_t send_many(struct fix *f, uint32_t n, struct h_sendctr *ctr)
{
	uint32_t mss = f->c->max_send_size, seq;

	for (seq = 0; seq < n; seq++) {
		uint32_t len = seq % 7 ? PROTO_HDR + seq % 113 : mss;

		if (len > mss)
			len = mss;
		proto_build(f->buf, len, 0, seq, PROTO_DATA);
		if (!CHECK_RC(h_send(f->ep, f->c, f->buf, len, h_ctx(seq), 0, ctr), CCI_SUCCESS))
			break;
	}
	h_drain(f->ep, ctr, seq, 10000);
	return seq;
}

static void reliable_bulk(cci_conn_attribute_t attr)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct h_sendctr ctr;
	uint32_t n = 10000;

	fix_open(&f, &o, attr);
	h_sendctr_init(&ctr, n);
	CHECK(send_many(&f, n, &ctr) == n);
	CHECKF(ctr.ok == n && ctr.err == 0 && ctr.dup == 0 && ctr.foreign == 0,
	       "SEND events: %llu ok, %llu failed (first %s), %llu duplicates",
	       (unsigned long long)ctr.ok, (unsigned long long)ctr.err,
	       h_status_name(ctr.first_err), (unsigned long long)ctr.dup);
	fix_close(&f, &st);
	CHECKF(st.recvs == n, "server received %llu of %u", (unsigned long long)st.recvs, n);
	CHECK(st.dups == 0 && st.corrupt == 0 && st.bad_conn == 0);
	CHECKF(st.enobufs == 0, "cci_get_event returned CCI_ENOBUFS %llu times to a "
	       "server that holds no event", (unsigned long long)st.enobufs);
	if (attr == CCI_CONN_ATTR_RO)
		CHECKF(st.order_errors == 0, "%llu messages out of order",
		       (unsigned long long)st.order_errors);
	h_sendctr_free(&ctr);
}

static void ro_delivers_10000_in_order(void)
{
	reliable_bulk(CCI_CONN_ATTR_RO);
}

static void ru_delivers_10000_exactly_once(void)
{
	reliable_bulk(CCI_CONN_ATTR_RU);
}

static void uu_never_duplicates_or_corrupts(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct h_sendctr ctr;
	uint32_t n = 5000;

	fix_open(&f, &o, CCI_CONN_ATTR_UU);
	h_sendctr_init(&ctr, n);
	CHECK(send_many(&f, n, &ctr) == n);
	CHECK(ctr.ok + ctr.err == n && ctr.dup == 0);
	fix_close(&f, &st);
	CHECKF(st.recvs <= n && st.recvs > 0, "server received %llu of %u",
	       (unsigned long long)st.recvs, n);
	CHECK(st.dups == 0 && st.corrupt == 0 && st.bad_conn == 0);
	h_sendctr_free(&ctr);
}

static void uu_to_stopped_receiver_never_blocks(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct h_sendctr ctr;
	uint32_t accepted = 0, n = 3000;
	uint64_t t0;

	fix_open(&f, &o, CCI_CONN_ATTR_UU);
	h_sendctr_init(&ctr, n);
	kill(f.s.peer.pid, SIGSTOP);
	t0 = h_now_ms();
	for (uint32_t seq = 0; seq < n; seq++) {
		int rc;

		proto_build(f.buf, 64, 0, seq, PROTO_DATA);
		rc = cci_send(f.c, f.buf, 64, h_ctx(seq), 0);
		if (rc == CCI_SUCCESS)
			accepted++;
		else
			CHECK_RC2(rc, CCI_ENOBUFS, CCI_ERR_RNR);
		h_pump(f.ep, &ctr);
	}
	CHECKF(h_now_ms() - t0 < 5000, "3000 UU sends to a stopped receiver took %llu ms",
	       (unsigned long long)(h_now_ms() - t0));
	kill(f.s.peer.pid, SIGCONT);
	h_drain(f.ep, &ctr, accepted, 5000);
	CHECKF(ctr.ok + ctr.err == accepted && ctr.dup == 0, "%u accepted UU sends, "
	       "%llu completions", accepted, (unsigned long long)(ctr.ok + ctr.err));
	fix_close(&f, &st);
	CHECK(st.recvs <= accepted && st.dups == 0 && st.corrupt == 0);
	h_sendctr_free(&ctr);
}

static void sizes_arrive_intact(cci_conn_attribute_t attr)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	uint32_t sizes[5] = { 0, 1, PROTO_HDR - 1, PROTO_HDR, 0 };

	fix_open(&f, &o, attr);
	sizes[4] = f.c->max_send_size;
	for (uint32_t i = 0; i < 5; i++) {
		proto_build(f.buf, sizes[i], 0, i, PROTO_DATA);
		CHECKF(cci_send(f.c, f.buf, sizes[i], NULL, CCI_FLAG_BLOCKING) == CCI_SUCCESS,
		       "a BLOCKING send of %u bytes failed", sizes[i]);
	}
	fix_close(&f, &st);
	CHECK(st.corrupt == 0 && st.dups == 0);
	if (attr == CCI_CONN_ATTR_UU) {
		CHECK(st.recvs <= 5);
	} else {
		CHECKF(st.recvs == 5 && st.tiny == 3, "received %llu (%llu tiny)",
		       (unsigned long long)st.recvs, (unsigned long long)st.tiny);
		CHECK(st.bytes == 2 * PROTO_HDR + sizes[4]);
	}
}

static void sizes_ro(void)
{
	sizes_arrive_intact(CCI_CONN_ATTR_RO);
}

static void sizes_ru(void)
{
	sizes_arrive_intact(CCI_CONN_ATTR_RU);
}

static void sizes_uu(void)
{
	sizes_arrive_intact(CCI_CONN_ATTR_UU);
}

static void oversize_is_emsgsize(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct iovec iov[2];
	uint32_t mss;

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	mss = f.c->max_send_size;
	CHECK_RC(cci_send(f.c, f.buf, mss + 1, NULL, 0), CCI_EMSGSIZE);
	CHECK_RC(cci_send(f.c, f.buf, mss + 1, NULL, CCI_FLAG_BLOCKING), CCI_EMSGSIZE);
	iov[0] = (struct iovec){ f.buf, mss };
	iov[1] = (struct iovec){ f.buf, 1 };
	CHECK_RC(cci_sendv(f.c, iov, 2, NULL, 0), CCI_EMSGSIZE);
	EXPECT_QUIET(f.ep, 200);
	fix_close(&f, &st);
	CHECK(st.recvs == 0);
}

static void sendv_gathers_in_order(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct iovec iov[20];
	uint32_t len;

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	len = 300;
	if (f.c->max_send_size < len)
		h_skip("max_send_size %u is below 300", f.c->max_send_size);
	proto_build(f.buf, len, 0, 0, PROTO_DATA);
	iov[0] = (struct iovec){ f.buf, 7 };
	iov[1] = (struct iovec){ f.buf + 7, 0 };
	iov[2] = (struct iovec){ f.buf + 7, 93 };
	iov[3] = (struct iovec){ f.buf + 100, len - 100 };
	CHECK_RC(cci_sendv(f.c, iov, 4, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	proto_build(f.buf, len, 0, 1, PROTO_DATA);
	for (int i = 0; i < 20; i++) /* 19 pieces of 15 bytes, then the rest */
		iov[i] = (struct iovec){ f.buf + 15 * i, i < 19 ? 15 : len - 15 * 19 };
	CHECK_RC(cci_sendv(f.c, iov, 20, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	fix_close(&f, &st);
	CHECK(st.recvs == 2 && st.corrupt == 0 && st.order_errors == 0);
	CHECK(st.bytes == 2u * len);
}

static void sendv_of_nothing_sends_empty(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	cci_event_t *ev;

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	CHECK_RC(cci_sendv(f.c, NULL, 0, h_ctx(5), 0), CCI_SUCCESS);
	ev = EXPECT_EVENT(f.ep, CCI_EVENT_SEND, 5000);
	if (ev) {
		CHECK_RC(ev->send.status, CCI_SUCCESS);
		CHECK(ev->send.context == h_ctx(5));
		cci_return_event(ev);
	}
	fix_close(&f, &st);
	CHECK(st.recvs == 1 && st.tiny == 1 && st.bytes == 0);
}

static void blocking_send_has_no_event(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	for (uint32_t i = 0; i < 3; i++) {
		proto_build(f.buf, 32, 0, i, PROTO_DATA);
		CHECK_RC(cci_send(f.c, f.buf, 32, h_ctx(i), CCI_FLAG_BLOCKING), CCI_SUCCESS);
	}
	EXPECT_QUIET(f.ep, 300);
	fix_close(&f, &st);
	CHECK(st.recvs == 3 && st.corrupt == 0 && st.order_errors == 0);
}

static void silent_sends_have_no_event(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	cci_event_t *ev;

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	for (uint32_t i = 0; i < 10; i++) {
		proto_build(f.buf, 40, 0, i, PROTO_DATA);
		CHECK_RC(cci_send(f.c, f.buf, 40, h_ctx(i), CCI_FLAG_SILENT), CCI_SUCCESS);
	}
	proto_build(f.buf, 40, 0, 10, PROTO_DATA);
	CHECK_RC(cci_send(f.c, f.buf, 40, h_ctx(10), 0), CCI_SUCCESS);
	ev = EXPECT_EVENT(f.ep, CCI_EVENT_SEND, 5000);
	if (ev) {
		CHECKF(ev->send.context == h_ctx(10), "SEND event for a SILENT send (%p)",
		       ev->send.context);
		CHECK_RC(ev->send.status, CCI_SUCCESS);
		cci_return_event(ev);
	}
	EXPECT_QUIET(f.ep, 300);
	fix_close(&f, &st);
	CHECK(st.recvs == 11 && st.corrupt == 0 && st.order_errors == 0);
}

/* Call cci_get_event on f's endpoint until the server has n messages,
 * for at most 10 s. */
static void calls_until_received(struct fix *f, uint64_t n)
{
	struct srv_stats st = { 0 };

	for (uint64_t stop = h_now_ms() + 10000; h_now_ms() < stop;) {
		cci_event_t *ev;

		srv_snapshot(&f->s, &st);
		if (st.recvs >= n)
			return;
		if (cci_get_event(f->ep, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		else
			h_sleep_ms(1);
	}
}

/* A sender that only calls cci_send (SILENT: no events to reap) and
 * retries on CCI_ENOBUFS: its own calls must move what frees its send
 * buffers, or it spins for ever. */
static void sender_that_never_polls_still_moves(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	uint32_t n = 5000, sent = 0, enobufs = 0;
	uint64_t stop;

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	/* Few send buffers, so that they run out (where the option is taken). */
	cci_set_opt(f.ep, CCI_OPT_ENDPT_SEND_BUF_COUNT, &(uint32_t){ 16 });
	stop = h_now_ms() + 20000;
	while (sent < n && h_now_ms() < stop) {
		int rc;
		proto_build(f.buf, 40, 0, sent, PROTO_DATA);
		rc = cci_send(f.c, f.buf, 40, h_ctx(sent), CCI_FLAG_SILENT);
		if (rc == CCI_ENOBUFS) {
			enobufs++;
			continue;
		}
		if (!CHECK_RC(rc, CCI_SUCCESS))
			break;
		sent++;
	}
	CHECKF(sent == n, "%u of %u sends taken in 20 s (%u CCI_ENOBUFS)", sent, n, enobufs);
	/* With progress = manual the last sends, queued for credits the peer
	 * returns, move only with a call: make them (not with a thread, whose
	 * claim is that it moves them alone). */
	if (h_device_manual(f.ep->device))
		calls_until_received(&f, n);
	fix_close(&f, &st);
	CHECKF(st.recvs == n, "server received %llu of %u", (unsigned long long)st.recvs, n);
	CHECK(st.corrupt == 0 && st.order_errors == 0);
}

static void no_copy_send_completes_intact(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	cci_event_t *ev;
	uint32_t len;

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	len = f.c->max_send_size;
	proto_build(f.buf, len, 0, 0, PROTO_DATA);
	CHECK_RC(cci_send(f.c, f.buf, len, h_ctx(1), CCI_FLAG_NO_COPY), CCI_SUCCESS);
	ev = EXPECT_EVENT(f.ep, CCI_EVENT_SEND, 5000);
	if (ev) {
		CHECK_RC(ev->send.status, CCI_SUCCESS);
		CHECK(ev->send.context == h_ctx(1));
		cci_return_event(ev);
	}
	memset(f.buf, 0xEE, len); /* ours again */
	fix_close(&f, &st);
	CHECK(st.recvs == 1 && st.corrupt == 0);
}

static void send_events_carry_context_and_connection(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	uint32_t seen[100] = { 0 }, got = 0;
	uint64_t stop;

	fix_open(&f, &o, CCI_CONN_ATTR_RU);
	for (uint32_t i = 0; i < 100; i++) {
		proto_build(f.buf, 24, 0, i, PROTO_DATA);
		CHECK_RC(cci_send(f.c, f.buf, 24, h_ctx(i), 0), CCI_SUCCESS);
	}
	for (stop = h_now_ms() + 10000; got < 100 && h_now_ms() < stop;) {
		cci_event_t *ev = NULL;
		uintptr_t i;

		if (h_poll_event(f.ep, &ev, 100) != CCI_SUCCESS)
			continue;
		i = (uintptr_t)ev->send.context - 1;
		if (CHECK(ev->type == CCI_EVENT_SEND) && CHECK(i < 100)) {
			CHECK(ev->send.connection == f.c);
			CHECK_RC(ev->send.status, CCI_SUCCESS);
			seen[i]++;
			got++;
		}
		cci_return_event(ev);
	}
	for (uint32_t i = 0; i < 100; i++)
		CHECKF(seen[i] == 1, "context %u completed %u times", i, seen[i]);
	fix_close(&f, NULL);
}

static void recv_buffers_are_8_byte_aligned(void)
{
	struct fix f;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	uint32_t n = 0;

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	for (uint32_t len = 1; len <= 64 && len <= f.c->max_send_size; len++, n++) {
		proto_build(f.buf, len, 0, n, PROTO_DATA);
		CHECK_RC(cci_send(f.c, f.buf, len, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	}
	fix_close(&f, &st);
	CHECK(st.recvs == n && st.corrupt == 0);
	CHECKF(st.misaligned == 0, "%llu of %u receive buffers not 8-byte aligned",
	       (unsigned long long)st.misaligned, n);
}

/* Collect n RECV events of the echo, holding them. */
static uint32_t collect_echoes(struct fix *f, cci_event_t **held, uint32_t n)
{
	uint64_t stop = h_now_ms() + 10000;
	uint32_t k = 0;

	while (k < n && h_now_ms() < stop) {
		cci_event_t *ev = NULL;

		if (h_poll_event(f->ep, &ev, 100) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_RECV) {
			held[k++] = ev;
			continue;
		}
		CHECK(ev->type == CCI_EVENT_SEND);
		cci_return_event(ev);
	}
	return k;
}

static void events_returned_out_of_order(void)
{
	struct fix f;
	struct srv_opts o = { .echo = 1 };
	cci_event_t *held[16];

	fix_open(&f, &o, CCI_CONN_ATTR_RO);
	for (uint32_t round = 0; round < 3; round++) {
		uint32_t got;

		for (uint32_t i = 0; i < 16; i++) {
			proto_build(f.buf, 64 + i, 1, round * 16 + i, PROTO_DATA);
			CHECK_RC(cci_send(f.c, f.buf, 64 + i, NULL, CCI_FLAG_SILENT), CCI_SUCCESS);
		}
		got = collect_echoes(&f, held, 16);
		CHECKF(got == 16, "round %u: %u of 16 echoes", round, got);
		for (uint32_t i = 0; i < got; i++) {
			struct proto_hdr h;

			CHECKF(proto_parse(held[i]->recv.ptr, held[i]->recv.len, &h) == 1 &&
			       h.seq == round * 16 + i, "held event %u changed", i);
		}
		for (uint32_t i = 1; i < got; i += 2)   /* odd ones first, */
			CHECK_RC(cci_return_event(held[got - i]), CCI_SUCCESS);
		for (uint32_t i = got % 2; i < got; i += 2) /* then the others */
			CHECK_RC(cci_return_event(held[i]), CCI_SUCCESS);
	}
	fix_close(&f, NULL);
}

const struct h_test t_msg_tests[] = {
	{ "RO delivers 10000 messages in send order, each SEND completes once",
	  ro_delivers_10000_in_order, H_NEEDS_DEVICE, 0 },
	{ "RU delivers each of 10000 messages exactly once",
	  ru_delivers_10000_exactly_once, H_NEEDS_DEVICE, 0 },
	{ "UU never duplicates or corrupts a message", uu_never_duplicates_or_corrupts,
	  H_NEEDS_DEVICE, 0 },
	{ "UU sends to a stopped receiver never block; what arrives is intact, once",
	  uu_to_stopped_receiver_never_blocks, H_NEEDS_DEVICE, 0 },
	{ "messages of 0, 1, 15, 16 and max_send_size bytes arrive intact on RO",
	  sizes_ro, H_NEEDS_DEVICE, 0 },
	{ "messages of 0, 1, 15, 16 and max_send_size bytes arrive intact on RU",
	  sizes_ru, H_NEEDS_DEVICE, 0 },
	{ "messages of 0, 1, 15, 16 and max_send_size bytes arrive intact on UU",
	  sizes_uu, H_NEEDS_DEVICE, 0 },
	{ "a message of max_send_size + 1 bytes fails with CCI_EMSGSIZE, send and sendv",
	  oversize_is_emsgsize, H_NEEDS_DEVICE, 0 },
	{ "cci_sendv gathers its buffers into one message in order",
	  sendv_gathers_in_order, H_NEEDS_DEVICE, 0 },
	{ "cci_sendv with 0 buffers sends a 0-byte message",
	  sendv_of_nothing_sends_empty, H_NEEDS_DEVICE, 0 },
	{ "a BLOCKING send returns its status and makes no SEND event",
	  blocking_send_has_no_event, H_NEEDS_DEVICE, 0 },
	{ "SILENT sends make no SEND event and still arrive",
	  silent_sends_have_no_event, H_NEEDS_DEVICE, 0 },
	{ "a sender that never polls, retrying SILENT sends on CCI_ENOBUFS, gets 5000 through",
	  sender_that_never_polls_still_moves, H_NEEDS_DEVICE, 0 },
	{ "a NO_COPY send of max_send_size completes with a SEND event and arrives intact",
	  no_copy_send_completes_intact, H_NEEDS_DEVICE, 0 },
	{ "each SEND event carries its send's context and connection",
	  send_events_carry_context_and_connection, H_NEEDS_DEVICE, 0 },
	{ "receive buffers are 8-byte aligned for sizes 1 to 64",
	  recv_buffers_are_8_byte_aligned, H_NEEDS_DEVICE, 0 },
	{ "held receive events stay intact and may be returned out of order",
	  events_returned_out_of_order, H_NEEDS_DEVICE, 0 },
};
const size_t t_msg_count = sizeof(t_msg_tests) / sizeof(t_msg_tests[0]);
