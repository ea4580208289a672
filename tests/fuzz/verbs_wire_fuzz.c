/*
 * verbs_wire_fuzz.c - libFuzzer harness for the verbs transport's
 * decoders of untrusted bytes (plugins/verbs/verbs_wire.c): the header of
 * a received SEND, an MR_REP body (plugins/common/peer_reg_wire.c), and
 * the hello in rdma_cm private data.
 * Every byte string decodes within the promised limits, or is refused;
 * what decodes encodes back to the same bytes; never a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_header(const uint8_t *data, size_t size, uint32_t mss)
{
	struct verbs_hdr h;
	uint8_t again[VERBS_HDR_LEN];

	if (verbs_hdr_decode(data, size, mss, &h) != CCI_SUCCESS)
		return;
	if (h.len != size - VERBS_HDR_LEN || h.type == 0 || h.type > VERBS_T_MAX ||
	    (h.type == VERBS_T_MSG && h.len > mss) || (h.type == VERBS_T_REQ && h.len > CCI_CONN_REQ_LEN))
		abort();
	verbs_hdr_encode(&h, again);
	if (memcmp(again, data, VERBS_HDR_LEN) != 0)
		abort();
	if (h.type == VERBS_T_MR_REP) {
		struct cci__peer_reg_rep r;
		uint8_t body[CCI__PEER_REG_REP_LEN];
		const char *why = NULL;

		if (cci__peer_reg_rep_decode(data + VERBS_HDR_LEN, h.len, VERBS_RKEY_MAX, &r, &why) ==
		    CCI_SUCCESS) {
			cci__peer_reg_rep_encode(&r, body);
			if (why || memcmp(body, data + VERBS_HDR_LEN, sizeof(body)) != 0 ||
			    (r.status == CCI_SUCCESS &&
			     (r.rkey > VERBS_RKEY_MAX || r.len == 0 || r.addr + r.len < r.addr)))
				abort();
		} else if (!why) {
			abort();
		}
	}
}

static void check_hello(const uint8_t *data, size_t size, int kind)
{
	struct verbs_hello h;
	const char *why = NULL;

	if (verbs_hello_decode(data, size, kind, &h, &why) != CCI_SUCCESS) {
		if (!why)
			abort();
		return;
	}
	if (size < VERBS_HELLO_LEN || h.kind != kind || h.core.mss < VERBS_MSS_MIN ||
	    h.core.mss > VERBS_MSS_MAX || h.core.credits == 0 || h.core.credits > VERBS_WINDOW_MAX ||
	    h.core.data_len > CCI_CONN_REQ_LEN)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t mss = size ? VERBS_MSS_MIN + (uint32_t)data[0] * 64u : VERBS_MSS_MIN;

	check_header(data, size, mss);
	check_hello(data, size, VERBS_HELLO_CONNECT);
	check_hello(data, size, VERBS_HELLO_ACCEPT);
	return 0;
}
