/*
 * emu_rma_wire.c - the codec of emulated-RMA records (emu_rma_wire.h).
 * Network byte order at any alignment (netorder.h).
 */
#include <string.h>

#include "emu_rma_wire.h"
#include "netorder.h"

void cci__emu_rma_encode(uint8_t *b, const struct cci__emu_rma_rec *r)
{
	memset(b, 0, CCI__EMU_RMA_HDR_LEN);
	b[0] = r->kind;
	cci__put32(b + 4, r->op);
	cci__put64(b + 8, r->key);
	cci__put64(b + 16, r->off);
	cci__put64(b + 24, r->kind == CCI__EMU_RMA_DONE ? (uint32_t)r->status : r->len);
}

/* The fields each kind carries; the others must be zero. */
#define F_KEY 1u
#define F_OFF 2u
#define F_LEN 4u
static const uint8_t kind_fields[CCI__EMU_RMA_KIND_END] = {
	[CCI__EMU_RMA_WR_DATA] = F_KEY | F_OFF, [CCI__EMU_RMA_WR_END] = F_LEN,
	[CCI__EMU_RMA_RD_REQ] = F_KEY | F_OFF | F_LEN, [CCI__EMU_RMA_RD_DATA] = F_OFF,
	[CCI__EMU_RMA_DONE] = F_LEN,
};

/* The rules of d's kind, with tail bytes after its header: NULL or why not. */
static const char *kind_check(const struct cci__emu_rma_rec *d, uint64_t tail,
                              const struct cci__emu_rma_limits *lim)
{
	switch (d->kind) {
	case CCI__EMU_RMA_WR_DATA:
	case CCI__EMU_RMA_RD_DATA:
		if (tail == 0 || tail > lim->frag_max)
			return "RMA data fragment empty or too long";
		return d->off + tail < d->off ? "RMA fragment past the end of the address space" : NULL;
	case CCI__EMU_RMA_RD_REQ:
		if (d->len == 0 || d->off + d->len < d->off)
			return "RMA read of zero bytes or past the end of the address space";
		return tail ? "bytes after an RMA read request" : NULL;
	case CCI__EMU_RMA_WR_END:
		if (d->len > lim->mss)
			return "RMA completion message longer than the mss";
		return tail != (lim->msg_inline ? d->len : 0) ? "RMA completion message length mismatch"
		                                              : NULL;
	default: /* DONE */
		if (d->len > UINT32_MAX)
			return "reserved RMA field set";
		return tail ? "bytes after an RMA completion" : NULL;
	}
}

int cci__emu_rma_decode(const uint8_t *b, uint64_t tail, const struct cci__emu_rma_limits *lim,
                        struct cci__emu_rma_rec *r, const char **why)
{
	struct cci__emu_rma_rec d = { .kind = b[0], .op = cci__get32(b + 4),
		                      .key = cci__get64(b + 8), .off = cci__get64(b + 16),
		                      .len = cci__get64(b + 24) };
	unsigned f = d.kind < CCI__EMU_RMA_KIND_END ? kind_fields[d.kind] : 0;
	const char *bad = NULL;

	if (d.kind == 0 || d.kind >= CCI__EMU_RMA_KIND_END)
		bad = "unknown RMA record kind";
	else if (b[1] != 0 || b[2] != 0 || b[3] != 0)
		bad = "reserved RMA field set";
	else if (d.op == 0)
		bad = "RMA record without an operation id";
	else if ((d.key && !(f & F_KEY)) || (d.off && !(f & F_OFF)) || (d.len && !(f & F_LEN)))
		bad = "reserved RMA field set";
	else
		bad = kind_check(&d, tail, lim);
	if (bad) {
		*why = bad;
		return -1;
	}
	if (d.kind == CCI__EMU_RMA_DONE) {
		d.status = (int)(int32_t)(uint32_t)d.len;
		d.len = 0;
	}
	*r = d;
	return 0;
}
