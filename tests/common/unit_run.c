/*
 * unit_run.c - see unit_run.h.
 */
#include <stdarg.h>
#include <stdio.h>

#include <CUnit/Basic.h>

#include "unit_run.h"

#define SKIPS_MAX 64

static struct {
	const char *name;
	char why[200];
} skips[SKIPS_MAX];
static unsigned nskips;

void unit_skip(const char *fmt, ...)
{
	CU_pTest t = CU_get_current_test();
	va_list ap;

	if (nskips >= SKIPS_MAX)
		return;
	skips[nskips].name = t && t->pName ? t->pName : "(unnamed)";
	va_start(ap, fmt);
	vsnprintf(skips[nskips].why, sizeof(skips[nskips].why), fmt, ap);
	va_end(ap);
	printf("SKIP: %s ", skips[nskips].why);
	nskips++;
}

unsigned unit_skips_report(void)
{
	if (nskips)
		printf("\n%u test(s) skipped (CUnit counts them as passed):\n", nskips);
	for (unsigned i = 0; i < nskips; i++)
		printf("  SKIP %s: %s\n", skips[i].name, skips[i].why);
	return nskips;
}

int unit_exit_status(void)
{
	unsigned failures = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	unsigned skipped = unit_skips_report();

	if (failures)
		return 1;
	return skipped && skipped >= CU_get_number_of_tests_run() ? 77 : 0;
}

int unit_run(const char *suite_name, const struct unit_test *tests, size_t count)
{
	CU_pSuite suite;
	int status;

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
	status = unit_exit_status();
	CU_cleanup_registry();
	return status;
}
