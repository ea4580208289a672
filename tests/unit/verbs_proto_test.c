/*
 * verbs_proto_test.c - unit tests of the verbs transport's logic that
 * needs no device: selective signalling and the send queue's accounting
 * (verbs_sq.c) and the connection set-up steps (verbs_fsm.c); its
 * credits and its registration-key exchange are tested with the common
 * ones (credit_test.c, peer_reg_test.c).
 */

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
		{ "client set-up steps and their failures", test_client_steps },
		{ "server, open and down steps", test_open_and_down_steps },
		{ "each message type only in its step", test_messages_only_in_their_step },
	};

	return UNIT_RUN("verbs_proto", tests);
}
