/*
 * threads.h - the thread suite: one process using the library from several
 * threads at once, on the conformance harness (each test in its own
 * process with a hard time limit), once per transport of conformance_runs.
 *
 * Both endpoints of each test live in the test process, so every thread
 * that touches the library runs under the same sanitizer (ThreadSanitizer
 * in .ci/run's build-tsan) as the checks.
 */
#ifndef THREADS_THREADS_H
#define THREADS_THREADS_H

#include "harness.h"

H_TABLE(t_senders)
H_TABLE(t_epdestroy)


/*
 * Make a connection from ep to the endpoint at uri (rep, of this process)
 * with data as the request payload, accepted with context actx, polling
 * both endpoints from the calling thread (nothing else may poll them
 * meanwhile).  REQUIREd to succeed within 10 s.
 */
cci_connection_t *th_connect_local(cci_endpoint_t *ep, cci_endpoint_t *rep,
                                   const char *uri, uint32_t data,
                                   cci_conn_attribute_t attr, const void *actx);

#endif /* THREADS_THREADS_H */
