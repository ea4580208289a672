/*
 * rmafix.c - the fixture of the RMA tests (see rmafix.h).
 */
#include "rmafix.h"

#include <stdlib.h>
#include <string.h>

void rfix_open(struct rfix *r, int target_flags, cci_conn_attribute_t attr)
{
	rfix_open_extra(r, target_flags, attr, 0);
}

void rfix_open_extra(struct rfix *r, int target_flags, cci_conn_attribute_t attr,
                     uint32_t extra_regs)
{
	void *mem = NULL;

	memset(r, 0, sizeof(*r));
	r->o = (struct srv_opts){ .rma_len = REGION, .rma_flags = target_flags,
	                          .extra_regs = extra_regs };
	srv_start(&r->s, &r->o);
	r->ep = h_endpoint(h_setup(), NULL);
	CHECK_RC(cci_get_opt(r->ep, CCI_OPT_ENDPT_RMA_ALIGN, &r->align), CCI_SUCCESS);
	r->c = h_connect(r->ep, r->s.uri, attr, NULL, 0, NULL);
	REQUIRE(posix_memalign(&mem, 4096, REGION + 2 * LCANARY) == 0);
	r->mem = mem;
	memset(r->mem, PROTO_CANARY, REGION + 2 * LCANARY);
	r->local = r->mem + LCANARY;
	proto_fill(r->local, REGION, LOCAL_SEED, 0);
	REQUIRE_RC(cci_rma_register(r->ep, r->local, REGION, 0, &r->lh), CCI_SUCCESS);
}

void check_local_canaries(struct rfix *r)
{
	for (uint32_t i = 0; i < LCANARY; i++)
		if (!CHECKF(r->mem[i] == PROTO_CANARY &&
		            r->local[REGION + i] == PROTO_CANARY,
		            "local canary byte %u changed", i))
			return;
}

void rfix_close(struct rfix *r, struct srv_stats *st)
{
	check_local_canaries(r);
	if (r->lh)
		CHECK_RC(cci_rma_deregister(r->ep, r->lh), CCI_SUCCESS);
	srv_stop_and_teardown(&r->s, st, r->ep);
	free(r->mem);
}

int wait_send(struct rfix *r, const void *ctx)
{
	cci_event_t *ev = EXPECT_EVENT(r->ep, CCI_EVENT_SEND, 10000);
	int st;

	if (!ev)
		return CCI_ETIMEDOUT;
	CHECKF(ev->send.context == ctx, "SEND event context %p, expected %p",
	       ev->send.context, ctx);
	CHECK(ev->send.connection == r->c);
	st = ev->send.status;
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	return st;
}

int rma_run(struct rfix *r, const void *msg, uint32_t msg_len,
                   cci_rma_handle_t *rh, uint64_t loff, uint64_t roff,
                   uint64_t len, int flags)
{
	const void *ctx = h_ctx(0x100000u + r->seq);
	int rc = cci_rma(r->c, msg, msg_len, r->lh, loff, rh, roff, len, ctx, flags);

	if (rc != CCI_SUCCESS || (flags & CCI_FLAG_BLOCKING))
		return rc;
	return wait_send(r, ctx);
}

uint32_t note_build(struct rfix *r, struct proto_note *n,
                           const struct proto_write *w, uint32_t nw)
{
	uint32_t len = PROTO_NOTE_LEN(nw);

	memset(n, 0, sizeof(*n));
	n->hdr = (struct proto_hdr){ PROTO_MAGIC, r->seq++, 0, PROTO_RMA_NOTE, len };
	n->n = nw;
	memcpy(n->w, w, nw * sizeof(*w));
	return len;
}

struct proto_write prepare_write(struct rfix *r, uint64_t loff, uint64_t roff,
                                        uint64_t len, uint32_t seed)
{
	proto_fill(r->local + loff, len, seed, loff);
	return (struct proto_write){ .roff = roff, .len = len, .srcoff = loff, .seed = seed };
}

static int misaligned(uint32_t a, uint64_t v)
{
	return a && (v % a);
}

void skip_unless_aligned(struct rfix *r, int write, uint64_t loff,
                                uint64_t roff, uint64_t len)
{
	const cci_alignment_t *a = &r->align;

	if (write ? misaligned(a->rma_write_local_addr, loff) ||
	            misaligned(a->rma_write_remote_addr, roff) ||
	            misaligned(a->rma_write_length, len)
	          : misaligned(a->rma_read_local_addr, loff) ||
	            misaligned(a->rma_read_remote_addr, roff) ||
	            misaligned(a->rma_read_length, len))
		h_skip("the transport's RMA alignment excludes length %llu at offsets "
		       "%llu/%llu", (unsigned long long)len, (unsigned long long)loff,
		       (unsigned long long)roff);
}
