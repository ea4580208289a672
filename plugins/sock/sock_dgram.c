/*
 * sock_dgram.c - see sock_dgram.h.
 */
#include <string.h>

#include "cci.h"
#include "sock_dgram.h"
#include "../common/netorder.h"

uint32_t sock_dg_sub_len(uint8_t type)
{
	switch (type) {
	case SOCK_DG_MSG:
		return 8;
	case SOCK_DG_RMA:
		return CCI__EMU_RMA_HDR_LEN;
	default:
		return 0;
	}
}

static void sub_encode(uint8_t *b, uint8_t type, const union sock_dg_sub *s)
{
	if (type == SOCK_DG_RMA) {
		memcpy(b, s->rma, CCI__EMU_RMA_HDR_LEN);
		return;
	}
	cci__put32(b, s->op);
	cci__put32(b + 4, s->val);
}

static void sub_decode(const uint8_t *b, uint8_t type, union sock_dg_sub *s)
{
	memset(s, 0, sizeof(*s));
	if (type == SOCK_DG_RMA) {
		memcpy(s->rma, b, CCI__EMU_RMA_HDR_LEN);
		return;
	}
	s->op = cci__get32(b);
	s->val = cci__get32(b + 4);
}

uint32_t sock_dg_encode(uint8_t *b, const struct sock_dg *d)
{
	uint32_t sl = sock_dg_sub_len(d->type);

	b[0] = SOCK_DG_MARK;
	b[1] = d->type;
	b[2] = d->flags;
	b[3] = SOCK_DG_VERSION;
	cci__put32(b + 4, d->seq);
	cci__put64(b + 8, d->token);
	cci__put32(b + 16, d->cum);
	cci__put32(b + 20, d->wnd);
	cci__put64(b + 24, d->sack);
	if (sl)
		sub_encode(b + SOCK_DG_HDR_LEN, d->type, &d->sub);
	return SOCK_DG_HDR_LEN + sl;
}

/* The body rules of each type, after the sub-header is read. */
static int body_ok(const struct sock_dg *d, uint32_t mss, const char **why)
{
	switch (d->type) {
	case SOCK_DG_HELLO:
		if (d->body_len < SOCK_DG_HELLO_LEN)
			return *why = "HELLO too short", -1;
		return 0;
	case SOCK_DG_ACCEPT:
		if (d->body_len != SOCK_DG_ACCEPT_LEN)
			return *why = "ACCEPT of the wrong length", -1;
		return 0;
	case SOCK_DG_MSG:
		if (d->sub.op > mss)
			return *why = "message longer than the mss", -1;
		if (d->sub.val > d->sub.op || d->body_len > d->sub.op - d->sub.val)
			return *why = "fragment outside its message", -1;
		if (d->body_len == 0 && d->sub.op != 0)
			return *why = "empty fragment", -1;
		return 0;
	case SOCK_DG_RMA: /* the record's reader checks it (emu_rma_wire.h) */
	case SOCK_DG_UU:
		return 0;
	default:
		if (d->body_len != 0)
			return *why = "unexpected bytes after the header", -1;
		return 0;
	}
}

int sock_dg_decode(const uint8_t *b, size_t len, uint32_t mss, struct sock_dg *d,
                   const char **why)
{
	uint32_t sl;

	if (len < SOCK_DG_HDR_LEN)
		return *why = "shorter than a header", -1;
	if (len > SOCK_DG_PAYLOAD_MAX)
		return *why = "longer than a UDP payload", -1;
	if (b[0] != SOCK_DG_MARK)
		return *why = "not a sock datagram (bad mark)", -1;
	if (b[3] != SOCK_DG_VERSION)
		return *why = "a datagram of another wire version", -1;
	d->type = b[1];
	d->flags = b[2];
	if (d->type == 0 || d->type >= SOCK_DG_TYPE_END)
		return *why = "unknown type", -1;
	if (d->flags & ~(SOCK_DG_F_ACK | SOCK_DG_F_ACK_NOW | SOCK_DG_F_IN_ORDER))
		return *why = "unknown flags", -1;
	d->seq = cci__get32(b + 4);
	d->token = cci__get64(b + 8);
	d->cum = cci__get32(b + 16);
	d->wnd = cci__get32(b + 20);
	d->sack = cci__get64(b + 24);
	sl = sock_dg_sub_len(d->type);
	if (len < SOCK_DG_HDR_LEN + sl)
		return *why = "shorter than its sub-header", -1;
	if (sl)
		sub_decode(b + SOCK_DG_HDR_LEN, d->type, &d->sub);
	else
		memset(&d->sub, 0, sizeof(d->sub));
	d->body = b + SOCK_DG_HDR_LEN + sl;
	d->body_len = (uint32_t)(len - SOCK_DG_HDR_LEN - sl);
	return body_ok(d, mss, why);
}

/* What a receiver takes: any mss and window but 0 (a connection uses the
 * smaller mss and caps the window at its send slots: sock_conn_rel_init). */
static const struct cci__hello_limits hs_limits = {
	.mss_min = 1, .mss_max = UINT32_MAX, .credits_min = 1, .credits_max = UINT32_MAX,
};

/* The 32 bytes HELLO and ACCEPT start with: the core, dgram, zero. */
static void hs_front_encode(uint8_t *b, const struct cci__hello *core, uint32_t dgram)
{
	cci__hello_encode(b, core);
	cci__put32(b + CCI__HELLO_LEN, dgram);
	cci__put32(b + CCI__HELLO_LEN + 4, 0);
}

static int hs_front_decode(const uint8_t *b, enum cci__hello_kind kind, struct cci__hello *core,
                           uint32_t *dgram, const char **why)
{
	if (cci__hello_decode(b, kind, &hs_limits, core, why) != CCI_SUCCESS)
		return -1;
	if (cci__get32(b + CCI__HELLO_LEN + 4) != 0)
		return *why = "reserved bytes after the hello core set", -1;
	*dgram = cci__get32(b + CCI__HELLO_LEN);
	if (*dgram < SOCK_DG_DGRAM_MIN)
		return *why = "a largest datagram below SOCK_DG_DGRAM_MIN", -1;
	if (core->nonce == 0)
		return *why = "a zero client token", -1;
	return 0;
}

void sock_dg_hello_encode(uint8_t *b, const struct sock_dg_hello *h)
{
	hs_front_encode(b, &h->core, h->dgram);
	cci__put64(b + 32, h->isn);
}

int sock_dg_quoted(const uint8_t *b, size_t len, uint8_t *type, uint64_t *token)
{
	const uint8_t *body = b + SOCK_DG_HDR_LEN;

	if (len < SOCK_DG_HDR_LEN || b[0] != SOCK_DG_MARK || b[3] != SOCK_DG_VERSION ||
	    b[1] == 0 || b[1] >= SOCK_DG_TYPE_END)
		return -1;
	*type = b[1];
	*token = cci__get64(b + 8);
	if (*type == SOCK_DG_HELLO) {
		if (len < SOCK_DG_HDR_LEN + SOCK_DG_HELLO_TOKEN_END || body[1] || body[2] || body[3])
			return -1;
		*token = cci__get64(body + SOCK_DG_HELLO_TOKEN_END - 8);
	}
	return *token ? 0 : -1;
}

int sock_dg_hello_decode(const uint8_t *b, uint32_t len, struct sock_dg_hello *h,
                         const char **why)
{
	if (len < SOCK_DG_HELLO_LEN)
		return *why = "HELLO too short", -1;
	if (hs_front_decode(b, CCI__HELLO_REQUEST, &h->core, &h->dgram, why) != 0)
		return -1;
	if (h->core.data_len != len - SOCK_DG_HELLO_LEN)
		return *why = "HELLO payload length wrong", -1;
	h->isn = cci__get64(b + 32);
	return 0;
}

void sock_dg_accept_encode(uint8_t *b, const struct sock_dg_accept *a)
{
	hs_front_encode(b, &a->core, a->dgram);
	cci__put64(b + 32, a->token);
	cci__put64(b + 40, a->isn);
}

int sock_dg_accept_decode(const uint8_t *b, uint32_t len, struct sock_dg_accept *a,
                          const char **why)
{
	if (len != SOCK_DG_ACCEPT_LEN)
		return *why = "ACCEPT of the wrong length", -1;
	if (hs_front_decode(b, CCI__HELLO_ANSWER, &a->core, &a->dgram, why) != 0)
		return -1;
	a->token = cci__get64(b + 32);
	a->isn = cci__get64(b + 40);
	if (a->token == 0)
		return *why = "ACCEPT with a zero server token", -1;
	return 0;
}
