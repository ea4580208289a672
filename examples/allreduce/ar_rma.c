/*
 * ar_rma.c - values travel by RMA WRITE into the peer's registered inbox;
 * the write's completion message (WRITTEN, with iter and step) reaches the
 * peer only once the value is in place, so the peer reads its inbox then.
 *
 * Each rank registers its inbox (peers may write it) and its outbox (the
 * local source of the writes) on each of its endpoints, then sends every
 * partner the inbox handle of the endpoint that partner is reached by.
 * A slot [iter % 2][step] is reused two iterations later: by then the
 * reader has consumed the value (no rank gets two iterations ahead of its
 * partners), and the writer waits for the slot's previous write to
 * complete before it overwrites the source.
 */
#include <stddef.h>
#include <string.h>

#include "ar.h"

/* Register the inbox (peers may write it) and the outbox (the local source
 * of the writes) on every endpoint, since a handle is an endpoint's. */
static int register_boxes(struct ar_rank *r)
{
	int rc = CCI_SUCCESS;

	for (int k = 0; rc == CCI_SUCCESS && k < AR_LINKS; k++) {
		struct ar_link *l = &r->links[k];

		if (!l->ep)
			continue;
		rc = ar_check(r, cci_rma_register(l->ep, r->inbox, sizeof(r->inbox),
						  CCI_FLAG_WRITE, &l->inbox_h),
			      "cci_rma_register(inbox)");
		if (rc == CCI_SUCCESS)
			rc = ar_check(r, cci_rma_register(l->ep, r->outbox, sizeof(r->outbox),
							  0, &l->outbox_h),
				      "cci_rma_register(outbox)");
	}
	return rc;
}

static int rma_setup(struct ar_rank *r)
{
	struct ar_msg m = { .type = AR_MSG_HANDLE };
	unsigned have = 0;
	int rc = register_boxes(r);

	for (int i = 0; rc == CCI_SUCCESS && i < r->cfg->n; i++)
		if (r->peers[i].partner) {
			/* the handle of the endpoint this partner writes through */
			memcpy(m.handle, r->peers[i].link->inbox_h, sizeof(m.handle));
			rc = ar_net_send(r, &r->peers[i], &m);
		}
	while (rc == CCI_SUCCESS && have < r->partners) {
		rc = ar_net_progress(r);
		have = 0;
		for (int i = 0; i < r->cfg->n; i++)
			have += r->peers[i].partner && r->peers[i].have_inbox;
	}
	return rc;
}

static uint64_t slot_offset(uint32_t iter, uint32_t step)
{
	return ((iter % 2) * AR_MAX_STEPS + step) * sizeof(double);
}

static int rma_post(struct ar_rank *r, struct ar_peer *peer, uint32_t iter,
		    uint32_t step, double v)
{
	struct ar_msg m = { .type = AR_MSG_WRITTEN, .iter = iter, .step = step };
	bool *busy = &r->out_busy[iter % 2][step];
	int rc = CCI_SUCCESS;

	while (rc == CCI_SUCCESS && *busy)
		rc = ar_net_progress(r);
	if (rc != CCI_SUCCESS)
		return rc;
	r->outbox[iter % 2][step] = v;
	*busy = true;
	for (;;) {
		/* the SEND event's context is the slot, which it frees */
		rc = cci_rma(peer->conn, &m, sizeof(m), peer->link->outbox_h,
			     slot_offset(iter, step), &peer->inbox,
			     slot_offset(iter, step), sizeof(double), busy,
			     CCI_FLAG_WRITE);
		if (rc != CCI_ENOBUFS || !r->inflight)
			break;
		rc = ar_net_progress(r);
		if (rc != CCI_SUCCESS)
			return rc;
	}
	if (rc == CCI_SUCCESS)
		r->inflight++;
	return ar_check(r, rc, "cci_rma");
}

static int rma_on_recv(struct ar_rank *r, struct ar_peer *src, const struct ar_msg *m)
{
	switch (m->type) {
	case AR_MSG_HANDLE:
		memcpy(&src->inbox, m->handle, sizeof(src->inbox));
		src->have_inbox = true;
		return CCI_SUCCESS;
	case AR_MSG_WRITTEN:
		if (m->step >= AR_MAX_STEPS)
			break;
		return ar_stash_put(r, src->rank, m->iter, m->step,
				    r->inbox[m->iter % 2][m->step]);
	default:
		break;
	}
	ar_log(r, "unexpected message type %u from rank %d", m->type, src->rank);
	return CCI_ERROR;
}

static void rma_teardown(struct ar_rank *r)
{
	for (int k = 0; k < AR_LINKS; k++) {
		struct ar_link *l = &r->links[k];

		if (l->inbox_h)
			ar_check(r, cci_rma_deregister(l->ep, l->inbox_h), "cci_rma_deregister");
		if (l->outbox_h)
			ar_check(r, cci_rma_deregister(l->ep, l->outbox_h), "cci_rma_deregister");
		l->inbox_h = l->outbox_h = NULL;
	}
}

const struct ar_exchange ar_rma_exchange = {
	.name = "rma",
	.setup = rma_setup,
	.post = rma_post,
	.on_recv = rma_on_recv,
	.teardown = rma_teardown,
};
