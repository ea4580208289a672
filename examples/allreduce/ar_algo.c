/*
 * ar_algo.c - allreduce by recursive doubling.
 *
 * With p the largest power of two <= n: ranks p..n-1 first hand their
 * value to rank - p (step 0, the fold-in); ranks 0..p-1 then exchange
 * with rank ^ 2^k in rounds k = 0..log2(p)-1 (steps 1..), each adding
 * what it gets; last, ranks below n - p hand the sum back (the fold-out).
 * Both partners of a round compute a + b from the same two numbers, and
 * IEEE addition is commutative, so every rank ends with the same bits.
 */
#include "ar.h"

struct ar_shape {
	int p, log2p, extra; /* power of two, its log, ranks beyond it */
};

static struct ar_shape shape_of(int n)
{
	struct ar_shape s = { .p = 1 };

	while (s.p * 2 <= n) {
		s.p *= 2;
		s.log2p++;
	}
	s.extra = n - s.p;
	return s;
}

void ar_schedule(struct ar_rank *r)
{
	struct ar_shape s = shape_of(r->cfg->n);
	int me = r->rank;

	if (me >= s.p) {
		r->peers[me - s.p].partner = true;
	} else {
		for (int k = 0; k < s.log2p; k++)
			r->peers[me ^ (1 << k)].partner = true;
		if (me < s.extra)
			r->peers[me + s.p].partner = true;
	}
	r->partners = 0;
	for (int i = 0; i < r->cfg->n; i++)
		r->partners += r->peers[i].partner;
}

/* Send v for (iter, step) to peer, then wait for the peer's value. */
static int exchange(struct ar_rank *r, int peer, uint32_t iter, uint32_t step,
		    double v, double *got)
{
	int rc = r->cfg->ex->post(r, &r->peers[peer], iter, step, v);

	if (rc != CCI_SUCCESS)
		return rc;
	return ar_stash_wait(r, peer, iter, step, got);
}

int ar_allreduce(struct ar_rank *r, uint32_t iter, double in, double *out)
{
	struct ar_shape s = shape_of(r->cfg->n);
	uint32_t last = (uint32_t)s.log2p + 1;
	int me = r->rank, rc = CCI_SUCCESS;
	double v = in, w;

	if (me >= s.p) {
		rc = r->cfg->ex->post(r, &r->peers[me - s.p], iter, 0, v);
		if (rc == CCI_SUCCESS)
			rc = ar_stash_wait(r, me - s.p, iter, last, out);
		return rc;
	}
	if (me < s.extra) {
		rc = ar_stash_wait(r, me + s.p, iter, 0, &w);
		v += w;
	}
	for (int k = 0; rc == CCI_SUCCESS && k < s.log2p; k++) {
		rc = exchange(r, me ^ (1 << k), iter, (uint32_t)k + 1, v, &w);
		v += w;
	}
	if (rc == CCI_SUCCESS && me < s.extra)
		rc = r->cfg->ex->post(r, &r->peers[me + s.p], iter, last, v);
	*out = v;
	return rc;
}
