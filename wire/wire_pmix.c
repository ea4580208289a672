/*
 * wire_pmix.c - the PMIx backend (Open MPI's mpirun, srun --mpi=pmix),
 * built when libpmix-dev is found; libcci_wire then links libpmix, libcci
 * never does.
 *
 * A fence is PMIx_Commit and a non-blocking PMIx_Fence_nb that collects
 * the data, so the caller's wait can watch the ranks of its host and its
 * deadline instead of blocking inside PMIx.  Its callback runs on PMIx's
 * progress thread: it only stores the status and raises a flag.  A fence
 * that Open MPI's server fails because a rank died (PMIX_ERR_PARTIAL_SUCCESS)
 * comes back as CCI_WIRE_ELAUNCHER; wire.c then names the rank if it ran
 * on this host.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pmix.h>

#include "wire_int.h"

struct pmix_state {
	pmix_proc_t me;
	pmix_info_t collect;       /* read by PMIx until the fence's callback */
	pmix_info_t optional;
	atomic_int fence_done;
	atomic_int fence_status;
};

static void fence_cb(pmix_status_t status, void *cbdata)
{
	struct pmix_state *s = cbdata;

	atomic_store(&s->fence_status, status);
	atomic_store(&s->fence_done, 1);
}

static int pmix_put(struct cci_wire *w, const char *key, const char *value)
{
	pmix_value_t v;
	pmix_status_t rc;

	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_STRING;
	v.data.string = strdup(value);
	if (!v.data.string)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for key '%s'", key);
	rc = PMIx_Put(PMIX_GLOBAL, key, &v);
	PMIX_VALUE_DESTRUCT(&v);
	if (rc != PMIX_SUCCESS)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMIx_Put of key '%s': %s", key,
		                 PMIx_Error_string(rc));
	return CCI_WIRE_SUCCESS;
}

static int pmix_fence_start(struct cci_wire *w)
{
	struct pmix_state *s = w->state;
	pmix_status_t rc = PMIx_Commit();

	if (rc != PMIX_SUCCESS)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMIx_Commit: %s", PMIx_Error_string(rc));
	atomic_store(&s->fence_done, 0);
	rc = PMIx_Fence_nb(NULL, 0, &s->collect, 1, fence_cb, s);
	if (rc != PMIX_SUCCESS)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMIx_Fence_nb: %s",
		                 PMIx_Error_string(rc));
	return CCI_WIRE_SUCCESS;
}

static int pmix_fence_test(struct cci_wire *w, int *done_p)
{
	struct pmix_state *s = w->state;
	const struct timespec nap = { .tv_nsec = 2000000L };
	pmix_status_t rc;

	*done_p = atomic_load(&s->fence_done);
	if (!*done_p) {
		nanosleep(&nap, NULL);
		return CCI_WIRE_SUCCESS;
	}
	rc = atomic_load(&s->fence_status);
	if (rc != PMIX_SUCCESS)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMIx_Fence: %s", PMIx_Error_string(rc));
	return CCI_WIRE_SUCCESS;
}

static int pmix_get(struct cci_wire *w, int rank, const char *key, char **value_p)
{
	struct pmix_state *s = w->state;
	pmix_value_t *v = NULL;
	pmix_proc_t proc;
	pmix_status_t rc;

	PMIX_PROC_LOAD(&proc, s->me.nspace, (pmix_rank_t)rank);
	/* The fence collected every value: one not here was never put, and
	 * PMIX_OPTIONAL keeps PMIx from asking the server to wait for it. */
	rc = PMIx_Get(&proc, key, &s->optional, 1, &v);
	if (rc == PMIX_ERR_NOT_FOUND)
		return wire_fail(w, CCI_WIRE_ENOTFOUND, rank,
		                 "rank %d put no key '%s' before the last fence", rank, key);
	if (rc != PMIX_SUCCESS)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, rank, "PMIx_Get of key '%s' of rank %d: %s",
		                 key, rank, PMIx_Error_string(rc));
	if (v->type != PMIX_STRING || !v->data.string) {
		PMIX_VALUE_RELEASE(v);
		return wire_fail(w, CCI_WIRE_ELAUNCHER, rank,
		                 "PMIx_Get of key '%s' of rank %d: not a string", key, rank);
	}
	*value_p = strdup(v->data.string);
	PMIX_VALUE_RELEASE(v);
	return *value_p ? CCI_WIRE_SUCCESS
	                : wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for key '%s'", key);
}

static void pmix_finalize(struct cci_wire *w)
{
	struct pmix_state *s = w->state;

	/* A fence still pending holds s as its callback's argument: PMIx may
	 * still call it until PMIx_Finalize returns. */
	PMIx_Finalize(NULL, 0);
	PMIX_INFO_DESTRUCT(&s->collect);
	PMIX_INFO_DESTRUCT(&s->optional);
	free(s);
	w->state = NULL;
}

static const struct wire_backend pmix_ops = {
	.name = "pmix",
	.put = pmix_put,
	.fence_start = pmix_fence_start,
	.fence_test = pmix_fence_test,
	.get = pmix_get,
	.finalize = pmix_finalize,
};

static int job_size(struct cci_wire *w, struct pmix_state *s)
{
	pmix_value_t *v = NULL;
	pmix_proc_t job;
	pmix_status_t rc;

	PMIX_PROC_LOAD(&job, s->me.nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
	if (rc != PMIX_SUCCESS)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMIx_Get of PMIX_JOB_SIZE: %s",
		                 PMIx_Error_string(rc));
	w->size = v->type == PMIX_UINT32 ? (int)v->data.uint32 : -1;
	PMIX_VALUE_RELEASE(v);
	if (w->size < 1)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMIX_JOB_SIZE is not a positive uint32");
	return CCI_WIRE_SUCCESS;
}

int wire_pmix_open(struct cci_wire *w)
{
	struct pmix_state *s;
	pmix_status_t rc;
	bool collect = true;        /* also the value of PMIX_OPTIONAL */

	if (!getenv("PMIX_RANK") || !getenv("PMIX_NAMESPACE"))
		return CCI_WIRE_ENOLAUNCHER;
	s = calloc(1, sizeof(*s));
	if (!s)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory");
	rc = PMIx_Init(&s->me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		free(s);
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
		                 "PMIx_Init (PMIX_NAMESPACE=%s, PMIX_RANK=%s): %s",
		                 getenv("PMIX_NAMESPACE"), getenv("PMIX_RANK"), PMIx_Error_string(rc));
	}
	PMIX_INFO_LOAD(&s->collect, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	PMIX_INFO_LOAD(&s->optional, PMIX_OPTIONAL, &collect, PMIX_BOOL);
	w->state = s;
	w->ops = &pmix_ops;
	w->rank = (int)s->me.rank;
	if (job_size(w, s) != CCI_WIRE_SUCCESS) {
		pmix_finalize(w);
		return CCI_WIRE_ELAUNCHER;
	}
	return CCI_WIRE_SUCCESS;
}
