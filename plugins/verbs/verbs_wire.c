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

	memset(p, 0, 8);
	cci__put32(p, VERBS_HELLO_MAGIC);
	p[4] = VERBS_WIRE_VERSION;
	p[5] = h->kind;
	cci__hello_encode(p + 8, &h->core);
}

int verbs_hello_decode(const void *pd, size_t n, int kind, struct verbs_hello *h,
                       const char **why_p)
{
	static const struct cci__hello_limits lim = { .mss_min = VERBS_MSS_MIN,
		                                      .mss_max = VERBS_MSS_MAX, .credits_min = 1,
		                                      .credits_max = VERBS_WINDOW_MAX };
	const uint8_t *p = pd;
	struct verbs_hello d = { .kind = (uint8_t)kind };

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
	if (p[5] != kind || p[6] || p[7]) {
		*why_p = p[5] != kind ? "a hello of the wrong kind" : "reserved hello bytes set";
		return CCI_EINVAL;
	}
	if (cci__hello_decode(p + 8, kind == VERBS_HELLO_CONNECT ? CCI__HELLO_REQUEST
	                                                          : CCI__HELLO_ANSWER,
	                      &lim, &d.core, why_p) != CCI_SUCCESS)
		return CCI_EINVAL;
	*h = d;
	return CCI_SUCCESS;
}
