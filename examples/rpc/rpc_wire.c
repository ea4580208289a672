/*
 * rpc_wire.c - the codec of rpc_wire.h.  Fields are moved byte by byte,
 * so neither alignment nor the host's byte order matters.
 */
#include <string.h>

#include "rpc_wire.h"

#define OFF_NAME 16
#define OFF_ARG_HANDLE 72
#define OFF_RES_HANDLE 104

static void put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void rpc_req_encode(const struct rpc_req *req, void *buf)
{
	unsigned char *p = buf;

	memset(p, 0, RPC_REQ_HDR);
	put32(p, RPC_REQ_MAGIC);
	put16(p + 4, req->kind);
	put16(p + 6, req->flags);
	put64(p + 8, req->call_id);
	memcpy(p + OFF_NAME, req->proc, strnlen(req->proc, RPC_NAME_MAX));
	put32(p + 48, req->arg_len);
	put32(p + 52, req->result_cap);
	put64(p + 56, req->arg_offset);
	put64(p + 64, req->res_offset);
	/* handles are opaque bytes already serialised by the library */
	if (req->flags & RPC_F_ARG_RMA)
		memcpy(p + OFF_ARG_HANDLE, &req->arg_handle, 32);
	if (req->flags & RPC_F_RES_RMA)
		memcpy(p + OFF_RES_HANDLE, &req->res_handle, 32);
}

/* The kind-specific rules: a BYE or PING carries nothing, a CALL a name and an
 * argument that is either inline (and exactly the rest of the message)
 * or remote (and then not empty). */
static bool req_check(const struct rpc_req *req, uint32_t len)
{
	if (req->kind == RPC_KIND_BYE || req->kind == RPC_KIND_PING)
		return len == RPC_REQ_HDR && req->flags == 0;
	if (req->kind != RPC_KIND_CALL || (req->flags & ~3u) || !req->proc[0])
		return false;
	if (req->flags & RPC_F_ARG_RMA)
		return len == RPC_REQ_HDR && req->arg_len > 0;
	return len - RPC_REQ_HDR == req->arg_len;
}

bool rpc_req_decode(const void *buf, uint32_t len, struct rpc_req *req)
{
	const unsigned char *p = buf;
	struct rpc_req r = { 0 };

	if (len < RPC_REQ_HDR || get32(p) != RPC_REQ_MAGIC)
		return false;
	if (!memchr(p + OFF_NAME, '\0', RPC_NAME_MAX + 1))
		return false;
	r.kind = get16(p + 4);
	r.flags = get16(p + 6);
	r.call_id = get64(p + 8);
	memcpy(r.proc, p + OFF_NAME, RPC_NAME_MAX + 1);
	r.arg_len = get32(p + 48);
	r.result_cap = get32(p + 52);
	r.arg_offset = get64(p + 56);
	r.res_offset = get64(p + 64);
	memcpy(&r.arg_handle, p + OFF_ARG_HANDLE, 32);
	memcpy(&r.res_handle, p + OFF_RES_HANDLE, 32);
	r.arg = p + RPC_REQ_HDR;
	if (!req_check(&r, len))
		return false;
	*req = r;
	return true;
}

void rpc_rep_encode(const struct rpc_rep *rep, void *buf)
{
	unsigned char *p = buf;

	memset(p, 0, RPC_REP_HDR);
	put32(p, RPC_REP_MAGIC);
	put16(p + 4, RPC_KIND_REPLY);
	put16(p + 6, rep->flags);
	put64(p + 8, rep->call_id);
	put32(p + 16, rep->status);
	put32(p + 20, (uint32_t)rep->proc_rc);
	put32(p + 24, rep->result_len);
}

bool rpc_rep_decode(const void *buf, uint32_t len, struct rpc_rep *rep)
{
	const unsigned char *p = buf;
	struct rpc_rep r = { 0 };

	if (len < RPC_REP_HDR || get32(p) != RPC_REP_MAGIC ||
	    get16(p + 4) != RPC_KIND_REPLY || get32(p + 28) != 0)
		return false;
	r.flags = get16(p + 6);
	r.call_id = get64(p + 8);
	r.status = get32(p + 16);
	r.proc_rc = (int32_t)get32(p + 20);
	r.result_len = get32(p + 24);
	r.result = p + RPC_REP_HDR;
	if (r.flags & ~(uint16_t)RPC_F_RES_RMA)
		return false;
	/* an RMA'd result leaves only the header; an inline one fills the rest */
	if (len - RPC_REP_HDR != (r.flags ? 0 : r.result_len))
		return false;
	*rep = r;
	return true;
}

void rpc_hello_encode(void *buf)
{
	put32(buf, RPC_HELLO_MAGIC);
	put32((unsigned char *)buf + 4, RPC_VERSION);
}

bool rpc_hello_check(const void *buf, uint32_t len)
{
	return len == RPC_HELLO_LEN && get32(buf) == RPC_HELLO_MAGIC &&
	       get32((const unsigned char *)buf + 4) == RPC_VERSION;
}
