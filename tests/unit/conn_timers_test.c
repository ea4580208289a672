/*
 * conn_timers_test.c - unit tests of the connection timers every plugin
 * shares (plugins/common/conn_timers.h): keepalive, send timeout, connect
 * deadline.  Times are given, never read from the clock.
 */
#include <CUnit/Basic.h>

#include "cci.h"
#include "conn_timers.h"
#include "unit_run.h"

#define MS 1000000ull /* ns */

static struct cci__conn_timers armed(uint32_t ka_us, uint64_t now)
{
	struct cci__conn_timers t = { 0 };

	cci__ct_arm(&t, ka_us, now);
	return t;
}

static void keepalive_off_never_acts(void)
{
	struct cci__conn_timers t = armed(0, 0);

	CU_ASSERT_EQUAL(cci__ct_keepalive_due(&t, 1000000 * MS), CCI__KA_IDLE);
}

static void a_heard_peer_is_not_probed(void)
{
	struct cci__conn_timers t = armed(100000, 0); /* 100 ms */

	for (uint64_t now = 10 * MS; now < 1000 * MS; now += 10 * MS) {
		cci__ct_heard(&t, now);
		CU_ASSERT_EQUAL(cci__ct_keepalive_due(&t, now + MS), CCI__KA_IDLE);
	}
}

static void a_quiet_peer_is_probed_once_a_quarter_period(void)
{
	struct cci__conn_timers t = armed(100000, 0);
	int pings = 0;

	CU_ASSERT_EQUAL(cci__ct_keepalive_due(&t, 24 * MS), CCI__KA_IDLE);
	for (uint64_t now = 25 * MS; now < 100 * MS; now += MS)
		pings += cci__ct_keepalive_due(&t, now) == CCI__KA_PING;
	CU_ASSERT_EQUAL(pings, 3); /* at 25, 50 and 75 ms */
}

static void silence_for_the_period_expires_once(void)
{
	struct cci__conn_timers t = armed(100000, 0);

	CU_ASSERT_EQUAL(cci__ct_keepalive_due(&t, 100 * MS), CCI__KA_EXPIRED);
	CU_ASSERT_EQUAL(t.ka_us, 0);
	CU_ASSERT_EQUAL(cci__ct_keepalive_due(&t, 300 * MS), CCI__KA_IDLE);
	/* Setting the option again re-arms it from that moment. */
	cci__ct_arm(&t, 100000, 300 * MS);
	CU_ASSERT_EQUAL(cci__ct_keepalive_due(&t, 399 * MS), CCI__KA_PING);
	CU_ASSERT_EQUAL(cci__ct_keepalive_due(&t, 400 * MS), CCI__KA_EXPIRED);
}

/* A sign of life stamped by another thread just after the tick read the
 * clock is "just now", not an idle time of almost 2^64 ns. */
static void a_later_stamp_counts_as_now(void)
{
	struct cci__conn_timers t = armed(100000, 50 * MS);

	cci__ct_heard(&t, 60 * MS);
	CU_ASSERT_EQUAL(cci__ct_keepalive_due(&t, 59 * MS), CCI__KA_IDLE);
	CU_ASSERT_FALSE(cci__ct_send_expired(1000, 60 * MS, 59 * MS));
}

static void send_timeout_counts_from_the_oldest_send(void)
{
	CU_ASSERT_FALSE(cci__ct_send_expired(0, 0, 1000000 * MS));       /* no timeout set */
	CU_ASSERT_FALSE(cci__ct_send_expired(1000, UINT64_MAX, 5 * MS)); /* nothing queued */
	CU_ASSERT_FALSE(cci__ct_send_expired(1000, 4 * MS, 5 * MS));     /* exactly 1 ms */
	CU_ASSERT_TRUE(cci__ct_send_expired(1000, 4 * MS, 5 * MS + 1));
}

/* After a send timeout broke the connection at 5 ms + 1 ns (timeout 1 ms):
 * the sends queued as long too timed out, the younger ones did not. */
static void pending_sends_fail_by_their_own_age(void)
{
	uint64_t now = 5 * MS + 1;

	CU_ASSERT_EQUAL(cci__ct_send_fail_status(1000, 4 * MS, now), CCI_ETIMEDOUT);
	CU_ASSERT_EQUAL(cci__ct_send_fail_status(1000, 1 * MS, now), CCI_ETIMEDOUT);
	CU_ASSERT_EQUAL(cci__ct_send_fail_status(1000, 4 * MS + 1, now), CCI_ERR_DISCONNECTED);
	CU_ASSERT_EQUAL(cci__ct_send_fail_status(1000, 5 * MS, now), CCI_ERR_DISCONNECTED);
	CU_ASSERT_EQUAL(cci__ct_send_fail_status(1000, now + 1, now), CCI_ERR_DISCONNECTED);
	CU_ASSERT_EQUAL(cci__ct_send_fail_status(0, 0, now), CCI_ERR_DISCONNECTED);
}

static void connect_deadline_follows_the_timeout(void)
{
	struct cci__conn_timers t = { 0 };
	struct timeval tv = { .tv_sec = 1, .tv_usec = 500000 };

	cci__ct_connecting(&t, NULL, 7 * MS);
	CU_ASSERT_FALSE(cci__ct_connect_expired(&t, UINT64_MAX - 1)); /* none: never */
	cci__ct_connecting(&t, &tv, 7 * MS);
	CU_ASSERT_FALSE(cci__ct_connect_expired(&t, 1506 * MS));
	CU_ASSERT_TRUE(cci__ct_connect_expired(&t, 1507 * MS));
	tv.tv_sec = (time_t)1 << 62; /* saturates instead of wrapping into the past */
	cci__ct_connecting(&t, &tv, 7 * MS);
	CU_ASSERT_FALSE(cci__ct_connect_expired(&t, 1000000000 * MS));
}

static const struct unit_test tests[] = {
	{ "a keepalive of 0 never acts", keepalive_off_never_acts },
	{ "a peer heard from within the period is neither probed nor timed out",
	  a_heard_peer_is_not_probed },
	{ "a quiet peer is probed once a quarter period", a_quiet_peer_is_probed_once_a_quarter_period },
	{ "a period of silence expires once, until the option is set again",
	  silence_for_the_period_expires_once },
	{ "a stamp set a little after the tick's clock counts as now", a_later_stamp_counts_as_now },
	{ "the send timeout counts from the oldest unfinished send",
	  send_timeout_counts_from_the_oldest_send },
	{ "after a send timeout, pending sends as old time out, younger ones are disconnected",
	  pending_sends_fail_by_their_own_age },
	{ "the connect deadline is the connect timeout after the start, or never",
	  connect_deadline_follows_the_timeout },
};

int main(void)
{
	return UNIT_RUN("connection timers", tests);
}
