/*
 * rpc_test.h - the parts of the RPC load test: the calls a client makes
 * (rpc_test_calls.c), the client processes (rpc_test_client.c) and the
 * launcher with its server (rpc_test.c).
 */
#ifndef CCI_EX_RPC_TEST_H
#define CCI_EX_RPC_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc.h"

/* The server's argument limit in the test: one call in 500 exceeds it. */
#define RPC_TEST_MAX_ARG (1u << 20)

/*
 * One test call: what to call with which bytes, and what must come back.
 * arg and res are malloc'd and belong to the call until rpc_test_call_free().
 */
struct rpc_test_call {
	const char *proc;
	unsigned kind;
	uint64_t seed;
	unsigned char *arg, *res;
	size_t arg_len, res_cap;
	int want_status;
	rpc_call_id_t id;
	unsigned seq;       /* the client's call number, in issue order */
};

/* Build call number i of client `client` (deterministic); slow picks the
 * kill test's slow procedure.  false when out of memory. */
bool rpc_test_call_make(struct rpc_test_call *call, unsigned client,
			unsigned i, bool slow);

/* Whether the argument or the result goes by RMA. */
bool rpc_test_call_uses_rma(const struct rpc_test_call *call);

/* Check an outcome: true when status and result are exactly what the
 * call must give; else prints why on stderr. */
bool rpc_test_call_check(const struct rpc_test_call *call, int status,
			 const struct rpc_reply *reply);

void rpc_test_call_free(struct rpc_test_call *call);

struct rpc_test_client_opts {
	const char *uri;
	unsigned id;            /* client number, seeds its calls */
	unsigned calls;         /* calls to make (kill mode: at most) */
	unsigned window;        /* async calls in flight */
	bool kill_mode;         /* expect the server to die under us */
	int notify_fd;          /* kill mode: a byte goes here when warmed up */
	unsigned time_limit_s;
};

/* Run one client process's workload; the process exit status. */
int rpc_test_client(const struct rpc_test_client_opts *o);

#endif /* CCI_EX_RPC_TEST_H */
