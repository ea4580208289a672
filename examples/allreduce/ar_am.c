/*
 * ar_am.c - values travel inside active messages.
 */
#include "ar.h"

static int am_setup(struct ar_rank *r)
{
	(void)r;
	return CCI_SUCCESS;
}

static int am_post(struct ar_rank *r, struct ar_peer *peer, uint32_t iter,
		   uint32_t step, double v)
{
	struct ar_msg m = { .type = AR_MSG_VALUE, .iter = iter, .step = step,
			    .value = v };

	return ar_net_send(r, peer, &m);
}

static int am_on_recv(struct ar_rank *r, struct ar_peer *src, const struct ar_msg *m)
{
	if (m->type != AR_MSG_VALUE) {
		ar_log(r, "unexpected message type %u from rank %d", m->type, src->rank);
		return CCI_ERROR;
	}
	return ar_stash_put(r, src->rank, m->iter, m->step, m->value);
}

static void am_teardown(struct ar_rank *r)
{
	(void)r;
}

const struct ar_exchange ar_am_exchange = {
	.name = "am",
	.setup = am_setup,
	.post = am_post,
	.on_recv = am_on_recv,
	.teardown = am_teardown,
};
