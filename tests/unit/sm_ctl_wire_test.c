/*
 * sm_ctl_wire_test.c - unit tests of the sm transport's control-message
 * codec (plugins/sm/sm_ctl_wire.c): what the encoder writes decodes to
 * the same fields, and every malformed record is refused with the status
 * its fault calls for, leaving the output untouched.
 */
#include <string.h>

#include <CUnit/Basic.h>

#include "netorder.h"
#include "sm_ctl_wire.h"
#include "sm_ring.h"
#include "unit_run.h"

static struct sm_ctl_hello hello_with(uint32_t data_len)
{
	struct sm_ctl_hello h;

	memset(&h, 0, sizeof(h));
	h.core.attr = CCI_CONN_ATTR_RU;
	h.core.data_len = data_len;
	h.core.mss = 8192;
	h.pid = 4242;
	h.ring_size = SM_RING_MIN_SIZE * 16;
	for (uint32_t i = 0; i < data_len; i++)
		h.data[i] = (uint8_t)(i * 7 + 1);
	return h;
}

/* Decoding buf fails with want; the output is untouched and a reason given. */
static void expect_refused(const void *buf, size_t len, int nfds, int want)
{
	struct sm_ctl_hello out;
	const char *why = NULL;

	memset(&out, 0xa5, sizeof(out));
	CU_ASSERT_EQUAL(sm_ctl_decode(buf, len, nfds, &out, &why), want);
	CU_ASSERT_PTR_NOT_NULL(why);
	CU_ASSERT_EQUAL(out.hdr.magic, 0xa5a5a5a5u);
}

static void test_request_round_trip(void)
{
	struct sm_ctl_hello in = hello_with(100), out;
	uint8_t buf[sizeof(struct sm_ctl_hello)];
	const char *why = "unset";
	size_t n = sm_ctl_encode(SM_CTL_REQ, &in, buf, sizeof(buf));

	CU_ASSERT_EQUAL_FATAL(n, SM_CTL_HELLO_HEAD + 100);
	memset(&out, 0xa5, sizeof(out));
	CU_ASSERT_EQUAL_FATAL(sm_ctl_decode(buf, n, SM_HELLO_FDS, &out, &why), CCI_SUCCESS);
	CU_ASSERT_PTR_NULL(why);
	CU_ASSERT_EQUAL(out.hdr.magic, SM_CTL_MAGIC);
	CU_ASSERT_EQUAL(out.hdr.version, SM_CTL_VERSION);
	CU_ASSERT_EQUAL(out.hdr.type, SM_CTL_REQ);
	CU_ASSERT_EQUAL(out.core.attr, in.core.attr);
	CU_ASSERT_EQUAL(out.core.data_len, 100);
	CU_ASSERT_EQUAL(out.core.mss, in.core.mss);
	CU_ASSERT_EQUAL(out.pid, in.pid);
	CU_ASSERT_EQUAL(out.ring_size, in.ring_size);
	CU_ASSERT_EQUAL(memcmp(out.data, in.data, 100), 0);
	CU_ASSERT_EQUAL(out.data[100], 0); /* nothing of the 0xa5 fill past the payload */
	CU_ASSERT_EQUAL(out.data[CCI_CONN_REQ_LEN - 1], 0);
}

static void test_accept_and_bare_round_trip(void)
{
	static const uint16_t bare[] = { SM_CTL_REJECT, SM_CTL_DISCONNECT, SM_CTL_PING,
	                                 SM_CTL_PONG, SM_CTL_NORES, SM_CTL_BUSY };
	struct sm_ctl_hello in = hello_with(0), out;
	uint8_t buf[sizeof(struct sm_ctl_hello)];
	size_t n;

	in.core.attr = 0; /* an answer carries no attribute */
	n = sm_ctl_encode(SM_CTL_ACCEPT, &in, buf, sizeof(buf));
	CU_ASSERT_EQUAL_FATAL(n, SM_CTL_HELLO_HEAD);
	CU_ASSERT_EQUAL(sm_ctl_decode(buf, n, SM_HELLO_FDS, &out, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(out.hdr.type, SM_CTL_ACCEPT);
	CU_ASSERT_EQUAL(out.ring_size, in.ring_size);
	for (size_t i = 0; i < sizeof(bare) / sizeof(bare[0]); i++) {
		n = sm_ctl_encode(bare[i], NULL, buf, sizeof(buf));
		CU_ASSERT_EQUAL(n, sizeof(struct sm_ctl_hdr));
		CU_ASSERT_EQUAL(sm_ctl_decode(buf, n, 0, &out, NULL), CCI_SUCCESS);
		CU_ASSERT_EQUAL(out.hdr.type, bare[i]);
		CU_ASSERT_EQUAL(out.core.data_len, 0);
	}
}

static void test_truncated_and_overlong_records(void)
{
	struct sm_ctl_hello in = hello_with(10);
	uint8_t buf[sizeof(struct sm_ctl_hello) + 8];
	size_t n = sm_ctl_encode(SM_CTL_REQ, &in, buf, sizeof(buf));

	CU_ASSERT_EQUAL_FATAL(n, SM_CTL_HELLO_HEAD + 10);
	expect_refused(NULL, 64, SM_HELLO_FDS, CCI_EMSGSIZE);
	expect_refused(buf, 0, SM_HELLO_FDS, CCI_EMSGSIZE);
	expect_refused(buf, sizeof(struct sm_ctl_hdr) - 1, SM_HELLO_FDS, CCI_EMSGSIZE);
	expect_refused(buf, SM_CTL_HELLO_HEAD - 1, SM_HELLO_FDS, CCI_EMSGSIZE);
	expect_refused(buf, n - 1, SM_HELLO_FDS, CCI_EMSGSIZE); /* payload cut short */
	expect_refused(buf, n + 1, SM_HELLO_FDS, CCI_EMSGSIZE); /* a byte past it */
	n = sm_ctl_encode(SM_CTL_PING, NULL, buf, sizeof(buf));
	expect_refused(buf, n + 4, 0, CCI_EMSGSIZE);            /* a body after PING */
}

/* Where the payload length is on the wire: the hello core's field. */
#define DATA_LEN_AT (sizeof(struct sm_ctl_hdr) + 12)

/* data_len is the peer's word: one over the limit, or past the record. */
static void test_payload_length_lies(void)
{
	struct sm_ctl_hello in = hello_with(CCI_CONN_REQ_LEN);
	uint8_t buf[sizeof(struct sm_ctl_hello) + 8];
	size_t n = sm_ctl_encode(SM_CTL_REQ, &in, buf, sizeof(buf));
	uint32_t lie;

	CU_ASSERT_EQUAL_FATAL(n, SM_CTL_HELLO_HEAD + CCI_CONN_REQ_LEN);
	lie = CCI_CONN_REQ_LEN + 1;
	cci__put32(buf + DATA_LEN_AT, lie);
	expect_refused(buf, n, SM_HELLO_FDS, CCI_EMSGSIZE);
	expect_refused(buf, n + 1, SM_HELLO_FDS, CCI_EMSGSIZE);
	lie = 0xffffffffu;
	cci__put32(buf + DATA_LEN_AT, lie);
	expect_refused(buf, n, SM_HELLO_FDS, CCI_EMSGSIZE);
	in = hello_with(10);
	n = sm_ctl_encode(SM_CTL_REQ, &in, buf, sizeof(buf));
	lie = 200; /* beyond the 10 bytes that came */
	cci__put32(buf + DATA_LEN_AT, lie);
	expect_refused(buf, n, SM_HELLO_FDS, CCI_EMSGSIZE);
}

static void test_bad_magic_version_type(void)
{
	struct sm_ctl_hello in = hello_with(0);
	uint8_t buf[sizeof(struct sm_ctl_hello)];
	struct sm_ctl_hdr *h = (struct sm_ctl_hdr *)buf;
	size_t n = sm_ctl_encode(SM_CTL_REQ, &in, buf, sizeof(buf));

	h->magic ^= 1;
	expect_refused(buf, n, SM_HELLO_FDS, CCI_EINVAL);
	h->magic ^= 1;
	h->version = SM_CTL_VERSION + 1;
	expect_refused(buf, n, SM_HELLO_FDS, CCI_EINVAL);
	h->version = SM_CTL_VERSION;
	h->type = 0;
	expect_refused(buf, n, SM_HELLO_FDS, CCI_EINVAL);
	h->type = SM_CTL_LAST + 1;
	expect_refused(buf, sizeof(*h), 0, CCI_EINVAL);
	h->type = 0xffff;
	expect_refused(buf, sizeof(*h), 0, CCI_EINVAL);
}

static void expect_hello_refused(struct sm_ctl_hello h, uint16_t type, int nfds)
{
	uint8_t buf[sizeof(struct sm_ctl_hello)];
	size_t n = sm_ctl_encode(type, &h, buf, sizeof(buf));

	CU_ASSERT_FATAL(n > 0);
	expect_refused(buf, n, nfds, CCI_EINVAL);
}

static void test_hello_field_checks(void)
{
	struct sm_ctl_hello ok = hello_with(4), h;
	uint8_t buf[16];

	h = ok;
	h.core.mss = SM_MSS_MIN - 1;
	expect_hello_refused(h, SM_CTL_REQ, SM_HELLO_FDS);
	h.core.mss = SM_MSS_MAX + 1;
	expect_hello_refused(h, SM_CTL_ACCEPT, SM_HELLO_FDS);
	h = ok;
	h.core.attr = CCI_CONN_ATTR_UU + 1;
	expect_hello_refused(h, SM_CTL_REQ, SM_HELLO_FDS);
	h = ok;
	h.ring_size = 0;
	expect_hello_refused(h, SM_CTL_REQ, SM_HELLO_FDS);
	h.ring_size = SM_RING_MIN_SIZE * 3; /* not a power of two */
	expect_hello_refused(h, SM_CTL_REQ, SM_HELLO_FDS);
	h.ring_size = SM_RING_MAX_SIZE * 2;
	expect_hello_refused(h, SM_CTL_REQ, SM_HELLO_FDS);
	h.ring_size = SM_RING_MIN_SIZE / 2;
	expect_hello_refused(h, SM_CTL_ACCEPT, SM_HELLO_FDS);
	/* An answer carries no payload. */
	expect_hello_refused(ok, SM_CTL_ACCEPT, SM_HELLO_FDS);
	/* Descriptors: three with a hello, none with anything else. */
	expect_hello_refused(ok, SM_CTL_REQ, SM_HELLO_FDS - 1);
	expect_hello_refused(ok, SM_CTL_REQ, 0);
	CU_ASSERT_EQUAL_FATAL(sm_ctl_encode(SM_CTL_DISCONNECT, NULL, buf, sizeof(buf)), 8);
	expect_refused(buf, 8, 1, CCI_EINVAL);
}

static void test_encoder_refusals(void)
{
	struct sm_ctl_hello h = hello_with(0);
	uint8_t buf[sizeof(struct sm_ctl_hello)];

	CU_ASSERT_EQUAL(sm_ctl_encode(0, &h, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(sm_ctl_encode(SM_CTL_LAST + 1, NULL, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(sm_ctl_encode(SM_CTL_REQ, NULL, buf, sizeof(buf)), 0);
	CU_ASSERT_EQUAL(sm_ctl_encode(SM_CTL_REQ, &h, buf, SM_CTL_HELLO_HEAD - 1), 0);
	CU_ASSERT_EQUAL(sm_ctl_encode(SM_CTL_PING, NULL, buf, 7), 0);
	h.core.data_len = CCI_CONN_REQ_LEN + 1;
	CU_ASSERT_EQUAL(sm_ctl_encode(SM_CTL_REQ, &h, buf, sizeof(buf)), 0);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "REQ with payload round-trips through the encoder", test_request_round_trip },
		{ "ACCEPT and header-only messages round-trip", test_accept_and_bare_round_trip },
		{ "truncated and overlong records refused (EMSGSIZE)",
		  test_truncated_and_overlong_records },
		{ "payload length over the limit or past the record refused (EMSGSIZE)",
		  test_payload_length_lies },
		{ "bad magic, version and type refused (EINVAL)", test_bad_magic_version_type },
		{ "hello refusals: mss, attr, ring size, answer payload, descriptors",
		  test_hello_field_checks },
		{ "encoder refuses unknown types, missing bodies, small buffers",
		  test_encoder_refusals },
	};

	return UNIT_RUN("sm_ctl_wire", tests);
}
