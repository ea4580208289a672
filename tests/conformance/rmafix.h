/*
 * rmafix.h - the fixture of the RMA tests: a server owning a registered
 * region between canaries (checked against a shadow copy at every
 * completion message and when it stops), a client endpoint, a connection,
 * and a registered local buffer between canaries.
 */
#ifndef CONFORMANCE_RMAFIX_H
#define CONFORMANCE_RMAFIX_H

#include "harness.h"
#include "proto.h"
#include "server.h"

#define REGION ((uint64_t)4 * 1024 * 1024 + 8192)
#define LCANARY 4096u
#define LOCAL_SEED 0x10Cu
#define MiB ((uint64_t)1024 * 1024)

struct rfix {
	struct srv s;
	struct srv_opts o;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint8_t *mem, *local;     /* local: REGION bytes, registered as lh */
	cci_rma_handle_t *lh;
	cci_alignment_t align;
	uint32_t seq;             /* of the messages this side sends */
};

/* Start the server (target handle flags target_flags), connect with attr. */
void rfix_open(struct rfix *r, int target_flags, cci_conn_attribute_t attr);
/* The same, the server registering extra_regs 1-byte regions before its
 * target region. */
void rfix_open_extra(struct rfix *r, int target_flags, cci_conn_attribute_t attr,
                     uint32_t extra_regs);
/* Check local canaries, deregister, stop the server, tear down. */
void rfix_close(struct rfix *r, struct srv_stats *st);
void check_local_canaries(struct rfix *r);
/* Wait for the SEND event of ctx; returns its status. */
int wait_send(struct rfix *r, const void *ctx);
/* One RMA from lh, waited for: the call's status if it failed, else the
 * SEND event's. */
int rma_run(struct rfix *r, const void *msg, uint32_t msg_len, cci_rma_handle_t *rh,
            uint64_t loff, uint64_t roff, uint64_t len, int flags);
/* A completion message describing nw writes; returns its length. */
uint32_t note_build(struct rfix *r, struct proto_note *n, const struct proto_write *w,
                    uint32_t nw);
/* Fill local memory for a write and describe it. */
struct proto_write prepare_write(struct rfix *r, uint64_t loff, uint64_t roff,
                                 uint64_t len, uint32_t seed);
/* Skip the test when the transport's alignment rules exclude the RMA. */
void skip_unless_aligned(struct rfix *r, int write, uint64_t loff, uint64_t roff,
                         uint64_t len);

#endif /* CONFORMANCE_RMAFIX_H */
