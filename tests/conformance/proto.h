/*
 * proto.h - the content of test messages and RMA data, so that the
 * receiving side can verify every byte without being told what to expect.
 *
 * A message of PROTO_HDR bytes or more starts with struct proto_hdr and its
 * body bytes follow proto_pat(proto_seed(hdr), offset); a shorter ("tiny")
 * message holds proto_pat(PROTO_TINY_SEED + len, offset).
 */
#ifndef CONFORMANCE_PROTO_H
#define CONFORMANCE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC 0x43434954u
#define PROTO_HDR 16u
#define PROTO_TINY_SEED 0x7100u
#define PROTO_INIT_SEED 0xA5u      /* initial content of RMA target memory */
#define PROTO_PAYLOAD_SEED 0x33u   /* connect request payloads */
#define PROTO_CANARY 0xC5u

enum proto_kind {
	PROTO_DATA = 0,     /* a plain message */
	PROTO_RMA_NOTE = 1, /* an RMA completion message: struct proto_note */
	PROTO_VERIFY = 2    /* the target compares all of its memory now */
};

struct proto_hdr {
	uint32_t magic;
	uint32_t seq;
	uint16_t stream;    /* a sender thread, or PROTO_SERVER_STREAM */
	uint16_t kind;
	uint32_t len;       /* the whole message */
};
#define PROTO_SERVER_STREAM 7u
#define PROTO_STREAMS 8u

/* One RMA write described to the target: region[roff + j] must equal
 * proto_pat(seed, srcoff + j) for j < len. */
struct proto_write {
	uint64_t roff, len, srcoff;
	uint32_t seed, pad;
};

#define PROTO_NOTE_MAX 16
struct proto_note {
	struct proto_hdr hdr;
	uint32_t n, pad;
	struct proto_write w[PROTO_NOTE_MAX];
};
/* The size of a note carrying n writes. */
#define PROTO_NOTE_LEN(n) ((uint32_t)(offsetof(struct proto_note, w) + \
                          (n) * sizeof(struct proto_write)))

static inline uint8_t proto_pat(uint32_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed * 0xD6E8FEB86659FD93ull);

	return (uint8_t)(x >> 56);
}

/* buf[j] = proto_pat(seed, base + j) for j < len. */
void proto_fill(void *buf, uint64_t len, uint32_t seed, uint64_t base);
/* The index of the first byte of buf that differs from proto_fill(), or
 * len when none does. */
uint64_t proto_diff(const void *buf, uint64_t len, uint32_t seed, uint64_t base);

/* Write a complete message of len bytes. */
void proto_build(void *buf, uint32_t len, uint16_t stream, uint32_t seq,
                 uint16_t kind);
/*
 * Check a received message.  Returns 1 with *h filled for a message with a
 * header, 0 for a good tiny message, -1 for a corrupt one.  Bodies of
 * PROTO_RMA_NOTE messages are not pattern-checked.
 */
int proto_parse(const void *buf, uint32_t len, struct proto_hdr *h);

#endif /* CONFORMANCE_PROTO_H */
