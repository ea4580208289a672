/*
 * unit_run.c - see unit_run.h.
 */
#include <CUnit/Basic.h>

#include "unit_run.h"

int unit_run(const char *suite_name, const struct unit_test *tests, size_t count)
{
	CU_pSuite suite;
	unsigned failures;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	CU_set_fail_on_inactive(CU_FALSE);
	suite = CU_add_suite(suite_name, NULL, NULL);
	for (size_t i = 0; suite != NULL && i < count; i++)
		if (CU_add_test(suite, tests[i].name, tests[i].fn) == NULL)
			suite = NULL;
	if (suite == NULL) {
		CU_cleanup_registry();
		return 2;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failures == 0 ? 0 : 1;
}
