/*
 * unit_run.h - the one main loop of the CUnit suites made of one table of
 * tests (tests/unit, and tests/core's config suites): register a table of
 * tests as one CUnit suite, run it verbosely, and turn the outcome into
 * an exit status (0 all passed, 1 a failure, 2 CUnit could not start).
 */
#ifndef CCI_UNIT_RUN_H
#define CCI_UNIT_RUN_H

#include <stddef.h>

struct unit_test {
	const char *name; /* what the test proves */
	void (*fn)(void);
};

int unit_run(const char *suite_name, const struct unit_test *tests, size_t count);

#define UNIT_RUN(name, tests) unit_run((name), (tests), sizeof(tests) / sizeof((tests)[0]))

#endif /* CCI_UNIT_RUN_H */
