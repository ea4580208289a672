/*
 * sock_dgram.h - the datagram format of the UDP transport (sock://): one
 * header, then a body whose layout the type fixes.  Pure encode/decode: no
 * allocation, no I/O.  Every multi-byte field is in network byte order; the
 * decoder treats its input as hostile and says what was wrong in *why.
 *
 * Header (SOCK_DG_HDR_LEN = 32 bytes):
 *
 *   0   u8   mark     SOCK_DG_MARK
 *   1   u8   type     enum sock_dg_type
 *   2   u8   flags    SOCK_DG_F_*
 *   3   u8   version  SOCK_DG_VERSION
 *   4   u32  seq      sequence (low 32 bits) of a sequenced or UU datagram, else 0
 *   8   u64  token    the receiver's connection token (HELLO: 0)
 *   16  u32  cum      ack: first sequence not yet received   } valid with
 *   20  u32  wnd      ack: sequences below cum + wnd granted } SOCK_DG_F_ACK
 *   24  u64  sack     ack: bit i = cum + 1 + i received      }
 *
 * The sequenced types (MSG, RMA) then carry a fixed sub-header
 * (sock_dg_sub_len(): a message fragment's place, or an RMA record's
 * header) and data.
 *
 * HELLO and ACCEPT bodies start with the common hello core (24 bytes,
 * plugins/common/hello.h; credits: the window, the datagrams the sender
 * grants its peer; nonce: the client's token, which an ACCEPT echoes), then
 * u32 dgram, u32 zero, in an ACCEPT the server's u64 token, then u64 isn:
 * SOCK_DG_HELLO_LEN (then the connect payload) and SOCK_DG_ACCEPT_LEN.
 */
#ifndef CCI_SOCK_DGRAM_H
#define CCI_SOCK_DGRAM_H

#include <stddef.h>
#include <stdint.h>

/* By path: the transport tests and the fuzzers build this codec with this
 * folder alone on their include path. */
#include "../common/emu_rma_wire.h"
#include "../common/hello.h"

#define SOCK_DG_HDR_LEN 32u
#define SOCK_DG_MARK 0xd7u
#define SOCK_DG_VERSION 3u        /* 3: the handshake on the common hello core */
#define SOCK_DG_HELLO_LEN 40u     /* HELLO body before the connect payload */
#define SOCK_DG_ACCEPT_LEN 48u
#define SOCK_DG_SUB_MAX 32u
#define SOCK_DG_PAYLOAD_MAX 65507u /* the largest UDP payload over IPv4 */
#define SOCK_DG_DGRAM_MIN 1200u   /* the smallest datagram size a side may ask for */

enum sock_dg_type {
	SOCK_DG_HELLO = 1,   /* client -> server: sock_dg_hello + payload */
	SOCK_DG_ACCEPT = 2,  /* server -> client: sock_dg_accept */
	SOCK_DG_REJECT = 3,  /* server -> client: no body */
	SOCK_DG_ACK = 4,     /* ack alone (with ACK_NOW: a probe asking for one) */
	SOCK_DG_PING = 5,    /* keepalive probe, answered by PONG */
	SOCK_DG_PONG = 6,
	SOCK_DG_BYE = 7,     /* the sender closed the connection */
	SOCK_DG_UU = 8,      /* an unreliable message, whole */
	/* Sequenced (reliable) types. */
	SOCK_DG_MSG = 9,     /* sub(total, off) + a fragment of a message */
	SOCK_DG_RMA = 10,    /* sub(an emulated-RMA record's header) + its data; a write's
	                      * completion message follows WR_END as MSG (IN_ORDER) */
	SOCK_DG_TYPE_END
};

#define SOCK_DG_F_ACK 0x01u     /* cum/wnd/sack are valid */
#define SOCK_DG_F_ACK_NOW 0x02u /* acknowledge at once */
#define SOCK_DG_F_IN_ORDER 0x04u /* MSG: deliver in sequence order, even on RU */

/* core.nonce: the client's token, random, never 0. */
struct sock_dg_hello {
	struct cci__hello core;
	uint32_t dgram;      /* the largest datagram the client receives */
	uint64_t isn;        /* the client's first sequence */
};

/* core.nonce: the client's token, echoed. */
struct sock_dg_accept {
	struct cci__hello core;
	uint32_t dgram;      /* the largest datagram the server receives */
	uint64_t token;      /* the server's connection token, never 0 */
	uint64_t isn;
};

union sock_dg_sub {
	struct {
		uint32_t op;   /* MSG: total message length */
		uint32_t val;  /* MSG: offset of the fragment */
	};
	uint8_t rma[CCI__EMU_RMA_HDR_LEN]; /* RMA: the record's header, as on the wire */
};

/* A decoded datagram; body points into the bytes given to the decoder. */
struct sock_dg {
	uint8_t type, flags;
	uint32_t seq;
	uint64_t token;
	uint32_t cum, wnd;
	uint64_t sack;
	union sock_dg_sub sub;
	const uint8_t *body;   /* after the sub-header */
	uint32_t body_len;
};

static inline int sock_dg_sequenced(uint8_t type)
{
	return type >= SOCK_DG_MSG && type < SOCK_DG_TYPE_END;
}

/* Sub-header bytes of a type (0 for the unsequenced ones). */
uint32_t sock_dg_sub_len(uint8_t type);

/* Encode the header and sub-header of d into b (SOCK_DG_HDR_LEN +
 * sock_dg_sub_len(d->type) bytes); returns that length. */
uint32_t sock_dg_encode(uint8_t *b, const struct sock_dg *d);

/* Decode len bytes: 0 with *d filled, or -1 with *why set.  Checks the
 * mark, version, type, flags, lengths and, for MSG, that the fragment lies
 * inside its message (total <= mss). */
int sock_dg_decode(const uint8_t *b, size_t len, uint32_t mss, struct sock_dg *d,
                   const char **why);

void sock_dg_hello_encode(uint8_t *b, const struct sock_dg_hello *h);
/* A datagram of ours of which only the first len bytes are known, as an
 * ICMP error quotes it: 0 with its type and the token that names its
 * connection (the receiver's from the header; a HELLO's, the client's
 * from its body), or -1 when they are not the start of one up to that
 * token. */
#define SOCK_DG_HELLO_TOKEN_END CCI__HELLO_LEN /* a HELLO's token (the core's nonce) ends here */
int sock_dg_quoted(const uint8_t *b, size_t len, uint8_t *type, uint64_t *token);
/* The HELLO / ACCEPT body (body/body_len of a decoded datagram): 0, or -1
 * with *why (the core checked by cci__hello_decode, then sock's fields). */
int sock_dg_hello_decode(const uint8_t *b, uint32_t len, struct sock_dg_hello *h,
                         const char **why);
void sock_dg_accept_encode(uint8_t *b, const struct sock_dg_accept *a);
int sock_dg_accept_decode(const uint8_t *b, uint32_t len, struct sock_dg_accept *a,
                          const char **why);

#endif /* CCI_SOCK_DGRAM_H */
