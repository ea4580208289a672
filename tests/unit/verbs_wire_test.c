/*
 * verbs_wire_test.c - unit tests of the verbs transport's codec
 * (plugins/verbs/verbs_wire.c): the header of every SEND (with the exact
 * body sizes of the registration exchange, whose bodies peer_reg_test.c
 * tests) and the hello in rdma_cm private data.
 */
#include <string.h>

#include <CUnit/Basic.h>

#include "unit_run.h"
#include "verbs_proto.h"

/* A SEND of type with body_len zero bytes after a valid header. */
static size_t frame(uint8_t *buf, uint8_t type, uint32_t body_len)
{
	struct verbs_hdr h = { .type = type, .credits = 7, .seq = 9, .len = body_len, .aux = 3 };

	verbs_hdr_encode(&h, buf);
	memset(buf + VERBS_HDR_LEN, 0, body_len);
	return VERBS_HDR_LEN + body_len;
}

static void test_header_round_trip(void)
{
	uint8_t buf[VERBS_HDR_LEN + 100];
	struct verbs_hdr in = { .type = VERBS_T_MSG, .credits = 0xfffe, .seq = 0xdeadbeef,
	                        .len = 100, .aux = 0x01020304 }, out;

	verbs_hdr_encode(&in, buf);
	CU_ASSERT_EQUAL(buf[0], VERBS_T_MSG);
	CU_ASSERT_EQUAL(buf[1], VERBS_WIRE_VERSION);
	CU_ASSERT_EQUAL(buf[4], 0xde); /* network byte order on the wire */
	CU_ASSERT_EQUAL(buf[7], 0xef);
	CU_ASSERT_EQUAL_FATAL(verbs_hdr_decode(buf, sizeof(buf), 8192, &out), CCI_SUCCESS);
	CU_ASSERT_EQUAL(out.type, in.type);
	CU_ASSERT_EQUAL(out.credits, in.credits);
	CU_ASSERT_EQUAL(out.seq, in.seq);
	CU_ASSERT_EQUAL(out.len, in.len);
	CU_ASSERT_EQUAL(out.aux, in.aux);
}

static void test_header_refuses_bad_lengths(void)
{
	uint8_t buf[VERBS_HDR_LEN + 2048];
	struct verbs_hdr out = { .type = 99 };
	size_t n = frame(buf, VERBS_T_MSG, 10);

	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, VERBS_HDR_LEN - 1, 8192, &out), CCI_EMSGSIZE);
	CU_ASSERT_EQUAL(verbs_hdr_decode(NULL, 64, 8192, &out), CCI_EMSGSIZE);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n - 1, 8192, &out), CCI_EMSGSIZE); /* len lies */
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n + 1, 8192, &out), CCI_EMSGSIZE);
	n = frame(buf, VERBS_T_MSG, 2000);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 1024, &out), CCI_EMSGSIZE); /* over mss */
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 2000, &out), CCI_SUCCESS);
	n = frame(buf, VERBS_T_REQ, CCI_CONN_REQ_LEN + 1);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_EMSGSIZE);
	n = frame(buf, VERBS_T_REQ, CCI_CONN_REQ_LEN);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_SUCCESS);
}

static void test_header_refuses_bad_type_version_body(void)
{
	uint8_t buf[VERBS_HDR_LEN + 64];
	struct verbs_hdr out = { .type = 42 };
	size_t n;

	n = frame(buf, 0, 0);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_EINVAL);
	n = frame(buf, VERBS_T_MAX + 1, 0);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_EINVAL);
	n = frame(buf, VERBS_T_PING, 0);
	buf[1] = VERBS_WIRE_VERSION + 1;
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_EINVAL);
	n = frame(buf, VERBS_T_CREDIT, 4); /* control types have exact bodies */
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_EINVAL);
	n = frame(buf, VERBS_T_MR_REQ, 7);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_EINVAL);
	n = frame(buf, VERBS_T_MR_REP, CCI__PEER_REG_REP_LEN - 1);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_EINVAL);
	CU_ASSERT_EQUAL(out.type, 42); /* untouched on failure */
	n = frame(buf, VERBS_T_MR_REP, CCI__PEER_REG_REP_LEN);
	CU_ASSERT_EQUAL(verbs_hdr_decode(buf, n, 8192, &out), CCI_SUCCESS);
}

static void test_hello_fits_ib_private_data(void)
{
	CU_ASSERT(VERBS_HELLO_LEN <= VERBS_PRIVATE_DATA_MAX);
}

static void test_hello_round_trip_with_padding(void)
{
	struct verbs_hello in = { .kind = VERBS_HELLO_CONNECT, .core = { .attr = CCI_CONN_ATTR_UU,
	                          .mss = 8192, .credits = 32, .data_len = 1024,
	                          .nonce = 0x0102030405060708ull }}, out;
	uint8_t pd[VERBS_PRIVATE_DATA_MAX] = { 0 };
	const char *why = NULL;

	verbs_hello_encode(&in, pd);
	/* rdma_cm may hand the private data zero-padded to its maximum */
	CU_ASSERT_EQUAL_FATAL(verbs_hello_decode(pd, sizeof(pd), VERBS_HELLO_CONNECT, &out, &why),
	                      CCI_SUCCESS);
	CU_ASSERT_EQUAL(out.core.attr, CCI_CONN_ATTR_UU);
	CU_ASSERT_EQUAL(out.core.mss, 8192);
	CU_ASSERT_EQUAL(out.core.credits, 32);
	CU_ASSERT_EQUAL(out.core.data_len, 1024);
	CU_ASSERT_EQUAL(out.core.nonce, in.core.nonce);
}

/* Encode h, damage byte at (if >= 0) with v, and expect a refusal. */
static void expect_hello_refused(struct verbs_hello h, int kind, int at, uint8_t v, size_t n)
{
	uint8_t pd[VERBS_PRIVATE_DATA_MAX] = { 0 };
	struct verbs_hello out = { .core.mss = 77 };
	const char *why = NULL;

	verbs_hello_encode(&h, pd);
	if (at >= 0)
		pd[at] = v;
	CU_ASSERT_EQUAL(verbs_hello_decode(pd, n, kind, &out, &why), CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(why);
	CU_ASSERT_EQUAL(out.core.mss, 77);
}

static void test_hello_refusals(void)
{
	struct verbs_hello ok = { .kind = VERBS_HELLO_CONNECT, .core = { .attr = CCI_CONN_ATTR_RO,
	                          .mss = 4096, .credits = 8 }}, h;
	const char *why = NULL;

	CU_ASSERT_EQUAL(verbs_hello_decode(NULL, 0, VERBS_HELLO_CONNECT, &h, &why), CCI_EINVAL);
	expect_hello_refused(ok, VERBS_HELLO_CONNECT, -1, 0, VERBS_HELLO_LEN - 1); /* short */
	expect_hello_refused(ok, VERBS_HELLO_CONNECT, 0, 0x00, VERBS_HELLO_LEN);   /* magic */
	expect_hello_refused(ok, VERBS_HELLO_CONNECT, 4, 9, VERBS_HELLO_LEN);      /* version */
	expect_hello_refused(ok, VERBS_HELLO_ACCEPT, -1, 0, VERBS_HELLO_LEN);      /* kind */
	h = ok;
	h.core.attr = CCI_CONN_ATTR_UU_MC_TX;
	expect_hello_refused(h, VERBS_HELLO_CONNECT, -1, 0, VERBS_HELLO_LEN);
	h = ok;
	h.core.mss = VERBS_MSS_MIN - 1;
	expect_hello_refused(h, VERBS_HELLO_CONNECT, -1, 0, VERBS_HELLO_LEN);
	h = ok;
	h.core.mss = VERBS_MSS_MAX + 1;
	expect_hello_refused(h, VERBS_HELLO_CONNECT, -1, 0, VERBS_HELLO_LEN);
	h = ok;
	h.core.credits = 0;
	expect_hello_refused(h, VERBS_HELLO_CONNECT, -1, 0, VERBS_HELLO_LEN);
	h = ok;
	h.core.credits = VERBS_WINDOW_MAX + 1;
	expect_hello_refused(h, VERBS_HELLO_CONNECT, -1, 0, VERBS_HELLO_LEN);
	h = ok;
	h.core.data_len = CCI_CONN_REQ_LEN + 1;
	expect_hello_refused(h, VERBS_HELLO_CONNECT, -1, 0, VERBS_HELLO_LEN);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "header round-trips in network byte order", test_header_round_trip },
		{ "header refuses short, lying and oversized lengths", test_header_refuses_bad_lengths },
		{ "header refuses bad type, version and control body sizes",
		  test_header_refuses_bad_type_version_body },
		{ "hello fits IB's 56 bytes of REQ private data", test_hello_fits_ib_private_data },
		{ "hello round-trips through zero-padded private data",
		  test_hello_round_trip_with_padding },
		{ "hello refusals: short, magic, version, kind, attr, mss, credits, payload",
		  test_hello_refusals },
	};

	return UNIT_RUN("verbs_wire", tests);
}
