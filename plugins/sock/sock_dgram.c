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
	if (b[0] != SOCK_DG_MARK || b[3] != SOCK_DG_VERSION)
		return *why = "bad mark or version", -1;
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

void sock_dg_hello_encode(uint8_t *b, const struct sock_dg_hello *h)
{
	cci__put32(b, SOCK_DG_MAGIC);
	cci__put32(b + 4, h->attr);
	cci__put32(b + 8, h->mss);
	cci__put32(b + 12, h->window);
	cci__put32(b + 16, h->data_len);
	cci__put32(b + 20, h->dgram);
	cci__put64(b + 24, h->token);
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
		if (len < SOCK_DG_HDR_LEN + SOCK_DG_HELLO_TOKEN_END || cci__get32(body) != SOCK_DG_MAGIC)
			return -1;
		*token = cci__get64(body + 24);
	}
	return *token ? 0 : -1;
}

int sock_dg_hello_decode(const uint8_t *b, uint32_t len, struct sock_dg_hello *h,
                         const char **why)
{
	if (len < SOCK_DG_HELLO_LEN)
		return *why = "HELLO too short", -1;
	if (cci__get32(b) != SOCK_DG_MAGIC)
		return *why = "HELLO without the magic", -1;
	h->attr = cci__get32(b + 4);
	h->mss = cci__get32(b + 8);
	h->window = cci__get32(b + 12);
	h->data_len = cci__get32(b + 16);
	h->dgram = cci__get32(b + 20);
	h->token = cci__get64(b + 24);
	h->isn = cci__get64(b + 32);
	if (h->attr > CCI_CONN_ATTR_UU)
		return *why = "HELLO with an unknown attribute", -1;
	if (h->data_len > CCI_CONN_REQ_LEN || h->data_len != len - SOCK_DG_HELLO_LEN)
		return *why = "HELLO payload length wrong", -1;
	if (h->mss == 0 || h->window == 0 || h->token == 0 || h->dgram < SOCK_DG_DGRAM_MIN)
		return *why = "HELLO with a zero mss, window or token, or a tiny datagram", -1;
	return 0;
}

void sock_dg_accept_encode(uint8_t *b, const struct sock_dg_accept *a)
{
	cci__put32(b, a->mss);
	cci__put32(b + 4, a->window);
	cci__put64(b + 8, a->client_token);
	cci__put64(b + 16, a->token);
	cci__put64(b + 24, a->isn);
	cci__put32(b + 32, a->dgram);
	cci__put32(b + 36, 0);
}

int sock_dg_accept_decode(const uint8_t *b, uint32_t len, struct sock_dg_accept *a,
                          const char **why)
{
	if (len != SOCK_DG_ACCEPT_LEN)
		return *why = "ACCEPT of the wrong length", -1;
	a->mss = cci__get32(b);
	a->window = cci__get32(b + 4);
	a->client_token = cci__get64(b + 8);
	a->token = cci__get64(b + 16);
	a->isn = cci__get64(b + 24);
	a->dgram = cci__get32(b + 32);
	if (a->mss == 0 || a->window == 0 || a->token == 0 || a->dgram < SOCK_DG_DGRAM_MIN)
		return *why = "ACCEPT with a zero mss, window or token, or a tiny datagram", -1;
	return 0;
}
