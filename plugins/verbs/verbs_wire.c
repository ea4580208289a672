/*
 * verbs_wire.c - the codec of the verbs transport: the header of every
 * SEND and the hello carried in rdma_cm private data (the bodies of the
 * registration exchange are plugins/common/peer_reg_wire.c's).  Pure
 * functions over bytes, fuzzed by tests/fuzz/verbs_wire_fuzz.c.
 */
#include <string.h>

#include "verbs_proto.h"

void verbs_hdr_encode(const struct verbs_hdr *h, void *out)
{
	uint8_t *p = out;

	p[0] = h->type;
	p[1] = VERBS_WIRE_VERSION;
	cci__put16(p + 2, h->credits);
	cci__put32(p + 4, h->seq);
	cci__put32(p + 8, h->len);
	cci__put32(p + 12, h->aux);
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
	case VERBS_T_MR_REP:
	case VERBS_T_MR_INVAL:
		return cci__peer_reg_body_len(type - VERBS_T_MR);
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
	d = (struct verbs_hdr){ .type = p[0], .version = p[1], .credits = cci__get16(p + 2),
	                        .seq = cci__get32(p + 4), .len = cci__get32(p + 8),
	                        .aux = cci__get32(p + 12) };
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

void verbs_hello_encode(const struct verbs_hello *h, void *out)
{
	uint8_t *p = out;

	memset(p, 0, VERBS_HELLO_LEN);
	cci__put32(p, VERBS_HELLO_MAGIC);
	p[4] = VERBS_WIRE_VERSION;
	p[5] = h->kind;
	p[6] = h->attr;
	cci__put32(p + 8, h->mss);
	cci__put32(p + 12, h->credits);
	cci__put32(p + 16, h->data_len);
	cci__put64(p + 24, h->nonce);
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
	if (cci__get32(p) != VERBS_HELLO_MAGIC) {
		*why_p = "private data without the CCI hello's magic (not a CCI verbs peer?)";
		return CCI_EINVAL;
	}
	if (p[4] != VERBS_WIRE_VERSION) {
		*why_p = "a hello of another wire version";
		return CCI_EINVAL;
	}
	d = (struct verbs_hello){ .kind = p[5], .attr = p[6], .mss = cci__get32(p + 8),
	                          .credits = cci__get32(p + 12), .data_len = cci__get32(p + 16),
	                          .nonce = cci__get64(p + 24) };
	why = hello_check(&d, kind);
	if (why) {
		*why_p = why;
		return CCI_EINVAL;
	}
	*h = d;
	return CCI_SUCCESS;
}
