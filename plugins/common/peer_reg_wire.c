/*
 * peer_reg_wire.c - the bodies of the registration-key messages; see
 * peer_reg_wire.h.
 */
#include "netorder.h"
#include "peer_reg_wire.h"

void cci__peer_reg_key_encode(uint64_t key, void *out)
{
	cci__put64(out, key);
}

uint64_t cci__peer_reg_key_decode(const void *in)
{
	return cci__get64(in);
}

/* Wire offsets: status 0, flags 4, key 8, rkey 16, addr 24, len 32. */
void cci__peer_reg_rep_encode(const struct cci__peer_reg_rep *r, void *out)
{
	uint8_t *p = out;

	cci__put32(p, (uint32_t)r->status);
	cci__put32(p + 4, r->flags);
	cci__put64(p + 8, r->key);
	cci__put64(p + 16, r->rkey);
	cci__put64(p + 24, r->addr);
	cci__put64(p + 32, r->len);
}

static const char *rep_check(const struct cci__peer_reg_rep *r, uint64_t rkey_max)
{
	if (r->status != CCI_SUCCESS && r->status != CCI_ERR_RMA_HANDLE)
		return "unknown registration status";
	if (r->flags & ~(uint32_t)(CCI_FLAG_READ | CCI_FLAG_WRITE))
		return "unknown registration flags";
	if (r->status != CCI_SUCCESS)
		return NULL;
	if (r->len == 0 || r->addr > UINT64_MAX - r->len)
		return "registration range empty or wrapping";
	if (r->rkey > rkey_max)
		return "remote key wider than the transport's";
	return NULL;
}

int cci__peer_reg_rep_decode(const void *in, size_t n, uint64_t rkey_max,
                             struct cci__peer_reg_rep *r, const char **why_p)
{
	const uint8_t *p = in;
	struct cci__peer_reg_rep d;
	const char *why;

	if (!in || n != CCI__PEER_REG_REP_LEN) {
		why = "registration answer of the wrong length";
	} else {
		d = (struct cci__peer_reg_rep){ .status = (int32_t)cci__get32(p),
		                                .flags = cci__get32(p + 4),
		                                .key = cci__get64(p + 8),
		                                .rkey = cci__get64(p + 16),
		                                .addr = cci__get64(p + 24),
		                                .len = cci__get64(p + 32) };
		why = rep_check(&d, rkey_max);
	}
	if (why_p)
		*why_p = why;
	if (why)
		return CCI_EINVAL;
	*r = d;
	return CCI_SUCCESS;
}
