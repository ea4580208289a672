/*
 * sock_dgram_test.c - the handshake bodies of the sock transport's
 * datagram codec (plugins/sock/sock_dgram.h): HELLO and ACCEPT carry the
 * common hello core first and round-trip in network byte order; every
 * field the layout checks is refused with a reason that names it; a
 * datagram of another wire version is refused; the client's token of
 * a HELLO is found in the prefix an ICMP error quotes.
 */
#include <CUnit/Basic.h>
#include <string.h>

#include "sock_dgram.h"
#include "unit_run.h"

#define TOKEN 0x0102030405060708ull

static const struct sock_dg_hello hello_ok = {
	.core = { .attr = CCI_CONN_ATTR_RU, .mss = 65536, .credits = 64, .data_len = 3,
	          .nonce = TOKEN },
	.dgram = 65507, .isn = 0x1112131415161718ull,
};

static const struct sock_dg_accept accept_ok = {
	.core = { .mss = 1024, .credits = 256, .nonce = TOKEN },
	.dgram = 1200, .token = 0x2122232425262728ull, .isn = 0x3132333435363738ull,
};

static void t_round_trip(void)
{
	uint8_t b[SOCK_DG_ACCEPT_LEN + 8];
	struct sock_dg_hello h;
	struct sock_dg_accept a;
	const char *why = NULL;

	sock_dg_hello_encode(b, &hello_ok);
	memcpy(b + SOCK_DG_HELLO_LEN, "abc", 3);
	CU_ASSERT(b[0] == CCI_CONN_ATTR_RU && b[10] == 0 && b[11] == 64); /* core first: window */
	CU_ASSERT(b[16] == 0x01 && b[23] == 0x08);                       /* the client's token */
	CU_ASSERT(b[26] == 0xff && b[27] == 0xe3);                       /* dgram 65507 */
	CU_ASSERT(b[32] == 0x11 && b[39] == 0x18);                       /* isn */
	CU_ASSERT_EQUAL_FATAL(sock_dg_hello_decode(b, SOCK_DG_HELLO_LEN + 3, &h, &why), 0);
	CU_ASSERT(h.core.attr == hello_ok.core.attr && h.core.mss == hello_ok.core.mss &&
	          h.core.credits == 64 && h.core.data_len == 3 && h.core.nonce == TOKEN &&
	          h.dgram == hello_ok.dgram && h.isn == hello_ok.isn);

	sock_dg_accept_encode(b, &accept_ok);
	CU_ASSERT(b[0] == 0 && b[16] == 0x01 && b[23] == 0x08); /* the client's token, echoed */
	CU_ASSERT(b[32] == 0x21 && b[40] == 0x31 && b[47] == 0x38);
	CU_ASSERT_EQUAL_FATAL(sock_dg_accept_decode(b, SOCK_DG_ACCEPT_LEN, &a, &why), 0);
	CU_ASSERT(a.core.mss == 1024 && a.core.credits == 256 && a.core.nonce == TOKEN &&
	          a.dgram == 1200 && a.token == accept_ok.token && a.isn == accept_ok.isn);
}

/* Encode h with its payload, set byte at (if >= 0) to val, decode len
 * bytes: the reason it was refused, or NULL. */
static const char *hello_refused(struct sock_dg_hello h, int at, uint8_t val, uint32_t len)
{
	uint8_t b[SOCK_DG_HELLO_LEN + CCI_CONN_REQ_LEN + 1] = { 0 };
	struct sock_dg_hello out;
	const char *why = NULL;

	sock_dg_hello_encode(b, &h);
	if (at >= 0)
		b[at] = val;
	if (sock_dg_hello_decode(b, len, &out, &why) == 0)
		return NULL;
	CU_ASSERT_PTR_NOT_NULL(why);
	return why ? why : "";
}

static const char *accept_refused(struct sock_dg_accept a, int at, uint8_t val, uint32_t len)
{
	uint8_t b[SOCK_DG_ACCEPT_LEN + 1] = { 0 };
	struct sock_dg_accept out;
	const char *why = NULL;

	sock_dg_accept_encode(b, &a);
	if (at >= 0)
		b[at] = val;
	if (sock_dg_accept_decode(b, len, &out, &why) == 0)
		return NULL;
	CU_ASSERT_PTR_NOT_NULL(why);
	return why ? why : "";
}

/* A refusal whose reason names word. */
static void names(const char *why, const char *word)
{
	CU_ASSERT(why && strstr(why, word));
}

static void t_hello_refused(void)
{
	const uint32_t len = SOCK_DG_HELLO_LEN + 3;
	struct sock_dg_hello h;

	CU_ASSERT_PTR_NULL(hello_refused(hello_ok, -1, 0, len));
	names(hello_refused(hello_ok, -1, 0, SOCK_DG_HELLO_LEN - 1), "short");
	names(hello_refused(hello_ok, 2, 1, len), "reserved");    /* in the core */
	names(hello_refused(hello_ok, 29, 1, len), "reserved");   /* after it */
	names(hello_refused(hello_ok, 0, 3, len), "attribute");
	h = hello_ok, h.core.mss = 0;
	names(hello_refused(h, -1, 0, len), "message size");
	h = hello_ok, h.core.credits = 0;
	names(hello_refused(h, -1, 0, len), "credits");
	h = hello_ok, h.core.credits = UINT32_MAX; /* taken: capped at the send slots */
	CU_ASSERT_PTR_NULL(hello_refused(h, -1, 0, len));
	h = hello_ok, h.core.nonce = 0;
	names(hello_refused(h, -1, 0, len), "token");
	h = hello_ok, h.dgram = SOCK_DG_DGRAM_MIN - 1;
	names(hello_refused(h, -1, 0, len), "datagram");
	names(hello_refused(hello_ok, -1, 0, len + 1), "payload");
	h = hello_ok, h.core.data_len = CCI_CONN_REQ_LEN + 1;
	names(hello_refused(h, -1, 0, SOCK_DG_HELLO_LEN + CCI_CONN_REQ_LEN + 1), "payload");
}

static void t_accept_refused(void)
{
	struct sock_dg_accept a;

	CU_ASSERT_PTR_NULL(accept_refused(accept_ok, -1, 0, SOCK_DG_ACCEPT_LEN));
	names(accept_refused(accept_ok, -1, 0, SOCK_DG_ACCEPT_LEN - 1), "length");
	names(accept_refused(accept_ok, -1, 0, SOCK_DG_ACCEPT_LEN + 1), "length");
	names(accept_refused(accept_ok, 1, 1, SOCK_DG_ACCEPT_LEN), "reserved");
	names(accept_refused(accept_ok, 31, 1, SOCK_DG_ACCEPT_LEN), "reserved");
	names(accept_refused(accept_ok, 0, CCI_CONN_ATTR_UU, SOCK_DG_ACCEPT_LEN), "answer");
	a = accept_ok, a.core.data_len = 1; /* an answer with a payload */
	names(accept_refused(a, -1, 0, SOCK_DG_ACCEPT_LEN), "payload");
	a = accept_ok, a.core.credits = 0;
	names(accept_refused(a, -1, 0, SOCK_DG_ACCEPT_LEN), "credits");
	a = accept_ok, a.core.mss = 0;
	names(accept_refused(a, -1, 0, SOCK_DG_ACCEPT_LEN), "message size");
	a = accept_ok, a.dgram = 0;
	names(accept_refused(a, -1, 0, SOCK_DG_ACCEPT_LEN), "datagram");
	a = accept_ok, a.token = 0;
	names(accept_refused(a, -1, 0, SOCK_DG_ACCEPT_LEN), "token");
	a = accept_ok, a.core.nonce = 0;
	names(accept_refused(a, -1, 0, SOCK_DG_ACCEPT_LEN), "token");
}

/* A HELLO datagram: header, body, 3 payload bytes; its length. */
static uint32_t hello_datagram(uint8_t *b)
{
	struct sock_dg d = { .type = SOCK_DG_HELLO };
	uint32_t hl = sock_dg_encode(b, &d);

	sock_dg_hello_encode(b + hl, &hello_ok);
	memcpy(b + hl + SOCK_DG_HELLO_LEN, "abc", 3);
	return hl + SOCK_DG_HELLO_LEN + 3;
}

static void t_version(void)
{
	uint8_t b[SOCK_DG_HDR_LEN + SOCK_DG_HELLO_LEN + 3];
	uint32_t n = hello_datagram(b);
	struct sock_dg d;
	const char *why = NULL;

	CU_ASSERT_EQUAL(sock_dg_decode(b, n, 65536, &d, &why), 0);
	b[3] = SOCK_DG_VERSION - 1;
	CU_ASSERT_EQUAL(sock_dg_decode(b, n, 65536, &d, &why), -1);
	names(why, "version");
	b[3] = SOCK_DG_VERSION;
	b[0] ^= 1;
	CU_ASSERT_EQUAL(sock_dg_decode(b, n, 65536, &d, &why), -1);
	names(why, "mark");
}

static void t_quoted_hello(void)
{
	uint8_t b[SOCK_DG_HDR_LEN + SOCK_DG_HELLO_LEN + 3];
	const size_t end = SOCK_DG_HDR_LEN + SOCK_DG_HELLO_TOKEN_END;
	uint64_t token = 0;
	uint8_t type = 0;

	hello_datagram(b);
	CU_ASSERT_EQUAL(sock_dg_quoted(b, end, &type, &token), 0);
	CU_ASSERT(type == SOCK_DG_HELLO && token == TOKEN);
	CU_ASSERT_EQUAL(sock_dg_quoted(b, end - 1, &type, &token), -1);
	b[SOCK_DG_HDR_LEN + 1] = 1; /* not a hello core */
	CU_ASSERT_EQUAL(sock_dg_quoted(b, end, &type, &token), -1);
}

static const struct unit_test tests[] = {
	{ "HELLO and ACCEPT carry the hello core first, in network byte order", t_round_trip },
	{ "a HELLO is refused for each field out of range, with a reason naming it",
	  t_hello_refused },
	{ "an ACCEPT is refused for each field out of range, an attribute or a payload",
	  t_accept_refused },
	{ "a datagram of another wire version is refused and says so", t_version },
	{ "an ICMP error's quote of a HELLO names the client's token", t_quoted_hello },
};

int main(void)
{
	return UNIT_RUN("sock datagram codec", tests);
}
