/*
 * fault.c - the reliability suite, run once per transport:
 *
 *   fault [--transport NAME] [--run SUBSTRING] [--list]
 */
#include "fault.h"

/* LeakSanitizer asks this at exit; never called without it. */
static volatile int lsan_off;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
	return lsan_off;
}

void f_lsan_off(void)
{
	lsan_off = 1;
}

int main(int argc, char **argv)
{
	const struct h_suite suites[] = {
		H_SUITE("peer death", t_death),
		H_SUITE("frozen peer", t_frozen),
		H_SUITE("connect failures", t_connfail),
		H_SUITE("blackholed peer", t_blackhole),
		H_SUITE("teardown orders", t_teardown),
		H_SUITE("load and back-pressure", t_load),
		H_SUITE("sleeping on the OS handle", t_blocking),
		H_SUITE("connect storms", t_storm),
		H_SUITE("fork", t_fork),
		H_SUITE("signals", t_signal),
	};

	return h_main("fault", argc, argv, suites, sizeof(suites) / sizeof(suites[0]));
}
