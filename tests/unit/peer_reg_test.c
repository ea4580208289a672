/*
 * peer_reg_test.c - unit tests of the registration-key exchange that ofi
 * and verbs share (plugins/common/peer_reg.c, peer_reg_wire.c): the
 * initiator's cache learns only answers it asked for, every RMA is
 * checked against the answer, the queue's head goes, waits or fails as
 * cci__peer_reg_gate says, and the message bodies travel in network byte
 * order and are refused when malformed.
 */
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "peer_reg_wire.h"
#include "unit_run.h"

/* ---- The cache ---- */

static struct cci__peer_reg *asked(struct cci__peer_reg **head, uint64_t key, uint32_t id)
{
	struct cci__peer_reg *c = calloc(1, sizeof(*c));

	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	c->key = key;
	c->req_id = id;
	c->next = *head;
	*head = c;
	return c;
}

static void test_answers_learned_once(void)
{
	struct cci__peer_reg *head = NULL, *c = asked(&head, 11, 1), *d = asked(&head, 22, 2);
	struct cci__peer_reg_rep ok = { .status = CCI_SUCCESS, .flags = CCI_FLAG_WRITE, .key = 11,
	                                .rkey = 5, .addr = 4096, .len = 100 };
	struct cci__peer_reg_rep no = { .status = CCI_ERR_RMA_HANDLE, .key = 22 };
	struct cci__peer_reg_rep stray = { .status = CCI_SUCCESS, .key = 33 };

	CU_ASSERT_PTR_EQUAL(cci__peer_reg_find(head, 11), c);
	CU_ASSERT_EQUAL(cci__peer_reg_learn(head, 9, &ok), CCI_EINVAL); /* wrong request id */
	CU_ASSERT_EQUAL(cci__peer_reg_learn(head, 1, &ok), CCI_SUCCESS);
	CU_ASSERT_EQUAL(c->state, CCI__PEER_REG_KNOWN);
	CU_ASSERT_EQUAL(c->rkey, 5);
	CU_ASSERT_EQUAL(c->addr, 4096);
	CU_ASSERT_EQUAL(cci__peer_reg_learn(head, 1, &ok), CCI_EINVAL); /* asked once, answered once */
	CU_ASSERT_EQUAL(cci__peer_reg_learn(head, 2, &no), CCI_SUCCESS);
	CU_ASSERT_EQUAL(d->state, CCI__PEER_REG_REFUSED);
	CU_ASSERT_EQUAL(cci__peer_reg_learn(head, 3, &stray), CCI_EINVAL);
	CU_ASSERT_PTR_EQUAL(cci__peer_reg_unlink(&head, 11), c);
	CU_ASSERT_PTR_NULL(cci__peer_reg_find(head, 11));
	CU_ASSERT_PTR_NULL(cci__peer_reg_unlink(&head, 11));
	free(c);
	cci__peer_reg_free_all(&head);
	CU_ASSERT_PTR_NULL(head);
}

static void test_rma_checked_before_posting(void)
{
	struct cci__peer_reg c = { .key = 1, .state = CCI__PEER_REG_KNOWN, .flags = CCI_FLAG_WRITE,
	                           .rkey = 9, .addr = 0x10000, .len = 4096 };
	uint64_t raddr = 0;

	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, 0, 4096, &raddr), CCI_SUCCESS);
	CU_ASSERT_EQUAL(raddr, 0x10000);
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, 4095, 1, &raddr), CCI_SUCCESS);
	CU_ASSERT_EQUAL(raddr, 0x10000 + 4095);
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, 4095, 2, &raddr), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, 4097, 1, &raddr), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, 1, UINT64_MAX, &raddr), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, UINT64_MAX, 1, &raddr), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, 0, 0, &raddr), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 1, 0, 1, &raddr), CCI_ERR_RMA_HANDLE); /* no READ */
	c.state = CCI__PEER_REG_REFUSED;
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, 0, 1, &raddr), CCI_ERR_RMA_HANDLE);
	c.state = CCI__PEER_REG_ASKED;
	CU_ASSERT_EQUAL(cci__peer_reg_check(&c, 0, 0, 1, &raddr), CCI_ERR_RMA_HANDLE);
	CU_ASSERT_EQUAL(cci__peer_reg_check(NULL, 0, 0, 1, &raddr), CCI_ERR_RMA_HANDLE);
}

/* ---- The queue's rule ---- */

/* A connection as the gate's ask callback sees it: the requests it sent. */
struct fake_conn {
	int fail;           /* the next request cannot go */
	int sent;
	uint32_t last_id;
	uint64_t last_key;
};

static int fake_ask(void *arg, uint32_t req_id, uint64_t key)
{
	struct fake_conn *fc = arg;

	if (fc->fail)
		return CCI_ENOBUFS;
	fc->sent++;
	fc->last_id = req_id;
	fc->last_key = key;
	return CCI_SUCCESS;
}

static void test_gate_asks_once_then_goes(void)
{
	struct cci__peer_reg *head = NULL;
	uint32_t next = 0;
	struct fake_conn fc = { 0 };
	struct cci__peer_reg_rma rma = { .key = 7, .roff = 16, .len = 8 };
	struct cci__peer_reg_rep rep = { .status = CCI_SUCCESS, .flags = CCI_FLAG_WRITE, .key = 7,
	                                 .rkey = 0xabc, .addr = 0x2000, .len = 64 };
	uint64_t raddr = 0, rkey = 0;

	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_EAGAIN);
	CU_ASSERT_EQUAL(fc.sent, 1);
	CU_ASSERT_EQUAL(fc.last_key, 7);
	CU_ASSERT_EQUAL(fc.last_id, next);
	/* Waiting for the answer: no second request. */
	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_EAGAIN);
	CU_ASSERT_EQUAL(fc.sent, 1);
	CU_ASSERT_EQUAL_FATAL(cci__peer_reg_learn(head, fc.last_id, &rep), CCI_SUCCESS);
	/* A fence waits for earlier RMAs even once the key is known. */
	rma.fenced = 1;
	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_EAGAIN);
	rma.fenced = 0;
	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_SUCCESS);
	CU_ASSERT_EQUAL(raddr, 0x2000 + 16);
	CU_ASSERT_EQUAL(rkey, 0xabc);
	/* Checked against the answer: a read of a write-only registration,
	 * and a range beyond it, fail. */
	rma.is_read = 1;
	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_ERR_RMA_HANDLE);
	rma.is_read = 0;
	rma.len = 64;
	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_EINVAL);
	CU_ASSERT_EQUAL(fc.sent, 1);
	cci__peer_reg_free_all(&head);
}

static void test_gate_refusal_and_failed_request(void)
{
	struct cci__peer_reg *head = NULL;
	uint32_t next = 41;
	struct fake_conn fc = { 0 };
	struct cci__peer_reg_rma rma = { .key = 9, .len = 1 };
	struct cci__peer_reg_rep no = { .status = CCI_ERR_RMA_HANDLE, .key = 9 };
	uint64_t raddr = 0, rkey = 0;

	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_EAGAIN);
	CU_ASSERT_EQUAL(fc.last_id, 42); /* the connection's counter, advanced */
	CU_ASSERT_EQUAL_FATAL(cci__peer_reg_learn(head, 42, &no), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_ERR_RMA_HANDLE);
	/* A request that cannot go fails the RMA, and nothing is cached. */
	fc.fail = 1;
	rma.key = 10;
	CU_ASSERT_EQUAL(cci__peer_reg_gate(&head, &next, &rma, fake_ask, &fc, &raddr, &rkey),
	                CCI_ENOMEM);
	CU_ASSERT_PTR_NULL(cci__peer_reg_find(head, 10));
	cci__peer_reg_free_all(&head);
}

/* ---- The bodies ---- */

static void test_bodies_in_network_byte_order(void)
{
	static const uint8_t rep_bytes[CCI__PEER_REG_REP_LEN] = {
		0x00, 0x00, 0x00, 0x00,                         /* status CCI_SUCCESS */
		0x00, 0x00, 0x00, CCI_FLAG_WRITE,               /* flags */
		0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, /* key */
		0x00, 0x00, 0x00, 0x00, 0xab, 0xcd, 0xef, 0x01, /* rkey */
		0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, /* addr */
		0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, /* len 2^33 */
	};
	static const uint8_t key_bytes[CCI__PEER_REG_KEY_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	struct cci__peer_reg_rep in = { .status = CCI_SUCCESS, .flags = CCI_FLAG_WRITE,
	                                .key = 0x1122334455667788ull, .rkey = 0xabcdef01,
	                                .addr = 0x7f0000001000ull, .len = 1ull << 33 }, out;
	uint8_t buf[CCI__PEER_REG_REP_LEN];

	cci__peer_reg_rep_encode(&in, buf);
	CU_ASSERT_EQUAL(memcmp(buf, rep_bytes, sizeof(buf)), 0);
	CU_ASSERT_EQUAL_FATAL(cci__peer_reg_rep_decode(rep_bytes, sizeof(rep_bytes), UINT32_MAX,
	                                               &out, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(memcmp(&out, &in, sizeof(in)), 0);
	cci__peer_reg_key_encode(0x0102030405060708ull, buf);
	CU_ASSERT_EQUAL(memcmp(buf, key_bytes, sizeof(key_bytes)), 0);
	CU_ASSERT_EQUAL(cci__peer_reg_key_decode(key_bytes), 0x0102030405060708ull);
	CU_ASSERT_EQUAL(cci__peer_reg_body_len(CCI__PEER_REG_MSG_REP), CCI__PEER_REG_REP_LEN);
	CU_ASSERT_EQUAL(cci__peer_reg_body_len(CCI__PEER_REG_MSG_DONE), CCI__PEER_REG_KEY_LEN);
}

static void expect_rep_refused(struct cci__peer_reg_rep r, uint64_t rkey_max)
{
	uint8_t buf[CCI__PEER_REG_REP_LEN];
	struct cci__peer_reg_rep out = { .key = 77 };
	const char *why = NULL;

	cci__peer_reg_rep_encode(&r, buf);
	CU_ASSERT_EQUAL(cci__peer_reg_rep_decode(buf, sizeof(buf), rkey_max, &out, &why),
	                CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(why);
	CU_ASSERT_EQUAL(out.key, 77); /* untouched on failure */
}

static void test_malformed_answers_refused(void)
{
	struct cci__peer_reg_rep ok = { .status = CCI_SUCCESS, .flags = CCI_FLAG_READ, .key = 1,
	                                .rkey = 2, .addr = 0x1000, .len = 10 }, r;
	uint8_t buf[CCI__PEER_REG_REP_LEN + 1];
	const char *why = NULL;

	cci__peer_reg_rep_encode(&ok, buf);
	CU_ASSERT_EQUAL(cci__peer_reg_rep_decode(buf, CCI__PEER_REG_REP_LEN - 1, UINT64_MAX, &r,
	                                         &why), CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(why);
	CU_ASSERT_EQUAL(cci__peer_reg_rep_decode(buf, CCI__PEER_REG_REP_LEN + 1, UINT64_MAX, &r,
	                                         NULL), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci__peer_reg_rep_decode(NULL, CCI__PEER_REG_REP_LEN, UINT64_MAX, &r, NULL),
	                CCI_EINVAL);
	r = ok;
	r.status = CCI_ERROR; /* only SUCCESS or RMA_HANDLE are answers */
	expect_rep_refused(r, UINT64_MAX);
	r = ok;
	r.flags = 0x100;
	expect_rep_refused(r, UINT64_MAX);
	r = ok;
	r.len = 0;
	expect_rep_refused(r, UINT64_MAX);
	r = ok;
	r.addr = UINT64_MAX - 4; /* addr + len wraps */
	expect_rep_refused(r, UINT64_MAX);
	r = ok;
	r.rkey = 1ull << 32; /* wider than a verbs rkey */
	expect_rep_refused(r, UINT32_MAX);
	/* A refusal carries no range, and the limits themselves pass. */
	r = (struct cci__peer_reg_rep){ .status = CCI_ERR_RMA_HANDLE, .key = 3 };
	cci__peer_reg_rep_encode(&r, buf);
	CU_ASSERT_EQUAL(cci__peer_reg_rep_decode(buf, CCI__PEER_REG_REP_LEN, 0, &r, NULL),
	                CCI_SUCCESS);
	r = ok;
	r.addr = UINT64_MAX - 10;
	r.rkey = UINT32_MAX;
	cci__peer_reg_rep_encode(&r, buf);
	CU_ASSERT_EQUAL(cci__peer_reg_rep_decode(buf, CCI__PEER_REG_REP_LEN, UINT32_MAX, &r, NULL),
	                CCI_SUCCESS);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "answers learned only when asked, once", test_answers_learned_once },
		{ "RMA checked against the answer before posting", test_rma_checked_before_posting },
		{ "queue head: asks once, waits, fences, then goes checked",
		  test_gate_asks_once_then_goes },
		{ "queue head: refused key fails; a request that cannot go fails",
		  test_gate_refusal_and_failed_request },
		{ "bodies in network byte order: known fields, known bytes",
		  test_bodies_in_network_byte_order },
		{ "malformed answers refused: length, status, flags, range, key width",
		  test_malformed_answers_refused },
	};

	return UNIT_RUN("peer_reg", tests);
}
