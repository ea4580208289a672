/*
 * ofi_wire.h - the messages of the libfabric transport, and their decoder
 * (ofi_wire.c).
 *
 * Every message on the RDM endpoint begins with a header of OFI_HDR_LEN
 * bytes; the body follows.  Every multi-byte field travels big-endian
 * (network byte order), at the offsets each layout below gives: the
 * structs are the fields as the host holds them, written to wire bytes
 * by the encoders here (ofi_hdr_encode, ofi_hello_encode,
 * ofi_cancel_encode) and read back only by ofi_wire_decode.  An
 * application message to a peer that takes remote CQ data carries its
 * header in the 64-bit datum instead (ofi_imm_pack; libfabric carries
 * the datum as an integer, so it has no byte order of ours).  Whatever
 * arrives is checked by ofi_wire_decode or ofi_imm_decode before any
 * field is used: pure functions (no I/O, no allocation, no endpoint
 * state), fuzzed by tests/fuzz/ofi_wire_fuzz.c.
 */
#ifndef CCI_OFI_WIRE_H
#define CCI_OFI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cci.h"
/* By path: the unit test and the fuzzer build this header with this
 * folder alone on their include path. */
#include "../common/hello.h"
#include "../common/netorder.h"
#include "../common/peer_reg_wire.h"

#define OFI_MSS_MIN 8192u
#define OFI_MSS_MAX (1u << 20)
#define OFI_WINDOW_MAX 64u            /* credits one connection is granted at most */
#define OFI_ADDR_MAX 256u             /* provider address bytes */

enum ofi_type {
	OFI_T_MSG = 1,      /* application message; seq orders RO */
	OFI_T_REQ = 2,      /* connection request (dst 0), struct ofi_hello */
	OFI_T_ACCEPT = 3,   /* answer, struct ofi_hello */
	OFI_T_REJECT = 4,
	OFI_T_DISC = 5,     /* the sender closed the connection; aux OFI_DISC_LAST: answer it */
	OFI_T_CANCEL = 6,   /* the client gave up waiting (dst 0), struct ofi_cancel */
	OFI_T_CREDIT = 7,   /* only the credits field */
	OFI_T_PING = 8,
	OFI_T_PONG = 9,
	OFI_T_MR = 10,      /* the registration-key messages from here (peer_reg_wire.h) */
	OFI_T_MR_REQ = OFI_T_MR + CCI__PEER_REG_MSG_REQ,
	OFI_T_MR_REP = OFI_T_MR + CCI__PEER_REG_MSG_REP,
	OFI_T_MR_INVAL = OFI_T_MR + CCI__PEER_REG_MSG_INVAL,
	OFI_T_MR_DONE = OFI_T_MR + CCI__PEER_REG_MSG_DONE,
	OFI_T_DISC_ACK = OFI_T_MR_DONE + 1 /* a DISC marked OFI_DISC_LAST was taken */
};
#define OFI_T_LAST OFI_T_DISC_ACK
/* The aux of a DISC that cci_disconnect or endpoint teardown sends, the
 * connection's last word: its receiver answers with a DISC_ACK, once it
 * read the DISC and so every message of the connection before it. */
#define OFI_DISC_LAST 1u

/* Every message begins with this; the payload follows, 8-byte aligned.
 * Wire offsets: dst 0, seq 4, credits 8, type 10, version 11, aux 12. */
struct ofi_hdr {
	uint32_t dst;      /* the receiver's connection id, 0 for REQ/CANCEL */
	uint32_t seq;      /* MSG: per-connection sequence number */
	uint16_t credits;  /* receive buffers given back to the receiver of this */
	uint8_t type;      /* enum ofi_type */
	uint8_t version;
	uint32_t aux;
};
#define OFI_HDR_LEN 16u
/* 2: network byte order (1 was the host's); 3: the hello begins with the
 * common core (hello.h).  The version byte sits where it always did, so a
 * peer of another version is refused by it. */
#define OFI_WIRE_VERSION 3

/* Write h's fields, with our version, as the OFI_HDR_LEN bytes at out
 * (the send path's one header write: a few stores and byte swaps). */
static inline void ofi_hdr_encode(const struct ofi_hdr *h, void *out)
{
	uint8_t *p = out;

	cci__put32(p, h->dst);
	cci__put32(p + 4, h->seq);
	cci__put16(p + 8, h->credits);
	p[10] = h->type;
	p[11] = OFI_WIRE_VERSION;
	cci__put32(p + 12, h->aux);
}

/* The identity of a process, to watch peers of this host for death. */
struct ofi_proc {
	uint64_t host;      /* hash of the boot id and host name */
	uint64_t start;     /* start time of the process (clock ticks since boot) */
	uint32_t pid;
	uint32_t pad;
};

/*
 * Application messages to a peer that takes remote CQ data carry no
 * header in the payload: the 64-bit immediate datum holds it, so the
 * payload alone meets the provider's inject and eager limits.
 *   bits  0..15 slot, 16..27 low bits of the generation (of dst),
 *        28..47 low 20 bits of seq, 48..59 credits, 60..63 type (MSG).
 */
#define OFI_IMM_CREDITS_MAX 0xfffu
static inline uint64_t ofi_imm_pack(uint32_t dst, uint32_t seq, uint32_t credits)
{
	return (uint64_t)(dst & 0xffffu) | (uint64_t)((dst >> 16) & 0xfffu) << 16 |
	       (uint64_t)(seq & 0xfffffu) << 28 | (uint64_t)(credits & 0xfffu) << 48 |
	       (uint64_t)OFI_T_MSG << 60;
}

#define OFI_HELLO_IMM 1u    /* the sender takes headers as remote CQ data */

/*
 * REQ and ACCEPT.  REQ: addr then data follow; ACCEPT: nothing follows.
 * Wire offsets: the hello core 0 (attr, mss, credits: receive buffers
 * granted to the peer, data_len: the REQ's connect payload, nonce: random
 * per connect attempt; an ACCEPT has neither attribute nor payload), id 24,
 * flags 28, proc.host 32, proc.start 40, proc.pid 48, addr_len 52,
 * (zero) 56.
 */
#define OFI_HELLO_LEN 64u
struct ofi_hello {
	struct cci__hello core;
	uint32_t id;        /* the sender's connection id */
	uint32_t flags;     /* OFI_HELLO_* */
	struct ofi_proc proc;
	uint32_t addr_len;  /* REQ: the client's provider address */
};

/* Wire offsets: id 0, (zero) 4, nonce 8. */
#define OFI_CANCEL_LEN 16u
struct ofi_cancel {
	uint32_t id;        /* the client's connection id */
	uint32_t pad;
	uint64_t nonce;
};

/* Write h (OFI_HELLO_LEN bytes) or c (OFI_CANCEL_LEN bytes) at out. */
void ofi_hello_encode(const struct ofi_hello *h, void *out);
void ofi_cancel_encode(const struct ofi_cancel *c, void *out);

/* A message decoded by ofi_wire_decode: the fields in host byte order;
 * pointers are into its bytes. */
struct ofi_msg {
	struct ofi_hdr hdr;
	const uint8_t *body;        /* after the header */
	uint32_t body_len;
	const uint8_t *addr;        /* REQ: the client's provider address (hello.addr_len) */
	const uint8_t *data;        /* REQ: the connect payload (hello.core.data_len) */
	union {
		struct ofi_hello hello;     /* REQ, ACCEPT */
		struct ofi_cancel cancel;   /* CANCEL */
		struct cci__peer_reg_rep mr_rep; /* MR_REP: rkey fi_mr_key(), addr the
		                                    offset 0 for fi_write (0 without
		                                    FI_MR_VIRT_ADDR) */
		uint64_t key;               /* MR_REQ, MR_INVAL, MR_DONE: a core key */
	} u;
};

/*
 * Decode the len bytes of one received message.  CCI_SUCCESS: *m holds
 * the header and, by type, the body's fields.  CCI_EMSGSIZE for a length
 * that is not the type's, CCI_EINVAL for a bad version, type, destination
 * or field; *why_p (static text) says which, and *m is left undefined.
 * Checked here: a body of exactly its type's size (any size for MSG: its
 * bound, the endpoint's mss, is the receive path's), dst 0 exactly for
 * REQ and CANCEL, and in a hello its core (cci__hello_decode: mss within
 * [OFI_MSS_MIN, OFI_MSS_MAX], credits within [1, OFI_WINDOW_MAX]), a
 * nonzero id, known flags, zero padding, an address of 1..OFI_ADDR_MAX
 * bytes in a REQ and none in an ACCEPT; in an MR_REP
 * a known status and flags, and a range that does not wrap.
 */
int ofi_wire_decode(const void *buf, size_t len, struct ofi_msg *m, const char **why_p);

/* The fields of a remote CQ datum (ofi_imm_pack). */
struct ofi_imm {
	uint32_t slot;     /* the receiver's connection slot (low 16 bits of its id) */
	uint32_t gen;      /* the low 12 bits of its generation */
	uint32_t seq20;    /* the low 20 bits of the sequence number */
	uint32_t credits;
};

/* CCI_SUCCESS, or CCI_EINVAL when the datum is not an application
 * message's or names slot 0 (no connection's). */
int ofi_imm_decode(uint64_t data, struct ofi_imm *im);

/* The full sequence number nearest to next (the one expected) whose low
 * 20 bits are seq20. */
uint32_t ofi_imm_seq(uint32_t next, uint32_t seq20);

#endif /* CCI_OFI_WIRE_H */
