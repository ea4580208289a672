/*
 * emu_rma_wire.c - the codec of emulated-RMA records (emu_rma_wire.h).
 * Network byte order, written and read byte by byte (any alignment).
 */
#include <string.h>

#include "emu_rma_wire.h"

static void put_be(uint8_t *b, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		b[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *b, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | b[i];
	return v;
}

void cci__emu_rma_encode(uint8_t *b, const struct cci__emu_rma_rec *r)
{
	uint64_t a = 0, bb = 0, c = 0;

	switch (r->kind) {
	case CCI__EMU_RMA_RD_REQ:
		c = r->len;
		/* fall through - key and offset as for a write fragment */
	case CCI__EMU_RMA_WR_DATA:
		a = r->key;
		bb = r->off;
		break;
	case CCI__EMU_RMA_RD_DATA:
		a = r->off;
		break;
	case CCI__EMU_RMA_WR_END:
		a = r->len;
		break;
	default: /* DONE: the status as its 32-bit two's complement */
		a = (uint32_t)r->status;
		break;
	}
	memset(b, 0, CCI__EMU_RMA_HDR_LEN);
	b[0] = r->kind;
	put_be(b + 4, r->op, 4);
	put_be(b + 8, a, 8);
	put_be(b + 16, bb, 8);
	put_be(b + 24, c, 8);
}

/* The record's fields, checked for its kind; tail as for the decoder. */
static const char *fields_check(struct cci__emu_rma_rec *r, uint64_t a, uint64_t b, uint64_t c,
                                uint64_t tail, const struct cci__emu_rma_limits *lim)
{
	switch (r->kind) {
	case CCI__EMU_RMA_WR_DATA:
	case CCI__EMU_RMA_RD_DATA:
		if (c != 0 || (r->kind == CCI__EMU_RMA_RD_DATA && b != 0))
			return "reserved RMA field set";
		if (tail == 0 || tail > lim->frag_max)
			return "RMA data fragment empty or too long";
		r->key = r->kind == CCI__EMU_RMA_WR_DATA ? a : 0;
		r->off = r->kind == CCI__EMU_RMA_WR_DATA ? b : a;
		if (r->off + tail < r->off)
			return "RMA fragment past the end of the address space";
		return NULL;
	case CCI__EMU_RMA_RD_REQ:
		if (c == 0 || b + c < b)
			return "RMA read of zero bytes or past the end of the address space";
		if (tail != 0)
			return "bytes after an RMA read request";
		r->key = a;
		r->off = b;
		r->len = c;
		return NULL;
	case CCI__EMU_RMA_WR_END:
		if (b != 0 || c != 0)
			return "reserved RMA field set";
		if (a > lim->mss)
			return "RMA completion message longer than the mss";
		if (tail != (lim->msg_inline ? a : 0))
			return "RMA completion message length mismatch";
		r->len = a;
		return NULL;
	default: /* DONE */
		if (a > UINT32_MAX || b != 0 || c != 0)
			return "reserved RMA field set";
		if (tail != 0)
			return "bytes after an RMA completion";
		r->status = (int)(int32_t)(uint32_t)a;
		return NULL;
	}
}

int cci__emu_rma_decode(const uint8_t *b, uint64_t tail, const struct cci__emu_rma_limits *lim,
                        struct cci__emu_rma_rec *r, const char **why)
{
	struct cci__emu_rma_rec d = { .kind = b[0], .op = (uint32_t)get_be(b + 4, 4) };
	const char *bad = NULL;

	if (d.kind == 0 || d.kind >= CCI__EMU_RMA_KIND_END)
		bad = "unknown RMA record kind";
	else if (b[1] != 0 || b[2] != 0 || b[3] != 0)
		bad = "reserved RMA field set";
	else if (d.op == 0)
		bad = "RMA record without an operation id";
	else
		bad = fields_check(&d, get_be(b + 8, 8), get_be(b + 16, 8), get_be(b + 24, 8), tail,
		                   lim);
	if (bad) {
		*why = bad;
		return -1;
	}
	*r = d;
	return 0;
}
