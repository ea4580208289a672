/*
 * ctl_corpus_gen.c - writes the seed corpora of sm_ctl_fuzz, ofi_wire_fuzz
 * and the tcp wire harness (tests/fuzz/corpus/sm_ctl, corpus/ofi and
 * corpus/wire): one valid message of each type, written by the
 * transports' encoders.  Run again only when a layout changes:
 *
 *   cc -std=gnu11 -I api -I plugins/sm -I plugins/ofi -I plugins/tcp -I plugins/common \
 *      tests/fuzz/ctl_corpus_gen.c plugins/sm/sm_ctl_wire.c plugins/common/hello.c \
 *      plugins/common/peer_reg_wire.c plugins/common/emu_rma_wire.c plugins/ofi/ofi_wire.c \
 *      plugins/tcp/tcp_wire.c -o gen && ./gen tests/fuzz/corpus
 *
 * Each file is checked by its decoder before it is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ofi_wire.h"
#include "sm_ctl_wire.h"
#include "sm_ring.h"
#include "tcp_wire.h"

static const char *top;

static void put(const char *dir, const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", top, dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* sm: the first byte is the descriptor count the harness passes. */
static void sm_put(const char *name, uint16_t type, const struct sm_ctl_hello *h)
{
	uint8_t buf[1 + sizeof(struct sm_ctl_hello)];
	size_t n = sm_ctl_encode(type, h, buf + 1, sizeof(buf) - 1);
	struct sm_ctl_hello out;

	buf[0] = h ? SM_HELLO_FDS : 0;
	if (n == 0 || sm_ctl_decode(buf + 1, n, buf[0], &out, NULL) != CCI_SUCCESS) {
		fprintf(stderr, "sm %s does not decode\n", name);
		exit(1);
	}
	put("sm_ctl", name, buf, n + 1);
}

static void ofi_put(const char *name, uint8_t type, uint32_t dst, const void *body, uint32_t len)
{
	uint8_t buf[OFI_HDR_LEN + OFI_HELLO_LEN + 64 + 64];
	struct ofi_hdr h = { .dst = dst, .seq = 0, .credits = 4, .type = type, .aux = 0 };
	struct ofi_msg m;

	ofi_hdr_encode(&h, buf);
	memcpy(buf + OFI_HDR_LEN, body, len);
	if (ofi_wire_decode(buf, OFI_HDR_LEN + len, &m, NULL) != CCI_SUCCESS) {
		fprintf(stderr, "ofi %s does not decode\n", name);
		exit(1);
	}
	put("ofi", name, buf, OFI_HDR_LEN + len);
}

static void gen_sm(void)
{
	struct sm_ctl_hello h;

	memset(&h, 0, sizeof(h));
	h.core.attr = CCI_CONN_ATTR_RO;
	h.core.mss = 8192;
	h.pid = 1000;
	h.ring_size = 1u << 20;
	h.core.data_len = 16;
	memcpy(h.data, "connect payload!", 16);
	sm_put("req", SM_CTL_REQ, &h);
	h.core.data_len = 0;
	sm_put("accept", SM_CTL_ACCEPT, &h);
	sm_put("reject", SM_CTL_REJECT, NULL);
	sm_put("disconnect", SM_CTL_DISCONNECT, NULL);
	sm_put("ping", SM_CTL_PING, NULL);
	sm_put("pong", SM_CTL_PONG, NULL);
	sm_put("nores", SM_CTL_NORES, NULL);
	sm_put("busy", SM_CTL_BUSY, NULL);
}

static void gen_ofi(void)
{
	uint8_t body[OFI_HELLO_LEN + 64 + 64], key[CCI__PEER_REG_KEY_LEN];
	struct ofi_hello h = {
		.core = { .attr = CCI_CONN_ATTR_RU, .mss = 65536, .credits = OFI_WINDOW_MAX,
		          .data_len = 8, .nonce = 0x1122334455667788ull },
		.id = 0x00010001, .flags = OFI_HELLO_IMM,
		.proc = { .host = 0xabcdef, .start = 123456, .pid = 1000 },
		.addr_len = 16, /* a sockaddr_in, as the tcp provider's names are */
	};
	struct ofi_cancel c = { .id = 0x00010001, .nonce = 0x1122334455667788ull };
	struct cci__peer_reg_rep r = { .status = CCI_SUCCESS,
		                       .flags = CCI_FLAG_READ | CCI_FLAG_WRITE, .key = 42,
		                       .rkey = 7, .addr = 0x7f0000001000ull, .len = 65536 };
	uint64_t imm = ofi_imm_pack(0x00030002, 17, 5);
	uint32_t next = 16;

	ofi_hello_encode(&h, body);
	memcpy(body + OFI_HELLO_LEN, "\x02\x00\x1f\x90\x7f\x00\x00\x01\0\0\0\0\0\0\0\0", 16);
	memcpy(body + OFI_HELLO_LEN + 16, "payload!", 8);
	ofi_put("req", OFI_T_REQ, 0, body, OFI_HELLO_LEN + 24);
	h.id = 0x00020001;
	h.core.attr = 0;
	h.addr_len = h.core.data_len = 0;
	ofi_hello_encode(&h, body);
	ofi_put("accept", OFI_T_ACCEPT, 0x00010001, body, OFI_HELLO_LEN);
	ofi_put("reject", OFI_T_REJECT, 0x00010001, NULL, 0);
	ofi_put("disc", OFI_T_DISC, 0x00010001, NULL, 0);
	ofi_put("disc_ack", OFI_T_DISC_ACK, 0x00010001, NULL, 0);
	ofi_cancel_encode(&c, body);
	ofi_put("cancel", OFI_T_CANCEL, 0, body, OFI_CANCEL_LEN);
	ofi_put("credit", OFI_T_CREDIT, 0x00010001, NULL, 0);
	ofi_put("ping", OFI_T_PING, 0x00010001, NULL, 0);
	ofi_put("pong", OFI_T_PONG, 0x00010001, NULL, 0);
	cci__peer_reg_key_encode(42, key);
	ofi_put("mr_req", OFI_T_MR_REQ, 0x00010001, key, sizeof(key));
	cci__peer_reg_rep_encode(&r, body);
	ofi_put("mr_rep", OFI_T_MR_REP, 0x00010001, body, CCI__PEER_REG_REP_LEN);
	ofi_put("mr_inval", OFI_T_MR_INVAL, 0x00010001, key, sizeof(key));
	ofi_put("mr_done", OFI_T_MR_DONE, 0x00010001, key, sizeof(key));
	ofi_put("msg", OFI_T_MSG, 0x00010001, "hello", 5);
	/* The remote CQ datum of a message, then the sequence number expected
	 * (host order: the harness reads them as integers). */
	memcpy(body, &imm, sizeof(imm));
	memcpy(body + sizeof(imm), &next, sizeof(next));
	put("ofi", "imm", body, sizeof(imm) + sizeof(next));
}

/* tcp: a handshake body (the harness decodes the input as one) and
 * frames with their headers. */
static void gen_tcp(void)
{
	uint8_t b[TCP_HDR_LEN + CCI__EMU_RMA_HDR_LEN + TCP_HELLO_LEN + 16];
	struct tcp_hello h = { .id = 0x1122334455667788ull,
		               .core = { .attr = CCI_CONN_ATTR_RO, .mss = 65536, .data_len = 16,
		                         .nonce = 0x0102030405060708ull } };
	struct tcp_hdr fh = { .type = TCP_F_MSG, .len = 5, .seq = 1, .ack = 0 };
	struct cci__emu_rma_rec r = { .kind = CCI__EMU_RMA_RD_REQ, .op = 1, .key = 42, .len = 4096 };
	struct tcp_hello out;
	const char *why = NULL;

	tcp_hello_encode(b, &h);
	memcpy(b + TCP_HELLO_LEN, "connect payload!", 16);
	if (tcp_hello_decode(b, TCP_HELLO_LEN + 16, CCI__HELLO_REQUEST, &out, &why) != 0) {
		fprintf(stderr, "tcp hello does not decode: %s\n", why);
		exit(1);
	}
	put("wire", "hello", b, TCP_HELLO_LEN + 16);
	h.core.attr = 0;
	h.core.data_len = 0;
	tcp_hello_encode(b, &h);
	put("wire", "accept", b, TCP_HELLO_LEN);
	tcp_hdr_encode(b, &fh);
	memcpy(b + TCP_HDR_LEN, "hello", 5);
	put("wire", "msg", b, TCP_HDR_LEN + 5);
	fh = (struct tcp_hdr){ .type = TCP_F_RMA, .len = CCI__EMU_RMA_HDR_LEN };
	tcp_hdr_encode(b, &fh);
	cci__emu_rma_encode(b + TCP_HDR_LEN, &r);
	put("wire", "rma_rd_req", b, TCP_HDR_LEN + CCI__EMU_RMA_HDR_LEN);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
		return 2;
	}
	top = argv[1];
	gen_sm();
	gen_ofi();
	gen_tcp();
	return 0;
}
