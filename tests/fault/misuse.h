/*
 * misuse.h - the API misuse suite: every call given NULL, a freed, a
 * foreign or a wrong kind of object returns the status api/cci.h
 * documents for it, never crashes and never touches memory it must not
 * (the suite runs under AddressSanitizer in CI).  Same harness and same
 * transports as the fault suite.
 */
#ifndef FAULT_MISUSE_H
#define FAULT_MISUSE_H

#include "harness.h"
#include "rmafix.h"

H_TABLE(t_misuse_null)
H_TABLE(t_misuse_foreign)
H_TABLE(t_misuse_stale)
H_TABLE(t_misuse_life)

/* Shells of closed objects the library keeps recognisable (core/core.h
 * CCI__QUARANTINE): at least this many later closures. */
#define M_QUARANTINE 256u

/* An RMA of 4 KiB on r's connection that must fail, at the call or in
 * its completion; what names the case in the failure message. */
void m_rma_refused(struct rfix *r, cci_rma_handle_t *lh, cci_rma_handle_t *rh, int flags,
                   const char *what);

#endif /* FAULT_MISUSE_H */
