/*
 * emu_rma_wire.h - the records of emulated RMA, as tcp, sock and sm's
 * copy mode carry them: a fixed 32-byte header in network byte order,
 * then, for the data records, the bytes.  Pure encode/decode (no
 * allocation, no I/O, no core), so the transports' tests and the fuzzers
 * build it alone.
 *
 * A transport carries a record as the payload of one frame, datagram or
 * ring record of its own type; how many bytes follow the header is what
 * that carrier says (its length minus CCI__EMU_RMA_HDR_LEN).
 *
 *   0   u8   kind     enum cci__emu_rma_kind
 *   1   u8   zero
 *   2   u16  zero
 *   4   u32  op       the initiator's operation id, never 0
 *   8   u64  key      WR_DATA, RD_REQ: the target's registration
 *   16  u64  off      WR_DATA, RD_REQ: offset in it; RD_DATA: offset in the read
 *   24  u64  len      RD_REQ: bytes to read; WR_END: message length;
 *                     DONE: status (its 32 bits, two's complement)
 *
 * Unused fields are zero, and the decoder refuses them otherwise.
 *
 * The exchange (emu_rma.h says who does what):
 *   write  initiator: WR_DATA..., WR_END (+ completion message);
 *          target:    DONE {op, status}
 *   read   initiator: RD_REQ;
 *          target:    RD_DATA..., DONE {op, status};
 *          initiator: the completion message, as a plain message
 */
#ifndef CCI_COMMON_EMU_RMA_WIRE_H
#define CCI_COMMON_EMU_RMA_WIRE_H

#include <stdint.h>

#define CCI__EMU_RMA_HDR_LEN 32u

enum cci__emu_rma_kind {
	CCI__EMU_RMA_WR_DATA = 1, /* key, offset + data (at least one byte) */
	CCI__EMU_RMA_WR_END = 2,  /* message length (+ the message where carried inline) */
	CCI__EMU_RMA_RD_REQ = 3,  /* key, offset, length */
	CCI__EMU_RMA_RD_DATA = 4, /* offset in the read + data (at least one byte) */
	CCI__EMU_RMA_DONE = 5,    /* status: the target's verdict on a write or a read */
	CCI__EMU_RMA_KIND_END
};

/* A decoded record; the fields its kind does not use are zero. */
struct cci__emu_rma_rec {
	uint8_t kind;
	uint32_t op;
	uint64_t key;     /* WR_DATA, RD_REQ */
	uint64_t off;     /* WR_DATA, RD_REQ: in the registration; RD_DATA: in the read */
	uint64_t len;     /* RD_REQ: bytes asked; WR_END: message bytes */
	int status;       /* DONE */
};

/* What a receiver accepts; a record beyond them is a protocol error. */
struct cci__emu_rma_limits {
	uint64_t frag_max;  /* data bytes after a WR_DATA or RD_DATA header */
	uint32_t mss;       /* a WR_END's message */
	int msg_inline;     /* the WR_END's message follows its header (tcp, sm), or
	                     * travels apart as a message of its own (sock) */
};

/* Write the header of r into b (CCI__EMU_RMA_HDR_LEN bytes). */
void cci__emu_rma_encode(uint8_t *b, const struct cci__emu_rma_rec *r);

/*
 * Decode the header at b of a record whose carrier holds tail bytes after
 * it, checked against lim: 0 with *r filled, or -1 with *why (static
 * text) and *r untouched.  Checks the kind, the zero fields, the op id,
 * the tail's length for the kind (data records: 1..frag_max bytes; WR_END:
 * its message length, or none when the message travels apart; the others:
 * none), a message length within mss, a read of at least one byte, and
 * that no offset plus length wraps around.  A DONE's status is any value:
 * reduce it with cci__emu_rma_peer_status (emu_rma.h).
 */
int cci__emu_rma_decode(const uint8_t *b, uint64_t tail, const struct cci__emu_rma_limits *lim,
                        struct cci__emu_rma_rec *r, const char **why);

#endif /* CCI_COMMON_EMU_RMA_WIRE_H */
