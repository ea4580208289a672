/*
 * emu_rma_test.c - unit tests of emulated RMA (plugins/common/emu_rma*):
 * the record codec and what it refuses, the target's checks, the
 * initiator's phases, FENCE, and the rule of completion, with a fake
 * core whose one registration is a local buffer.
 */
#include <string.h>

#include <CUnit/Basic.h>

#include "cci.h"
#include "emu_rma.h"
#include "unit_run.h"

#define KEY 0x1234u
static char target_mem[256];
static int target_access = CCI_FLAG_READ | CCI_FLAG_WRITE;
static unsigned lookups;
static const unsigned no_log = 0;

static int fake_lookup(cci__ep_t *ep, uint64_t key, uint64_t off, uint64_t len, int access,
                       void **addr)
{
	(void)ep;
	lookups++;
	if (key != KEY || (target_access & access) != access)
		return CCI_ERR_RMA_HANDLE;
	if (off > sizeof(target_mem) || len > sizeof(target_mem) - off)
		return CCI_EINVAL;
	*addr = target_mem + off;
	return CCI_SUCCESS;
}

static const char *fake_text(int status)
{
	(void)status;
	return "status";
}

static struct cci_core core = { .log_mask = &no_log, .rma_lookup = fake_lookup,
	                        .status_text = fake_text };
static const struct cci__emu_rma_limits lim = { .frag_max = 64, .mss = 128, .msg_inline = 1 };

static void reset(void)
{
	memset(target_mem, 0, sizeof(target_mem));
	target_access = CCI_FLAG_READ | CCI_FLAG_WRITE;
	lookups = 0;
}

/* Field by field: a struct's padding bytes are whatever the stack held. */
static int rec_equal(const struct cci__emu_rma_rec *a, const struct cci__emu_rma_rec *b)
{
	return a->kind == b->kind && a->op == b->op && a->key == b->key && a->off == b->off &&
	       a->len == b->len && a->status == b->status;
}

/* Encode r and decode it back with tail bytes after the header. */
static int round_trip(const struct cci__emu_rma_rec *r, uint64_t tail,
                      struct cci__emu_rma_rec *out, const char **why)
{
	uint8_t b[CCI__EMU_RMA_HDR_LEN];

	cci__emu_rma_encode(b, r);
	return cci__emu_rma_decode(b, tail, &lim, out, why);
}

static void test_codec_round_trip(void)
{
	const struct cci__emu_rma_rec recs[] = {
		{ .kind = CCI__EMU_RMA_WR_DATA, .op = 7, .key = 0x0102030405060708ull, .off = 9 },
		{ .kind = CCI__EMU_RMA_WR_END, .op = 0xfffffffeu, .len = 100 },
		{ .kind = CCI__EMU_RMA_RD_REQ, .op = 1, .key = 5, .off = 6, .len = 7 },
		{ .kind = CCI__EMU_RMA_RD_DATA, .op = 2, .off = 64 },
		{ .kind = CCI__EMU_RMA_DONE, .op = 3, .status = CCI_ERR_RMA_HANDLE },
	};
	const uint64_t tails[] = { 10, 100, 0, 64, 0 };
	uint8_t b[CCI__EMU_RMA_HDR_LEN];
	const char *why = NULL;

	for (size_t i = 0; i < sizeof(recs) / sizeof(recs[0]); i++) {
		struct cci__emu_rma_rec out;
		CU_ASSERT_EQUAL_FATAL(round_trip(&recs[i], tails[i], &out, &why), 0);
		CU_ASSERT(rec_equal(&out, &recs[i]));
	}
	/* Network byte order: the op id's most significant byte first. */
	cci__emu_rma_encode(b, &recs[0]);
	CU_ASSERT_EQUAL(b[0], CCI__EMU_RMA_WR_DATA);
	CU_ASSERT_EQUAL(b[7], 7);
	CU_ASSERT_EQUAL(b[8], 0x01);
	CU_ASSERT_EQUAL(b[15], 0x08);
}

static void test_codec_refuses(void)
{
	struct cci__emu_rma_rec out = { .op = 99 }, r;
	uint8_t b[CCI__EMU_RMA_HDR_LEN];
	const char *why = NULL;

	r = (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_WR_DATA, .op = 0, .key = KEY };
	CU_ASSERT_EQUAL(round_trip(&r, 1, &out, &why), -1); /* no op id */
	CU_ASSERT_PTR_NOT_NULL(why);
	r.op = 1;
	CU_ASSERT_EQUAL(round_trip(&r, 0, &out, &why), -1);  /* empty fragment */
	CU_ASSERT_EQUAL(round_trip(&r, 65, &out, &why), -1); /* over frag_max */
	r.off = UINT64_MAX - 2;
	CU_ASSERT_EQUAL(round_trip(&r, 8, &out, &why), -1);  /* wraps around */
	r = (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_RD_REQ, .op = 1, .len = 0 };
	CU_ASSERT_EQUAL(round_trip(&r, 0, &out, &why), -1);  /* read of nothing */
	r.len = 4;
	CU_ASSERT_EQUAL(round_trip(&r, 4, &out, &why), -1);  /* bytes after a request */
	r = (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_WR_END, .op = 1, .len = 129 };
	CU_ASSERT_EQUAL(round_trip(&r, 129, &out, &why), -1); /* message over the mss */
	r.len = 10;
	CU_ASSERT_EQUAL(round_trip(&r, 9, &out, &why), -1);  /* length mismatch */
	r = (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_DONE, .op = 1 };
	CU_ASSERT_EQUAL(round_trip(&r, 1, &out, &why), -1);
	cci__emu_rma_encode(b, &r);
	b[0] = CCI__EMU_RMA_KIND_END;
	CU_ASSERT_EQUAL(cci__emu_rma_decode(b, 0, &lim, &out, &why), -1);
	b[0] = CCI__EMU_RMA_DONE;
	b[2] = 1;
	CU_ASSERT_EQUAL(cci__emu_rma_decode(b, 0, &lim, &out, &why), -1);
	b[2] = 0;
	b[20] = 1; /* a field DONE does not use */
	CU_ASSERT_EQUAL(cci__emu_rma_decode(b, 0, &lim, &out, &why), -1);
	CU_ASSERT_EQUAL(out.op, 99); /* untouched by every refusal */
}

static void test_codec_message_apart(void)
{
	const struct cci__emu_rma_limits apart = { .frag_max = 64, .mss = 128, .msg_inline = 0 };
	struct cci__emu_rma_rec r = { .kind = CCI__EMU_RMA_WR_END, .op = 1, .len = 10 }, out;
	uint8_t b[CCI__EMU_RMA_HDR_LEN];
	const char *why = NULL;

	cci__emu_rma_encode(b, &r);
	CU_ASSERT_EQUAL(cci__emu_rma_decode(b, 0, &apart, &out, &why), 0);
	CU_ASSERT_EQUAL(out.len, 10);
	CU_ASSERT_EQUAL(cci__emu_rma_decode(b, 10, &apart, &out, &why), -1);
}

/* Drive an initiator op against the target until it waits for DONE;
 * returns the DONE the target answers. */
static struct cci__emu_rma_rec run_write(struct cci__emu_rma_conn *ini,
                                         struct cci__emu_rma_conn *tgt,
                                         struct cci__emu_rma_op *op)
{
	struct cci__emu_rma_rec r, done = { .kind = CCI__EMU_RMA_DONE };
	void *data;
	uint64_t dlen;
	int rounds = 0;

	CU_ASSERT_EQUAL(cci__emu_rma_start(ini, op), 1);
	while (cci__emu_rma_next(ini, op, 16, &r, &data, &dlen) && rounds++ < 100) {
		cci__emu_rma_sent(op, &r, dlen);
		if (r.kind == CCI__EMU_RMA_WR_DATA)
			cci__emu_rma_write_in(tgt, &r, data, dlen);
		else if (r.kind == CCI__EMU_RMA_WR_END)
			done.status = cci__emu_rma_wr_end(tgt, &r);
	}
	done.op = op->id;
	return done;
}

static void test_write_completes_at_done(void)
{
	struct cci__emu_rma_conn ini, tgt;
	struct cci__emu_rma_op op;
	struct cci__emu_rma_rec done;
	char src[40];

	reset();
	memset(src, 'w', sizeof(src));
	cci__emu_rma_conn_init(&ini, &core, NULL, "ini");
	cci__emu_rma_conn_init(&tgt, &core, NULL, "tgt");
	cci__emu_rma_op_init(&ini, &op, CCI_FLAG_WRITE, KEY, 8, src, sizeof(src), 5);
	done = run_write(&ini, &tgt, &op);
	CU_ASSERT_EQUAL(lookups, 3); /* every fragment checked: 16 + 16 + 8 bytes */
	CU_ASSERT_EQUAL(op.phase, CCI__EMU_RMA_WAIT);
	CU_ASSERT(memcmp(target_mem + 8, src, sizeof(src)) == 0);
	CU_ASSERT_EQUAL(done.status, CCI_SUCCESS);
	CU_ASSERT_EQUAL(ini.started, 1);
	CU_ASSERT_EQUAL(cci__emu_rma_done_in(&ini, &op, &done), 0);
	CU_ASSERT_EQUAL(op.status, CCI_SUCCESS);
	CU_ASSERT_FALSE(cci__emu_rma_msg_due(&op)); /* a write's message went with WR_END */
	CU_ASSERT_EQUAL(ini.started, 0); /* complete: no FENCE waits for it */
	CU_ASSERT_EQUAL(cci__emu_rma_done_in(&ini, &op, &done), -1); /* a second DONE */
	CU_ASSERT_EQUAL(ini.started, 0);
}

static void test_refused_write_writes_nothing(void)
{
	struct cci__emu_rma_conn ini, tgt;
	struct cci__emu_rma_op op;
	struct cci__emu_rma_rec done;
	char src[40];

	reset();
	memset(src, 'w', sizeof(src));
	cci__emu_rma_conn_init(&ini, &core, NULL, NULL);
	cci__emu_rma_conn_init(&tgt, &core, NULL, NULL);
	/* Past the end from the third fragment on: the first two land, the
	 * rest is dropped unchecked, and the verdict is the refusal. */
	cci__emu_rma_op_init(&ini, &op, CCI_FLAG_WRITE, KEY, sizeof(target_mem) - 32, src,
	                     sizeof(src), 5);
	done = run_write(&ini, &tgt, &op);
	CU_ASSERT_EQUAL(done.status, CCI_EINVAL);
	CU_ASSERT_EQUAL(lookups, 3);
	CU_ASSERT_EQUAL(cci__emu_rma_done_in(&ini, &op, &done), 0);
	CU_ASSERT_EQUAL(op.status, CCI_EINVAL);
	/* No write access: nothing moves; the next write starts afresh. */
	reset();
	target_access = CCI_FLAG_READ;
	cci__emu_rma_op_init(&ini, &op, CCI_FLAG_WRITE, KEY, 0, src, sizeof(src), 0);
	done = run_write(&ini, &tgt, &op);
	CU_ASSERT_EQUAL(done.status, CCI_ERR_RMA_HANDLE);
	CU_ASSERT_EQUAL(target_mem[0], 0);
	target_access = CCI_FLAG_WRITE;
	cci__emu_rma_op_init(&ini, &op, CCI_FLAG_WRITE, KEY, 0, src, 8, 0);
	done = run_write(&ini, &tgt, &op);
	CU_ASSERT_EQUAL(done.status, CCI_SUCCESS);
	CU_ASSERT_EQUAL(target_mem[0], 'w');
}

static void test_read_takes_only_what_it_asked(void)
{
	struct cci__emu_rma_conn ini, tgt;
	struct cci__emu_rma_op op, a;
	struct cci__emu_rma_rec r;
	char dst[40] = { 0 };
	void *src;
	uint64_t dlen;

	reset();
	memset(target_mem, 'r', sizeof(target_mem));
	cci__emu_rma_conn_init(&ini, &core, NULL, NULL);
	cci__emu_rma_conn_init(&tgt, &core, NULL, NULL);
	cci__emu_rma_op_init(&ini, &op, CCI_FLAG_READ, KEY, 4, dst, 30, 3);
	CU_ASSERT_EQUAL_FATAL(cci__emu_rma_next(&ini, &op, 16, &r, &src, &dlen), 1);
	CU_ASSERT_EQUAL(r.kind, CCI__EMU_RMA_RD_REQ);
	CU_ASSERT_EQUAL(r.len, 30);
	cci__emu_rma_sent(&op, &r, dlen);
	cci__emu_rma_answer_init(&tgt, &a, &r, CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci__emu_rma_next(&ini, &op, 16, &r, &src, &dlen), 0); /* waits */
	CU_ASSERT_EQUAL(a.status, CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci__emu_rma_start(&tgt, &a), 1); /* an answer is never held */
	CU_ASSERT_EQUAL(tgt.started, 0);
	cci__emu_rma_next(&tgt, &a, 16, &r, &src, &dlen);
	CU_ASSERT_EQUAL_FATAL(r.kind, CCI__EMU_RMA_RD_DATA);
	/* A DONE that says success before all the bytes is a protocol error. */
	{
		struct cci__emu_rma_rec early = { .kind = CCI__EMU_RMA_DONE, .op = op.id };
		CU_ASSERT_EQUAL(cci__emu_rma_done_in(&ini, &op, &early), -1);
	}
	/* Data out of order, or past what was asked, is refused. */
	r.off = 1;
	CU_ASSERT_EQUAL(cci__emu_rma_read_in(&op, &r, src, dlen), -1);
	r.off = 0;
	CU_ASSERT_EQUAL(cci__emu_rma_read_in(&op, &r, src, 31), -1);
	r.op = op.id + 1;
	CU_ASSERT_EQUAL(cci__emu_rma_read_in(&op, &r, src, dlen), -1);
	r.op = op.id;
	CU_ASSERT_EQUAL(cci__emu_rma_read_in(&op, &r, src, dlen), 0);
	cci__emu_rma_sent(&a, &r, dlen);
	for (int i = 0; i < 10 && a.phase == CCI__EMU_RMA_SEND; i++) {
		cci__emu_rma_next(&tgt, &a, 16, &r, &src, &dlen);
		int rc = r.kind == CCI__EMU_RMA_RD_DATA ? cci__emu_rma_read_in(&op, &r, src, dlen)
		                                        : cci__emu_rma_done_in(&ini, &op, &r);
		CU_ASSERT_EQUAL(rc, 0);
		cci__emu_rma_sent(&a, &r, dlen);
	}
	CU_ASSERT_EQUAL(a.phase, CCI__EMU_RMA_OVER);
	CU_ASSERT_EQUAL(op.phase, CCI__EMU_RMA_OVER);
	CU_ASSERT_EQUAL(op.status, CCI_SUCCESS);
	CU_ASSERT_EQUAL(dst[0], 'r');
	CU_ASSERT_EQUAL(dst[29], 'r');
	CU_ASSERT_EQUAL(dst[30], 0);
	CU_ASSERT(cci__emu_rma_msg_due(&op)); /* now the completion message */
}

static void test_read_refused_answers_done_at_once(void)
{
	struct cci__emu_rma_conn tgt;
	struct cci__emu_rma_op a;
	struct cci__emu_rma_rec req = { .kind = CCI__EMU_RMA_RD_REQ, .op = 4, .key = KEY,
		                        .len = 16 }, r;
	void *src;
	uint64_t dlen;

	reset();
	target_access = CCI_FLAG_WRITE;
	cci__emu_rma_conn_init(&tgt, &core, NULL, NULL);
	cci__emu_rma_answer_init(&tgt, &a, &req, CCI_SUCCESS);
	cci__emu_rma_next(&tgt, &a, 16, &r, &src, &dlen);
	CU_ASSERT_EQUAL(r.kind, CCI__EMU_RMA_DONE);
	CU_ASSERT_EQUAL(r.status, CCI_ERR_RMA_HANDLE);
	CU_ASSERT_EQUAL(dlen, 0);
	/* A write's answer is its verdict alone. */
	req.kind = CCI__EMU_RMA_WR_END;
	cci__emu_rma_answer_init(&tgt, &a, &req, CCI_EINVAL);
	cci__emu_rma_next(&tgt, &a, 16, &r, &src, &dlen);
	CU_ASSERT(r.kind == CCI__EMU_RMA_DONE && r.status == CCI_EINVAL && r.op == 4);
	req.kind = CCI__EMU_RMA_RD_REQ;
	/* Access dropped after the request: the next fragment ends it. */
	target_access = CCI_FLAG_READ;
	req.len = 32;
	cci__emu_rma_answer_init(&tgt, &a, &req, CCI_SUCCESS);
	cci__emu_rma_next(&tgt, &a, 16, &r, &src, &dlen);
	CU_ASSERT_EQUAL(r.kind, CCI__EMU_RMA_RD_DATA);
	cci__emu_rma_sent(&a, &r, dlen);
	target_access = 0;
	cci__emu_rma_next(&tgt, &a, 16, &r, &src, &dlen);
	CU_ASSERT_EQUAL(r.kind, CCI__EMU_RMA_DONE);
	CU_ASSERT_EQUAL(r.status, CCI_ERR_RMA_HANDLE);
	cci__emu_rma_sent(&a, &r, dlen);
	CU_ASSERT_EQUAL(a.phase, CCI__EMU_RMA_OVER);
	CU_ASSERT_EQUAL(cci__emu_rma_next(&tgt, &a, 16, &r, &src, &dlen), 0);
}

/* op's DONE (a failure, so a read needs no bytes) arrives. */
static void complete(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op)
{
	struct cci__emu_rma_rec done = { .kind = CCI__EMU_RMA_DONE, .op = op->id,
		                         .status = CCI_ERR_RMA_OP };

	op->phase = CCI__EMU_RMA_WAIT;
	CU_ASSERT_EQUAL(cci__emu_rma_done_in(c, op, &done), 0);
}

static void test_fence_waits_for_earlier_rmas(void)
{
	struct cci__emu_rma_conn c;
	struct cci__emu_rma_op a, b, f;
	char buf[8];

	cci__emu_rma_conn_init(&c, &core, NULL, NULL);
	cci__emu_rma_op_init(&c, &a, CCI_FLAG_WRITE, KEY, 0, buf, 8, 0);
	cci__emu_rma_op_init(&c, &b, CCI_FLAG_READ, KEY, 0, buf, 8, 0);
	cci__emu_rma_op_init(&c, &f, CCI_FLAG_WRITE | CCI_FLAG_FENCE, KEY, 0, buf, 8, 0);
	CU_ASSERT(a.id != b.id && b.id != f.id && a.id != 0);
	CU_ASSERT_EQUAL(cci__emu_rma_start(&c, &a), 1);
	CU_ASSERT_EQUAL(cci__emu_rma_start(&c, &b), 1);
	CU_ASSERT_EQUAL(cci__emu_rma_start(&c, &f), 0);
	complete(&c, &a);
	CU_ASSERT_EQUAL(cci__emu_rma_start(&c, &f), 0);
	complete(&c, &b);
	CU_ASSERT_EQUAL(cci__emu_rma_start(&c, &f), 1);
	CU_ASSERT_EQUAL(cci__emu_rma_start(&c, &f), 1); /* started: goes on */
	CU_ASSERT_EQUAL(c.started, 1);
	/* Past its records (a read sending its completion message after its
	 * DONE), an op is not held, nor counted. */
	b.phase = CCI__EMU_RMA_OVER;
	b.fence = 1;
	CU_ASSERT_EQUAL(cci__emu_rma_start(&c, &b), 1);
	CU_ASSERT_EQUAL(c.started, 1);
	c.next_id = UINT32_MAX; /* ids wrap past 0 */
	cci__emu_rma_op_init(&c, &a, CCI_FLAG_WRITE, KEY, 0, buf, 8, 0);
	CU_ASSERT_EQUAL(a.id, 1);
}

static void test_peer_status_reduced(void)
{
	CU_ASSERT_EQUAL(cci__emu_rma_peer_status(CCI_SUCCESS), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci__emu_rma_peer_status(CCI_EINVAL), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci__emu_rma_peer_status(CCI_ERR_RMA_HANDLE), CCI_ERR_RMA_HANDLE);
	CU_ASSERT_EQUAL(cci__emu_rma_peer_status(CCI_ERR_DISCONNECTED), CCI_ERR_RMA_OP);
	CU_ASSERT_EQUAL(cci__emu_rma_peer_status(0xffffffffu), CCI_ERR_RMA_OP);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "records survive encode and decode, in network byte order", test_codec_round_trip },
		{ "the decoder refuses every malformed record", test_codec_refuses },
		{ "a WR_END whose message travels apart carries no bytes", test_codec_message_apart },
		{ "a write is checked per fragment and completes at DONE", test_write_completes_at_done },
		{ "a refused write writes nothing more and says why", test_refused_write_writes_nothing },
		{ "a read takes only the bytes it asked for, in order", test_read_takes_only_what_it_asked },
		{ "a refused read answers DONE with the refusal", test_read_refused_answers_done_at_once },
		{ "FENCE holds an RMA until the earlier ones completed", test_fence_waits_for_earlier_rmas },
		{ "peer statuses are reduced to RMA statuses", test_peer_status_reduced },
	};

	return UNIT_RUN("emu_rma", tests);
}
