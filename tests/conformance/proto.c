/*
 * proto.c - building and checking test message contents.
 */
#include "proto.h"

#include <string.h>

void proto_fill(void *buf, uint64_t len, uint32_t seed, uint64_t base)
{
	uint8_t *b = buf;

	for (uint64_t j = 0; j < len; j++)
		b[j] = proto_pat(seed, base + j);
}

uint64_t proto_diff(const void *buf, uint64_t len, uint32_t seed, uint64_t base)
{
	const uint8_t *b = buf;

	for (uint64_t j = 0; j < len; j++)
		if (b[j] != proto_pat(seed, base + j))
			return j;
	return len;
}

static uint32_t body_seed(uint16_t stream, uint32_t seq)
{
	return seq ^ ((uint32_t)stream << 24);
}

void proto_build(void *buf, uint32_t len, uint16_t stream, uint32_t seq,
                 uint16_t kind)
{
	struct proto_hdr h = { PROTO_MAGIC, seq, stream, kind, len };

	if (len < PROTO_HDR) {
		proto_fill(buf, len, PROTO_TINY_SEED + len, 0);
		return;
	}
	memcpy(buf, &h, sizeof(h));
	proto_fill((uint8_t *)buf + PROTO_HDR, len - PROTO_HDR, body_seed(stream, seq),
	           PROTO_HDR);
}

int proto_parse(const void *buf, uint32_t len, struct proto_hdr *h)
{
	if (len < PROTO_HDR)
		return proto_diff(buf, len, PROTO_TINY_SEED + len, 0) == len ? 0 : -1;
	memcpy(h, buf, sizeof(*h));
	if (h->magic != PROTO_MAGIC || h->len != len || h->stream >= PROTO_STREAMS)
		return -1;
	if (h->kind == PROTO_RMA_NOTE)
		return len >= PROTO_NOTE_LEN(0) ? 1 : -1;
	if (proto_diff((const uint8_t *)buf + PROTO_HDR, len - PROTO_HDR,
	               body_seed(h->stream, h->seq), PROTO_HDR) != len - PROTO_HDR)
		return -1;
	return 1;
}
