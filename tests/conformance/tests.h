/*
 * tests.h - the test tables of each conformance file.
 */
#ifndef CONFORMANCE_TESTS_H
#define CONFORMANCE_TESTS_H

#include "harness.h"

H_TABLE(t_init)
H_TABLE(t_endpoint)
H_TABLE(t_os_handle)
H_TABLE(t_options)
H_TABLE(t_connect)
H_TABLE(t_msg)
H_TABLE(t_rma)
H_TABLE(t_rma_refuse)
H_TABLE(t_handles)
H_TABLE(t_teardown)
H_TABLE(t_threads)
H_TABLE(t_args)
H_TABLE(t_cci2)
H_TABLE(t_progress)

#endif /* CONFORMANCE_TESTS_H */
