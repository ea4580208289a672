/*
 * verbs_fsm.c - the set-up steps of a verbs connection (enum verbs_step):
 * which rdma_cm event or message is expected in which step, and what to
 * do about it.  Pure, so that every transition is unit-tested without a
 * device; verbs_hs.c carries out the actions.
 */
#include "verbs_proto.h"

/* Events that end an attempt or a connection, whatever the step. */
static enum verbs_act cm_end(int step, int ev, int *status_p)
{
	int open = step == VERBS_STEP_OPEN;

	switch (ev) {
	case VERBS_CM_REJECTED:
		*status_p = CCI_ECONNREFUSED;
		return open ? VERBS_ACT_NONE : VERBS_ACT_FAIL;
	case VERBS_CM_ADDR_ERROR:
	case VERBS_CM_ROUTE_ERROR:
		*status_p = CCI_EADDRNOTAVAIL;
		return open ? VERBS_ACT_NONE : VERBS_ACT_FAIL;
	case VERBS_CM_UNREACHABLE:
	case VERBS_CM_CONNECT_ERROR:
		*status_p = CCI_ECONNREFUSED;
		return open ? VERBS_ACT_BREAK : VERBS_ACT_FAIL;
	case VERBS_CM_DISCONNECTED:
		*status_p = CCI_ERR_DISCONNECTED;
		return open ? VERBS_ACT_BREAK : VERBS_ACT_FAIL;
	case VERBS_CM_DEVICE_REMOVAL:
		*status_p = CCI_ERR_DEVICE_DEAD;
		return VERBS_ACT_DEVICE;
	default:
		return VERBS_ACT_NONE;
	}
}

enum verbs_act verbs_fsm_cm(int step, int is_client, int ev, int *status_p)
{
	if (step == VERBS_STEP_DOWN)
		return VERBS_ACT_NONE;
	if (is_client && step == VERBS_STEP_ADDR && ev == VERBS_CM_ADDR_RESOLVED)
		return VERBS_ACT_RESOLVE_ROUTE;
	if (is_client && step == VERBS_STEP_ROUTE && ev == VERBS_CM_ROUTE_RESOLVED)
		return VERBS_ACT_CONNECT;
	if (step == VERBS_STEP_CM && ev == VERBS_CM_ESTABLISHED)
		return is_client ? VERBS_ACT_SEND_REQ : VERBS_ACT_WAIT_REQ;
	if (ev == VERBS_CM_ADDR_RESOLVED || ev == VERBS_CM_ROUTE_RESOLVED ||
	    ev == VERBS_CM_ESTABLISHED) {
		/* out of step: the peer or the library misbehaves */
		*status_p = CCI_ERROR;
		return step == VERBS_STEP_OPEN ? VERBS_ACT_BREAK : VERBS_ACT_FAIL;
	}
	return cm_end(step, ev, status_p);
}

int verbs_fsm_msg_ok(int step, int is_client, int type)
{
	switch (type) {
	case VERBS_T_REQ:
		return !is_client && step == VERBS_STEP_WAIT_REQ;
	case VERBS_T_ACCEPT:
	case VERBS_T_REJECT:
		return is_client && step == VERBS_STEP_ANSWER;
	case VERBS_T_MSG:
	case VERBS_T_MR_REQ:
	case VERBS_T_MR_REP:
	case VERBS_T_MR_INVAL:
		return step == VERBS_STEP_OPEN;
	case VERBS_T_CREDIT:
	case VERBS_T_PING:
	case VERBS_T_PONG:
		return step == VERBS_STEP_OPEN || step == VERBS_STEP_ANSWER ||
		       step == VERBS_STEP_WAIT_REQ || step == VERBS_STEP_DECIDE;
	default:
		return 0;
	}
}
