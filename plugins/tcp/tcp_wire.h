/*
 * tcp_wire.h - the wire format of the tcp transport: the frame header and
 * the connection handshake.  Pure encode/decode functions: no allocation,
 * no I/O.
 *
 * Every multi-byte field is in network byte order (big-endian).  Decoders treat their input as
 * hostile: they check every field and report what was wrong in *why (a
 * static string for the log line that closes the connection).
 *
 * A frame is a 24-byte header followed by len payload bytes:
 *
 *   0   u8   mark     TCP_HDR_MARK, catches garbage and lost framing
 *   1   u8   type     enum tcp_frame_type
 *   2   u8   flags    TCP_FL_*
 *   3   u8   zero
 *   4   u32  len      payload bytes after the header
 *   8   u64  seq      sequence number of a sequenced frame, else 0
 *   16  u64  ack      sequenced frames received from the peer so far
 *
 * The payload of an RMA frame is one emulated-RMA record: its 32-byte
 * header (tcp_sub_len()), then data or a completion message.
 *
 * The body of a HELLO, an ACCEPT and a REJECT (TCP_HELLO_LEN bytes, then
 * a HELLO's connect payload):
 *
 *   0   u32  magic    TCP_WIRE_MAGIC
 *   4   u16  version  TCP_WIRE_VERSION
 *   6   u16  zero
 *   8   u64  id       the sender's random per-incarnation id
 *   16  24   core     the handshake's core (../common/hello.h): credits 0,
 *                     tcp has no window; an answer has no attribute and
 *                     no payload and echoes the request's nonce
 */
#ifndef CCI_TCP_WIRE_H
#define CCI_TCP_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* By path: the transport tests and the fuzzers build this codec with this
 * folder alone on their include path. */
#include "../common/emu_rma_wire.h"
#include "../common/hello.h"
#include "../common/netorder.h"

#define TCP_HDR_LEN 24u
#define TCP_HDR_MARK 0xc5u
#define TCP_WIRE_MAGIC 0x43434953u /* "CCIS" on the wire */
#define TCP_WIRE_VERSION 3u        /* 3: the handshake carries the common hello core */
/* Magic and version: what every version of the handshake starts with, so
 * that a peer of another version is named as such whatever its layout. */
#define TCP_HS_PREFIX_LEN 8u
#define TCP_HELLO_LEN 40u          /* HELLO before its payload; ACCEPT and REJECT whole */
/* The mss range an endpoint can be configured with (its ini key's bounds),
 * hence what a handshake may announce. */
#define TCP_AM_MSS_MIN 64u
#define TCP_AM_MSS_MAX (16u << 20)
#define TCP_SUB_MAX CCI__EMU_RMA_HDR_LEN /* the RMA record header after a frame header */

enum tcp_frame_type {
	TCP_F_HELLO = 1,    /* client: tcp_hello + connect payload */
	TCP_F_ACCEPT = 2,   /* server: tcp_hello, an answer */
	TCP_F_REJECT = 3,   /* server: tcp_hello, an answer */
	TCP_F_MSG = 4,      /* sequenced: one active message */
	TCP_F_ACK = 5,      /* no payload: carries ack only */
	TCP_F_PING = 6,     /* keepalive probe; answered by PONG */
	TCP_F_PONG = 7,
	TCP_F_RMA = 8,      /* one emulated-RMA record (emu_rma_wire.h) */
	TCP_F_TYPE_END
};

/* The receiver acknowledges at once (a blocked sender waits for it). */
#define TCP_FL_ACK_NOW 0x01u

struct tcp_hdr {
	uint8_t type;
	uint8_t flags;
	uint32_t len;
	uint64_t seq;
	uint64_t ack;
};

/* What a receiver accepts; frames beyond these limits close the connection. */
struct tcp_limits {
	uint32_t mss;        /* largest message payload (MSG, an RMA completion message) */
	uint32_t frag_max;   /* largest RMA data fragment */
};

/* The client's request (HELLO) or the server's answer (ACCEPT, REJECT):
 * one layout, told apart by the frame type. */
struct tcp_hello {
	uint64_t id;               /* the sender's random per-incarnation id */
	struct cci__hello core;    /* core.nonce: random per request, echoed */
};

void tcp_hdr_encode(uint8_t *b, const struct tcp_hdr *h);
/* Decode and check a header against lim: 0, or -1 with *why set. */
int tcp_hdr_decode(const uint8_t *b, const struct tcp_limits *lim, struct tcp_hdr *h,
                    const char **why);
/* Is this frame type sequenced (counted by seq/ack)?  Inline, as the next
 * one: both are asked for every frame on the data path. */
static inline int tcp_type_sequenced(uint8_t type)
{
	return type == TCP_F_MSG;
}

/* Bytes of sub-header a frame type starts with: an RMA frame's record
 * header, read before its payload is placed (0 for the others). */
static inline uint32_t tcp_sub_len(uint8_t type)
{
	return type == TCP_F_RMA ? CCI__EMU_RMA_HDR_LEN : 0;
}

void tcp_hello_encode(uint8_t *b, const struct tcp_hello *h);
/* Decode the len-byte body of a HELLO (kind CCI__HELLO_REQUEST, its
 * payload after TCP_HELLO_LEN) or of an ACCEPT or REJECT (an answer):
 * 0, or -1 with *why set. */
int tcp_hello_decode(const uint8_t *b, uint32_t len, enum cci__hello_kind kind,
                     struct tcp_hello *h, const char **why);

#endif /* CCI_TCP_WIRE_H */
