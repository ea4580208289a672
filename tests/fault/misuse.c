/*
 * misuse.c - the API misuse suite, run once per transport:
 *
 *   misuse [--transport NAME] [--run SUBSTRING] [--list]
 */
#include "misuse.h"

int main(int argc, char **argv)
{
	const struct h_suite suites[] = {
		H_SUITE("NULL arguments", t_misuse_null),
		H_SUITE("foreign and wrong-kind objects", t_misuse_foreign),
		H_SUITE("closed objects", t_misuse_stale),
		H_SUITE("init and finalize", t_misuse_life),
	};

	return h_main("misuse", argc, argv, suites, sizeof(suites) / sizeof(suites[0]));
}
