/*
 * conn_base_test.c - unit tests of the connection base every plugin
 * embeds (plugins/common/conn_base.h): the legal state moves, and which of
 * the plugin's callbacks one tick calls in each state.  The callbacks
 * record their calls; the core services are a recorder too, since the
 * tick's only use of the core is to log and to post KEEPALIVE_TIMEDOUT.
 */
#include <CUnit/Basic.h>
#include <stdarg.h>

#include "cci.h"
#include "conn_base.h"
#include "recorder_core.h"
#include "unit_run.h"

#define MS 1000000ull /* ns */


/* A plugin connection with its calls counted. */
struct fake_conn {
	struct cci__conn_base base;
	uint64_t oldest;
	int pings, connect_expiries, send_expiries;
};

static uint64_t oldest(void *pc) { return ((struct fake_conn *)pc)->oldest; }
static void ping(void *pc) { ((struct fake_conn *)pc)->pings++; }
static void connect_expired(void *pc) { ((struct fake_conn *)pc)->connect_expiries++; }

static void send_expired(void *pc)
{
	struct fake_conn *f = pc;

	f->send_expiries++;
	cci__conn_move(&f->base, CCI__CONN_BROKEN, &core, NULL); /* as a plugin breaks */
}

static const struct cci__conn_tick_ops ops = {
	.oldest_send_ns = oldest,
	.ping = ping,
	.connect_expired = connect_expired,
	.send_expired = send_expired,
};

static cci__dev_t dev = { .pub = { .transport = "fake" } };
static cci__ep_t ep = { .dev = &dev };

static void reset(struct fake_conn *f, cci__conn_t *conn, uint32_t send_to_us, uint32_t ka_us)
{
	*f = (struct fake_conn){ .oldest = UINT64_MAX };
	*conn = (cci__conn_t){ .ep = &ep, .send_timeout_us = send_to_us, .keepalive_us = ka_us };
	logged = ka_posted = 0;
}

static void only_the_documented_moves_are_legal(void)
{
	int n = 0;

	for (int from = 0; from < CCI__CONN_NSTATES; from++)
		for (int to = 0; to < CCI__CONN_NSTATES; to++)
			n += cci__conn_can_move(from, to);
	CU_ASSERT_EQUAL(n, 7);
	CU_ASSERT_TRUE(cci__conn_can_move(CCI__CONN_CONNECTING, CCI__CONN_OPEN));
	CU_ASSERT_TRUE(cci__conn_can_move(CCI__CONN_CONNECTING, CCI__CONN_FAILED));
	CU_ASSERT_TRUE(cci__conn_can_move(CCI__CONN_OPEN, CCI__CONN_BROKEN));
	CU_ASSERT_TRUE(cci__conn_can_move(CCI__CONN_BROKEN, CCI__CONN_CLOSED));
	CU_ASSERT_FALSE(cci__conn_can_move(CCI__CONN_BROKEN, CCI__CONN_OPEN));
	CU_ASSERT_FALSE(cci__conn_can_move(CCI__CONN_CLOSED, CCI__CONN_OPEN));
	CU_ASSERT_FALSE(cci__conn_can_move(CCI__CONN_OPEN, CCI__CONN_CONNECTING));
	CU_ASSERT_FALSE(cci__conn_can_move(-1, CCI__CONN_OPEN));
	CU_ASSERT_FALSE(cci__conn_can_move(CCI__CONN_OPEN, CCI__CONN_NSTATES));
	CU_ASSERT_STRING_EQUAL(cci__conn_state_name(CCI__CONN_BROKEN), "broken");
	CU_ASSERT_STRING_EQUAL(cci__conn_state_name(42), "?");
}

static void an_illegal_move_is_made_and_logged(void)
{
	struct fake_conn f;
	cci__conn_t conn;

	reset(&f, &conn, 0, 0);
	cci__conn_move(&f.base, CCI__CONN_OPEN, &core, &conn);
	CU_ASSERT_EQUAL(logged, 0);
	cci__conn_move(&f.base, CCI__CONN_CONNECTING, &core, &conn);
	CU_ASSERT_EQUAL(logged, 1);
	CU_ASSERT_EQUAL(cci__conn_state(&f.base), CCI__CONN_CONNECTING);
}

static void a_connecting_conn_fails_at_its_deadline_only(void)
{
	struct fake_conn f;
	cci__conn_t conn;
	struct timeval tv = { .tv_sec = 0, .tv_usec = 10000 };
	struct cci__conn_tick_ops no_connect = ops;

	reset(&f, &conn, 1000, 1000);
	cci__ct_connecting(&f.base.timers, &tv, 0);
	f.oldest = 0; /* a send timeout means nothing before the connection opens */
	CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, 9 * MS), 0);
	CU_ASSERT_EQUAL(f.connect_expiries, 0);
	no_connect.connect_expired = NULL;
	CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &no_connect, &f, 10 * MS), 0);
	CU_ASSERT_EQUAL(f.connect_expiries, 0);
	CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, 10 * MS), 0);
	CU_ASSERT_EQUAL(f.connect_expiries, 1);
	CU_ASSERT_EQUAL(f.send_expiries + f.pings + ka_posted, 0);
}

static void an_old_send_breaks_an_open_conn_before_any_keepalive(void)
{
	struct fake_conn f;
	cci__conn_t conn;

	reset(&f, &conn, 1000, 100000); /* 1 ms send timeout, 100 ms keepalive */
	cci__conn_move(&f.base, CCI__CONN_OPEN, &core, &conn);
	cci__ct_arm(&f.base.timers, conn.keepalive_us, 0);
	f.oldest = 5 * MS;
	CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, 6 * MS), 1);
	CU_ASSERT_EQUAL(f.send_expiries, 0);
	CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, 200 * MS), 0);
	CU_ASSERT_EQUAL(f.send_expiries, 1);
	CU_ASSERT_EQUAL(f.pings + ka_posted, 0);
	/* Broken now: later ticks leave it alone. */
	CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, 400 * MS), 0);
	CU_ASSERT_EQUAL(f.send_expiries, 1);
}

static void an_open_quiet_conn_is_pinged_then_timed_out(void)
{
	struct fake_conn f;
	cci__conn_t conn;

	reset(&f, &conn, 0, 100000);
	cci__conn_move(&f.base, CCI__CONN_OPEN, &core, &conn);
	cci__ct_arm(&f.base.timers, conn.keepalive_us, 0);
	for (uint64_t now = MS; now < 100 * MS; now += MS)
		CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, now), 1);
	CU_ASSERT_EQUAL(f.pings, 3);
	CU_ASSERT_EQUAL(ka_posted, 0);
	CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, 100 * MS), 1);
	CU_ASSERT_EQUAL(ka_posted, 1); /* the event; the connection stays open */
	CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, 300 * MS), 1);
	CU_ASSERT_EQUAL(ka_posted, 1);
}

static void closed_and_failed_conns_are_left_alone(void)
{
	int states[] = { CCI__CONN_FAILED, CCI__CONN_BROKEN, CCI__CONN_CLOSED };

	for (unsigned i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		struct fake_conn f;
		cci__conn_t conn;
		reset(&f, &conn, 1, 1);
		atomic_store(&f.base.state, states[i]);
		f.oldest = 0;
		CU_ASSERT_EQUAL(cci__conn_tick(&f.base, &conn, &core, &ops, &f, 1000 * MS), 0);
		CU_ASSERT_EQUAL(f.pings + f.connect_expiries + f.send_expiries + ka_posted, 0);
	}
}

static const struct unit_test tests[] = {
	{ "only the documented state moves are legal", only_the_documented_moves_are_legal },
	{ "an illegal move is made all the same, and logged", an_illegal_move_is_made_and_logged },
	{ "a connecting connection fails at its deadline, and only when the plugin can act",
	  a_connecting_conn_fails_at_its_deadline_only },
	{ "an open connection whose oldest send is too old breaks, before any keepalive",
	  an_old_send_breaks_an_open_conn_before_any_keepalive },
	{ "an open quiet connection is pinged, then gets one KEEPALIVE_TIMEDOUT",
	  an_open_quiet_conn_is_pinged_then_timed_out },
	{ "failed, broken and closed connections are left alone", closed_and_failed_conns_are_left_alone },
};

int main(void)
{
	return UNIT_RUN("connection base", tests);
}
