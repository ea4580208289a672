/*
 * t_rma.c - RMA write and read: data, canaries, offsets, completion
 * messages and fences (refusals are in t_rma_refuse.c).
 */
#include "tests.h"

#include "rmafix.h"

#include <stdlib.h>
#include <string.h>

static void write_case(uint64_t len, uint64_t loff, uint64_t roff)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_note note;
	struct proto_write w;
	uint32_t nl;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	skip_unless_aligned(&r, 1, loff, roff, len);
	w = prepare_write(&r, loff, roff, len, 0x1000u + (uint32_t)len);
	nl = note_build(&r, &note, &w, 1);
	CHECK_RC(rma_run(&r, &note, nl, &r.s.handle, loff, roff, len, CCI_FLAG_WRITE),
	         CCI_SUCCESS);
	rfix_close(&r, &st);
	CHECKF(st.rma_notes == 1, "the target got %llu completion messages",
	       (unsigned long long)st.rma_notes);
	CHECK(st.rma_bad == 0 && st.canary_bad == 0 && st.corrupt == 0);
}

static void read_case(uint64_t len, uint64_t loff, uint64_t roff)
{
	struct rfix r;
	struct srv_stats st;
	uint8_t msg[32];
	uint64_t d;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	skip_unless_aligned(&r, 0, loff, roff, len);
	proto_build(msg, sizeof(msg), 0, r.seq++, PROTO_VERIFY);
	CHECK_RC(rma_run(&r, msg, sizeof(msg), &r.s.handle, loff, roff, len, CCI_FLAG_READ),
	         CCI_SUCCESS);
	d = proto_diff(r.local + loff, len, PROTO_INIT_SEED, roff);
	CHECKF(d == len, "read data differs at byte %llu of %llu", (unsigned long long)d,
	       (unsigned long long)len);
	CHECK(proto_diff(r.local, loff, LOCAL_SEED, 0) == loff);
	CHECKF(proto_diff(r.local + loff + len, REGION - loff - len, LOCAL_SEED, loff + len) ==
	       REGION - loff - len, "a read wrote past its range in local memory");
	rfix_close(&r, &st);
	CHECK(st.recvs == 1 && st.rma_bad == 0 && st.canary_bad == 0);
}

static void write_1(void) { write_case(1, 1, 3); }
static void write_4095(void) { write_case(4095, 5, 1); }
static void write_4096(void) { write_case(4096, 0, 4096); }
static void write_1m(void) { write_case(MiB, 64, 7); }
static void write_4m(void) { write_case(4 * MiB, 0, 4096); }
static void read_1(void) { read_case(1, 3, 1); }
static void read_4095(void) { read_case(4095, 1, 5); }
static void read_4096(void) { read_case(4096, 4096, 0); }
static void read_1m(void) { read_case(MiB, 7, 64); }
static void read_4m(void) { read_case(4 * MiB, 4096, 0); }

static void pipelined_writes_land_before_messages(void)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_note note[16];
	const uint64_t area = 256 * 1024;

	rfix_open(&r, CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	for (uint32_t i = 0; i < 16; i++) {
		struct proto_write w = prepare_write(&r, i * area, i * area + i,
		                                     area - 100 * i, 0x2000u + i);
		uint32_t nl = note_build(&r, &note[i], &w, 1);

		CHECK_RC(cci_rma(r.c, &note[i], nl, r.lh, w.srcoff, &r.s.handle, w.roff,
		                 w.len, h_ctx(i), CCI_FLAG_WRITE), CCI_SUCCESS);
	}
	for (uint32_t i = 0; i < 16; i++) {
		cci_event_t *ev = EXPECT_EVENT(r.ep, CCI_EVENT_SEND, 10000);

		if (!ev)
			break;
		CHECK_RC(ev->send.status, CCI_SUCCESS);
		cci_return_event(ev);
	}
	rfix_close(&r, &st);
	CHECK(st.rma_notes == 16 && st.rma_bad == 0 && st.canary_bad == 0);
}

static void completion_messages_ordered_with_sends(void)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_note note;
	uint8_t msg[48];

	rfix_open(&r, CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	for (uint32_t i = 0; i < 8; i++) {
		struct proto_write w = prepare_write(&r, i * 4096, i * 8192, 4000, 0x3000u + i);
		uint32_t nl = note_build(&r, &note, &w, 1);

		CHECK_RC(cci_rma(r.c, &note, nl, r.lh, w.srcoff, &r.s.handle, w.roff, w.len,
		                 NULL, CCI_FLAG_WRITE | CCI_FLAG_SILENT), CCI_SUCCESS);
		proto_build(msg, sizeof(msg), 0, r.seq++, PROTO_DATA);
		CHECK_RC(cci_send(r.c, msg, sizeof(msg), NULL, CCI_FLAG_SILENT), CCI_SUCCESS);
	}
	CHECK_RC(cci_send(r.c, msg, 0, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	rfix_close(&r, &st);
	CHECK(st.recvs == 17 && st.rma_notes == 8);
	CHECKF(st.order_errors == 0, "%llu messages out of order",
	       (unsigned long long)st.order_errors);
	CHECK(st.rma_bad == 0);
}

static void fence_write_follows_earlier_writes(void)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_write w[9];
	struct proto_note note;
	uint32_t nl;

	rfix_open(&r, CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	for (uint32_t i = 0; i < 8; i++) {
		w[i] = prepare_write(&r, i * 512 * 1024, i * 512 * 1024, 512 * 1024, 0x4000u + i);
		CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, w[i].srcoff, &r.s.handle, w[i].roff,
		                 w[i].len, NULL, CCI_FLAG_WRITE | CCI_FLAG_SILENT), CCI_SUCCESS);
	}
	w[8] = prepare_write(&r, REGION - 1, REGION - 1, 1, 0x4100u);
	nl = note_build(&r, &note, w, 9);
	CHECK_RC(rma_run(&r, &note, nl, &r.s.handle, REGION - 1, REGION - 1, 1,
	                 CCI_FLAG_WRITE | CCI_FLAG_FENCE), CCI_SUCCESS);
	rfix_close(&r, &st);
	CHECK(st.rma_notes == 1);
	CHECKF(st.rma_bad == 0, "earlier writes were not in place at the fenced write's "
	       "completion message");
}

static void fence_read_sees_earlier_write(void)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_write w;
	struct proto_note note;
	uint64_t d;
	uint32_t nl;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	w = prepare_write(&r, 0, 0, MiB, 0x5000u);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, MiB, NULL,
	                 CCI_FLAG_WRITE | CCI_FLAG_SILENT), CCI_SUCCESS);
	CHECK_RC(rma_run(&r, NULL, 0, &r.s.handle, 2 * MiB, 0, MiB,
	                 CCI_FLAG_READ | CCI_FLAG_FENCE), CCI_SUCCESS);
	d = proto_diff(r.local + 2 * MiB, MiB, 0x5000u, 0);
	CHECKF(d == MiB, "the fenced read saw old data at byte %llu", (unsigned long long)d);
	nl = note_build(&r, &note, &w, 1); /* tell the target what changed */
	CHECK_RC(cci_send(r.c, &note, nl, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	rfix_close(&r, &st);
	CHECK(st.rma_bad == 0);
}

static void rma_on_ru_works(void)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_note note;
	struct proto_write w;
	uint32_t nl;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RU);
	w = prepare_write(&r, 100, 200, 65536, 0x6000u);
	nl = note_build(&r, &note, &w, 1);
	CHECK_RC(rma_run(&r, &note, nl, &r.s.handle, 100, 200, 65536, CCI_FLAG_WRITE),
	         CCI_SUCCESS);
	CHECK_RC(rma_run(&r, NULL, 0, &r.s.handle, MiB, 200, 65536, CCI_FLAG_READ),
	         CCI_SUCCESS);
	CHECK(proto_diff(r.local + MiB, 65536, 0x6000u, 100) == 65536);
	rfix_close(&r, &st);
	CHECK(st.rma_notes == 1 && st.rma_bad == 0);
}

static void blocking_rma_has_no_event(void)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_note note;
	struct proto_write w;
	uint32_t nl;

	rfix_open(&r, CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	w = prepare_write(&r, 0, 0, 8192, 0x7000u);
	nl = note_build(&r, &note, &w, 1);
	CHECK_RC(rma_run(&r, &note, nl, &r.s.handle, 0, 0, 8192,
	                 CCI_FLAG_WRITE | CCI_FLAG_BLOCKING), CCI_SUCCESS);
	EXPECT_QUIET(r.ep, 300);
	rfix_close(&r, &st);
	CHECK(st.rma_notes == 1 && st.rma_bad == 0);
}

/*
 * Registrations do not run out at a small count, and a lookup finds the
 * right one among many: each side holds MANY_REGS other registrations
 * (registered before the two in use on the server, after on the client)
 * while a write and a read go through.
 */
#define MANY_REGS 100000u
static void rma_among_many_registrations(void)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_note note;
	struct proto_write w;
	cci_rma_handle_t **mine = calloc(MANY_REGS, sizeof(*mine));
	uint8_t *bytes = malloc(MANY_REGS);
	uint32_t nl, n = 0;
	uint64_t d;

	REQUIRE(mine && bytes);
	rfix_open_extra(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO, MANY_REGS);
	while (n < MANY_REGS &&
	       CHECK_RC(cci_rma_register(r.ep, bytes + n, 1, CCI_FLAG_WRITE, &mine[n]),
	                CCI_SUCCESS))
		n++;
	w = prepare_write(&r, 0, 4096, 8192, 0x8000u);
	nl = note_build(&r, &note, &w, 1);
	CHECK_RC(rma_run(&r, &note, nl, &r.s.handle, 0, 4096, 8192, CCI_FLAG_WRITE), CCI_SUCCESS);
	CHECK_RC(rma_run(&r, NULL, 0, &r.s.handle, 65536, 65536, 4096, CCI_FLAG_READ), CCI_SUCCESS);
	d = proto_diff(r.local + 65536, 4096, PROTO_INIT_SEED, 65536);
	CHECKF(d == 4096, "read data differs at byte %llu of 4096", (unsigned long long)d);
	for (uint32_t i = 0; i < n; i++)
		CHECK_RC(cci_rma_deregister(r.ep, mine[i]), CCI_SUCCESS);
	rfix_close(&r, &st);
	CHECK(st.rma_notes == 1 && st.rma_bad == 0 && st.canary_bad == 0 && st.corrupt == 0);
	free(mine);
	free(bytes);
}

const struct h_test t_rma_tests[] = {
	{ "rma write of 1 byte lands intact, canaries untouched", write_1, H_NEEDS_DEVICE, 0 },
	{ "rma write of 4095 bytes lands intact, canaries untouched", write_4095,
	  H_NEEDS_DEVICE, 0 },
	{ "rma write of 4096 bytes lands intact, canaries untouched", write_4096,
	  H_NEEDS_DEVICE, 0 },
	{ "rma write of 1 MiB lands intact, canaries untouched", write_1m, H_NEEDS_DEVICE, 0 },
	{ "rma write of 4 MiB lands intact, canaries untouched", write_4m, H_NEEDS_DEVICE, 0 },
	{ "rma read of 1 byte brings the data, nothing else changes", read_1,
	  H_NEEDS_DEVICE, 0 },
	{ "rma read of 4095 bytes brings the data, nothing else changes", read_4095,
	  H_NEEDS_DEVICE, 0 },
	{ "rma read of 4096 bytes brings the data, nothing else changes", read_4096,
	  H_NEEDS_DEVICE, 0 },
	{ "rma read of 1 MiB brings the data, nothing else changes", read_1m,
	  H_NEEDS_DEVICE, 0 },
	{ "rma read of 4 MiB brings the data, nothing else changes", read_4m,
	  H_NEEDS_DEVICE, 0 },
	{ "16 pipelined rma writes each land before their completion message",
	  pipelined_writes_land_before_messages, H_NEEDS_DEVICE, 0 },
	{ "rma completion messages are ordered with sends on RO",
	  completion_messages_ordered_with_sends, H_NEEDS_DEVICE, 0 },
	{ "a FENCE write completes after every earlier rma write",
	  fence_write_follows_earlier_writes, H_NEEDS_DEVICE, 0 },
	{ "a FENCE read returns the data of an earlier write",
	  fence_read_sees_earlier_write, H_NEEDS_DEVICE, 0 },
	{ "rma write and read work on an RU connection", rma_on_ru_works, H_NEEDS_DEVICE, 0 },
	{ "a BLOCKING rma returns its status and makes no SEND event",
	  blocking_rma_has_no_event, H_NEEDS_DEVICE, 0 },
	{ "rma write and read work with 100,000 other registrations on each side",
	  rma_among_many_registrations, H_NEEDS_DEVICE, 0 },
};
const size_t t_rma_count = sizeof(t_rma_tests) / sizeof(t_rma_tests[0]);
