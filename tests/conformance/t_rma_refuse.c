/*
 * t_rma_refuse.c - every RMA that must be refused: wrong connection type,
 * bad lengths and flags, ranges outside a registration, missing access,
 * forged and stale handles.  A refusal may come from the call or in the
 * SEND event; either way no byte of memory on either side may change (the
 * server compares its whole region with its shadow copy when it stops).
 */
#include "tests.h"

#include "rmafix.h"

#include <stdio.h>
#include <string.h>

static int refused(int rc)
{
	return rc == CCI_EINVAL || rc == CCI_ERR_RMA_HANDLE || rc == CCI_ERR_RMA_OP;
}

#define CHECK_REFUSED(rc, what) \
	CHECKF(refused(rc), "%s completed with %s", (what), h_status_name(rc))

static void check_local_untouched(struct rfix *r)
{
	uint64_t d = proto_diff(r->local, REGION, LOCAL_SEED, 0);

	CHECKF(d == REGION, "local memory changed at byte %llu", (unsigned long long)d);
	check_local_canaries(r);
}

static void finish(struct rfix *r, uint64_t notes)
{
	struct srv_stats st;

	check_local_untouched(r);
	rfix_close(r, &st);
	CHECKF(st.rma_bad == 0 && st.canary_bad == 0, "target memory changed");
	CHECKF(st.rma_notes == notes, "the target got %llu completion messages, "
	       "expected %llu", (unsigned long long)st.rma_notes,
	       (unsigned long long)notes);
}

static void uu_rma_is_einval(void)
{
	struct rfix r;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_UU);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 64, NULL, CCI_FLAG_WRITE),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 64, NULL, CCI_FLAG_READ),
	         CCI_EINVAL);
	EXPECT_QUIET(r.ep, 200);
	finish(&r, 0);
}

static void zero_length_is_einval(void)
{
	struct rfix r;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 0, NULL, CCI_FLAG_WRITE),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 0, NULL, CCI_FLAG_READ),
	         CCI_EINVAL);
	EXPECT_QUIET(r.ep, 200);
	finish(&r, 0);
}

static void read_write_flags_must_be_one(void)
{
	struct rfix r;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 64, NULL,
	                 CCI_FLAG_READ | CCI_FLAG_WRITE), CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 64, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 64, NULL, CCI_FLAG_FENCE),
	         CCI_EINVAL);
	EXPECT_QUIET(r.ep, 200);
	finish(&r, 0);
}

static void oversize_completion_message_refused(void)
{
	struct rfix r;
	uint8_t *msg;
	int rc;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	msg = r.local; /* any readable bytes */
	rc = cci_rma(r.c, msg, r.c->max_send_size + 1, r.lh, 0, &r.s.handle, 0, 64, NULL,
	             CCI_FLAG_WRITE);
	CHECK_RC2(rc, CCI_EMSGSIZE, CCI_EINVAL);
	EXPECT_QUIET(r.ep, 200);
	finish(&r, 0);
}

/* Try one RMA that must be refused and wait for its outcome. */
static void try_refused(struct rfix *r, cci_rma_handle_t *rh, uint64_t loff,
                        uint64_t roff, uint64_t len, int flags, const char *what)
{
	char buf[200];
	int rc = rma_run(r, NULL, 0, rh, loff, roff, len, flags);

	snprintf(buf, sizeof(buf), "%s %s of %llu bytes at local %llu, remote %llu", what,
	         flags & CCI_FLAG_WRITE ? "write" : "read", (unsigned long long)len,
	         (unsigned long long)loff, (unsigned long long)roff);
	CHECK_REFUSED(rc, buf);
}

static const struct { uint64_t off, len; } out_of_range[] = {
	{ REGION - 8, 16 },       /* straddles the end */
	{ REGION, 1 },            /* just past it */
	{ UINT64_MAX - 7, 16 },   /* wraps around */
	{ 0, REGION + 1 },        /* too long */
};
#define N_OOR (sizeof(out_of_range) / sizeof(out_of_range[0]))

static void local_range_outside_registration(void)
{
	struct rfix r;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	for (size_t i = 0; i < N_OOR; i++) {
		try_refused(&r, &r.s.handle, out_of_range[i].off, 0, out_of_range[i].len,
		            CCI_FLAG_WRITE, "out-of-range local");
		try_refused(&r, &r.s.handle, out_of_range[i].off, 0, out_of_range[i].len,
		            CCI_FLAG_READ, "out-of-range local");
	}
	finish(&r, 0);
}

static void remote_range_outside_registration(void)
{
	struct rfix r;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	for (size_t i = 0; i < N_OOR; i++) {
		try_refused(&r, &r.s.handle, 0, out_of_range[i].off, out_of_range[i].len,
		            CCI_FLAG_WRITE, "out-of-range remote");
		try_refused(&r, &r.s.handle, 0, out_of_range[i].off, out_of_range[i].len,
		            CCI_FLAG_READ, "out-of-range remote");
	}
	finish(&r, 0);
}

static void write_needs_write_access(void)
{
	struct rfix r;

	rfix_open(&r, CCI_FLAG_READ, CCI_CONN_ATTR_RO);
	CHECK_RC(rma_run(&r, NULL, 0, &r.s.handle, 4096, 0, 4096, CCI_FLAG_READ),
	         CCI_SUCCESS);
	CHECK(proto_diff(r.local + 4096, 4096, PROTO_INIT_SEED, 0) == 4096);
	proto_fill(r.local + 4096, 4096, LOCAL_SEED, 4096); /* restore */
	try_refused(&r, &r.s.handle, 0, 0, 4096, CCI_FLAG_WRITE, "READ-only handle:");
	finish(&r, 0);
}

static void read_needs_read_access(void)
{
	struct rfix r;
	struct proto_note note;
	struct proto_write w;
	uint32_t nl;

	rfix_open(&r, CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	try_refused(&r, &r.s.handle, 0, 0, 4096, CCI_FLAG_READ, "WRITE-only handle:");
	check_local_untouched(&r);
	w = prepare_write(&r, 0, 0, 4096, 0x9000u);
	nl = note_build(&r, &note, &w, 1);
	CHECK_RC(rma_run(&r, &note, nl, &r.s.handle, 0, 0, 4096, CCI_FLAG_WRITE),
	         CCI_SUCCESS);
	proto_fill(r.local, 4096, LOCAL_SEED, 0); /* restore */
	finish(&r, 1);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void forged_handle_refused(void)
{
	struct rfix r;
	struct cci_rma_handle fake;
	uint64_t seed = 0x9E3779B97F4A7C15ull;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	for (int i = 0; i < 5; i++) {
		for (int k = 0; k < 4; k++)
			fake.stuff[k] = i < 4 ? xorshift(&seed)
			                      : r.s.handle.stuff[k] ^ xorshift(&seed);
		try_refused(&r, &fake, 0, 0, 4096, CCI_FLAG_WRITE, "forged handle:");
		try_refused(&r, &fake, 0, 0, 4096, CCI_FLAG_READ, "forged handle:");
	}
	finish(&r, 0);
}

static void stale_remote_handle_refused(void)
{
	struct rfix r;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	srv_cmd(&r.s, SRV_CMD_DEREGISTER, 0);
	try_refused(&r, &r.s.handle, 0, 0, 4096, CCI_FLAG_WRITE, "deregistered handle:");
	try_refused(&r, &r.s.handle, 0, 0, 4096, CCI_FLAG_READ, "deregistered handle:");
	finish(&r, 0);
}

/* A new registration may take the place the old one had in the target's
 * tables (sm reuses the slot): the old handle must still be refused. */
static void replaced_remote_handle_refused(void)
{
	struct rfix r;
	struct cci_rma_handle old;
	struct proto_note note;
	struct proto_write w;
	uint32_t nl;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	srv_reregister(&r.s, &old);
	CHECK(old.stuff[0] != r.s.handle.stuff[0]);
	try_refused(&r, &old, 0, 0, 4096, CCI_FLAG_WRITE, "replaced handle:");
	try_refused(&r, &old, 0, 0, 4096, CCI_FLAG_READ, "replaced handle:");
	w = prepare_write(&r, 0, 0, 4096, 0x9000u);
	nl = note_build(&r, &note, &w, 1);
	CHECK_RC(rma_run(&r, &note, nl, &r.s.handle, 0, 0, 4096, CCI_FLAG_WRITE), CCI_SUCCESS);
	proto_fill(r.local, 4096, LOCAL_SEED, 0); /* what finish() expects of local memory */
	finish(&r, 1);
}

static void stale_local_handle_refused(void)
{
	struct rfix r;
	int rc;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	CHECK_RC(cci_rma_deregister(r.ep, r.lh), CCI_SUCCESS);
	rc = cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_READ);
	CHECK_RC2(rc, CCI_ERR_RMA_HANDLE, CCI_EINVAL);
	rc = cci_rma(r.c, NULL, 0, r.lh, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_WRITE);
	CHECK_RC2(rc, CCI_ERR_RMA_HANDLE, CCI_EINVAL);
	r.lh = NULL;
	EXPECT_QUIET(r.ep, 200);
	finish(&r, 0);
}

static void null_handles_are_einval(void)
{
	struct rfix r;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	CHECK_RC(cci_rma(r.c, NULL, 0, NULL, 0, &r.s.handle, 0, 64, NULL, CCI_FLAG_WRITE),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, NULL, 0, 64, NULL, CCI_FLAG_WRITE),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(NULL, NULL, 0, r.lh, 0, &r.s.handle, 0, 64, NULL, CCI_FLAG_WRITE),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 8, r.lh, 0, &r.s.handle, 0, 64, NULL, CCI_FLAG_WRITE),
	         CCI_EINVAL);
	EXPECT_QUIET(r.ep, 200);
	finish(&r, 0);
}

const struct h_test t_rma_refuse_tests[] = {
	{ "rma on a UU connection fails with CCI_EINVAL", uu_rma_is_einval, H_NEEDS_DEVICE, 0 },
	{ "rma with data_len 0 fails with CCI_EINVAL", zero_length_is_einval, H_NEEDS_DEVICE, 0 },
	{ "rma with both or neither of READ and WRITE fails with CCI_EINVAL",
	  read_write_flags_must_be_one, H_NEEDS_DEVICE, 0 },
	{ "rma with a completion message over max_send_size is refused",
	  oversize_completion_message_refused, H_NEEDS_DEVICE, 0 },
	{ "rma outside the local registration is refused, memory untouched",
	  local_range_outside_registration, H_NEEDS_DEVICE, 0 },
	{ "rma outside the remote registration is refused, target memory untouched",
	  remote_range_outside_registration, H_NEEDS_DEVICE, 0 },
	{ "a handle without WRITE access refuses writes and allows reads",
	  write_needs_write_access, H_NEEDS_DEVICE, 0 },
	{ "a handle without READ access refuses reads and allows writes",
	  read_needs_read_access, H_NEEDS_DEVICE, 0 },
	{ "a forged remote handle is refused and never touches memory",
	  forged_handle_refused, H_NEEDS_DEVICE, 0 },
	{ "a deregistered remote handle is refused at the target, memory untouched",
	  stale_remote_handle_refused, H_NEEDS_DEVICE, 0 },
	{ "a handle whose region was registered again is refused, the new one works",
	  replaced_remote_handle_refused, H_NEEDS_DEVICE, 0 },
	{ "a deregistered local handle is refused", stale_local_handle_refused,
	  H_NEEDS_DEVICE, 0 },
	{ "rma with a NULL handle, connection or message fails with CCI_EINVAL",
	  null_handles_are_einval, H_NEEDS_DEVICE, 0 },
};
const size_t t_rma_refuse_count = sizeof(t_rma_refuse_tests) / sizeof(t_rma_refuse_tests[0]);
