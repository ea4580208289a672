/*
 * tcp_wire_fuzz.c - libFuzzer harness for the tcp transport's wire
 * decoders (plugins/tcp/tcp_wire.c): every byte string must decode to
 * a frame within the limits, or be refused with a reason; never a crash.
 *
 * Build (as tests/fuzz/run.sh does for the other harnesses):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I api -I plugins/tcp \
 *         tests/tcp/tcp_wire_fuzz.c plugins/tcp/tcp_wire.c
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cci.h"
#include "tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_header(const uint8_t *data, size_t size)
{
	const struct tcp_limits lim = { 65536, 1u << 20 };
	struct tcp_sub sub;
	struct tcp_hdr h;
	const char *why = NULL;
	uint32_t sl;

	if (size < TCP_HDR_LEN)
		return;
	if (tcp_hdr_decode(data, &lim, &h, &why) != 0) {
		if (!why)
			abort();
		return;
	}
	sl = tcp_sub_len(h.type);
	if (h.type == 0 || h.type >= TCP_F_TYPE_END || h.len < sl ||
	    h.len > lim.frag_max + TCP_SUB_MAX)
		abort();
	if (sl && size >= TCP_HDR_LEN + sl)
		tcp_sub_decode(data + TCP_HDR_LEN, h.type, &sub, &why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tcp_hello hello;
	struct tcp_reply reply;
	const char *why = NULL;

	check_header(data, size);
	if (size > TCP_HDR_LEN + CCI_CONN_REQ_LEN + TCP_HELLO_LEN)
		return 0;
	if (tcp_hello_decode(data, (uint32_t)size, &hello, &why) == 0 &&
	    (hello.data_len != size - TCP_HELLO_LEN || hello.attr > CCI_CONN_ATTR_UU))
		abort();
	if (size == TCP_REPLY_LEN)
		tcp_reply_decode(data, (uint32_t)size, &reply, &why);
	return 0;
}
