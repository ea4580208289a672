/*
 * verbs_proto_test.c - unit tests of the verbs transport's logic that
 * needs no device: selective signalling and the send queue's accounting
 * (verbs_sq.c), the checks of a peer's registration (verbs_reg.c) and
 * the connection set-up steps (verbs_fsm.c); its credits are tested
 * with the common ones (credit_test.c).
 */
#include <stdlib.h>

#include <CUnit/Basic.h>

#include "unit_run.h"
#include "verbs_proto.h"

static void test_selective_signalling(void)
{
	CU_ASSERT_TRUE(verbs_signal_wanted(0, 128, 1));      /* the last of a burst */
	CU_ASSERT_FALSE(verbs_signal_wanted(0, 128, 0));
	CU_ASSERT_FALSE(verbs_signal_wanted(VERBS_SIGNAL_EVERY - 2, 128, 0));
	CU_ASSERT_TRUE(verbs_signal_wanted(VERBS_SIGNAL_EVERY - 1, 128, 0));
	CU_ASSERT_TRUE(verbs_signal_wanted(3, 8, 0));        /* half of a small queue */
	CU_ASSERT_TRUE(verbs_signal_wanted(0, 1, 0));
}

static void test_send_queue_accounting(void)
{
	CU_ASSERT_TRUE(verbs_sq_fits(0, 0, 16, 16));
	CU_ASSERT_FALSE(verbs_sq_fits(0, 0, 17, 16));
	CU_ASSERT_TRUE(verbs_sq_fits(10, 0, 6, 16));
	CU_ASSERT_FALSE(verbs_sq_fits(10, 0, 7, 16)); /* unreaped requests still count */
	CU_ASSERT_TRUE(verbs_sq_fits(10, 4, 10, 16));
	CU_ASSERT_FALSE(verbs_sq_fits(0, 0, UINT64_MAX, 16));
	CU_ASSERT_EQUAL(verbs_rma_wrs(1, 1u << 30, 0), 1);
	CU_ASSERT_EQUAL(verbs_rma_wrs(1u << 30, 1u << 30, 1), 2);
	CU_ASSERT_EQUAL(verbs_rma_wrs((1ull << 30) + 1, 1u << 30, 0), 2);
	CU_ASSERT_EQUAL(verbs_rma_wrs(5ull << 30, 1u << 30, 1), 6);
}

static void test_completion_attribution(void)
{
	/* a signaled completion completes the unsignaled requests before it */
	CU_ASSERT_EQUAL(verbs_op_status(3, 7, CCI_SUCCESS), CCI_SUCCESS);
	CU_ASSERT_EQUAL(verbs_op_status(7, 7, CCI_SUCCESS), CCI_SUCCESS);
	CU_ASSERT_EQUAL(verbs_op_status(8, 7, CCI_SUCCESS), -1);
	/* an error fails its own operation only: the earlier ones were done */
	CU_ASSERT_EQUAL(verbs_op_status(6, 7, CCI_ERR_DISCONNECTED), CCI_SUCCESS);
	CU_ASSERT_EQUAL(verbs_op_status(7, 7, CCI_ERR_DISCONNECTED), CCI_ERR_DISCONNECTED);
	/* an RMA whose last request is later: not complete (tx reports it) */
	CU_ASSERT_EQUAL(verbs_op_status(9, 7, CCI_ERR_RMA_HANDLE), -1);
}

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

static void test_registration_answers(void)
{
	struct cci__peer_reg *head = NULL, *c = asked(&head, 11, 1), *d = asked(&head, 22, 2);
	struct verbs_mr_rep ok = { .status = CCI_SUCCESS, .flags = CCI_FLAG_WRITE, .key = 11,
	                           .rkey = 5, .addr = 4096, .len = 100 };
	struct verbs_mr_rep no = { .status = CCI_ERR_RMA_HANDLE, .key = 22 };
	struct verbs_mr_rep stray = { .status = CCI_SUCCESS, .key = 33 };

	CU_ASSERT_PTR_EQUAL(cci__peer_reg_find(head, 11), c);
	CU_ASSERT_EQUAL(verbs_mrc_learn(head, 9, &ok), CCI_EINVAL); /* wrong request id */
	CU_ASSERT_EQUAL(verbs_mrc_learn(head, 1, &ok), CCI_SUCCESS);
	CU_ASSERT_EQUAL(c->state, CCI__PEER_REG_KNOWN);
	CU_ASSERT_EQUAL(verbs_mrc_learn(head, 1, &ok), CCI_EINVAL); /* asked once, answered once */
	CU_ASSERT_EQUAL(verbs_mrc_learn(head, 2, &no), CCI_SUCCESS);
	CU_ASSERT_EQUAL(d->state, CCI__PEER_REG_REFUSED);
	CU_ASSERT_EQUAL(verbs_mrc_learn(head, 3, &stray), CCI_EINVAL);
	CU_ASSERT_PTR_EQUAL(cci__peer_reg_unlink(&head, 11), c);
	CU_ASSERT_PTR_NULL(cci__peer_reg_find(head, 11));
	CU_ASSERT_PTR_NULL(cci__peer_reg_unlink(&head, 11));
	free(c);
	free(cci__peer_reg_unlink(&head, 22));
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

static void test_client_steps(void)
{
	int st = -1;

	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_ADDR, 1, VERBS_CM_ADDR_RESOLVED, &st),
	                VERBS_ACT_RESOLVE_ROUTE);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_ROUTE, 1, VERBS_CM_ROUTE_RESOLVED, &st),
	                VERBS_ACT_CONNECT);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_CM, 1, VERBS_CM_ESTABLISHED, &st),
	                VERBS_ACT_SEND_REQ);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_ADDR, 1, VERBS_CM_ADDR_ERROR, &st), VERBS_ACT_FAIL);
	CU_ASSERT_EQUAL(st, CCI_EADDRNOTAVAIL);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_CM, 1, VERBS_CM_REJECTED, &st), VERBS_ACT_FAIL);
	CU_ASSERT_EQUAL(st, CCI_ECONNREFUSED);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_ANSWER, 1, VERBS_CM_DISCONNECTED, &st),
	                VERBS_ACT_FAIL);
	CU_ASSERT_EQUAL(st, CCI_ERR_DISCONNECTED);
	/* out of order: a route before the address */
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_ADDR, 1, VERBS_CM_ROUTE_RESOLVED, &st),
	                VERBS_ACT_FAIL);
}

static void test_open_and_down_steps(void)
{
	int st = -1;

	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_CM, 0, VERBS_CM_ESTABLISHED, &st), VERBS_ACT_WAIT_REQ);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_OPEN, 0, VERBS_CM_DISCONNECTED, &st), VERBS_ACT_BREAK);
	CU_ASSERT_EQUAL(st, CCI_ERR_DISCONNECTED);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_OPEN, 1, VERBS_CM_ESTABLISHED, &st), VERBS_ACT_BREAK);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_OPEN, 1, VERBS_CM_DEVICE_REMOVAL, &st),
	                VERBS_ACT_DEVICE);
	CU_ASSERT_EQUAL(st, CCI_ERR_DEVICE_DEAD);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_OPEN, 1, VERBS_CM_TIMEWAIT_EXIT, &st), VERBS_ACT_NONE);
	CU_ASSERT_EQUAL(verbs_fsm_cm(VERBS_STEP_DOWN, 1, VERBS_CM_DISCONNECTED, &st), VERBS_ACT_NONE);
}

static void test_messages_only_in_their_step(void)
{
	CU_ASSERT_TRUE(verbs_fsm_msg_ok(VERBS_STEP_WAIT_REQ, 0, VERBS_T_REQ));
	CU_ASSERT_FALSE(verbs_fsm_msg_ok(VERBS_STEP_WAIT_REQ, 1, VERBS_T_REQ));
	CU_ASSERT_FALSE(verbs_fsm_msg_ok(VERBS_STEP_OPEN, 0, VERBS_T_REQ)); /* a second REQ */
	CU_ASSERT_TRUE(verbs_fsm_msg_ok(VERBS_STEP_ANSWER, 1, VERBS_T_ACCEPT));
	CU_ASSERT_FALSE(verbs_fsm_msg_ok(VERBS_STEP_ANSWER, 0, VERBS_T_ACCEPT));
	CU_ASSERT_FALSE(verbs_fsm_msg_ok(VERBS_STEP_OPEN, 1, VERBS_T_REJECT));
	CU_ASSERT_FALSE(verbs_fsm_msg_ok(VERBS_STEP_DECIDE, 0, VERBS_T_MSG)); /* before accept */
	CU_ASSERT_TRUE(verbs_fsm_msg_ok(VERBS_STEP_OPEN, 0, VERBS_T_MSG));
	CU_ASSERT_TRUE(verbs_fsm_msg_ok(VERBS_STEP_ANSWER, 1, VERBS_T_PING));
	CU_ASSERT_FALSE(verbs_fsm_msg_ok(VERBS_STEP_DOWN, 1, VERBS_T_PING));
	CU_ASSERT_FALSE(verbs_fsm_msg_ok(VERBS_STEP_OPEN, 1, 0));
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "sends are signalled selectively, the last of a burst always",
		  test_selective_signalling },
		{ "send queue counts unreaped requests; RMA chunks", test_send_queue_accounting },
		{ "a completion completes earlier requests, an error only its own",
		  test_completion_attribution },
		{ "registration answers are matched to their request", test_registration_answers },
		{ "RMA range and access checked before posting", test_rma_checked_before_posting },
		{ "client set-up steps and their failures", test_client_steps },
		{ "server, open and down steps", test_open_and_down_steps },
		{ "each message type only in its step", test_messages_only_in_their_step },
	};

	return UNIT_RUN("verbs_proto", tests);
}
