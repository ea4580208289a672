/*
 * sock_wire.h - the wire format of the socket transports (tcp today, the
 * UDP transport later): the frame header, the connection handshake and the
 * RMA sub-headers.  Pure encode/decode functions: no allocation, no I/O.
 *
 * Every multi-byte field is little-endian.  Decoders treat their input as
 * hostile: they check every field and report what was wrong in *why (a
 * static string for the log line that closes the connection).
 *
 * A frame is a 24-byte header followed by len payload bytes:
 *
 *   0   u8   mark     SOCK_HDR_MARK, catches garbage and lost framing
 *   1   u8   type     enum sock_frame_type
 *   2   u8   flags    SOCK_FL_*
 *   3   u8   zero
 *   4   u32  len      payload bytes after the header
 *   8   u64  seq      sequence number of a sequenced frame, else 0
 *   16  u64  ack      sequenced frames received from the peer so far
 *
 * The payload of an RMA frame starts with a fixed sub-header (see
 * sock_sub_len()); the rest is data or a completion message.
 */
#ifndef CCI_SOCK_WIRE_H
#define CCI_SOCK_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* By path: the transport tests and the fuzzers build this codec with this
 * folder alone on their include path. */
#include "../common/le.h"

#define SOCK_HDR_LEN 24u
#define SOCK_HDR_MARK 0xc5u
#define SOCK_WIRE_MAGIC 0x53494343u /* "CCIS" */
#define SOCK_WIRE_VERSION 1u
#define SOCK_HELLO_LEN 32u          /* fixed part of HELLO, before the payload */
#define SOCK_REPLY_LEN 32u          /* ACCEPT and REJECT bodies */
#define SOCK_SUB_MAX 32u            /* the longest RMA sub-header */

enum sock_frame_type {
	SOCK_F_HELLO = 1,    /* client: sock_hello + connect payload */
	SOCK_F_ACCEPT = 2,   /* server: sock_reply */
	SOCK_F_REJECT = 3,   /* server: sock_reply */
	SOCK_F_MSG = 4,      /* sequenced: one active message */
	SOCK_F_ACK = 5,      /* no payload: carries ack only */
	SOCK_F_PING = 6,     /* keepalive probe; answered by PONG */
	SOCK_F_PONG = 7,
	SOCK_F_WR_DATA = 8,  /* RMA write fragment: sub(op, key, off) + data */
	SOCK_F_WR_END = 9,   /* sequenced: sub(op) + completion message */
	SOCK_F_RD_REQ = 10,  /* RMA read request: sub(op, key, off, len) */
	SOCK_F_RD_DATA = 11, /* RMA read fragment: sub(op, off) + data */
	SOCK_F_RD_END = 12,  /* RMA read done: sub(op, status) */
	SOCK_F_RMA_NACK = 13, /* target refused an RMA write: sub(op, status) */
	SOCK_F_TYPE_END
};

/* The receiver acknowledges at once (a blocked sender waits for it). */
#define SOCK_FL_ACK_NOW 0x01u

struct sock_hdr {
	uint8_t type;
	uint8_t flags;
	uint32_t len;
	uint64_t seq;
	uint64_t ack;
};

/* What a receiver accepts; frames beyond these limits close the connection. */
struct sock_limits {
	uint32_t mss;        /* largest message payload (MSG, WR_END message) */
	uint32_t frag_max;   /* largest RMA data fragment */
};

/* The client's request. */
struct sock_hello {
	uint16_t attr;
	uint32_t mss;
	uint32_t data_len;
	uint64_t id;         /* the sender's random per-incarnation id */
	uint64_t nonce;      /* random per request, echoed in the reply */
};

/* The server's answer (ACCEPT or REJECT). */
struct sock_reply {
	uint32_t mss;
	uint64_t id;
	uint64_t nonce;
};

/* RMA sub-header; which fields travel depends on the frame type. */
struct sock_sub {
	uint32_t op;
	uint32_t status;
	uint64_t key;
	uint64_t off;
	uint64_t len;
};

void sock_hdr_encode(uint8_t *b, const struct sock_hdr *h);
/* Decode and check a header against lim: 0, or -1 with *why set. */
int sock_hdr_decode(const uint8_t *b, const struct sock_limits *lim, struct sock_hdr *h,
                    const char **why);
/* Is this frame type sequenced (counted by seq/ack)?  Inline, as the next
 * one: both are asked for every frame on the data path. */
static inline int sock_type_sequenced(uint8_t type)
{
	return type == SOCK_F_MSG || type == SOCK_F_WR_END;
}

/* Bytes of sub-header an RMA frame type starts with (0 for the others). */
static inline uint32_t sock_sub_len(uint8_t type)
{
	switch (type) {
	case SOCK_F_WR_DATA:
		return 24;
	case SOCK_F_RD_REQ:
		return 32;
	case SOCK_F_RD_DATA:
		return 16;
	case SOCK_F_WR_END:
	case SOCK_F_RD_END:
	case SOCK_F_RMA_NACK:
		return 8;
	default:
		return 0;
	}
}

void sock_hello_encode(uint8_t *b, const struct sock_hello *h);
int sock_hello_decode(const uint8_t *b, uint32_t len, struct sock_hello *h, const char **why);
void sock_reply_encode(uint8_t *b, const struct sock_reply *r);
int sock_reply_decode(const uint8_t *b, uint32_t len, struct sock_reply *r, const char **why);

/* Encode the sub-header of type into b (sock_sub_len(type) bytes). */
void sock_sub_encode(uint8_t *b, uint8_t type, const struct sock_sub *s);
int sock_sub_decode(const uint8_t *b, uint8_t type, struct sock_sub *s, const char **why);

#endif /* CCI_SOCK_WIRE_H */
