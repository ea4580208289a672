/*
 * conformance.c - the conformance suite of the public API (api/cci.h),
 * run once per transport:
 *
 *   conformance [--transport NAME] [--run SUBSTRING] [--list]
 */
#include "tests.h"

int main(int argc, char **argv)
{
	const struct h_suite suites[] = {
		H_SUITE("init and devices", t_init),
		H_SUITE("endpoints", t_endpoint),
		H_SUITE("the OS handle", t_os_handle),
		H_SUITE("options", t_options),
		H_SUITE("connections", t_connect),
		H_SUITE("messages", t_msg),
		H_SUITE("rma", t_rma),
		H_SUITE("rma refusals", t_rma_refuse),
		H_SUITE("rma handles are values", t_handles),
		H_SUITE("teardown and failures", t_teardown),
		H_SUITE("threads", t_threads),
		H_SUITE("bad arguments", t_args),
		H_SUITE("CCI 2 programs", t_cci2),
		H_SUITE("progress = auto and manual", t_progress),
	};

	return h_main("conformance", argc, argv, suites, sizeof(suites) / sizeof(suites[0]));
}
