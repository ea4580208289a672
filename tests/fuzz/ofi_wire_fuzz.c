/*
 * ofi_wire_fuzz.c - libFuzzer harness for the libfabric transport's
 * message decoder (plugins/ofi/ofi_wire.c): any message a peer (or
 * anybody who can reach the endpoint's address) sends.  The decoder
 * accepts it only within the promised limits, with every pointer it
 * returns inside the message, or refuses it with a reason; it never reads
 * past the message.  What it accepts encodes back (ofi_*_encode) to the
 * bytes that came, padding aside: the fields are read in network byte
 * order at the offsets the encoders write.  The first 8 bytes are also taken as the remote CQ
 * datum of an application message: what ofi_imm_decode accepts packs back
 * to the same datum, and ofi_imm_seq returns the nearest sequence number.
 *
 * Build (as tests/fuzz/run.sh does):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I api -I plugins/ofi \
 *         tests/fuzz/ofi_wire_fuzz.c plugins/ofi/ofi_wire.c plugins/common/peer_reg_wire.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ofi_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read every byte of [p, p + n) so that ASan sees an over-read. */
static unsigned touch(const uint8_t *p, size_t n)
{
	unsigned s = 0;

	for (size_t i = 0; i < n; i++)
		s += p[i];
	return s;
}

static int hello_ok(const struct ofi_hello *h)
{
	return h->id != 0 && h->core.attr <= CCI_CONN_ATTR_UU && h->core.mss >= OFI_MSS_MIN &&
	       h->core.mss <= OFI_MSS_MAX && h->core.credits >= 1 &&
	       h->core.credits <= OFI_WINDOW_MAX && h->core.data_len <= CCI_CONN_REQ_LEN &&
	       !(h->flags & ~OFI_HELLO_IMM);
}

/* Does the body, hello or cancel of the message encode back to its bytes?
 * A hello's padding is checked by the decoder (zero), a cancel's is not:
 * it is copied over. */
static int hello_round_trips(const struct ofi_hello *h, const uint8_t *body)
{
	uint8_t out[OFI_HELLO_LEN];

	ofi_hello_encode(h, out);
	return memcmp(out, body, sizeof(out)) == 0;
}

static int cancel_round_trips(const struct ofi_cancel *c, const uint8_t *body)
{
	uint8_t out[OFI_CANCEL_LEN];

	ofi_cancel_encode(c, out);
	memcpy(out + 4, body + 4, 4);
	return memcmp(out, body, sizeof(out)) == 0;
}

static int rep_round_trips(const struct cci__peer_reg_rep *r, const uint8_t *body)
{
	uint8_t out[CCI__PEER_REG_REP_LEN];

	cci__peer_reg_rep_encode(r, out);
	return memcmp(out, body, sizeof(out)) == 0;
}

static void check_accepted(const struct ofi_msg *m, const uint8_t *msg, size_t len)
{
	const struct ofi_hello *h = &m->u.hello;
	uint8_t hdr[OFI_HDR_LEN];
	volatile unsigned sink;

	ofi_hdr_encode(&m->hdr, hdr);
	if (m->hdr.version != OFI_WIRE_VERSION || m->hdr.type < OFI_T_MSG ||
	    m->hdr.type > OFI_T_LAST || m->body != msg + OFI_HDR_LEN ||
	    m->body_len != len - OFI_HDR_LEN || memcmp(hdr, msg, OFI_HDR_LEN) != 0 ||
	    (m->hdr.dst == 0) != (m->hdr.type == OFI_T_REQ || m->hdr.type == OFI_T_CANCEL))
		abort();
	sink = touch(m->body, m->body_len);
	switch (m->hdr.type) {
	case OFI_T_REQ:
		if (!hello_ok(h) || h->addr_len == 0 || h->addr_len > OFI_ADDR_MAX ||
		    m->addr != m->body + OFI_HELLO_LEN ||
		    m->data != m->addr + h->addr_len || m->data + h->core.data_len != msg + len ||
		    !hello_round_trips(h, m->body))
			abort();
		sink += touch(m->addr, h->addr_len) + touch(m->data, h->core.data_len);
		break;
	case OFI_T_ACCEPT:
		if (!hello_ok(h) || h->core.attr || h->addr_len || h->core.data_len ||
		    m->body_len != OFI_HELLO_LEN ||
		    !hello_round_trips(h, m->body))
			abort();
		break;
	case OFI_T_CANCEL:
		if (m->u.cancel.id == 0 || m->body_len != OFI_CANCEL_LEN ||
		    !cancel_round_trips(&m->u.cancel, m->body))
			abort();
		break;
	case OFI_T_MR_REQ:
	case OFI_T_MR_INVAL:
	case OFI_T_MR_DONE:
		if (m->body_len != CCI__PEER_REG_KEY_LEN || m->u.key != cci__get64(m->body))
			abort();
		break;
	case OFI_T_MR_REP: {
		const struct cci__peer_reg_rep *r = &m->u.mr_rep;
		const uint32_t known = CCI_FLAG_READ | CCI_FLAG_WRITE;

		if (m->body_len != CCI__PEER_REG_REP_LEN || !rep_round_trips(r, m->body) ||
		    (r->flags & ~known) ||
		    (r->status != CCI_SUCCESS && r->status != CCI_ERR_RMA_HANDLE) ||
		    (r->status == CCI_SUCCESS && (r->len == 0 || r->addr + r->len < r->addr)))
			abort();
		break;
	}
	case OFI_T_MSG:
		break;
	default:
		if (m->body_len != 0)
			abort();
	}
	(void)sink;
}

static void check_imm(const uint8_t *data, size_t size)
{
	struct ofi_imm im;
	uint64_t d;
	uint32_t next, seq;
	int32_t dist;

	if (size < 12)
		return;
	memcpy(&d, data, sizeof(d));
	memcpy(&next, data + 8, sizeof(next));
	if (ofi_imm_decode(d, &im) != CCI_SUCCESS)
		return;
	if (im.slot == 0 || im.slot > 0xffffu || im.gen > 0xfffu || im.seq20 > 0xfffffu ||
	    im.credits > OFI_IMM_CREDITS_MAX ||
	    ofi_imm_pack(im.slot | im.gen << 16, im.seq20, im.credits) != d)
		abort();
	seq = ofi_imm_seq(next, im.seq20);
	dist = (int32_t)(seq - next);
	if ((seq & 0xfffffu) != im.seq20 || dist < -(1 << 19) || dist >= (1 << 19))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ofi_msg m;
	const char *why = NULL;
	uint8_t *msg = malloc(size ? size : 1);

	if (!msg)
		return 0;
	/* A copy of exactly size bytes, so that ASan sees any read past it. */
	memcpy(msg, data, size);
	if (ofi_wire_decode(msg, size, &m, &why) == CCI_SUCCESS) {
		if (why)
			abort();
		check_accepted(&m, msg, size);
	} else if (!why) {
		abort();
	}
	check_imm(data, size);
	free(msg);
	return 0;
}
