/*
 * ofi_test.h - transport tests of the ofi (libfabric) plugin: what the
 * conformance suite cannot reach through the API alone (refused
 * providers, registrations of odd and huge ranges, peers killed in the
 * middle of RMA, servers gone before a connect).  One provider per run:
 *
 *   ofi_test --provider tcp [substring]
 */
#ifndef OFI_TEST_H
#define OFI_TEST_H

#include <stdint.h>

#include <CUnit/CUnit.h>

#include "cci.h"

/* The provider under test (--provider). */
extern const char *ot_provider;

uint64_t ot_now_ms(void);
void ot_sleep_ms(unsigned ms);

/* cci_init with a config naming the provider: its status. */
int ot_cci_init(void);
/* The same, asserted; the ofi device, or NULL. */
cci_device_t *ot_init(void);
/* Destroy ep (if any) and finalize, asserting both succeed. */
void ot_fini(cci_endpoint_t *ep);
cci_endpoint_t *ot_endpoint(cci_device_t *dev);
/* The next event of type within ms (others are returned), or NULL. */
cci_event_t *ot_wait(cci_endpoint_t *ep, cci_event_type_t type, unsigned ms);
/* Connect a to b (RO), polling both; 0 on success. */
int ot_pair(cci_endpoint_t *a, cci_endpoint_t *b, cci_connection_t **ca,
            cci_connection_t **cb);
/* The status of the SEND event carrying ctx (CCI_ETIMEDOUT if none in ms). */
int ot_send_status(cci_endpoint_t *ep, const void *ctx, unsigned ms);
/* Print a skip reason for the current test (CUnit has no skip). */
void ot_skip(const char *why);

/* Suites (t_refuse.c, t_rma.c, t_hostile.c, t_dead.c, t_timeout.c, t_exec.c,
 * t_exit.c). */
int ot_add_refuse_suite(void);
int ot_add_rma_suite(void);
int ot_add_hostile_suite(void);
int ot_add_dead_suite(void);
int ot_add_timeout_suite(void);
int ot_add_exec_suite(void);
int ot_add_exit_suite(void);
/* The child of t_exit.c's test (EXIT_AUDIT_CHILD_ARG): an endpoint, then
 * exit() with it open.  Returns only on failure. */
int ot_exit_child(void);

#endif /* OFI_TEST_H */
