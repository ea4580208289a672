/*
 * emu_rma.h - RMA emulated with messages, for transports whose wire moves
 * bytes only (tcp, sock, sm's copy mode): the protocol's state and rules,
 * on both sides, written once.  The records and their codec are in
 * emu_rma_wire.h; the transport only carries them (one frame, datagram
 * or ring record each, in order, reliably) and says when it may send.
 *
 * The rule of completion, the same everywhere:
 *  - the target answers the END of a write (WR_END) and of a read (its
 *    last RD_DATA, or at once when refused) with DONE {op, status};
 *  - an RMA completes at the initiator when its DONE arrives, with that
 *    status; a successful read with a completion message sends that
 *    message then, as a plain message, and completes as a send does;
 *  - a refused write's completion message is never delivered to the
 *    target's application;
 *  - FENCE holds an RMA until every earlier RMA of the connection
 *    completed (cci__emu_rma_start).
 *
 * The target checks every fragment against its registrations
 * (core->rma_lookup: key, bounds, access) before a byte moves, a read's
 * again as each fragment leaves (the registration may be gone since the
 * request).  The initiator takes read data only inside what it asked
 * for, in order.
 *
 * Locks: none here.  The initiator's fields (next_id, started, and the
 * ops) belong to the transport's transmit side and the target's (wr_op,
 * wr_status) to its receive side: the caller holds whichever lock guards
 * that side.  Nothing here allocates, and nothing calls back into the
 * transport; the core is called for rma_lookup and the log only.
 */
#ifndef CCI_COMMON_EMU_RMA_H
#define CCI_COMMON_EMU_RMA_H

#include <stdint.h>

#include "cci_plugin.h"
#include "emu_rma_wire.h"

/* One connection's emulated-RMA state, on both sides. */
struct cci__emu_rma_conn {
	const struct cci_core *core;
	cci__ep_t *ep;
	const char *peer;      /* for the log; the transport's, lives as long as this */
	/* Initiator. */
	uint32_t next_id;      /* the last op id given (never 0) */
	uint32_t started;      /* RMAs started and not complete (FENCE waits for 0) */
	/* Target. */
	uint32_t wr_op;        /* the write being received (0: none) ... */
	int wr_status;         /* ... and its verdict so far */
};

enum cci__emu_rma_phase {
	CCI__EMU_RMA_SEND,     /* records to send: a write's WR_DATA and WR_END, a read's RD_REQ */
	CCI__EMU_RMA_WAIT,     /* all sent: waits for DONE (a read takes RD_DATA meanwhile) */
	CCI__EMU_RMA_OVER      /* DONE arrived: status is final */
};

/* The initiator's side of one RMA, embedded in the transport's op. */
struct cci__emu_rma_op {
	uint32_t id;
	uint8_t write, fence, started, phase;
	int status;
	uint64_t key, roff;    /* the target's registration and offset */
	char *laddr;           /* the local bytes */
	uint64_t total;        /* bytes to move */
	uint64_t done;         /* write: bytes sent; read: bytes received */
	uint32_t msg_len;      /* the completion message's bytes (kept by the transport) */
};

/* The target's answer to one read. */
struct cci__emu_rma_answer {
	uint32_t op;
	int status;            /* of the check so far */
	uint8_t over;          /* its DONE is sent */
	uint64_t key, roff, total, done;
};

void cci__emu_rma_conn_init(struct cci__emu_rma_conn *c, const struct cci_core *core,
                            cci__ep_t *ep, const char *peer);

/* A status from the peer, reduced to those an RMA may end with (anything
 * else is CCI_ERR_RMA_OP). */
int cci__emu_rma_peer_status(uint32_t st);

/* ---- initiator ---------------------------------------------------------- */

/* A new RMA with cci_rma()'s arguments (flags: WRITE or READ, FENCE);
 * takes the connection's next op id. */
void cci__emu_rma_op_init(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op, int flags,
                          uint64_t key, uint64_t roff, char *laddr, uint64_t total,
                          uint32_t msg_len);

/* May op send its first record now?  1 (then it counts as started until
 * cci__emu_rma_finish), or 0 while FENCE holds it behind earlier RMAs.
 * An op already started may always go on. */
int cci__emu_rma_start(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op);

/* op completed or failed: it no longer holds a FENCE back. */
void cci__emu_rma_finish(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op);

/* The next record op sends, without moving op on: 1 with *r, and for
 * WR_DATA its *data and *dlen (at most frag_max bytes; a WR_END's message
 * is the transport's), or 0 when op sends nothing more. */
int cci__emu_rma_next(const struct cci__emu_rma_op *op, uint64_t frag_max,
                      struct cci__emu_rma_rec *r, char **data, uint64_t *dlen);

/* The record r that cci__emu_rma_next gave, with dlen data bytes, is taken
 * by the transport: op moves past it. */
void cci__emu_rma_sent(struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                       uint64_t dlen);

/* Where the dlen bytes of RD_DATA r for op go: the next bytes of the read
 * op asked for, or NULL (a protocol error: data never asked for).  Then
 * cci__emu_rma_landed when they are there. */
char *cci__emu_rma_rd_place(const struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                            uint64_t dlen);
void cci__emu_rma_landed(struct cci__emu_rma_op *op, uint64_t dlen);

/* Both of the above for data in hand: 0, or -1 for a protocol error. */
int cci__emu_rma_read_in(struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                         const void *data, uint64_t dlen);

/* DONE r arrived for op: 0 with op->status final, or -1 for a protocol
 * error (op was not waiting for it, or a read says success without all
 * its bytes). */
int cci__emu_rma_done_in(struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r);

/* After DONE: must op's completion message go out (a read that
 * succeeded and has one)?  Otherwise op completes now. */
static inline int cci__emu_rma_msg_due(const struct cci__emu_rma_op *op)
{
	return !op->write && op->status == CCI_SUCCESS && op->msg_len > 0;
}

/* ---- target ------------------------------------------------------------- */

/* WR_DATA r with dlen bytes: CCI_SUCCESS with *addr, where they go, or the
 * status of the refusal of this write (its bytes are then dropped, and
 * so are those of its later fragments). */
int cci__emu_rma_wr_place(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r,
                          uint64_t dlen, void **addr);

/* The same for bytes in hand: checked, then written. */
void cci__emu_rma_write_in(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r,
                           const void *data, uint64_t dlen);

/* WR_END r: the write's verdict, the status of the DONE that answers it.
 * Its completion message goes to the application only on CCI_SUCCESS. */
int cci__emu_rma_wr_end(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r);

/* RD_REQ r: a's answer, checked (a refused one answers DONE at once). */
void cci__emu_rma_answer_init(struct cci__emu_rma_conn *c, struct cci__emu_rma_answer *a,
                              const struct cci__emu_rma_rec *r);

/* a's next record: RD_DATA of at most frag_max bytes at *data (the
 * registration checked again), or DONE when all went or a check failed. */
void cci__emu_rma_answer_next(struct cci__emu_rma_conn *c, struct cci__emu_rma_answer *a,
                              uint64_t frag_max, struct cci__emu_rma_rec *r, void **data,
                              uint64_t *dlen);

/* a's record r of dlen bytes is taken: 1 when it was the DONE. */
int cci__emu_rma_answer_sent(struct cci__emu_rma_answer *a, const struct cci__emu_rma_rec *r,
                             uint64_t dlen);

#endif /* CCI_COMMON_EMU_RMA_H */
