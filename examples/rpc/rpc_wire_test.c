/*
 * rpc_wire_test - the message codec: what is encoded decodes to the same
 * fields, and every malformed message is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_wire.h"

static unsigned passed, failed;

static void check(int ok, const char *what)
{
	if (ok) {
		passed++;
	} else {
		failed++;
		fprintf(stderr, "FAILED: %s\n", what);
	}
}

static struct rpc_req sample_req(uint16_t flags)
{
	struct rpc_req r = {
		.kind = RPC_KIND_CALL, .flags = flags, .call_id = 0x1122334455667788ull,
		.arg_len = flags & RPC_F_ARG_RMA ? 5000 : 3, .result_cap = 9000,
		.arg_offset = 7, .res_offset = 9,
	};

	strcpy(r.proc, "transform");
	memset(&r.arg_handle, 0xab, sizeof(r.arg_handle));
	memset(&r.res_handle, 0xcd, sizeof(r.res_handle));
	return r;
}

static void test_req_roundtrip(void)
{
	unsigned char buf[RPC_REQ_HDR + 3];
	struct rpc_req in = sample_req(0), out;

	rpc_req_encode(&in, buf);
	memcpy(buf + RPC_REQ_HDR, "abc", 3);
	check(rpc_req_decode(buf, sizeof(buf), &out), "an inline request decodes");
	check(out.call_id == in.call_id && out.arg_len == 3 && out.result_cap == 9000 &&
	      !strcmp(out.proc, "transform") && !memcmp(out.arg, "abc", 3),
	      "an inline request keeps its fields");

	in = sample_req(RPC_F_ARG_RMA | RPC_F_RES_RMA);
	rpc_req_encode(&in, buf);
	check(rpc_req_decode(buf, RPC_REQ_HDR, &out), "an RMA request decodes");
	check(out.arg_offset == 7 && out.res_offset == 9 && out.arg_len == 5000 &&
	      !memcmp(&out.arg_handle, &in.arg_handle, 32) &&
	      !memcmp(&out.res_handle, &in.res_handle, 32),
	      "an RMA request keeps its handles and offsets");
}

static void test_req_refused(void)
{
	unsigned char buf[RPC_REQ_HDR + 3];
	struct rpc_req in = sample_req(0), out;

	rpc_req_encode(&in, buf);
	check(!rpc_req_decode(buf, RPC_REQ_HDR - 1, &out), "a short request is refused");
	check(!rpc_req_decode(buf, RPC_REQ_HDR + 2, &out), "a length mismatch is refused");
	buf[0] ^= 1;
	check(!rpc_req_decode(buf, sizeof(buf), &out), "a bad magic is refused");
	buf[0] ^= 1;
	memset(buf + 16, 'x', 32);
	check(!rpc_req_decode(buf, sizeof(buf), &out), "an unterminated name is refused");
	memset(buf + 16, 0, 32);
	check(!rpc_req_decode(buf, sizeof(buf), &out), "an empty name is refused");
	in.flags = 4;
	rpc_req_encode(&in, buf);
	check(!rpc_req_decode(buf, sizeof(buf), &out), "unknown flags are refused");
	in = sample_req(RPC_F_ARG_RMA);
	in.arg_len = 0;
	rpc_req_encode(&in, buf);
	check(!rpc_req_decode(buf, RPC_REQ_HDR, &out), "an empty remote argument is refused");
	in = (struct rpc_req){ .kind = 9 };
	rpc_req_encode(&in, buf);
	check(!rpc_req_decode(buf, RPC_REQ_HDR, &out), "an unknown kind is refused");
	in.kind = RPC_KIND_BYE;
	rpc_req_encode(&in, buf);
	check(rpc_req_decode(buf, RPC_REQ_HDR, &out) && out.kind == RPC_KIND_BYE,
	      "a goodbye decodes");
	check(!rpc_req_decode(buf, RPC_REQ_HDR + 1, &out), "a goodbye with bytes is refused");
}

static void test_rep(void)
{
	unsigned char buf[RPC_REP_HDR + 4];
	struct rpc_rep in = { .call_id = 42, .status = RPC_EPROC, .proc_rc = -7,
			      .result_len = 4 }, out;

	rpc_rep_encode(&in, buf);
	memcpy(buf + RPC_REP_HDR, "wxyz", 4);
	check(rpc_rep_decode(buf, sizeof(buf), &out) && out.call_id == 42 &&
	      out.status == RPC_EPROC && out.proc_rc == -7 &&
	      !memcmp(out.result, "wxyz", 4), "an inline reply round-trips");
	check(!rpc_rep_decode(buf, sizeof(buf) - 1, &out), "a short inline reply is refused");
	in.flags = RPC_F_RES_RMA;
	in.result_len = 100000;
	rpc_rep_encode(&in, buf);
	check(rpc_rep_decode(buf, RPC_REP_HDR, &out) && out.result_len == 100000,
	      "an RMA reply carries only its header");
	check(!rpc_rep_decode(buf, RPC_REP_HDR + 1, &out), "an RMA reply with bytes is refused");
	in.flags = 1;
	rpc_rep_encode(&in, buf);
	check(!rpc_rep_decode(buf, RPC_REP_HDR, &out), "unknown reply flags are refused");
}

static void test_hello(void)
{
	unsigned char buf[RPC_HELLO_LEN];

	rpc_hello_encode(buf);
	check(rpc_hello_check(buf, sizeof(buf)), "the hello is recognised");
	check(!rpc_hello_check(buf, sizeof(buf) - 1), "a short hello is refused");
	buf[4] ^= 1;
	check(!rpc_hello_check(buf, sizeof(buf)), "another version is refused");
}

int main(void)
{
	test_req_roundtrip();
	test_req_refused();
	test_rep();
	test_hello();
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
