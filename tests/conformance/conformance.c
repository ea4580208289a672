/*
 * conformance.c - the conformance suite of the public API (api/cci.h),
 * run once per transport:
 *
 *   conformance [--transport NAME] [--run SUBSTRING] [--list]
 *
 * --transport picks the first device of that transport (device tests are
 * skipped, with the reason printed, when there is none); --run keeps only
 * the tests whose name contains SUBSTRING; --list prints the test names.
 */
#include "tests.h"

#include <stdio.h>
#include <string.h>

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [--transport NAME] [--run SUBSTRING] [--list]\n", prog);
}

static void add_suites(void)
{
	h_add_suite("init and devices", t_init_tests, t_init_count);
	h_add_suite("endpoints", t_endpoint_tests, t_endpoint_count);
	h_add_suite("the OS handle", t_os_handle_tests, t_os_handle_count);
	h_add_suite("options", t_options_tests, t_options_count);
	h_add_suite("connections", t_connect_tests, t_connect_count);
	h_add_suite("messages", t_msg_tests, t_msg_count);
	h_add_suite("rma", t_rma_tests, t_rma_count);
	h_add_suite("rma refusals", t_rma_refuse_tests, t_rma_refuse_count);
	h_add_suite("teardown and failures", t_teardown_tests, t_teardown_count);
	h_add_suite("threads", t_threads_tests, t_threads_count);
	h_add_suite("bad arguments", t_args_tests, t_args_count);
	h_add_suite("CCI 2 programs", t_cci2_tests, t_cci2_count);
}

static void list_tests(void)
{
	const struct { const struct h_test *t; size_t n; } all[] = {
		{ t_init_tests, t_init_count }, { t_endpoint_tests, t_endpoint_count },
		{ t_os_handle_tests, t_os_handle_count },
		{ t_options_tests, t_options_count }, { t_connect_tests, t_connect_count },
		{ t_msg_tests, t_msg_count }, { t_rma_tests, t_rma_count },
		{ t_rma_refuse_tests, t_rma_refuse_count },
		{ t_teardown_tests, t_teardown_count }, { t_threads_tests, t_threads_count },
		{ t_args_tests, t_args_count }, { t_cci2_tests, t_cci2_count },
	};

	for (size_t s = 0; s < sizeof(all) / sizeof(all[0]); s++)
		for (size_t i = 0; i < all[s].n; i++)
			printf("%s\n", all[s].t[i].name);
}

int main(int argc, char **argv)
{
	const char *filter = NULL;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc) {
			h_transport = argv[++i];
		} else if (strcmp(argv[i], "--run") == 0 && i + 1 < argc) {
			filter = argv[++i];
		} else if (strcmp(argv[i], "--list") == 0) {
			list_tests();
			return 0;
		} else {
			usage(argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("conformance: transport %s\n", h_transport ? h_transport : "(first device)");
	add_suites();
	return h_run(filter);
}
