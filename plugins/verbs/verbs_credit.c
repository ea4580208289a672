/*
 * verbs_credit.c - credit accounting, the selective-signalling rule and
 * the send queue's accounting by serial numbers (verbs_proto.h says why
 * each exists).  Pure: the connection's lock is the caller's.
 */
#include "verbs_proto.h"

void verbs_credit_init(struct verbs_credit *c, uint32_t granted_by_peer, uint32_t our_window)
{
	*c = (struct verbs_credit){ .tx = granted_by_peer, .tx_max = granted_by_peer,
	                            .window = our_window };
}

int verbs_credit_take(struct verbs_credit *c)
{
	if (c->tx == 0)
		return 0;
	c->tx--;
	return 1;
}

int verbs_credit_rx(struct verbs_credit *c)
{
	if (c->rx_used + c->owed >= c->window)
		return CCI_ERROR;
	c->rx_used++;
	return CCI_SUCCESS;
}

void verbs_credit_returned(struct verbs_credit *c)
{
	if (c->rx_used == 0)
		return;
	c->rx_used--;
	c->owed++;
}

int verbs_credit_in(struct verbs_credit *c, uint32_t n)
{
	if (n > c->tx_max || c->tx > c->tx_max - n)
		return CCI_ERROR;
	c->tx += n;
	return CCI_SUCCESS;
}

uint16_t verbs_credit_piggyback(struct verbs_credit *c)
{
	uint32_t n = c->owed > 0xffffu ? 0xffffu : c->owed;

	c->owed -= n;
	return (uint16_t)n;
}

int verbs_type_spends_credit(int type)
{
	return type == VERBS_T_MSG || type == VERBS_T_REQ || type == VERBS_T_ACCEPT ||
	       type == VERBS_T_REJECT;
}

int verbs_credit_explicit_due(const struct verbs_credit *c)
{
	uint32_t quarter = c->window / 4 ? c->window / 4 : 1;

	return c->owed >= quarter;
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
