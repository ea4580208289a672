/*
 * emu_rma.h - RMA emulated with messages, for transports whose wire moves
 * bytes only (tcp, sock, sm's copy mode): both sides' state and rules,
 * written once.  The records are in emu_rma_wire.h; the transport carries
 * them (one frame, datagram or ring record each, reliably, in order) and
 * says when it may send.  docs/writing-a-transport.md, "Emulated RMA",
 * gives the calls in order.
 *
 * One rule of completion: the target answers the END of a write (WR_END)
 * and of a read (its last RD_DATA, or at once when refused) with DONE
 * {op, status}; an RMA completes at the initiator when its DONE arrives,
 * with that status; a refused write's completion message is never
 * delivered; a read's goes out after its DONE, as a plain message.  FENCE
 * holds an RMA until every earlier RMA of the connection completed.
 *
 * The target checks every fragment with core->rma_lookup (key, bounds,
 * access) before a byte moves, a read's again as each fragment leaves.
 * The initiator takes read data only inside what it asked for, in order.
 *
 * Locks: none here.  The initiator's fields (next_id, started, the ops)
 * belong to the transport's transmit side, the target's (wr_op,
 * wr_status) to its receive side; the caller holds that side's lock.
 * Nothing allocates; the core is called for rma_lookup and the log only.
 */
#ifndef CCI_COMMON_EMU_RMA_H
#define CCI_COMMON_EMU_RMA_H

#include <stdint.h>

#include "cci_plugin.h"
#include "emu_rma_wire.h"

/* One connection's emulated-RMA state, both sides. */
struct cci__emu_rma_conn {
	const struct cci_core *core;
	cci__ep_t *ep;
	const char *peer;      /* for the log (the transport's, as long-lived), or NULL */
	uint32_t next_id;      /* initiator: the last op id given (never 0) */
	uint32_t started;      /* initiator: RMAs started, not complete (FENCE waits for 0) */
	uint32_t wr_op;        /* target: the write being received (0: none) ... */
	int wr_status;         /* ... and its verdict so far */
};

enum cci__emu_rma_role {
	CCI__EMU_RMA_WRITE,    /* initiator: WR_DATA..., WR_END */
	CCI__EMU_RMA_READ,     /* initiator: RD_REQ */
	CCI__EMU_RMA_ANSWER    /* target: RD_DATA... (a read's), DONE */
};

enum cci__emu_rma_phase {
	CCI__EMU_RMA_SEND,     /* records to send */
	CCI__EMU_RMA_WAIT,     /* initiator: waits for DONE (a read takes RD_DATA meanwhile) */
	CCI__EMU_RMA_OVER      /* DONE arrived (initiator: status final) or went (answer) */
};

/* One side of one RMA, in the transport's operation: the initiator's, or
 * the target's answer. */
struct cci__emu_rma_op {
	uint32_t id;
	uint8_t role, fence, started, phase;
	int status;            /* answer: the verdict so far */
	uint64_t key, roff;    /* the target's registration and offset */
	char *laddr;           /* initiator: the local bytes */
	uint64_t total, done;  /* bytes to move; sent, or received (read) */
	uint32_t msg_len;      /* the completion message (its bytes are the transport's) */
};

void cci__emu_rma_conn_init(struct cci__emu_rma_conn *c, const struct cci_core *core,
                            cci__ep_t *ep, const char *peer);

/* A peer's status reduced to those an RMA may end with (else CCI_ERR_RMA_OP). */
int cci__emu_rma_peer_status(uint32_t st);

/* ---- initiator ---------------------------------------------------------- */

/* A new RMA with cci_rma()'s arguments; takes the connection's next id.
 * Its records: cci__emu_rma_next and cci__emu_rma_sent below. */
void cci__emu_rma_op_init(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op, int flags,
                          uint64_t key, uint64_t roff, char *laddr, uint64_t total,
                          uint32_t msg_len);

/* May op send now?  1 (an RMA then counts as started until its DONE), or
 * 0 while FENCE holds it behind earlier RMAs.  Always 1 for an answer and
 * for an op past its records.  A connection that breaks sets started 0. */
int cci__emu_rma_start(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op);

/* op's next record (an initiator's or an answer's): 1 with *r (and for
 * WR_DATA and RD_DATA *data, *dlen, at most frag_max bytes; an answer's
 * registration is checked again, a refusal turning it into DONE), or 0
 * when op sends nothing more.  Then cci__emu_rma_sent once the transport
 * took it; op->phase then says whether more follows (SEND). */
int cci__emu_rma_next(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op, uint64_t frag_max,
                      struct cci__emu_rma_rec *r, void **data, uint64_t *dlen);
void cci__emu_rma_sent(struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                       uint64_t dlen);

/* RD_DATA r of dlen bytes for op: where they go (the next bytes asked
 * for), or NULL, a protocol error; cci__emu_rma_landed once they are
 * there.  cci__emu_rma_read_in does both for bytes in hand (0 or -1). */
char *cci__emu_rma_rd_place(const struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                            uint64_t dlen);
void cci__emu_rma_landed(struct cci__emu_rma_op *op, uint64_t dlen);
int cci__emu_rma_read_in(struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                         const void *data, uint64_t dlen);

/* DONE r for op: 0 with op->status final (op no longer holds a FENCE
 * back), or -1 for a protocol error (op was not waiting, or a read says
 * success without all its bytes). */
int cci__emu_rma_done_in(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op,
                         const struct cci__emu_rma_rec *r);

/* After DONE: must op's completion message go out first (a successful
 * read with one)?  Otherwise op completes now. */
static inline int cci__emu_rma_msg_due(const struct cci__emu_rma_op *op)
{
	return op->role == CCI__EMU_RMA_READ && op->status == CCI_SUCCESS && op->msg_len > 0;
}

/* ---- target ------------------------------------------------------------- */

/* WR_DATA r of dlen bytes: CCI_SUCCESS with *addr, where they go, or the
 * refusal of this write (its bytes, and its later fragments', dropped).
 * cci__emu_rma_write_in checks and writes bytes in hand. */
int cci__emu_rma_wr_place(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r,
                          uint64_t dlen, void **addr);
void cci__emu_rma_write_in(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r,
                           const void *data, uint64_t dlen);

/* WR_END r: the write's verdict, for its DONE; the completion message goes
 * to the application only on CCI_SUCCESS. */
int cci__emu_rma_wr_end(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r);

/* op answers RD_REQ r (checked: a refused one is a DONE alone) or WR_END
 * r (a DONE with verdict, from cci__emu_rma_wr_end). */
void cci__emu_rma_answer_init(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op,
                              const struct cci__emu_rma_rec *r, int verdict);

#endif /* CCI_COMMON_EMU_RMA_H */
