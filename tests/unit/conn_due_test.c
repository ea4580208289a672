/*
 * conn_due_test.c - unit tests of the due heap (plugins/common/conn_due.h)
 * and of the tick that visits only the connections it says are due
 * (cci__conn_due_tick, conn_base.h): the heap gives entries back in time
 * order whatever moves and removals came between; idle connections cost a
 * tick nothing; a keepalive costs a visit per probe, not one per tick; a
 * send timeout and a connect deadline act as early as with a tick that
 * visits every connection; a connection the tick frees is not touched
 * again (AddressSanitizer would say so).
 */
#include <CUnit/Basic.h>
#include <stdlib.h>

#include "cci.h"
#include "conn_base.h"
#include "recorder_core.h"
#include "unit_run.h"

#define MS 1000000ull /* ns */

static cci__dev_t dev = { .pub = { .transport = "fake" } };
static cci__ep_t ep = { .dev = &dev };

/* A plugin connection, its base first, with its calls counted. */
struct fake_conn {
	struct cci__conn_base base;
	cci__conn_t conn;
	uint64_t oldest;
	int visits, pings, connect_expiries, send_expiries;
	uint64_t send_expired_at;
};

static uint64_t oldest(void *pc) { return ((struct fake_conn *)pc)->oldest; }
static void ping(void *pc) { ((struct fake_conn *)pc)->pings++; }
static cci__conn_t *conn_of(void *pc) { return &((struct fake_conn *)pc)->conn; }

static uint64_t now_ns; /* the tick's time, for send_expired's record */

static void send_expired(void *pc)
{
	struct fake_conn *f = pc;

	f->send_expiries++;
	f->send_expired_at = now_ns;
	cci__conn_move(&f->base, CCI__CONN_BROKEN, &core, NULL);
}

static uint64_t visit(void *pc, uint64_t now)
{
	(void)now;
	((struct fake_conn *)pc)->visits++;
	return CCI__DUE_NEVER;
}

/* As sock's expired connect: the connection is released by the tick. */
static int freed;
static void connect_expired_frees(void *pc)
{
	freed++;
	free(pc);
}

static const struct cci__conn_tick_ops ops = {
	.oldest_send_ns = oldest,
	.ping = ping,
	.connect_expired = connect_expired_frees,
	.send_expired = send_expired,
	.conn_of = conn_of,
	.visit = visit,
};

static struct fake_conn *fake_new(struct cci__due_heap *h, uint32_t send_to_us, uint32_t ka_us)
{
	struct fake_conn *f = calloc(1, sizeof(*f));

	CU_ASSERT_FATAL(f != NULL && cci__due_reserve(h) == CCI_SUCCESS);
	f->oldest = UINT64_MAX;
	f->conn = (cci__conn_t){ .ep = &ep, .send_timeout_us = send_to_us, .keepalive_us = ka_us };
	return f;
}

static void fake_open(struct cci__due_heap *h, struct fake_conn *f, uint64_t now)
{
	cci__conn_move(&f->base, CCI__CONN_OPEN, &core, &f->conn);
	cci__ct_arm(&f->base.timers, f->conn.keepalive_us, now);
	cci__conn_due_note(h, &f->base, &f->conn, now);
}

static void fake_free(struct cci__due_heap *h, struct fake_conn *f)
{
	cci__due_clear(h, &f->base.due);
	cci__due_unreserve(h);
	free(f);
}

/* Ticks every ms from..to (inclusive of from, not of to). */
static void ticks(struct cci__due_heap *h, uint64_t from, uint64_t to)
{
	for (now_ns = from; now_ns < to; now_ns += MS)
		cci__conn_due_tick(h, &core, &ops, now_ns);
}

static void entries_come_back_in_time_order_after_moves_and_removals(void)
{
	enum { N = 600 };
	static struct cci__due d[N];
	struct cci__due_heap h = { 0 };
	uint64_t at[N], last = 0;
	unsigned taken = 0, live = 0;

	srand(7);
	for (int i = 0; i < N; i++) {
		CU_ASSERT_FATAL(cci__due_reserve(&h) == CCI_SUCCESS);
		at[i] = 1 + (uint64_t)(rand() % 100000);
		cci__due_set(&h, &d[i], at[i]);
	}
	/* Move a third later or earlier, remove a sixth, "by" some. */
	for (int i = 0; i < N; i += 3) {
		at[i] = 1 + (uint64_t)(rand() % 100000);
		cci__due_set(&h, &d[i], at[i]);
	}
	for (int i = 1; i < N; i += 6) {
		cci__due_clear(&h, &d[i]);
		CU_ASSERT_EQUAL(d[i].pos, 0);
		at[i] = CCI__DUE_NEVER;
	}
	for (int i = 2; i < N; i += 6) {
		uint64_t by = 1 + (uint64_t)(rand() % 100000);
		cci__due_by(&h, &d[i], by); /* moves only if earlier */
		if (by < at[i])
			at[i] = by;
	}
	for (int i = 0; i < N; i++)
		live += at[i] != CCI__DUE_NEVER;
	CU_ASSERT_EQUAL(h.n, live);
	CU_ASSERT_PTR_NULL(cci__due_take(&h, 0)); /* nothing due at 0 */
	for (struct cci__due *e; (e = cci__due_take(&h, UINT64_MAX - 1)) != NULL; taken++) {
		int i = (int)(e - d);
		CU_ASSERT(e->at_ns >= last);
		CU_ASSERT_EQUAL(e->at_ns, at[i]);
		CU_ASSERT_EQUAL(e->pos, 0);
		last = e->at_ns;
	}
	CU_ASSERT_EQUAL(taken, live);
	CU_ASSERT_EQUAL(cci__due_first(&h), CCI__DUE_NEVER);
	for (int i = 0; i < N; i++)
		cci__due_unreserve(&h);
	cci__due_heap_fini(&h);
}

static void idle_connections_cost_a_tick_nothing(void)
{
	struct cci__due_heap h = { 0 };
	struct fake_conn *f[1000];

	for (int i = 0; i < 1000; i++) {
		f[i] = fake_new(&h, 0, 0);
		fake_open(&h, f[i], 0);
	}
	CU_ASSERT_EQUAL(h.n, 0);
	ticks(&h, MS, 200 * MS);
	for (int i = 0; i < 1000; i++) {
		CU_ASSERT_EQUAL(f[i]->visits + f[i]->pings, 0);
		fake_free(&h, f[i]);
	}
	cci__due_heap_fini(&h);
}

/* The same pings and the same single KEEPALIVE_TIMEDOUT as a tick that
 * visits every connection (conn_base_test.c), in a handful of visits. */
static void a_keepalive_costs_a_visit_per_probe_not_per_tick(void)
{
	struct cci__due_heap h = { 0 };
	struct fake_conn *f = fake_new(&h, 0, 100000); /* 100 ms */

	ka_posted = 0;
	fake_open(&h, f, 0);
	ticks(&h, MS, 100 * MS);
	CU_ASSERT_EQUAL(f->pings, 3);
	CU_ASSERT_EQUAL(ka_posted, 0);
	CU_ASSERT(f->visits <= 4);
	ticks(&h, 100 * MS, 101 * MS);
	CU_ASSERT_EQUAL(ka_posted, 1);
	CU_ASSERT_EQUAL(h.n, 0); /* the keepalive is off until set again */
	ticks(&h, 101 * MS, 400 * MS);
	CU_ASSERT_EQUAL(ka_posted, 1);
	fake_free(&h, f);
	cci__due_heap_fini(&h);
}

/* Heard from meanwhile: the visit filed for the old time comes, finds
 * nothing to do, and files the connection for its new time. */
static void a_peer_heard_moves_the_probe_later(void)
{
	struct cci__due_heap h = { 0 };
	struct fake_conn *f = fake_new(&h, 0, 100000);

	fake_open(&h, f, 0);
	ticks(&h, MS, 20 * MS);
	cci__ct_heard(&f->base.timers, 20 * MS);
	ticks(&h, 20 * MS, 45 * MS); /* the probe was due at 25 ms, then 45 */
	CU_ASSERT_EQUAL(f->pings, 0);
	CU_ASSERT_EQUAL(f->visits, 1);
	ticks(&h, 45 * MS, 46 * MS);
	CU_ASSERT_EQUAL(f->pings, 1);
	fake_free(&h, f);
	cci__due_heap_fini(&h);
}

/* A send queued at 3 ms with a 10 ms timeout breaks the connection at the
 * first tick after 13 ms, though nothing filed it when it was queued. */
static void a_send_timeout_acts_on_time_without_a_note_per_send(void)
{
	struct cci__due_heap h = { 0 };
	struct fake_conn *f = fake_new(&h, 10000, 0);

	fake_open(&h, f, 0);
	ticks(&h, 0, 3 * MS);
	f->oldest = 3 * MS;
	ticks(&h, 3 * MS, 60 * MS);
	CU_ASSERT_EQUAL(f->send_expiries, 1);
	CU_ASSERT_EQUAL(f->send_expired_at, 14 * MS);
	CU_ASSERT_EQUAL(h.n, 0); /* broken: no timer runs */
	fake_free(&h, f);
	cci__due_heap_fini(&h);
}

/* A connect expires at its deadline and is freed by the plugin's
 * callback; its neighbours in the heap go on. */
static void an_expired_connect_is_not_touched_after_its_callback(void)
{
	struct cci__due_heap h = { 0 };
	struct fake_conn *c = fake_new(&h, 0, 0), *o = fake_new(&h, 0, 100000);
	struct timeval tv = { .tv_sec = 0, .tv_usec = 10000 };

	freed = 0;
	cci__ct_connecting(&c->base.timers, &tv, 0);
	cci__conn_due_note(&h, &c->base, &c->conn, 0);
	fake_open(&h, o, 0);
	ticks(&h, MS, 10 * MS);
	CU_ASSERT_EQUAL(freed, 0);
	ticks(&h, 10 * MS, 11 * MS);
	CU_ASSERT_EQUAL(freed, 1); /* c is gone: its slot is the plugin's to give back */
	cci__due_unreserve(&h);
	ticks(&h, 11 * MS, 30 * MS);
	CU_ASSERT_EQUAL(o->pings, 1);
	CU_ASSERT_EQUAL(h.n, 1);
	fake_free(&h, o);
	cci__due_heap_fini(&h);
}

static const struct unit_test tests[] = {
	{ "the heap gives entries back in time order after moves and removals",
	  entries_come_back_in_time_order_after_moves_and_removals },
	{ "1,000 idle connections cost a tick nothing", idle_connections_cost_a_tick_nothing },
	{ "a keepalive costs a visit per probe, not one per tick",
	  a_keepalive_costs_a_visit_per_probe_not_per_tick },
	{ "a peer heard from moves the next probe later", a_peer_heard_moves_the_probe_later },
	{ "a send timeout acts on time without a note per send",
	  a_send_timeout_acts_on_time_without_a_note_per_send },
	{ "an expired connect freed by its callback is not touched again",
	  an_expired_connect_is_not_touched_after_its_callback },
};

int main(void)
{
	return UNIT_RUN("due heap", tests);
}
