/*
 * ofi_wire_test.c - unit tests of the libfabric transport's message
 * decoder (plugins/ofi/ofi_wire.c): messages laid out as the transport
 * sends them decode to the same fields, every malformed one is refused
 * with the status its fault calls for, the encoders write network byte
 * order (known fields give known bytes), and the remote CQ datum of an
 * application message round-trips through ofi_imm_pack.
 */
#include <string.h>

#include <CUnit/Basic.h>

#include "ofi_wire.h"
#include "unit_run.h"

#define BUF_MAX (OFI_HDR_LEN + OFI_HELLO_LEN + OFI_ADDR_MAX + CCI_CONN_REQ_LEN + 16)

/* A message as ofi_tx.c lays it out: the header, then len body bytes. */
static size_t frame(uint8_t *buf, uint8_t type, uint32_t dst, const void *body, uint32_t len)
{
	struct ofi_hdr h = { .dst = dst, .seq = 5, .credits = 3, .type = type, .aux = 77 };

	ofi_hdr_encode(&h, buf);
	if (len)
		memcpy(buf + OFI_HDR_LEN, body, len);
	return OFI_HDR_LEN + len;
}

/* The fixed bodies as ofi_hs.c and ofi_rma.c encode them. */
static size_t hello_frame(uint8_t *buf, uint8_t type, uint32_t dst, const struct ofi_hello *h)
{
	uint8_t body[OFI_HELLO_LEN];

	ofi_hello_encode(h, body);
	return frame(buf, type, dst, body, sizeof(body));
}

static size_t cancel_frame(uint8_t *buf, const struct ofi_cancel *c)
{
	uint8_t body[OFI_CANCEL_LEN];

	ofi_cancel_encode(c, body);
	return frame(buf, OFI_T_CANCEL, 0, body, sizeof(body));
}

static size_t rep_frame(uint8_t *buf, const struct cci__peer_reg_rep *r)
{
	uint8_t body[CCI__PEER_REG_REP_LEN];

	cci__peer_reg_rep_encode(r, body);
	return frame(buf, OFI_T_MR_REP, 7, body, sizeof(body));
}

static size_t key_frame(uint8_t *buf, uint8_t type, uint64_t key)
{
	uint8_t body[CCI__PEER_REG_KEY_LEN];

	cci__peer_reg_key_encode(key, body);
	return frame(buf, type, 7, body, sizeof(body));
}

static struct ofi_hello hello_ok(void)
{
	struct ofi_hello h;

	memset(&h, 0, sizeof(h));
	h.id = 0x00020003;
	h.core = (struct cci__hello){ .attr = CCI_CONN_ATTR_RO, .mss = 65536, .credits = 32,
	                              .nonce = 0x0123456789abcdefull };
	h.proc.host = 11;
	h.proc.start = 12;
	h.proc.pid = 13;
	h.flags = OFI_HELLO_IMM;
	return h;
}

/* A REQ as ofi_hs.c's send_req lays it out: hello, address, payload. */
static size_t req_frame(uint8_t *buf, struct ofi_hello h, uint32_t alen, uint32_t dlen)
{
	uint8_t body[BUF_MAX];

	h.addr_len = alen;
	h.core.data_len = dlen;
	ofi_hello_encode(&h, body);
	for (uint32_t i = 0; i < alen + dlen; i++)
		body[OFI_HELLO_LEN + i] = (uint8_t)(i + 1);
	return frame(buf, OFI_T_REQ, 0, body, OFI_HELLO_LEN + alen + dlen);
}

static void expect(const uint8_t *buf, size_t len, int want)
{
	struct ofi_msg m;
	const char *why = NULL;

	CU_ASSERT_EQUAL(ofi_wire_decode(buf, len, &m, &why), want);
	if (want == CCI_SUCCESS) {
		CU_ASSERT_PTR_NULL(why);
	} else {
		CU_ASSERT_PTR_NOT_NULL(why);
	}
}

static void test_request_decodes(void)
{
	uint8_t buf[BUF_MAX];
	struct ofi_hello in = hello_ok();
	struct ofi_msg m;
	size_t n = req_frame(buf, in, 24, 100);

	CU_ASSERT_EQUAL_FATAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.hdr.type, OFI_T_REQ);
	CU_ASSERT_EQUAL(m.hdr.credits, 3);
	CU_ASSERT_EQUAL(m.hdr.aux, 77);
	CU_ASSERT_EQUAL(m.u.hello.id, in.id);
	CU_ASSERT_EQUAL(m.u.hello.core.nonce, in.core.nonce);
	CU_ASSERT_EQUAL(m.u.hello.core.attr, CCI_CONN_ATTR_RO);
	CU_ASSERT_EQUAL(m.u.hello.proc.pid, 13);
	CU_ASSERT_EQUAL(m.u.hello.addr_len, 24);
	CU_ASSERT_EQUAL(m.u.hello.core.data_len, 100);
	CU_ASSERT_EQUAL(m.u.hello.proc.host, 11);
	CU_ASSERT_EQUAL(m.u.hello.proc.start, 12);
	CU_ASSERT_EQUAL(m.u.hello.flags, OFI_HELLO_IMM);
	CU_ASSERT_PTR_EQUAL(m.addr, buf + OFI_HDR_LEN + OFI_HELLO_LEN);
	CU_ASSERT_PTR_EQUAL(m.data, m.addr + 24);
	CU_ASSERT_EQUAL(m.addr[0], 1);
	CU_ASSERT_EQUAL(m.data[99], 124);
	/* The limits themselves are allowed. */
	n = req_frame(buf, in, OFI_ADDR_MAX, CCI_CONN_REQ_LEN);
	expect(buf, n, CCI_SUCCESS);
	n = req_frame(buf, in, 1, 0);
	expect(buf, n, CCI_SUCCESS);
}

static void test_fixed_bodies_decode(void)
{
	static const uint8_t bare[] = { OFI_T_REJECT, OFI_T_DISC, OFI_T_CREDIT, OFI_T_PING,
	                                OFI_T_PONG, OFI_T_DISC_ACK };
	uint8_t buf[BUF_MAX];
	struct ofi_hello h = hello_ok();
	struct ofi_cancel c = { .id = 9, .nonce = 10 };
	struct cci__peer_reg_rep r = { .status = CCI_SUCCESS,
	                               .flags = CCI_FLAG_READ | CCI_FLAG_WRITE, .key = 1,
	                               .rkey = 1ull << 40, .addr = 0x1000, .len = 4096 };
	uint64_t key = 0xfeedull;
	struct ofi_msg m;
	size_t n;

	n = hello_frame(buf, OFI_T_ACCEPT, 7, &h);
	CU_ASSERT_EQUAL_FATAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.u.hello.core.credits, 32);
	CU_ASSERT_EQUAL(m.u.hello.core.nonce, h.core.nonce);
	n = cancel_frame(buf, &c);
	CU_ASSERT_EQUAL_FATAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.u.cancel.id, 9);
	CU_ASSERT_EQUAL(m.u.cancel.nonce, 10);
	n = key_frame(buf, OFI_T_MR_REQ, key);
	CU_ASSERT_EQUAL_FATAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.u.key, key);
	n = key_frame(buf, OFI_T_MR_INVAL, key);
	CU_ASSERT_EQUAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	n = key_frame(buf, OFI_T_MR_DONE, key);
	CU_ASSERT_EQUAL_FATAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.u.key, key);
	expect(buf, n - 1, CCI_EMSGSIZE);
	n = rep_frame(buf, &r);
	CU_ASSERT_EQUAL_FATAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.u.mr_rep.rkey, 1ull << 40); /* a provider key is 64 bits wide */
	CU_ASSERT_EQUAL(m.u.mr_rep.addr, 0x1000);
	CU_ASSERT_EQUAL(m.u.mr_rep.len, 4096);
	memset(&r, 0, sizeof(r));
	r.status = CCI_ERR_RMA_HANDLE; /* a refusal carries no range */
	n = rep_frame(buf, &r);
	CU_ASSERT_EQUAL_FATAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.u.mr_rep.status, CCI_ERR_RMA_HANDLE);
	for (size_t i = 0; i < sizeof(bare); i++) {
		n = frame(buf, bare[i], 7, NULL, 0);
		CU_ASSERT_EQUAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
		CU_ASSERT_EQUAL(m.hdr.type, bare[i]);
		CU_ASSERT_EQUAL(m.body_len, 0);
	}
	/* An application message's body is any size here (mss is the caller's). */
	n = frame(buf, OFI_T_MSG, 7, buf, 0);
	expect(buf, n, CCI_SUCCESS);
	n = frame(buf, OFI_T_MSG, 7, &r, 33);
	CU_ASSERT_EQUAL(ofi_wire_decode(buf, n, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.body_len, 33);
	CU_ASSERT_PTR_EQUAL(m.body, buf + OFI_HDR_LEN);
}

static void test_truncated_and_lying_lengths(void)
{
	uint8_t buf[BUF_MAX];
	struct ofi_hello h = hello_ok();
	struct ofi_cancel c = { .id = 9 };
	size_t n = req_frame(buf, h, 16, 10);
	uint32_t lie;

	expect(NULL, 64, CCI_EMSGSIZE);
	expect(buf, 0, CCI_EMSGSIZE);
	expect(buf, OFI_HDR_LEN - 1, CCI_EMSGSIZE);
	expect(buf, n - 1, CCI_EMSGSIZE);                       /* payload cut short */
	expect(buf, n + 1, CCI_EMSGSIZE);                       /* a byte past it */
	expect(buf, OFI_HDR_LEN + OFI_HELLO_LEN - 1, CCI_EMSGSIZE); /* hello cut short */
	lie = 200; /* a payload beyond the bytes that came (data_len at 12) */
	cci__put32(buf + OFI_HDR_LEN + 12, lie);
	expect(buf, n, CCI_EMSGSIZE);
	cci__put32(buf + OFI_HDR_LEN + 12, 10);
	lie = 0xfffffff0u; /* an address length that would wrap a sum (addr_len at 52) */
	cci__put32(buf + OFI_HDR_LEN + 52, lie);
	expect(buf, n, CCI_EMSGSIZE);
	n = req_frame(buf, h, 0, 10);
	expect(buf, n, CCI_EMSGSIZE);
	n = req_frame(buf, h, OFI_ADDR_MAX + 1, 0);
	expect(buf, n, CCI_EMSGSIZE);
	n = req_frame(buf, h, 16, CCI_CONN_REQ_LEN + 1); /* the hello core refuses it */
	expect(buf, n, CCI_EINVAL);
	/* Fixed sizes are exact. */
	n = hello_frame(buf, OFI_T_ACCEPT, 7, &h);
	expect(buf, n - 1, CCI_EMSGSIZE);
	n = cancel_frame(buf, &c);
	expect(buf, n + 1, CCI_EMSGSIZE);
	n = frame(buf, OFI_T_MR_REQ, 7, &c, 7);
	expect(buf, n, CCI_EMSGSIZE);
	n = frame(buf, OFI_T_MR_REP, 7, &h, CCI__PEER_REG_REP_LEN - 8);
	expect(buf, n, CCI_EMSGSIZE);
	n = frame(buf, OFI_T_PING, 7, &c, 1);
	expect(buf, n, CCI_EMSGSIZE);
}

static void test_bad_version_type_destination(void)
{
	uint8_t buf[BUF_MAX];
	size_t n = frame(buf, OFI_T_PING, 7, NULL, 0);
	uint8_t *type = buf + 10, *version = buf + 11; /* the header's wire offsets */

	*version = OFI_WIRE_VERSION + 1;
	expect(buf, n, CCI_EINVAL);
	*version = 1; /* the host-order wire of earlier releases */
	expect(buf, n, CCI_EINVAL);
	*version = 0;
	expect(buf, n, CCI_EINVAL);
	*version = OFI_WIRE_VERSION;
	*type = 0;
	expect(buf, n, CCI_EINVAL);
	*type = OFI_T_LAST + 1;
	expect(buf, n, CCI_EINVAL);
	*type = 0xff;
	expect(buf, n, CCI_EINVAL);
	*type = OFI_T_PING;
	cci__put32(buf, 0); /* a connection's message without its id */
	expect(buf, n, CCI_EINVAL);
	*type = OFI_T_MSG;
	expect(buf, n, CCI_EINVAL);
	n = req_frame(buf, hello_ok(), 8, 0);
	cci__put32(buf, 5); /* a request goes to the endpoint, never a connection */
	expect(buf, n, CCI_EINVAL);
}

static void expect_hello_refused(struct ofi_hello h, uint8_t type)
{
	uint8_t buf[BUF_MAX];
	size_t n = type == OFI_T_REQ ? req_frame(buf, h, 8, 8) : hello_frame(buf, OFI_T_ACCEPT, 7, &h);

	expect(buf, n, CCI_EINVAL);
}

static void test_hello_field_checks(void)
{
	struct ofi_hello ok = hello_ok(), h;

	h = ok;
	h.id = 0;
	expect_hello_refused(h, OFI_T_REQ);
	expect_hello_refused(h, OFI_T_ACCEPT);
	h = ok;
	h.core.attr = CCI_CONN_ATTR_UU + 1;
	expect_hello_refused(h, OFI_T_REQ);
	h.core.attr = CCI_CONN_ATTR_RU; /* an answer has no attribute */
	expect_hello_refused(h, OFI_T_ACCEPT);
	h = ok;
	h.core.mss = OFI_MSS_MIN - 1;
	expect_hello_refused(h, OFI_T_REQ);
	h.core.mss = OFI_MSS_MAX + 1;
	expect_hello_refused(h, OFI_T_ACCEPT);
	h = ok;
	h.core.credits = 0;
	expect_hello_refused(h, OFI_T_REQ);
	h.core.credits = OFI_WINDOW_MAX + 1;
	expect_hello_refused(h, OFI_T_ACCEPT);
	h = ok;
	h.flags = OFI_HELLO_IMM << 1;
	expect_hello_refused(h, OFI_T_REQ);
	/* An answer carries neither address nor payload. */
	h = ok;
	h.addr_len = 4;
	expect_hello_refused(h, OFI_T_ACCEPT);
	h = ok;
	h.core.data_len = 1;
	expect_hello_refused(h, OFI_T_ACCEPT);
}

/* The reserved bytes of the core (1..3) and of the tail (56..63) are
 * zero, or the hello is refused. */
static void test_hello_reserved_bytes(void)
{
	static const unsigned reserved[] = { 1, 3, 56, 63 };
	const struct ofi_hello ok = hello_ok();
	uint8_t buf[BUF_MAX];

	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		size_t n = req_frame(buf, ok, 8, 8);

		expect(buf, n, CCI_SUCCESS);
		buf[OFI_HDR_LEN + reserved[i]] = 1;
		expect(buf, n, CCI_EINVAL);
		n = hello_frame(buf, OFI_T_ACCEPT, 7, &ok);
		expect(buf, n, CCI_SUCCESS);
		buf[OFI_HDR_LEN + reserved[i]] = 1;
		expect(buf, n, CCI_EINVAL);
	}
}

static void test_cancel_and_mr_rep_checks(void)
{
	uint8_t buf[BUF_MAX];
	struct ofi_cancel c = { .id = 0, .nonce = 1 };
	struct cci__peer_reg_rep r = { .status = CCI_SUCCESS, .flags = CCI_FLAG_READ, .key = 1,
	                               .rkey = 2, .addr = UINT64_MAX - 4, .len = 10 };

	expect(buf, cancel_frame(buf, &c), CCI_EINVAL);
	/* MR_REP goes through the common checks (peer_reg_test.c tests them
	 * all): a range that wraps is refused here too. */
	expect(buf, rep_frame(buf, &r), CCI_EINVAL);
}

/* Network byte order, whatever the host's: known fields, known bytes. */
static void test_byte_order(void)
{
	static const uint8_t hdr_bytes[OFI_HDR_LEN] = {
		0x01, 0x02, 0x03, 0x04,  /* dst */
		0x0a, 0x0b, 0x0c, 0x0d,  /* seq */
		0x01, 0x2c,              /* credits 300 */
		OFI_T_MR_REP, OFI_WIRE_VERSION,
		0xde, 0xad, 0xbe, 0xef,  /* aux */
	};
	static const uint8_t hello_head[32] = {
		CCI_CONN_ATTR_RO, 0x00, 0x00, 0x00,
		0x00, 0x01, 0x00, 0x00,  /* mss 65536 */
		0x00, 0x00, 0x00, 0x20,  /* credits 32 */
		0x00, 0x00, 0x00, 0x00,  /* data_len */
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, /* nonce */
		0x00, 0x02, 0x00, 0x03,  /* id */
		0x00, 0x00, 0x00, OFI_HELLO_IMM, /* flags */
	};
	struct ofi_hdr h = { .dst = 0x01020304u, .seq = 0x0a0b0c0du, .credits = 300,
	                     .type = OFI_T_MR_REP, .aux = 0xdeadbeefu };
	struct ofi_hello hello = hello_ok();
	uint8_t out[OFI_HELLO_LEN];
	struct ofi_msg m;

	memset(out, 0x55, sizeof(out));
	ofi_hdr_encode(&h, out);
	CU_ASSERT_EQUAL(memcmp(out, hdr_bytes, sizeof(hdr_bytes)), 0);
	ofi_hello_encode(&hello, out);
	CU_ASSERT_EQUAL(memcmp(out, hello_head, sizeof(hello_head)), 0);
	CU_ASSERT_EQUAL(out[39], 11);     /* proc.host's low byte last */
	CU_ASSERT_EQUAL(out[51], 13);     /* proc.pid's low byte last */
	CU_ASSERT_EQUAL(out[63], 0);      /* the padding, zeroed */
	/* The decoder reads the same bytes back. */
	memcpy(out, hdr_bytes, sizeof(hdr_bytes));
	out[10] = OFI_T_PING;
	CU_ASSERT_EQUAL_FATAL(ofi_wire_decode(out, OFI_HDR_LEN, &m, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(m.hdr.dst, 0x01020304u);
	CU_ASSERT_EQUAL(m.hdr.seq, 0x0a0b0c0du);
	CU_ASSERT_EQUAL(m.hdr.credits, 300);
	CU_ASSERT_EQUAL(m.hdr.aux, 0xdeadbeefu);
}

static void test_imm_round_trip(void)
{
	struct ofi_imm im;
	uint32_t dst = 0x0abc0123u; /* generation 0xabc, slot 0x0123 */

	CU_ASSERT_EQUAL_FATAL(ofi_imm_decode(ofi_imm_pack(dst, 0x12345678u, 0xfff), &im),
	                      CCI_SUCCESS);
	CU_ASSERT_EQUAL(im.slot, 0x0123);
	CU_ASSERT_EQUAL(im.gen, 0xabc);
	CU_ASSERT_EQUAL(im.seq20, 0x45678);
	CU_ASSERT_EQUAL(im.credits, 0xfff);
	/* Another type in the top bits, or slot 0: refused. */
	CU_ASSERT_EQUAL(ofi_imm_decode(ofi_imm_pack(dst, 1, 1) ^ (3ull << 60), &im), CCI_EINVAL);
	CU_ASSERT_EQUAL(ofi_imm_decode(ofi_imm_pack(0x0abc0000u, 1, 1), &im), CCI_EINVAL);
	/* The full sequence number nearest to the one expected, either side
	 * and across the wrap of 32 bits. */
	CU_ASSERT_EQUAL(ofi_imm_seq(0x12345678u, 0x4567du), 0x1234567du);
	CU_ASSERT_EQUAL(ofi_imm_seq(0x12345678u, 0x45670u), 0x12345670u);
	CU_ASSERT_EQUAL(ofi_imm_seq(0x00000002u, 0xffffeu), 0xfffffffeu);
	CU_ASSERT_EQUAL(ofi_imm_seq(0xfffffffeu, 0x00001u), 0x00000001u);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "REQ decodes: hello, address and payload where they came",
		  test_request_decodes },
		{ "ACCEPT, CANCEL, MR_*, header-only and MSG bodies decode",
		  test_fixed_bodies_decode },
		{ "truncated, overlong and lying lengths refused",
		  test_truncated_and_lying_lengths },
		{ "bad version, type and destination refused (EINVAL)",
		  test_bad_version_type_destination },
		{ "hello refusals: id, attr, mss, credits, flags, answer extras",
		  test_hello_field_checks },
		{ "a hello with a reserved byte set is refused", test_hello_reserved_bytes },
		{ "CANCEL without id, MR_REP with a wrapping range refused",
		  test_cancel_and_mr_rep_checks },
		{ "header and hello in network byte order: known fields, known bytes",
		  test_byte_order },
		{ "remote CQ datum round-trips; nearest sequence number", test_imm_round_trip },
	};

	return UNIT_RUN("ofi_wire", tests);
}
