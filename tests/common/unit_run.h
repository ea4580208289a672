/*
 * unit_run.h - the one main loop of the CUnit suites made of one table of
 * tests (tests/unit, and tests/core's config suites): register a table of
 * tests as one CUnit suite, run it verbosely, and turn the outcome into
 * an exit status (0 all passed, 1 a failure, 2 CUnit could not start, 77
 * every test skipped itself).
 *
 * Skips.  CUnit has none: a test that returns early counts as passed.  A
 * test that cannot run here (no root, no raw socket) calls unit_skip()
 * instead, which says why at once and lists it by name, with the reason,
 * after the run (unit_skips_report, called by unit_run and by the suites
 * with a main of their own), so that a summary never shows a silent pass.
 */
#ifndef CCI_UNIT_RUN_H
#define CCI_UNIT_RUN_H

#include <stddef.h>

struct unit_test {
	const char *name; /* what the test proves */
	void (*fn)(void);
};

int unit_run(const char *suite_name, const struct unit_test *tests, size_t count);

/* The current test cannot run here, for the reason fmt: the caller
 * returns after this. */
void unit_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print the tests skipped so far, by name with their reasons; their
 * number. */
unsigned unit_skips_report(void);

/* The exit status of a CUnit run that just ended: 0, 1 with a failure,
 * 77 when every test that ran skipped itself. */
int unit_exit_status(void);

#define UNIT_RUN(name, tests) unit_run((name), (tests), sizeof(tests) / sizeof((tests)[0]))

#endif /* CCI_UNIT_RUN_H */
