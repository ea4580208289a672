/*
 * lender_test.c - unit tests of the receive-buffer lender
 * (plugins/common/lender.h): takes stop at recv_buf_count; a buffer that
 * came back counts as out until the receive side collects it; a lower
 * limit holds takes back until enough came back; and buffers returned by
 * many threads at once while the receive side takes and collects are
 * each collected exactly once.
 */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "lender.h"
#include "unit_run.h"

struct buf {
	int id;
	struct cci__lent lent;   /* not the first member: found back by offset */
	int collected;
};

static struct buf *buf_of(struct cci__lent *b)
{
	return (struct buf *)((char *)b - offsetof(struct buf, lent));
}

static unsigned collect_count(struct cci__lender *l)
{
	unsigned n = 0;

	for (struct cci__lent *b = cci__lender_collect(l); b; b = b->next) {
		buf_of(b)->collected++;
		n++;
	}
	return n;
}

static void t_limit(void)
{
	struct cci__lender l;
	struct buf b[4] = { { .id = 0 }, { .id = 1 }, { .id = 2 }, { .id = 3 } };

	cci__lender_init(&l, 3);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_TRUE(cci__lender_take(&l));
	CU_ASSERT_FALSE(cci__lender_take(&l)); /* starved */
	CU_ASSERT_FALSE(cci__lender_available(&l));
	cci__lender_return(&l, &b[1].lent);
	CU_ASSERT_TRUE(cci__lender_returned(&l));
	CU_ASSERT_TRUE(cci__lender_available(&l)); /* once collected */
	CU_ASSERT_FALSE(cci__lender_take(&l));     /* not before */
	CU_ASSERT_EQUAL(collect_count(&l), 1);
	CU_ASSERT_EQUAL(b[1].collected, 1);
	CU_ASSERT_FALSE(cci__lender_returned(&l));
	CU_ASSERT_TRUE(cci__lender_take(&l));
	CU_ASSERT_FALSE(cci__lender_take(&l));
	CU_ASSERT_EQUAL(collect_count(&l), 0); /* nothing came back */
}

static void t_lower_limit(void)
{
	struct cci__lender l;
	struct buf b[4] = { { .id = 0 } };

	cci__lender_init(&l, 4);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_TRUE(cci__lender_take(&l));
	cci__lender_set_limit(&l, 2);
	CU_ASSERT_EQUAL(cci__lender_limit(&l), 2);
	cci__lender_return(&l, &b[0].lent);
	cci__lender_return(&l, &b[1].lent);
	CU_ASSERT_EQUAL(collect_count(&l), 2);
	CU_ASSERT_FALSE(cci__lender_take(&l)); /* 2 out: at the new limit */
	cci__lender_return(&l, &b[2].lent);
	CU_ASSERT_EQUAL(collect_count(&l), 1);
	CU_ASSERT_TRUE(cci__lender_take(&l));
	cci__lender_set_limit(&l, 8);
	CU_ASSERT_TRUE(cci__lender_take(&l));
}

#define RETURNERS 3
#define BUFS 64
#define ROUNDS 20000

/* The receive side lends buffers to a ring of returner threads, which
 * give each back; every buffer is lent again only once collected. */
static struct cci__lender shared;
static struct buf pool[BUFS];
static _Atomic(struct buf *) handed[RETURNERS];
static _Atomic int stop;

static void *returner(void *arg)
{
	_Atomic(struct buf *) *slot = &handed[(uintptr_t)arg];

	while (!atomic_load(&stop)) {
		struct buf *b = atomic_exchange(slot, NULL);

		if (b)
			cci__lender_return(&shared, &b->lent);
	}
	return NULL;
}

static void t_threads(void)
{
	pthread_t t[RETURNERS];
	struct buf *free_list[BUFS];
	unsigned nfree = BUFS, lent = 0, back = 0, over = 0;
	time_t deadline = 0;

	cci__lender_init(&shared, 16);
	for (int i = 0; i < BUFS; i++)
		free_list[i] = &pool[i];
	for (uintptr_t i = 0; i < RETURNERS; i++)
		CU_ASSERT_EQUAL_FATAL(pthread_create(&t[i], NULL, returner, (void *)i), 0);
	for (unsigned r = 0; r < ROUNDS || back < lent; r++) {
		struct cci__lent *c = cci__lender_collect(&shared);

		for (; c; c = c->next, back++)
			free_list[nfree++] = buf_of(c);
		if (r < ROUNDS && nfree > 0 && cci__lender_take(&shared)) {
			struct buf *b = free_list[--nfree], *none = NULL;

			/* A returner still busy: given back at once, as a
			 * transport's failed post does. */
			if (!atomic_compare_exchange_strong(&handed[r % RETURNERS], &none, b))
				cci__lender_return(&shared, &b->lent);
			lent++;
		}
		over += cci__lender_out(&shared) > 16;
		if (r >= ROUNDS) {
			/* The returners may have no core now: give them ours, for
			 * at most 10 s (the assertions below report a loss). */
			if (!deadline)
				deadline = time(NULL) + 10;
			if (time(NULL) > deadline)
				break;
			sched_yield();
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < RETURNERS; i++)
		pthread_join(t[i], NULL);
	CU_ASSERT_EQUAL(over, 0);
	CU_ASSERT_EQUAL(back, lent);
	CU_ASSERT_EQUAL(cci__lender_out(&shared), 0);
	CU_ASSERT_EQUAL(nfree, BUFS);
	CU_ASSERT(lent > 0);
}

static const struct unit_test tests[] = {
	{ "takes stop at the limit; a returned buffer counts until it is collected", t_limit },
	{ "a lower limit holds takes back until enough came back", t_lower_limit },
	{ "buffers returned by many threads at once are each collected once", t_threads },
};

int main(void)
{
	return UNIT_RUN("receive-buffer lender", tests);
}
