/*
 * rpc_wire.h - the messages of the RPC runtime and their codec.  Pure
 * functions over bytes: the decoders check everything a peer could get
 * wrong, so the rest of the runtime handles only well-formed messages.
 *
 * Every field is little-endian.  A request (client to server):
 *
 *   0  u32  magic "RPCQ"          4  u16  kind (CALL, BYE, PING)
 *   6  u16  flags (ARG_RMA, RES_RMA)
 *   8  u64  call id
 *  16  32   procedure name, NUL-padded
 *  48  u32  argument length      52  u32  result capacity
 *  56  u64  argument offset in its registration (ARG_RMA)
 *  64  u64  result offset in its registration (RES_RMA)
 *  72  32   argument RMA handle (ARG_RMA), as cci_rma_register() gave it
 * 104  32   result RMA handle (RES_RMA)
 * 136       the argument bytes, unless ARG_RMA
 *
 * A reply (server to client):
 *
 *   0  u32  magic "RPCR"          4  u16  kind (REPLY)
 *   6  u16  flags (RES_RMA: the result was written into the caller's buffer)
 *   8  u64  call id              16  u32  status (enum rpc_status)
 *  20  i32  procedure return value   24  u32  result length   28  u32  0
 *  32       the result bytes, unless RES_RMA
 */
#ifndef CCI_EX_RPC_WIRE_H
#define CCI_EX_RPC_WIRE_H

#include <stdbool.h>
#include <stdint.h>

#include <cci.h>

#include "rpc.h"

#define RPC_REQ_MAGIC 0x51435052u  /* "RPCQ" */
#define RPC_REP_MAGIC 0x52435052u  /* "RPCR" */
#define RPC_HELLO_MAGIC 0x4c435052u /* "RPCL": the connect payload */
#define RPC_VERSION 1u

#define RPC_REQ_HDR 136u
#define RPC_REP_HDR 32u
#define RPC_HELLO_LEN 8u

/* BYE: the client is done; PING: a probe the server ignores, sent only
 * to learn whether the connection still stands. */
enum rpc_kind {
	RPC_KIND_CALL = 1, RPC_KIND_BYE = 2, RPC_KIND_REPLY = 3, RPC_KIND_PING = 4
};
enum rpc_flag { RPC_F_ARG_RMA = 1, RPC_F_RES_RMA = 2 };

/* A decoded request.  arg points into the message (valid with it). */
struct rpc_req {
	uint16_t kind, flags;
	uint64_t call_id;
	char proc[RPC_NAME_MAX + 1];
	uint32_t arg_len, result_cap;
	uint64_t arg_offset, res_offset;
	struct cci_rma_handle arg_handle, res_handle;
	const void *arg;
};

/* A decoded reply.  result points into the message unless RES_RMA. */
struct rpc_rep {
	uint16_t flags;
	uint64_t call_id;
	uint32_t status;
	int32_t proc_rc;
	uint32_t result_len;
	const void *result;
};

/* Write the request header of req into buf (RPC_REQ_HDR bytes); req->arg
 * is not copied: the caller puts inline bytes after the header. */
void rpc_req_encode(const struct rpc_req *req, void *buf);
/* Parse len bytes; false (nothing written) unless they are a well-formed
 * request: magic, known kind and flags, a NUL-terminated non-empty name
 * for a CALL, a length that matches the inline argument. */
bool rpc_req_decode(const void *buf, uint32_t len, struct rpc_req *req);

/* Write the reply header of rep into buf (RPC_REP_HDR bytes). */
void rpc_rep_encode(const struct rpc_rep *rep, void *buf);
/* Parse len bytes; false unless they are a well-formed reply. */
bool rpc_rep_decode(const void *buf, uint32_t len, struct rpc_rep *rep);

/* The connect payload: magic and version (RPC_HELLO_LEN bytes). */
void rpc_hello_encode(void *buf);
bool rpc_hello_check(const void *buf, uint32_t len);

#endif /* CCI_EX_RPC_WIRE_H */
