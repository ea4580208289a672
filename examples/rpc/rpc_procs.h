/*
 * rpc_procs.h - the procedures the demo and the tests serve, and the
 * functions a client uses to check their results.  Each is deterministic,
 * so a client knows the exact bytes to expect.
 *
 *   checksum   8-byte FNV-1a hash of the argument (little-endian)
 *   transform  the argument reversed, each byte xor 0xa5 (as long as it)
 *   fill       argument {u64 seed, u32 length}: length pseudo-random bytes
 *   upper      the argument with ASCII letters upper-cased
 *   fail       always fails with RPC_PROCS_FAIL_RC
 *   slow       sleeps RPC_PROCS_SLOW_US, then as checksum
 */
#ifndef CCI_EX_RPC_PROCS_H
#define CCI_EX_RPC_PROCS_H

#include <stddef.h>
#include <stdint.h>

#include "rpc.h"

#define RPC_PROCS_FAIL_RC 42
#define RPC_PROCS_SLOW_US 300

/* Register every procedure above on server. */
int rpc_procs_register(struct rpc_server *server);

uint64_t rpc_procs_fnv1a(const void *p, size_t len);
/* len pseudo-random bytes from seed (splitmix64), into p. */
void rpc_procs_fill(void *p, size_t len, uint64_t seed);
/* The transform of len bytes at in, into out (no overlap). */
void rpc_procs_transform(const void *in, size_t len, void *out);

#endif /* CCI_EX_RPC_PROCS_H */
