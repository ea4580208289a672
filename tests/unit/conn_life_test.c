/*
 * conn_life_test.c - unit tests of a connection object's lifetime
 * (plugins/common/conn_life.h): a new object is held once; only the drop
 * of the last hold says so; when many threads hold and drop one object at
 * once exactly one drop is the last; objects pushed on the graves by many
 * threads are each taken exactly once.
 */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdlib.h>

#include "conn_life.h"
#include "unit_run.h"

static void t_last_drop(void)
{
	struct cci__conn_life l;

	cci__conn_life_init(&l);
	CU_ASSERT_EQUAL(cci__conn_holds(&l), 1);
	cci__conn_hold(&l); /* a RECV event lent */
	cci__conn_hold(&l); /* a send in flight */
	CU_ASSERT_FALSE(cci__conn_drop(&l)); /* the connection's own: disconnected */
	CU_ASSERT_FALSE(cci__conn_drop(&l));
	CU_ASSERT_EQUAL(cci__conn_holds(&l), 1);
	CU_ASSERT_TRUE(cci__conn_drop(&l));
	CU_ASSERT_EQUAL(cci__conn_holds(&l), 0);
}

#define THREADS 4
#define ROUNDS 100000

struct obj {
	struct cci__conn_life life;
	int freed;
};

static struct cci__conn_graves graves;
static struct obj objs[THREADS * 64];
static _Atomic int lasts;

/* Each thread holds and drops the shared object ROUNDS times, then drops
 * the hold it was given; it also kills objects of its own through the
 * graves. */
static void *worker(void *arg)
{
	struct obj *shared = arg;

	for (int i = 0; i < ROUNDS; i++) {
		cci__conn_hold(&shared->life);
		if (cci__conn_drop(&shared->life))
			atomic_fetch_add(&lasts, 1); /* never: the given hold stays */
	}
	if (cci__conn_drop(&shared->life))
		atomic_fetch_add(&lasts, 1);
	return NULL;
}

static void *killer(void *arg)
{
	struct obj *mine = arg;

	for (int i = 0; i < 64; i++)
		if (cci__conn_drop(&mine[i].life))
			cci__conn_graves_push(&graves, &mine[i].life);
	return NULL;
}

static void t_threads(void)
{
	pthread_t t[THREADS], k[THREADS];
	struct obj shared = { .freed = 0 };
	unsigned taken = 0;

	cci__conn_life_init(&shared.life);
	for (int i = 0; i < THREADS - 1; i++) /* one hold per worker, the first is its own */
		cci__conn_hold(&shared.life);
	cci__conn_graves_init(&graves);
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
		cci__conn_life_init(&objs[i].life);
	for (int i = 0; i < THREADS; i++) {
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, worker, &shared), 0);
		CU_ASSERT_EQUAL_FATAL(pthread_create(&k[i], NULL, killer, &objs[i * 64]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		/* Taken while the killers push: the consumer takes whole stacks. */
		for (struct cci__conn_life *l = cci__conn_graves_take(&graves), *n; l; l = n) {
			n = l->next_grave;
			((struct obj *)l)->freed++;
			taken++;
		}
		pthread_join(t[i], NULL);
		pthread_join(k[i], NULL);
	}
	for (struct cci__conn_life *l = cci__conn_graves_take(&graves), *n; l; l = n) {
		n = l->next_grave;
		((struct obj *)l)->freed++;
		taken++;
	}
	CU_ASSERT_EQUAL(atomic_load(&lasts), 1);
	CU_ASSERT_EQUAL(cci__conn_holds(&shared.life), 0);
	CU_ASSERT_EQUAL(taken, sizeof(objs) / sizeof(objs[0]));
	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++)
		CU_ASSERT_EQUAL(objs[i].freed, 1);
	CU_ASSERT_PTR_NULL(cci__conn_graves_take(&graves));
}

static const struct unit_test tests[] = {
	{ "a new object is held once and only the last drop says so", t_last_drop },
	{ "many threads hold and drop at once: exactly one drop is the last, "
	  "and every object on the graves is taken once", t_threads },
};

int main(void)
{
	return UNIT_RUN("connection lifetime", tests);
}
