/*
 * tcp_wire.c - encoding and checking of tcp frames (see
 * tcp_wire.h).  Everything a peer sends passes through a decoder here
 * before any other code looks at it.
 */
#include "tcp_wire.h"

#include "cci.h"

void tcp_hdr_encode(uint8_t *b, const struct tcp_hdr *h)
{
	b[0] = TCP_HDR_MARK;
	b[1] = h->type;
	b[2] = h->flags;
	b[3] = 0;
	cci__put32(b + 4, h->len);
	cci__put64(b + 8, h->seq);
	cci__put64(b + 16, h->ack);
}

/* Is len a possible payload length for type under lim? */
static int len_ok(uint8_t type, uint32_t len, const struct tcp_limits *lim)
{
	uint32_t sub = tcp_sub_len(type);

	switch (type) {
	case TCP_F_HELLO: /* down to the version prefix: tcp_hello_decode names the rest */
		return len >= TCP_HS_PREFIX_LEN && len <= TCP_HELLO_LEN + CCI_CONN_REQ_LEN;
	case TCP_F_ACCEPT:
	case TCP_F_REJECT:
		return len >= TCP_HS_PREFIX_LEN && len <= TCP_HELLO_LEN;
	case TCP_F_MSG:
		return len <= lim->mss;
	case TCP_F_ACK:
	case TCP_F_PING:
	case TCP_F_PONG:
		return len == 0;
	default: /* RMA: the record's decoder checks its tail for its kind */
		return len >= sub && len - sub <= (lim->frag_max > lim->mss ? lim->frag_max : lim->mss);
	}
}

int tcp_hdr_decode(const uint8_t *b, const struct tcp_limits *lim, struct tcp_hdr *h,
                    const char **why)
{
	struct tcp_hdr d;

	if (b[0] != TCP_HDR_MARK || b[3] != 0) {
		*why = "bad frame mark (garbage or lost framing)";
		return -1;
	}
	d.type = b[1];
	d.flags = b[2];
	d.len = cci__get32(b + 4);
	d.seq = cci__get64(b + 8);
	d.ack = cci__get64(b + 16);
	if (d.type == 0 || d.type >= TCP_F_TYPE_END) {
		*why = "unknown frame type";
		return -1;
	}
	if (d.flags & ~TCP_FL_ACK_NOW) {
		*why = "unknown frame flags";
		return -1;
	}
	if (!len_ok(d.type, d.len, lim)) {
		*why = "frame length out of range for its type";
		return -1;
	}
	if (!tcp_type_sequenced(d.type) && d.seq != 0) {
		*why = "sequence number on an unsequenced frame";
		return -1;
	}
	*h = d;
	return 0;
}

void tcp_hello_encode(uint8_t *b, const struct tcp_hello *h)
{
	cci__put32(b, TCP_WIRE_MAGIC);
	cci__put16(b + 4, TCP_WIRE_VERSION);
	cci__put16(b + 6, 0);
	cci__put64(b + 8, h->id);
	cci__hello_encode(b + 16, &h->core);
}

int tcp_hello_decode(const uint8_t *b, uint32_t len, enum cci__hello_kind kind,
                     struct tcp_hello *h, const char **why)
{
	/* credits_max 0: tcp has no window, a hello carries no credits */
	static const struct cci__hello_limits lim = { .mss_min = TCP_AM_MSS_MIN,
	                                              .mss_max = TCP_AM_MSS_MAX };
	struct tcp_hello d;

	/* Magic and version first: a peer of another version is named as
	 * such, not by what its layout gets wrong in this one's. */
	if (len < TCP_HS_PREFIX_LEN || cci__get32(b) != TCP_WIRE_MAGIC)
		*why = "bad handshake magic (not a CCI peer)";
	else if (cci__get16(b + 4) != TCP_WIRE_VERSION)
		*why = "unsupported protocol version (a peer of another tcp wire version)";
	else if (len < TCP_HELLO_LEN)
		*why = "short handshake";
	else if (cci__get16(b + 6) != 0)
		*why = "reserved handshake fields set";
	else if (cci__hello_decode(b + 16, kind, &lim, &d.core, why) != CCI_SUCCESS)
		return -1;
	else if (d.core.data_len != len - TCP_HELLO_LEN)
		*why = "connect payload length mismatch";
	else {
		d.id = cci__get64(b + 8);
		*h = d;
		return 0;
	}
	return -1;
}
