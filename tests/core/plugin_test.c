/*
 * plugin_test.c - broken plugins in CCI_PLUGIN_PATH are logged and skipped;
 * the library still starts with the good ones.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cci.h"

static char err_text[16384];
static int init_rc = -1;

/* Start the library in a child with CCI_DEBUG=init; keep its stderr. */
static void run_child(void)
{
	int p[2], status;
	size_t off = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(p) != 0)
		return;
	pid = fork();
	if (pid == 0) {
		cci_device_t *const *devs;
		int rc;
		dup2(p[1], 2);
		setenv("CCI_DEBUG", "init", 1);
		rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });
		if (rc == CCI_SUCCESS && cci_get_devices(&devs) == CCI_SUCCESS)
			for (int i = 0; devs[i]; i++)
				fprintf(stderr, "device %s transport %s\n", devs[i]->name, devs[i]->transport);
		if (rc == CCI_SUCCESS)
			cci_finalize();
		_exit(rc);
	}
	close(p[1]);
	while (off + 1 < sizeof(err_text) &&
	       (n = read(p[0], err_text + off, sizeof(err_text) - 1 - off)) > 0)
		off += (size_t)n;
	err_text[off] = '\0';
	close(p[0]);
	waitpid(pid, &status, 0);
	init_rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_library_starts_despite_broken_plugins(void)
{
	CU_ASSERT_EQUAL(init_rc, CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "transport sm"));
	CU_ASSERT_PTR_NULL(strstr(err_text, "transport bogus"));
}

static void test_wrong_abi_version_is_skipped(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "cci_ctp_badabi.so: ABI version"));
}

static void test_missing_mandatory_op_is_skipped(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "cci_ctp_badops.so: mandatory op missing"));
}

static void test_failing_init_is_skipped(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "plugin badinit: init failed"));
}

int main(void)
{
	CU_pSuite s;
	int failed;

	run_child();
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_set_fail_on_inactive(CU_FALSE);
	s = CU_add_suite("plugins", NULL, NULL);
	CU_add_test(s, "the library starts despite broken plugins",
	            test_library_starts_despite_broken_plugins);
	CU_add_test(s, "a plugin of another ABI version is skipped", test_wrong_abi_version_is_skipped);
	CU_add_test(s, "a plugin missing a mandatory op is skipped",
	            test_missing_mandatory_op_is_skipped);
	CU_add_test(s, "a plugin whose init fails is skipped", test_failing_init_is_skipped);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = (int)(CU_get_number_of_failures() + CU_get_number_of_tests_failed());
	if (failed)
		fprintf(stderr, "library log was:\n%s", err_text);
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
