/*
 * hello.c - the handshake's core fields (hello.h).
 */
#include "hello.h"
#include "netorder.h"

void cci__hello_encode(void *out, const struct cci__hello *h)
{
	uint8_t *b = out;

	b[0] = h->attr;
	b[1] = b[2] = b[3] = 0;
	cci__put32(b + 4, h->mss);
	cci__put32(b + 8, h->credits);
	cci__put32(b + 12, h->data_len);
	cci__put64(b + 16, h->nonce);
}

int cci__hello_decode(const void *in, enum cci__hello_kind kind,
                      const struct cci__hello_limits *lim, struct cci__hello *h,
                      const char **why)
{
	const uint8_t *b = in;
	struct cci__hello d = {
		.attr = b[0],
		.mss = cci__get32(b + 4),
		.credits = cci__get32(b + 8),
		.data_len = cci__get32(b + 12),
		.nonce = cci__get64(b + 16),
	};

	if (b[1] || b[2] || b[3])
		*why = "reserved hello bytes set";
	else if (kind == CCI__HELLO_REQUEST && d.attr != CCI_CONN_ATTR_RO &&
	         d.attr != CCI_CONN_ATTR_RU && d.attr != CCI_CONN_ATTR_UU)
		*why = "unknown connection attribute";
	else if (kind == CCI__HELLO_ANSWER && (d.attr || d.data_len))
		*why = "an answer with an attribute or a payload";
	else if (d.mss < lim->mss_min || d.mss > lim->mss_max)
		*why = "message size out of range";
	else if (lim->credits_max ? d.credits < lim->credits_min || d.credits > lim->credits_max
	                          : d.credits != 0)
		*why = "credits out of range";
	else if (d.data_len > CCI_CONN_REQ_LEN)
		*why = "connect payload longer than CCI_CONN_REQ_LEN";
	else {
		*h = d;
		return CCI_SUCCESS;
	}
	return CCI_EINVAL;
}
