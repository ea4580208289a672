/*
 * ar_rank.c - one rank: open an endpoint, publish its URI, connect to its
 * partners, integrate its slice, then one untimed allreduce (every rank
 * is up once it completes) and cfg->iters timed ones, each result checked
 * against the single-process value.  Rank 0 writes the timing to
 * <dir>/result for the launcher, or prints it when started by mpirun or
 * another launcher of libcci_wire.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ar.h"
#include "ex_util.h"

#define AR_TOLERANCE 1e-12

/* A result must match the reference to AR_TOLERANCE, and be the same
 * bits every time. */
static bool result_ok(struct ar_rank *r, uint32_t iter, double got, double first)
{
	double ref = r->cfg->reference;
	double err = fabs(got - ref) / fabs(ref);

	if (err <= AR_TOLERANCE && (iter == 0 || got == first))
		return true;
	ar_log(r, "allreduce %u gave %.17g (reference %.17g, first %.17g)", iter,
	       got, ref, first);
	return false;
}

static void write_result(struct ar_rank *r, double us, double sum)
{
	char path[512], tmp[520];
	FILE *f;

	if (r->cfg->wire) {
		/* No launcher of ours to read a file: the line is rank 0's. */
		printf("%-4s N=%d  %10.2f us per allreduce  pi = %.15f  rel. error %.1e  ok\n",
		       r->cfg->ex->name, r->cfg->n, us, sum,
		       fabs(sum - r->cfg->reference) / r->cfg->reference);
		fflush(stdout);
		return;
	}

	snprintf(path, sizeof(path), "%s/result", r->cfg->dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%.6f %.17g\n", us, sum) < 0 || fclose(f) != 0 ||
	    rename(tmp, path) != 0)
		ar_log(r, "cannot write %s", path);
}

/* The allreduces; CCI_ERROR when a result is wrong. */
static int run_allreduces(struct ar_rank *r)
{
	const struct ar_config *c = r->cfg;
	uint64_t first = (uint64_t)r->rank * c->intervals / (uint64_t)c->n;
	uint64_t last = (uint64_t)(r->rank + 1) * c->intervals / (uint64_t)c->n;
	double part = ar_pi_partial(c->intervals, first, last), sum0 = 0, sum;
	uint64_t t0 = 0;
	int rc = CCI_SUCCESS;

	for (uint32_t k = 0; rc == CCI_SUCCESS && k <= c->iters; k++) {
		if (k == 1)
			t0 = ex_now_ns();
		rc = ar_allreduce(r, k, part, &sum);
		if (rc == CCI_SUCCESS && !result_ok(r, k, sum, sum0))
			rc = CCI_ERROR;
		if (k == 0)
			sum0 = sum;
	}
	if (rc == CCI_SUCCESS && r->rank == 0)
		write_result(r, c->iters ? (double)(ex_now_ns() - t0) / 1e3 / c->iters : 0,
			     sum0);
	return rc;
}

int ar_rank_main(const struct ar_config *cfg, int rank)
{
	struct ar_rank *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return EXIT_FAILURE;
	r->cfg = cfg;
	r->rank = rank;
	r->deadline_ns = ex_deadline_ms(cfg->time_limit_s * 1000ull);
	for (int i = 0; i < cfg->n; i++)
		r->peers[i].rank = i;
	ar_schedule(r);
	rc = ar_check(r, cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), "cci_init");
	if (rc != CCI_SUCCESS)
		goto out_free;
	rc = ar_net_open(r);
	if (rc == CCI_SUCCESS)
		rc = ar_net_connect(r);
	if (rc == CCI_SUCCESS)
		rc = cfg->ex->setup(r);
	if (rc == CCI_SUCCESS)
		rc = run_allreduces(r);
	/* our last messages must arrive before the connections close */
	if (rc == CCI_SUCCESS)
		rc = ar_net_drain(r);
	cfg->ex->teardown(r);
	ar_net_close(r);
	cci_finalize();
out_free:
	free(r);
	return rc == CCI_SUCCESS ? EXIT_SUCCESS : EXIT_FAILURE;
}
