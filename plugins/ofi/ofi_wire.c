/*
 * ofi_wire.c - the codec of the libfabric transport's messages
 * (ofi_wire.h): the bodies' encoders, and the decoder every received
 * header and body passes before the receive path reads a field of it.
 */
#include "ofi_wire.h"

/* The body size of each type: MSG and REQ have rules of their own (never
 * looked up here); REJECT, DISC, CREDIT, PING, PONG and DISC_ACK carry none. */
static const uint32_t body_len[OFI_T_LAST + 1] = {
	[OFI_T_ACCEPT] = OFI_HELLO_LEN,
	[OFI_T_CANCEL] = OFI_CANCEL_LEN,
	[OFI_T_MR_REQ] = CCI__PEER_REG_KEY_LEN,
	[OFI_T_MR_REP] = CCI__PEER_REG_REP_LEN,
	[OFI_T_MR_INVAL] = CCI__PEER_REG_KEY_LEN,
	[OFI_T_MR_DONE] = CCI__PEER_REG_KEY_LEN,
};

/* ---- Encoders ---- */

void ofi_hello_encode(const struct ofi_hello *h, void *out)
{
	uint8_t *p = out;

	cci__hello_encode(p, &h->core);
	cci__put32(p + 24, h->id);
	cci__put32(p + 28, h->flags);
	cci__put64(p + 32, h->proc.host);
	cci__put64(p + 40, h->proc.start);
	cci__put32(p + 48, h->proc.pid);
	cci__put32(p + 52, h->addr_len);
	cci__put64(p + 56, 0);
}

void ofi_cancel_encode(const struct ofi_cancel *c, void *out)
{
	uint8_t *p = out;

	cci__put32(p, c->id);
	cci__put32(p + 4, 0);
	cci__put64(p + 8, c->nonce);
}

/* ---- The decoder ---- */

/* The hello at p, as a request or an answer; NULL or why it is refused
 * (*h written either way: a request's lengths are checked after). */
static const char *hello_read(const uint8_t *p, enum cci__hello_kind kind, struct ofi_hello *h)
{
	static const struct cci__hello_limits lim = { .mss_min = OFI_MSS_MIN,
		                                      .mss_max = OFI_MSS_MAX, .credits_min = 1,
		                                      .credits_max = OFI_WINDOW_MAX };
	const char *why = NULL;

	*h = (struct ofi_hello){ .id = cci__get32(p + 24), .flags = cci__get32(p + 28),
	                         .proc = { .host = cci__get64(p + 32),
	                                   .start = cci__get64(p + 40),
	                                   .pid = cci__get32(p + 48) },
	                         .addr_len = cci__get32(p + 52) };
	if (cci__hello_decode(p, kind, &lim, &h->core, &why) != CCI_SUCCESS)
		return why;
	if (h->id == 0)
		return "hello without a connection id";
	if (h->flags & ~OFI_HELLO_IMM)
		return "unknown hello flags";
	if (cci__get64(p + 56) != 0)
		return "reserved hello bytes set";
	if (kind == CCI__HELLO_ANSWER && h->addr_len != 0)
		return "address in an answer";
	return NULL;
}

static int req_decode(struct ofi_msg *m, const char **why_p)
{
	struct ofi_hello *h = &m->u.hello;

	if (m->body_len < OFI_HELLO_LEN) {
		*why_p = "request shorter than its hello";
		return CCI_EMSGSIZE;
	}
	*why_p = hello_read(m->body, CCI__HELLO_REQUEST, h);
	if (*why_p)
		return CCI_EINVAL;
	if (h->addr_len == 0 || h->addr_len > OFI_ADDR_MAX)
		*why_p = "request address length out of range";
	else if (m->body_len != OFI_HELLO_LEN + h->addr_len + h->core.data_len) /* bounded terms: no wrap */
		*why_p = "request length disagrees with its address and payload lengths";
	if (*why_p)
		return CCI_EMSGSIZE;
	m->addr = m->body + OFI_HELLO_LEN;
	m->data = m->addr + h->addr_len;
	return CCI_SUCCESS;
}

/* The fixed-size bodies, their length already checked. */
static int body_decode(struct ofi_msg *m, const char **why_p)
{
	switch (m->hdr.type) {
	case OFI_T_ACCEPT:
		*why_p = hello_read(m->body, CCI__HELLO_ANSWER, &m->u.hello);
		break;
	case OFI_T_CANCEL:
		m->u.cancel = (struct ofi_cancel){ .id = cci__get32(m->body),
		                                   .nonce = cci__get64(m->body + 8) };
		if (m->u.cancel.id == 0)
			*why_p = "cancel without a connection id";
		break;
	case OFI_T_MR_REQ:
	case OFI_T_MR_INVAL:
	case OFI_T_MR_DONE:
		m->u.key = cci__peer_reg_key_decode(m->body);
		break;
	case OFI_T_MR_REP:
		/* provider keys are 64 bits wide */
		cci__peer_reg_rep_decode(m->body, m->body_len, UINT64_MAX, &m->u.mr_rep, why_p);
		break;
	default:
		break;
	}
	return *why_p ? CCI_EINVAL : CCI_SUCCESS;
}

int ofi_wire_decode(const void *buf, size_t len, struct ofi_msg *m, const char **why_p)
{
	const uint8_t *p;
	const char *why = NULL;
	int rc = CCI_EINVAL;

	if (!buf || len < OFI_HDR_LEN)
		why = "shorter than a header";
	else if (len - OFI_HDR_LEN > UINT32_MAX)
		why = "longer than any message";
	if (why) {
		rc = CCI_EMSGSIZE;
		goto out;
	}
	p = buf;
	m->hdr = (struct ofi_hdr){ .dst = cci__get32(p), .seq = cci__get32(p + 4),
	                           .credits = cci__get16(p + 8), .type = p[10],
	                           .version = p[11], .aux = cci__get32(p + 12) };
	m->body = (const uint8_t *)buf + OFI_HDR_LEN;
	m->body_len = (uint32_t)(len - OFI_HDR_LEN);
	m->addr = m->data = NULL;
	if (m->hdr.version != OFI_WIRE_VERSION) {
		why = "unsupported version";
	} else if (m->hdr.type < OFI_T_MSG || m->hdr.type > OFI_T_LAST) {
		why = "unknown message type";
	} else if ((m->hdr.dst == 0) != (m->hdr.type == OFI_T_REQ || m->hdr.type == OFI_T_CANCEL)) {
		why = m->hdr.dst ? "connection id in a message to the endpoint" :
		                   "message without a connection id";
	} else if (m->hdr.type == OFI_T_MSG) {
		rc = CCI_SUCCESS;
	} else if (m->hdr.type == OFI_T_REQ) {
		rc = req_decode(m, &why);
	} else if (m->body_len != body_len[m->hdr.type]) {
		why = "body length not its type's";
		rc = CCI_EMSGSIZE;
	} else {
		rc = body_decode(m, &why);
	}
out:
	if (why_p)
		*why_p = why;
	return rc;
}

int ofi_imm_decode(uint64_t data, struct ofi_imm *im)
{
	/* Slot 0 is never a connection's. */
	if ((data >> 60) != OFI_T_MSG || (data & 0xffffu) == 0)
		return CCI_EINVAL;
	im->slot = (uint32_t)(data & 0xffffu);
	im->gen = (uint32_t)(data >> 16) & 0xfffu;
	im->seq20 = (uint32_t)(data >> 28) & 0xfffffu;
	im->credits = (uint32_t)(data >> 48) & 0xfffu;
	return CCI_SUCCESS;
}

uint32_t ofi_imm_seq(uint32_t next, uint32_t seq20)
{
	/* The 20-bit difference, sign-extended. */
	return next + (uint32_t)((int32_t)((seq20 - next) << 12) >> 12);
}
