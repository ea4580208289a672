/*
 * rpc_test_calls.c - the mix of calls a test client makes, and their
 * checks.  Per thousand calls: 20 large checksums (argument by RMA READ),
 * 20 large transforms (argument by READ, result by RMA WRITE), 15 large
 * fills (result by WRITE), 10 small fills into a large buffer (result
 * inline although the buffer is registered), 5 failing procedures, 5
 * unknown ones, 2 arguments over the server's limit, 223 small transforms
 * and 700 small checksums (inline both ways).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_procs.h"
#include "rpc_test.h"

enum {
	K_SUM, K_SUM_LARGE, K_XFORM, K_XFORM_LARGE, K_FILL_LARGE, K_FILL_SMALL,
	K_FAIL, K_NOPROC, K_2BIG, K_SLOW
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static unsigned pick_kind(uint64_t r, bool slow)
{
	static const struct { unsigned below, kind; } mix_table[] = {
		{ 20, K_SUM_LARGE }, { 40, K_XFORM_LARGE }, { 55, K_FILL_LARGE },
		{ 65, K_FILL_SMALL }, { 70, K_FAIL }, { 75, K_NOPROC },
		{ 77, K_2BIG }, { 300, K_XFORM },
	};

	if (slow)
		return r % 4 ? K_SLOW : K_SUM;
	for (size_t i = 0; i < sizeof(mix_table) / sizeof(mix_table[0]); i++)
		if (r % 1000 < mix_table[i].below)
			return mix_table[i].kind;
	return K_SUM;
}

/* Argument length, result capacity and procedure of a kind; r varies
 * the sizes. */
static void kind_shape(struct rpc_test_call *c, uint64_t r)
{
	size_t small = (size_t)(r % (RPC_INLINE_MAX + 1));

	switch (c->kind) {
	case K_SUM: c->proc = "checksum"; c->arg_len = small; c->res_cap = 8; break;
	case K_SUM_LARGE: c->proc = "checksum"; c->res_cap = 8;
		c->arg_len = RPC_INLINE_MAX + 1 + (size_t)(r % (256 << 10)); break;
	case K_XFORM: c->proc = "transform"; c->arg_len = c->res_cap = small; break;
	case K_XFORM_LARGE: c->proc = "transform";
		c->arg_len = c->res_cap = RPC_INLINE_MAX + 1 + (size_t)(r % (64 << 10));
		break;
	case K_FILL_LARGE: c->proc = "fill"; c->arg_len = 12;
		c->res_cap = RPC_INLINE_MAX + 1 + (size_t)(r % (128 << 10)); break;
	case K_FILL_SMALL: c->proc = "fill"; c->arg_len = 12; c->res_cap = 4096; break;
	case K_FAIL: c->proc = "fail"; c->arg_len = small; c->res_cap = 16;
		c->want_status = RPC_EPROC; break;
	case K_NOPROC: c->proc = "no-such-procedure"; c->arg_len = small;
		c->res_cap = 16; c->want_status = RPC_ENOPROC; break;
	case K_2BIG: c->proc = "checksum"; c->arg_len = RPC_TEST_MAX_ARG + 1;
		c->res_cap = 8; c->want_status = RPC_E2BIG; break;
	default: c->proc = "slow"; c->arg_len = small; c->res_cap = 8; break;
	}
}

/* A fill's argument: {seed, length}; a small fill asks for what fits
 * inline, so the reply carries it although the buffer is registered. */
static void fill_arg(struct rpc_test_call *c)
{
	uint32_t n = (uint32_t)(c->kind == K_FILL_SMALL ? c->seed % RPC_INLINE_MAX
					     : c->res_cap);

	for (int i = 0; i < 8; i++)
		c->arg[i] = (unsigned char)(c->seed >> (8 * i));
	for (int i = 0; i < 4; i++)
		c->arg[8 + i] = (unsigned char)(n >> (8 * i));
}

bool rpc_test_call_make(struct rpc_test_call *c, unsigned client, unsigned i,
			bool slow)
{
	uint64_t r = mix((uint64_t)client << 32 | i);

	*c = (struct rpc_test_call){ .seed = mix(r), .want_status = RPC_OK };
	c->kind = pick_kind(r, slow);
	kind_shape(c, r >> 16);
	c->arg = malloc(c->arg_len ? c->arg_len : 1);
	c->res = malloc(c->res_cap ? c->res_cap : 1);
	if (!c->arg || !c->res) {
		rpc_test_call_free(c);
		return false;
	}
	/* an oversized argument is refused before anyone reads it */
	if (c->kind == K_FILL_LARGE || c->kind == K_FILL_SMALL)
		fill_arg(c);
	else if (c->kind != K_2BIG)
		rpc_procs_fill(c->arg, c->arg_len, c->seed);
	memset(c->res, 0xee, c->res_cap);
	return true;
}

bool rpc_test_call_uses_rma(const struct rpc_test_call *c)
{
	return c->arg_len > RPC_INLINE_MAX || c->res_cap > RPC_INLINE_MAX;
}

/* The exact result a successful call must give, into a malloc'd buffer. */
static unsigned char *expected(const struct rpc_test_call *c, size_t *len_p)
{
	size_t len = c->kind == K_XFORM || c->kind == K_XFORM_LARGE ? c->arg_len : 8;
	unsigned char *want;
	uint64_t h;

	if (c->kind == K_FILL_LARGE || c->kind == K_FILL_SMALL)
		len = c->kind == K_FILL_SMALL ? c->seed % RPC_INLINE_MAX : c->res_cap;
	want = malloc(len ? len : 1);
	if (!want)
		return NULL;
	if (c->kind == K_XFORM || c->kind == K_XFORM_LARGE) {
		rpc_procs_transform(c->arg, len, want);
	} else if (c->kind == K_FILL_LARGE || c->kind == K_FILL_SMALL) {
		rpc_procs_fill(want, len, c->seed);
	} else {
		h = rpc_procs_fnv1a(c->arg, c->arg_len);
		for (int i = 0; i < 8; i++)
			want[i] = (unsigned char)(h >> (8 * i));
	}
	*len_p = len;
	return want;
}

bool rpc_test_call_check(const struct rpc_test_call *c, int status,
			 const struct rpc_reply *reply)
{
	unsigned char *want;
	size_t len = 0;
	bool ok;

	if (status != c->want_status) {
		fprintf(stderr, "%s(%zu bytes): status \"%s\", expected \"%s\"\n",
			c->proc, c->arg_len, rpc_strerror(status),
			rpc_strerror(c->want_status));
		return false;
	}
	if (status == RPC_EPROC)
		return reply->proc_rc == RPC_PROCS_FAIL_RC;
	if (status != RPC_OK)
		return true;
	want = expected(c, &len);
	ok = want && reply->result_len == len && !memcmp(c->res, want, len);
	if (!ok)
		fprintf(stderr, "%s(%zu bytes): wrong result (%zu bytes, expected %zu)\n",
			c->proc, c->arg_len, reply->result_len, len);
	free(want);
	return ok;
}

void rpc_test_call_free(struct rpc_test_call *c)
{
	free(c->arg);
	free(c->res);
	c->arg = c->res = NULL;
}
