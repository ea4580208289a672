/*
 * tests.h - the test tables of each conformance file.
 */
#ifndef CONFORMANCE_TESTS_H
#define CONFORMANCE_TESTS_H

#include "harness.h"

#define T_TABLE(name) \
	extern const struct h_test name##_tests[]; \
	extern const size_t name##_count;

T_TABLE(t_init)
T_TABLE(t_endpoint)
T_TABLE(t_os_handle)
T_TABLE(t_options)
T_TABLE(t_connect)
T_TABLE(t_msg)
T_TABLE(t_rma)
T_TABLE(t_rma_refuse)
T_TABLE(t_teardown)
T_TABLE(t_threads)
T_TABLE(t_args)
T_TABLE(t_cci2)

#undef T_TABLE

#endif /* CONFORMANCE_TESTS_H */
