/*
 * hello_test.c - the handshake's core fields (plugins/common/hello.h):
 * a request and an answer round-trip in network byte order, and the
 * decoder refuses each field outside what the transport accepts.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include "hello.h"
#include "unit_run.h"

static const struct cci__hello_limits lim = { .mss_min = 64, .mss_max = 65536,
	                                      .credits_min = 1, .credits_max = 1024 };

static void t_round_trip(void)
{
	struct cci__hello in = { .attr = CCI_CONN_ATTR_UU, .mss = 8192, .credits = 32,
	                         .data_len = 17, .nonce = 0x0102030405060708ull }, out;
	uint8_t b[CCI__HELLO_LEN];
	const char *why = NULL;

	cci__hello_encode(b, &in);
	CU_ASSERT_EQUAL(b[0], CCI_CONN_ATTR_UU);
	CU_ASSERT(b[4] == 0 && b[5] == 0 && b[6] == 0x20 && b[7] == 0); /* 8192, big-endian */
	CU_ASSERT(b[16] == 0x01 && b[23] == 0x08);
	CU_ASSERT_EQUAL_FATAL(cci__hello_decode(b, CCI__HELLO_REQUEST, &lim, &out, &why),
	                      CCI_SUCCESS);
	CU_ASSERT(out.attr == in.attr && out.mss == in.mss && out.credits == in.credits &&
	          out.data_len == in.data_len && out.nonce == in.nonce);
	in.attr = 0;
	in.data_len = 0;
	cci__hello_encode(b, &in);
	CU_ASSERT_EQUAL(cci__hello_decode(b, CCI__HELLO_ANSWER, &lim, &out, &why), CCI_SUCCESS);
}

/* Encode h, corrupt byte at (if >= 0) with val, and say why it was refused. */
static const char *refused(struct cci__hello h, enum cci__hello_kind kind,
                           const struct cci__hello_limits *l, int at, uint8_t val)
{
	uint8_t b[CCI__HELLO_LEN];
	struct cci__hello out = { .mss = 0xdead };
	const char *why = NULL;

	cci__hello_encode(b, &h);
	if (at >= 0)
		b[at] = val;
	if (cci__hello_decode(b, kind, l, &out, &why) == CCI_SUCCESS)
		return NULL;
	CU_ASSERT_EQUAL(out.mss, 0xdead); /* untouched */
	return why;
}

static void t_refused(void)
{
	const struct cci__hello ok = { .attr = CCI_CONN_ATTR_RO, .mss = 1024, .credits = 8,
	                               .data_len = 0, .nonce = 1 };
	const struct cci__hello_limits no_window = { .mss_min = 64, .mss_max = 65536 };
	struct cci__hello h;

	CU_ASSERT_PTR_NULL(refused(ok, CCI__HELLO_REQUEST, &lim, -1, 0));
	CU_ASSERT_PTR_NOT_NULL(refused(ok, CCI__HELLO_REQUEST, &lim, 2, 1));  /* reserved */
	CU_ASSERT_PTR_NOT_NULL(refused(ok, CCI__HELLO_REQUEST, &lim, 0, 3));  /* attribute */
	CU_ASSERT_PTR_NOT_NULL(refused(ok, CCI__HELLO_ANSWER, &lim, 0, 1));   /* answer's attr */
	h = ok, h.mss = 63;
	CU_ASSERT_PTR_NOT_NULL(refused(h, CCI__HELLO_REQUEST, &lim, -1, 0));
	h = ok, h.mss = 65537;
	CU_ASSERT_PTR_NOT_NULL(refused(h, CCI__HELLO_REQUEST, &lim, -1, 0));
	h = ok, h.credits = 0;
	CU_ASSERT_PTR_NOT_NULL(refused(h, CCI__HELLO_REQUEST, &lim, -1, 0));
	h = ok, h.credits = 1025;
	CU_ASSERT_PTR_NOT_NULL(refused(h, CCI__HELLO_REQUEST, &lim, -1, 0));
	CU_ASSERT_PTR_NOT_NULL(refused(ok, CCI__HELLO_REQUEST, &no_window, -1, 0)); /* 8 credits */
	h = ok, h.credits = 0;
	CU_ASSERT_PTR_NULL(refused(h, CCI__HELLO_REQUEST, &no_window, -1, 0));
	h = ok, h.data_len = CCI_CONN_REQ_LEN + 1;
	CU_ASSERT_PTR_NOT_NULL(refused(h, CCI__HELLO_REQUEST, &lim, -1, 0));
	h = ok, h.data_len = CCI_CONN_REQ_LEN;
	CU_ASSERT_PTR_NULL(refused(h, CCI__HELLO_REQUEST, &lim, -1, 0));
	CU_ASSERT_PTR_NOT_NULL(refused(h, CCI__HELLO_ANSWER, &lim, 0, 0)); /* answer's payload */
}

static const struct unit_test tests[] = {
	{ "a request and an answer round-trip in network byte order", t_round_trip },
	{ "every field outside the transport's limits is refused, the output untouched",
	  t_refused },
};

int main(void)
{
	return UNIT_RUN("hello core", tests);
}
