/*
 * emu_rma.c - the emulated-RMA protocol, both sides (emu_rma.h).
 */
#include <string.h>

#include "emu_rma.h"

void cci__emu_rma_conn_init(struct cci__emu_rma_conn *c, const struct cci_core *core,
                            cci__ep_t *ep, const char *peer)
{
	*c = (struct cci__emu_rma_conn){ .core = core, .ep = ep, .peer = peer };
}

int cci__emu_rma_peer_status(uint32_t st)
{
	switch (st) {
	case CCI_SUCCESS:
	case CCI_ERR_RMA_HANDLE:
	case CCI_EINVAL:
	case CCI_ERR_RMA_OP:
	case CCI_ENOMEM:
	case CCI_ENOBUFS:
		return (int)st;
	default:
		return CCI_ERR_RMA_OP;
	}
}

static void refused(struct cci__emu_rma_conn *c, const char *what, uint64_t key, uint64_t off,
                    int rc)
{
	CCI__LOG(c->core, CCI_LOG_RMA, "emulated RMA %s from %s refused (key %#llx, offset %llu): %s",
	         what, c->peer ? c->peer : "a peer", (unsigned long long)key,
	         (unsigned long long)off, c->core->status_text(rc));
}

/* ---- initiator ---------------------------------------------------------- */

void cci__emu_rma_op_init(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op, int flags,
                          uint64_t key, uint64_t roff, char *laddr, uint64_t total,
                          uint32_t msg_len)
{
	if (++c->next_id == 0) /* 0 names no operation on the wire */
		c->next_id = 1;
	*op = (struct cci__emu_rma_op){ .id = c->next_id,
		.role = (flags & CCI_FLAG_WRITE) ? CCI__EMU_RMA_WRITE : CCI__EMU_RMA_READ,
		.fence = (flags & CCI_FLAG_FENCE) != 0, .key = key, .roff = roff, .laddr = laddr,
		.total = total, .msg_len = msg_len };
}

int cci__emu_rma_start(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op)
{
	if (op->started || op->role == CCI__EMU_RMA_ANSWER || op->phase != CCI__EMU_RMA_SEND)
		return 1;
	if (op->fence && c->started > 0)
		return 0;
	op->started = 1;
	c->started++;
	return 1;
}

/* op completed: it no longer holds a FENCE back. */
static void finish(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op)
{
	if (op->started)
		c->started--;
	op->started = 0;
}

/* An answer's next record: RD_DATA of the registration, checked again (it
 * may be gone since the request), or DONE. */
static void answer_next(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *a,
                        uint64_t n, struct cci__emu_rma_rec *r, void **data, uint64_t *dlen)
{
	if (a->status == CCI_SUCCESS && n > 0) {
		a->status = c->core->rma_lookup(c->ep, a->key, a->roff + a->done, n, CCI_FLAG_READ,
		                                data);
		if (a->status == CCI_SUCCESS) {
			r->kind = CCI__EMU_RMA_RD_DATA;
			r->off = a->done;
			*dlen = n;
			return;
		}
		*data = NULL;
		refused(c, "read", a->key, a->roff + a->done, a->status);
	}
	r->kind = CCI__EMU_RMA_DONE;
	r->status = a->status;
}

int cci__emu_rma_next(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op, uint64_t frag_max,
                      struct cci__emu_rma_rec *r, void **data, uint64_t *dlen)
{
	uint64_t left = op->total - op->done, n = left < frag_max ? left : frag_max;

	memset(r, 0, sizeof(*r));
	*data = NULL;
	*dlen = 0;
	if (op->phase != CCI__EMU_RMA_SEND)
		return 0;
	r->op = op->id;
	if (op->role == CCI__EMU_RMA_ANSWER) {
		answer_next(c, op, n, r, data, dlen);
	} else if (op->role == CCI__EMU_RMA_READ) {
		r->kind = CCI__EMU_RMA_RD_REQ;
		r->key = op->key;
		r->off = op->roff;
		r->len = op->total;
	} else if (n > 0) {
		r->kind = CCI__EMU_RMA_WR_DATA;
		r->key = op->key;
		r->off = op->roff + op->done;
		*data = op->laddr + op->done;
		*dlen = n;
	} else {
		r->kind = CCI__EMU_RMA_WR_END;
		r->len = op->msg_len;
	}
	return 1;
}

void cci__emu_rma_sent(struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                       uint64_t dlen)
{
	switch (r->kind) {
	case CCI__EMU_RMA_WR_DATA:
	case CCI__EMU_RMA_RD_DATA:
		op->done += dlen;
		break;
	case CCI__EMU_RMA_DONE:
		op->phase = CCI__EMU_RMA_OVER;
		break;
	default: /* WR_END, RD_REQ: the rest is the target's */
		op->phase = CCI__EMU_RMA_WAIT;
		break;
	}
}

char *cci__emu_rma_rd_place(const struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                            uint64_t dlen)
{
	if (op->role != CCI__EMU_RMA_READ || op->phase != CCI__EMU_RMA_WAIT || r->op != op->id ||
	    r->off != op->done ||
	    dlen > op->total - op->done)
		return NULL;
	return op->laddr + op->done;
}

void cci__emu_rma_landed(struct cci__emu_rma_op *op, uint64_t dlen)
{
	op->done += dlen;
}

int cci__emu_rma_read_in(struct cci__emu_rma_op *op, const struct cci__emu_rma_rec *r,
                         const void *data, uint64_t dlen)
{
	char *dst = cci__emu_rma_rd_place(op, r, dlen);

	if (!dst)
		return -1;
	memcpy(dst, data, dlen);
	cci__emu_rma_landed(op, dlen);
	return 0;
}

int cci__emu_rma_done_in(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op,
                         const struct cci__emu_rma_rec *r)
{
	if (op->role == CCI__EMU_RMA_ANSWER || op->phase != CCI__EMU_RMA_WAIT || r->op != op->id)
		return -1;
	if (r->status == CCI_SUCCESS && op->role == CCI__EMU_RMA_READ && op->done != op->total)
		return -1;
	op->status = cci__emu_rma_peer_status((uint32_t)r->status);
	op->phase = CCI__EMU_RMA_OVER;
	finish(c, op);
	return 0;
}

/* ---- target ------------------------------------------------------------- */

int cci__emu_rma_wr_place(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r,
                          uint64_t dlen, void **addr)
{
	if (c->wr_op != r->op) {
		c->wr_op = r->op;
		c->wr_status = CCI_SUCCESS;
	}
	if (c->wr_status != CCI_SUCCESS)
		return c->wr_status; /* the rest of a refused write */
	c->wr_status = c->core->rma_lookup(c->ep, r->key, r->off, dlen, CCI_FLAG_WRITE, addr);
	if (c->wr_status != CCI_SUCCESS)
		refused(c, "write", r->key, r->off, c->wr_status);
	return c->wr_status;
}

void cci__emu_rma_write_in(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r,
                           const void *data, uint64_t dlen)
{
	void *addr = NULL;

	if (cci__emu_rma_wr_place(c, r, dlen, &addr) == CCI_SUCCESS)
		memcpy(addr, data, dlen);
}

int cci__emu_rma_wr_end(struct cci__emu_rma_conn *c, const struct cci__emu_rma_rec *r)
{
	int status = c->wr_op == r->op ? c->wr_status : CCI_SUCCESS;

	c->wr_op = 0;
	c->wr_status = CCI_SUCCESS;
	return status;
}

void cci__emu_rma_answer_init(struct cci__emu_rma_conn *c, struct cci__emu_rma_op *op,
                              const struct cci__emu_rma_rec *r, int verdict)
{
	void *addr;

	*op = (struct cci__emu_rma_op){ .id = r->op, .role = CCI__EMU_RMA_ANSWER, .status = verdict };
	if (r->kind != CCI__EMU_RMA_RD_REQ)
		return;
	op->key = r->key;
	op->roff = r->off;
	op->total = r->len;
	op->status = c->core->rma_lookup(c->ep, r->key, r->off, r->len, CCI_FLAG_READ, &addr);
	if (op->status != CCI_SUCCESS)
		refused(c, "read", r->key, r->off, op->status);
}
