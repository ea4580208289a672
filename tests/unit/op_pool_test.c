/*
 * op_pool_test.c - unit tests of the send-descriptor pool
 * (plugins/common/op_pool.h): the application's objects stop at the
 * budget and control objects do not; the count follows gets and puts
 * whatever their order; a new limit applies to the next get; objects are
 * reused, not remade; a grow callback's objects are the ones handed out;
 * prealloc makes objects ready for use; fini frees them with what hangs on
 * them (ASan's leak check sees the rest); and threads that get and put at
 * once leave the count and the free list whole.
 */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "op_pool.h"
#include "unit_run.h"

struct obj {
	struct cci__op_link link;
	char *buf;                /* what a transport hangs on an object */
	unsigned uses;
};

static unsigned freed_bufs;

static void obj_free(struct cci__op_link *o)
{
	struct obj *ob = (struct obj *)o;

	if (ob->buf) {
		freed_bufs++;
		free(ob->buf);
	}
}

static struct obj *get(struct cci__op_pool *p, int ctl)
{
	return (struct obj *)cci__op_pool_get(p, ctl);
}

static void t_budget(void)
{
	struct cci__op_pool p;
	struct obj *o[4], *c[8];

	cci__op_pool_init(&p, sizeof(struct obj), 4, NULL, NULL, NULL);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(o[i] = get(&p, 0));
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 4);
	CU_ASSERT_PTR_NULL(get(&p, 0)); /* the fifth: past send_buf_count */
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 4);
	for (int i = 0; i < 8; i++) /* control objects: outside the budget */
		CU_ASSERT_PTR_NOT_NULL_FATAL(c[i] = get(&p, 1));
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 4);
	cci__op_pool_put(&p, &c[0]->link); /* a control put frees no budget */
	CU_ASSERT_PTR_NULL(get(&p, 0));
	cci__op_pool_put(&p, &o[2]->link);
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 3);
	CU_ASSERT_PTR_EQUAL(get(&p, 0), o[2]); /* reused, the last put first */
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 4);
	cci__op_pool_fini(&p);
}

static void t_limit_changes(void)
{
	struct cci__op_pool p;
	struct obj *o[3];

	cci__op_pool_init(&p, sizeof(struct obj), 1, NULL, NULL, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o[0] = get(&p, 0));
	CU_ASSERT_PTR_NULL(get(&p, 0));
	cci__op_pool_set_limit(&p, 3);
	CU_ASSERT_EQUAL(cci__op_pool_limit(&p), 3);
	CU_ASSERT_PTR_NOT_NULL_FATAL(o[1] = get(&p, 0));
	CU_ASSERT_PTR_NOT_NULL_FATAL(o[2] = get(&p, 0));
	CU_ASSERT_PTR_NULL(get(&p, 0));
	/* Shrunk below what is out: nothing more until enough came back. */
	cci__op_pool_set_limit(&p, 1);
	cci__op_pool_put(&p, &o[0]->link);
	CU_ASSERT_PTR_NULL(get(&p, 0));
	cci__op_pool_put(&p, &o[1]->link);
	CU_ASSERT_PTR_NULL(get(&p, 0));
	cci__op_pool_put(&p, &o[2]->link);
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 0);
	CU_ASSERT_PTR_NOT_NULL(get(&p, 0));
	cci__op_pool_fini(&p);
}

/* A grow callback: slabs of 4 objects, counted and freed by the test. */
struct slabs {
	struct cci__op_pool *p;
	struct obj *slab[8];
	unsigned n;
	int fail;
};

static int slab_grow(void *owner)
{
	struct slabs *s = owner;

	if (s->fail || s->n == 8 || !(s->slab[s->n] = calloc(4, sizeof(struct obj))))
		return CCI_ENOMEM;
	for (int i = 0; i < 4; i++)
		cci__op_pool_add(s->p, &s->slab[s->n][i].link);
	s->n++;
	return CCI_SUCCESS;
}

static int in_slabs(const struct slabs *s, const struct obj *o)
{
	for (unsigned i = 0; i < s->n; i++)
		if (o >= s->slab[i] && o < s->slab[i] + 4)
			return 1;
	return 0;
}

static void t_grow_callback(void)
{
	struct cci__op_pool p;
	struct slabs s = { .p = &p };
	struct obj *o[6];

	cci__op_pool_init(&p, sizeof(struct obj), 5, slab_grow, &s, NULL);
	for (int i = 0; i < 5; i++) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(o[i] = get(&p, 0));
		CU_ASSERT(in_slabs(&s, o[i]));
	}
	CU_ASSERT_EQUAL(s.n, 2); /* 5 objects: two slabs of 4 */
	CU_ASSERT_EQUAL(cci__op_pool_made(&p), 0); /* the slabs' objects are the test's */
	CU_ASSERT_PTR_NULL(get(&p, 0));
	CU_ASSERT_PTR_NOT_NULL_FATAL(o[5] = get(&p, 1));
	CU_ASSERT_EQUAL(s.n, 2); /* the second slab's rest served it */
	for (int i = 0; i < 6; i++)
		cci__op_pool_put(&p, &o[i]->link);
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 0);
	/* Memory runs out: NULL, and the budget is not taken. */
	for (int i = 0; i < 5; i++)
		CU_ASSERT_PTR_NOT_NULL_FATAL(o[i] = get(&p, 1));
	s.fail = 1;
	for (int i = 0; i < 3; i++)
		CU_ASSERT_PTR_NOT_NULL(get(&p, 1));
	CU_ASSERT_PTR_NULL(get(&p, 0));
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 0);
	cci__op_pool_fini(&p); /* the slabs are the test's */
	for (unsigned i = 0; i < s.n; i++)
		free(s.slab[i]);
}

static int give_buf(struct cci__op_link *o)
{
	struct obj *ob = (struct obj *)o;

	ob->buf = malloc(64);
	return ob->buf ? CCI_SUCCESS : CCI_ENOMEM;
}

static void t_prealloc_and_fini(void)
{
	struct cci__op_pool p;
	struct obj *o[5];
	int with_buf = 0;

	freed_bufs = 0;
	cci__op_pool_init(&p, sizeof(struct obj), 100, NULL, NULL, obj_free);
	CU_ASSERT_EQUAL_FATAL(cci__op_pool_prealloc(&p, 4, give_buf), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci__op_pool_out(&p), 0);
	CU_ASSERT_EQUAL(cci__op_pool_made(&p), 4);
	for (int i = 0; i < 5; i++) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(o[i] = get(&p, 0));
		with_buf += o[i]->buf != NULL;
	}
	CU_ASSERT_EQUAL(with_buf, 4); /* the fifth was made on demand, bare */
	CU_ASSERT_EQUAL(cci__op_pool_made(&p), 5);
	cci__op_pool_put(&p, &o[0]->link);
	/* Objects still out are freed too, with what hangs on them. */
	cci__op_pool_fini(&p);
	CU_ASSERT_EQUAL(freed_bufs, 4);
}

#define THREADS 4
#define ROUNDS 20000
#define LIMIT 6

static struct cci__op_pool shared;
static _Atomic unsigned over_budget;

static void *churn(void *arg)
{
	struct obj *held[3];
	int ctl = (int)(uintptr_t)arg & 1;

	for (int r = 0; r < ROUNDS; r++) {
		int n = 0;

		for (int i = 0; i < 3; i++)
			if ((held[n] = get(&shared, ctl)) != NULL) {
				held[n]->uses++;
				n++;
			}
		if (cci__op_pool_out(&shared) > LIMIT)
			atomic_fetch_add(&over_budget, 1);
		while (n > 0)
			cci__op_pool_put(&shared, &held[--n]->link);
	}
	return NULL;
}

static void t_threads(void)
{
	pthread_t t[THREADS];
	unsigned free_count = 0;

	cci__op_pool_init(&shared, sizeof(struct obj), LIMIT, NULL, NULL, NULL);
	for (uintptr_t i = 0; i < THREADS; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, churn, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CU_ASSERT_EQUAL(atomic_load(&over_budget), 0);
	CU_ASSERT_EQUAL(cci__op_pool_out(&shared), 0);
	/* Every object made is free once, and no more were made than could
	 * be out at once (the budget, 3 per control thread) plus one per
	 * thread that found the list empty while another put one back. */
	for (struct cci__op_link *o = shared.free; o && free_count < 1000; o = o->next)
		free_count++;
	{
		unsigned made = 0;

		for (struct cci__op_link *o = shared.all; o; o = o->all_next)
			made++;
		CU_ASSERT_EQUAL(free_count, made);
		CU_ASSERT_EQUAL(cci__op_pool_made(&shared), made);
		CU_ASSERT(made <= LIMIT + 3 * (THREADS / 2) + THREADS);
	}
	cci__op_pool_fini(&shared);
}

static const struct unit_test tests[] = {
	{ "the application's objects stop at the budget, control objects do not", t_budget },
	{ "a new limit applies to the next get, also below what is out", t_limit_changes },
	{ "a grow callback's objects are handed out; no memory takes no budget", t_grow_callback },
	{ "prealloc readies objects; fini frees every one with what hangs on it", t_prealloc_and_fini },
	{ "threads getting and putting at once keep the count and the free list whole", t_threads },
};

int main(void)
{
	return UNIT_RUN("send-descriptor pool", tests);
}
