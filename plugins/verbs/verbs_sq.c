/*
 * verbs_sq.c - which messages spend a credit, the selective-signalling
 * rule and the send queue's accounting by serial numbers (verbs_proto.h
 * says why each exists).  Pure: the connection's lock is the caller's.
 */
#include "verbs_proto.h"

int verbs_type_spends_credit(int type)
{
	return type == VERBS_T_MSG || type == VERBS_T_REQ || type == VERBS_T_ACCEPT ||
	       type == VERBS_T_REJECT;
}

int verbs_sq_fits(uint64_t posted, uint64_t done, uint64_t need, uint32_t sq_depth)
{
	uint64_t in_queue = posted >= done ? posted - done : 0;

	return need <= sq_depth && in_queue <= sq_depth - need;
}

uint64_t verbs_rma_wrs(uint64_t rlen, uint64_t max_msg, int has_msg)
{
	return rlen / max_msg + (rlen % max_msg != 0) + (has_msg != 0);
}

int verbs_op_status(uint64_t op_serial, uint64_t done_serial, int status)
{
	if (op_serial < done_serial)
		return CCI_SUCCESS;
	return op_serial == done_serial ? status : -1;
}

int verbs_signal_wanted(uint32_t unsignaled, uint32_t sq_depth, int last)
{
	uint32_t half = sq_depth / 2 ? sq_depth / 2 : 1;

	return last || unsignaled + 1 >= half || unsignaled + 1 >= VERBS_SIGNAL_EVERY;
}
