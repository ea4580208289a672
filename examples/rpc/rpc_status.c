/*
 * rpc_status.c - status sentences and the runtime's log line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include <cci.h>

#include "rpc.h"
#include "rpc_log.h"

const char *rpc_strerror(int status)
{
	switch (status) {
	case RPC_OK: return "success";
	case RPC_EAGAIN: return "call still in flight";
	case RPC_ENOPROC: return "no such procedure on the server";
	case RPC_EPROC: return "the procedure failed";
	case RPC_E2BIG: return "argument too large for the server";
	case RPC_ERMA: return "the server could not move the argument or result";
	case RPC_EDEAD: return "connection to the server broken";
	case RPC_ETIMEDOUT: return "no reply within the call timeout";
	case RPC_EBUSY: return "too many calls in flight";
	case RPC_EINVAL: return "invalid argument or call id";
	case RPC_ENOMEM: return "out of memory";
	case RPC_EPROTO: return "malformed message";
	case RPC_ECCI: return "communication library error";
	}
	return "unknown status";
}

void rpc_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rpc[%ld]: ", (long)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int rpc_cci_fail(int rc, const char *what)
{
	if (rc == CCI_SUCCESS)
		return RPC_OK;
	rpc_log("%s: %s", what, cci_strerror(NULL, (enum cci_status)rc));
	return RPC_ECCI;
}
