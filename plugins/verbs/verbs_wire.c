/*
 * verbs_wire.c - the codec of the verbs transport: the header of every
 * SEND, the bodies of the registration exchange, and the hello carried in
 * rdma_cm private data.  Pure functions over bytes, fuzzed by
 * tests/fuzz/verbs_wire_fuzz.c.
 */
#include <string.h>

#include "verbs_proto.h"

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void verbs_u64_put(void *out, uint64_t v)
{
	put32(out, (uint32_t)v);
	put32((uint8_t *)out + 4, (uint32_t)(v >> 32));
}

uint64_t verbs_u64_get(const void *in)
{
	return (uint64_t)get32(in) | (uint64_t)get32((const uint8_t *)in + 4) << 32;
}

void verbs_hdr_encode(const struct verbs_hdr *h, void *out)
{
	uint8_t *p = out;

	p[0] = h->type;
	p[1] = VERBS_WIRE_VERSION;
	put16(p + 2, h->credits);
	put32(p + 4, h->seq);
	put32(p + 8, h->len);
	put32(p + 12, h->aux);
}

/* The body size a control type must have, or -1 for a variable one. */
static long body_len_of(uint8_t type)
{
	switch (type) {
	case VERBS_T_ACCEPT:
	case VERBS_T_REJECT:
	case VERBS_T_CREDIT:
	case VERBS_T_PING:
	case VERBS_T_PONG:
		return 0;
	case VERBS_T_MR_REQ:
	case VERBS_T_MR_INVAL:
		return VERBS_MR_KEY_LEN;
	case VERBS_T_MR_REP:
		return VERBS_MR_REP_LEN;
	default:
		return -1;
	}
}

int verbs_hdr_decode(const void *buf, size_t n, uint32_t mss, struct verbs_hdr *h)
{
	const uint8_t *p = buf;
	struct verbs_hdr d;
	long want;

	if (!buf || n < VERBS_HDR_LEN)
		return CCI_EMSGSIZE;
	d = (struct verbs_hdr){ .type = p[0], .version = p[1], .credits = get16(p + 2),
	                        .seq = get32(p + 4), .len = get32(p + 8), .aux = get32(p + 12) };
	if (d.version != VERBS_WIRE_VERSION || d.type == 0 || d.type > VERBS_T_MAX)
		return CCI_EINVAL;
	if ((uint64_t)d.len != (uint64_t)(n - VERBS_HDR_LEN))
		return CCI_EMSGSIZE;
	want = body_len_of(d.type);
	if (want >= 0 && (long)d.len != want)
		return CCI_EINVAL;
	if (d.type == VERBS_T_MSG && d.len > mss)
		return CCI_EMSGSIZE;
	if (d.type == VERBS_T_REQ && d.len > CCI_CONN_REQ_LEN)
		return CCI_EMSGSIZE;
	*h = d;
	return CCI_SUCCESS;
}

void verbs_mr_rep_encode(const struct verbs_mr_rep *r, void *out)
{
	uint8_t *p = out;

	put32(p, (uint32_t)r->status);
	put32(p + 4, r->flags);
	verbs_u64_put(p + 8, r->key);
	put32(p + 16, r->rkey);
	put32(p + 20, 0);
	verbs_u64_put(p + 24, r->addr);
	verbs_u64_put(p + 32, r->len);
}

int verbs_mr_rep_decode(const void *in, size_t n, struct verbs_mr_rep *r)
{
	const uint8_t *p = in;
	struct verbs_mr_rep d;

	if (!in || n != VERBS_MR_REP_LEN)
		return CCI_EINVAL;
	d = (struct verbs_mr_rep){ .status = (int32_t)get32(p), .flags = get32(p + 4),
	                           .key = verbs_u64_get(p + 8), .rkey = get32(p + 16),
	                           .addr = verbs_u64_get(p + 24), .len = verbs_u64_get(p + 32) };
	if (d.status != CCI_SUCCESS && d.status != CCI_ERR_RMA_HANDLE)
		return CCI_EINVAL;
	if (d.flags & ~(uint32_t)(CCI_FLAG_READ | CCI_FLAG_WRITE))
		return CCI_EINVAL;
	*r = d;
	return CCI_SUCCESS;
}

void verbs_hello_encode(const struct verbs_hello *h, void *out)
{
	uint8_t *p = out;

	memset(p, 0, VERBS_HELLO_LEN);
	put32(p, VERBS_HELLO_MAGIC);
	p[4] = VERBS_WIRE_VERSION;
	p[5] = h->kind;
	p[6] = h->attr;
	put32(p + 8, h->mss);
	put32(p + 12, h->credits);
	put32(p + 16, h->data_len);
	verbs_u64_put(p + 24, h->nonce);
}

static const char *hello_check(const struct verbs_hello *h, int kind)
{
	if (h->kind != kind)
		return "a hello of the wrong kind";
	if (kind == VERBS_HELLO_CONNECT && h->attr != CCI_CONN_ATTR_RO &&
	    h->attr != CCI_CONN_ATTR_RU && h->attr != CCI_CONN_ATTR_UU)
		return "an unknown connection attribute";
	if (h->mss < VERBS_MSS_MIN || h->mss > VERBS_MSS_MAX)
		return "a message size out of range";
	if (h->credits == 0 || h->credits > VERBS_WINDOW_MAX)
		return "a credit window out of range";
	if (h->data_len > CCI_CONN_REQ_LEN)
		return "a connect payload over 1024 bytes";
	return NULL;
}

int verbs_hello_decode(const void *pd, size_t n, int kind, struct verbs_hello *h,
                       const char **why_p)
{
	const uint8_t *p = pd;
	struct verbs_hello d;
	const char *why;

	if (!pd || n < VERBS_HELLO_LEN) {
		*why_p = "no CCI hello in the private data (not a CCI verbs peer?)";
		return CCI_EINVAL;
	}
	if (get32(p) != VERBS_HELLO_MAGIC) {
		*why_p = "private data without the CCI hello's magic (not a CCI verbs peer?)";
		return CCI_EINVAL;
	}
	if (p[4] != VERBS_WIRE_VERSION) {
		*why_p = "a hello of another wire version";
		return CCI_EINVAL;
	}
	d = (struct verbs_hello){ .kind = p[5], .attr = p[6], .mss = get32(p + 8),
	                          .credits = get32(p + 12), .data_len = get32(p + 16),
	                          .nonce = verbs_u64_get(p + 24) };
	why = hello_check(&d, kind);
	if (why) {
		*why_p = why;
		return CCI_EINVAL;
	}
	*h = d;
	return CCI_SUCCESS;
}
