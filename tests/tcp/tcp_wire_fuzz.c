/*
 * tcp_wire_fuzz.c - libFuzzer harness for the tcp transport's wire
 * decoders (plugins/tcp/tcp_wire.c), the emulated-RMA record an RMA frame
 * carries (plugins/common/emu_rma_wire.c, which sock and sm's copy mode
 * carry too) and the hello core of its handshake (plugins/common/hello.c):
 * every byte string must decode to a frame, record or handshake within the
 * limits, or be refused with a reason; never a crash.
 *
 * Build (as tests/fuzz/run.sh does):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I api -I plugins/tcp \
 *         tests/tcp/tcp_wire_fuzz.c plugins/tcp/tcp_wire.c plugins/common/emu_rma_wire.c \
 *         plugins/common/hello.c
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cci.h"
#include "tcp_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The record header at b with tail bytes after it: refused with a reason,
 * or within the limits for its kind. */
static void check_rma(const uint8_t *b, uint64_t tail, const struct cci__emu_rma_limits *lim)
{
	struct cci__emu_rma_rec r;
	const char *why = NULL;

	if (cci__emu_rma_decode(b, tail, lim, &r, &why) != 0) {
		if (!why)
			abort();
		return;
	}
	if (r.op == 0 || r.kind == 0 || r.kind >= CCI__EMU_RMA_KIND_END)
		abort();
	if ((r.kind == CCI__EMU_RMA_WR_DATA || r.kind == CCI__EMU_RMA_RD_DATA) &&
	    (tail == 0 || tail > lim->frag_max || r.off + tail < r.off))
		abort();
	if (r.kind == CCI__EMU_RMA_RD_REQ && (r.len == 0 || r.off + r.len < r.off || tail))
		abort();
	if (r.kind == CCI__EMU_RMA_WR_END && (r.len > lim->mss || tail != (lim->msg_inline ? r.len : 0)))
		abort();
}

static void check_header(const uint8_t *data, size_t size)
{
	const struct tcp_limits lim = { 65536, 1u << 20 };
	const struct cci__emu_rma_limits rma_lim = { lim.frag_max, lim.mss, 1 };
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
		check_rma(data + TCP_HDR_LEN, h.len - sl, &rma_lim);
}

/* A handshake body of either kind: refused with a reason, or within the
 * limits (an answer: attribute 0, no payload). */
static void check_hello(const uint8_t *data, uint32_t size, enum cci__hello_kind kind)
{
	struct tcp_hello h;
	const char *why = NULL;

	if (tcp_hello_decode(data, size, kind, &h, &why) != 0
	        ? !why
	        : h.core.data_len != size - TCP_HELLO_LEN || h.core.credits ||
	          h.core.mss < TCP_AM_MSS_MIN || h.core.mss > TCP_AM_MSS_MAX ||
	          h.core.attr > CCI_CONN_ATTR_UU ||
	          (kind == CCI__HELLO_ANSWER && (h.core.attr || h.core.data_len)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_header(data, size);
	/* The record alone, its tail the bytes after it, as sock carries it
	 * (its completion message apart). */
	if (size >= CCI__EMU_RMA_HDR_LEN) {
		const struct cci__emu_rma_limits apart = { 1u << 16, 1u << 16, 0 };
		check_rma(data, size - CCI__EMU_RMA_HDR_LEN, &apart);
	}
	if (size > TCP_HDR_LEN + CCI_CONN_REQ_LEN + TCP_HELLO_LEN)
		return 0;
	check_hello(data, (uint32_t)size, CCI__HELLO_REQUEST);
	check_hello(data, (uint32_t)size, CCI__HELLO_ANSWER);
	return 0;
}
