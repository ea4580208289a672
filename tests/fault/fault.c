/*
 * fault.c - the reliability suite, run once per transport:
 *
 *   fault [--transport NAME] [--run SUBSTRING] [--list]
 */
#include "fault.h"

int main(int argc, char **argv)
{
	const struct h_suite suites[] = {
		H_SUITE("peer death", t_death),
	};

	return h_main("fault", argc, argv, suites, sizeof(suites) / sizeof(suites[0]));
}
