/*
 * engine_clock_test.c - unit tests of the engine's coarse clock
 * (cci__engine_now, plugins/common/engine.h): what sends are stamped with
 * and timeouts judged by.
 */
#include <time.h>

#include <CUnit/Basic.h>

#include "cci.h"
#include "clock.h"
#include "engine.h"
#include "unit_run.h"

/* The tick's time is a floor: the clock never reads earlier than the time
 * the tick judged its timers by (here init's, as no tick ran). */
static void test_never_earlier_than_the_tick(void)
{
	struct cci__engine e;
	uint64_t before = cci__now_ns();
	uint64_t prev;

	CU_ASSERT_EQUAL_FATAL(cci__engine_init(&e, NULL, 1.0, 0, NULL, NULL), CCI_SUCCESS);
	prev = cci__engine_now(&e);
	CU_ASSERT(prev >= before);
	for (int i = 0; i < 10000; i++) {
		uint64_t t = cci__engine_now(&e);

		CU_ASSERT_FATAL(t >= prev); /* and it never goes back */
		prev = t;
	}
	cci__engine_fini(&e);
}

/* No tick for 150 ms, as when a loaded machine leaves the engine's thread
 * unscheduled: the clock still follows the true time within a jiffy (at
 * most 10 ms; 50 allowed for a descheduling between the two reads), so a
 * send stamped now does not look 150 ms older than it is. */
static void test_follows_time_when_no_tick_runs(void)
{
	struct cci__engine e;
	struct timespec pause = { 0, 150 * 1000000L };
	uint64_t stamp, truth;

	CU_ASSERT_EQUAL_FATAL(cci__engine_init(&e, NULL, 1.0, 0, NULL, NULL), CCI_SUCCESS);
	nanosleep(&pause, NULL);
	stamp = cci__engine_now(&e);
	truth = cci__now_ns();
	CU_ASSERT(truth >= stamp);
	CU_ASSERT(truth - stamp < 50ull * 1000000);
	cci__engine_fini(&e);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "the coarse clock never reads earlier than the tick's time, nor goes back",
		  test_never_earlier_than_the_tick },
		{ "the coarse clock follows the true time within a jiffy when no tick runs",
		  test_follows_time_when_no_tick_runs },
	};

	return UNIT_RUN("engine clock", tests);
}
