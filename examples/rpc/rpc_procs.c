/*
 * rpc_procs.c - the procedures of rpc_procs.h.
 */
#include <ctype.h>
#include <string.h>
#include <time.h>

#include "rpc_procs.h"

uint64_t rpc_procs_fnv1a(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rpc_procs_fill(void *p, size_t len, uint64_t seed)
{
	unsigned char *b = p;
	uint64_t state = seed;

	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = splitmix64(&state);

		for (size_t j = 0; j < 8 && i + j < len; j++)
			b[i + j] = (unsigned char)(v >> (8 * j));
	}
}

void rpc_procs_transform(const void *in, size_t len, void *out)
{
	const unsigned char *a = in;
	unsigned char *r = out;

	for (size_t i = 0; i < len; i++)
		r[i] = a[len - 1 - i] ^ 0xa5;
}

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static int proc_checksum(const void *arg, size_t len, void *res, size_t cap,
			 size_t *res_len)
{
	if (cap < 8)
		return 1;
	put_le64(res, rpc_procs_fnv1a(arg, len));
	*res_len = 8;
	return 0;
}

static int proc_transform(const void *arg, size_t len, void *res, size_t cap,
			  size_t *res_len)
{
	if (cap < len)
		return 1;
	rpc_procs_transform(arg, len, res);
	*res_len = len;
	return 0;
}

static int proc_fill(const void *arg, size_t len, void *res, size_t cap,
		     size_t *res_len)
{
	const unsigned char *a = arg;
	uint64_t seed = 0;
	uint32_t n = 0;

	if (len != 12)
		return 2;
	for (int i = 7; i >= 0; i--)
		seed = seed << 8 | a[i];
	for (int i = 11; i >= 8; i--)
		n = n << 8 | a[i];
	if (cap < n)
		return 1;
	rpc_procs_fill(res, n, seed);
	*res_len = n;
	return 0;
}

static int proc_upper(const void *arg, size_t len, void *res, size_t cap,
		      size_t *res_len)
{
	const unsigned char *a = arg;
	unsigned char *r = res;

	if (cap < len)
		return 1;
	for (size_t i = 0; i < len; i++)
		r[i] = (unsigned char)toupper(a[i]);
	*res_len = len;
	return 0;
}

static int proc_fail(const void *arg, size_t len, void *res, size_t cap,
		     size_t *res_len)
{
	(void)arg, (void)len, (void)res, (void)cap, (void)res_len;
	return RPC_PROCS_FAIL_RC;
}

static int proc_slow(const void *arg, size_t len, void *res, size_t cap,
		     size_t *res_len)
{
	const struct timespec nap = { .tv_nsec = RPC_PROCS_SLOW_US * 1000L };

	nanosleep(&nap, NULL);
	return proc_checksum(arg, len, res, cap, res_len);
}

int rpc_procs_register(struct rpc_server *server)
{
	static const struct { const char *name; rpc_proc_t fn; } procs[] = {
		{ "checksum", proc_checksum }, { "transform", proc_transform },
		{ "fill", proc_fill }, { "upper", proc_upper },
		{ "fail", proc_fail }, { "slow", proc_slow },
	};

	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		int rc = rpc_register(server, procs[i].name, procs[i].fn);

		if (rc != RPC_OK)
			return rc;
	}
	return RPC_OK;
}
