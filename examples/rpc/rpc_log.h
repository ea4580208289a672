/*
 * rpc_log.h - the runtime's one line on stderr for a failure, written by
 * the function that first sees it.
 */
#ifndef CCI_EX_RPC_LOG_H
#define CCI_EX_RPC_LOG_H

/* "rpc[pid]: message" on stderr. */
void rpc_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Log "WHAT: <cci_strerror>" and give RPC_ECCI, unless rc is CCI_SUCCESS
 * (then RPC_OK). */
int rpc_cci_fail(int rc, const char *what);

#endif /* CCI_EX_RPC_LOG_H */
