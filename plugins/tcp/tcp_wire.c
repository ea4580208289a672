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
	case TCP_F_HELLO:
		return len >= TCP_HELLO_LEN && len - TCP_HELLO_LEN <= CCI_CONN_REQ_LEN;
	case TCP_F_ACCEPT:
	case TCP_F_REJECT:
		return len == TCP_REPLY_LEN;
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
	cci__put16(b + 6, h->attr);
	cci__put32(b + 8, h->mss);
	cci__put32(b + 12, h->data_len);
	cci__put64(b + 16, h->id);
	cci__put64(b + 24, h->nonce);
}

static int magic_version_ok(const uint8_t *b, const char **why)
{
	if (cci__get32(b) != TCP_WIRE_MAGIC) {
		*why = "bad handshake magic (not a CCI peer)";
		return 0;
	}
	if (cci__get16(b + 4) != TCP_WIRE_VERSION) {
		*why = "unsupported protocol version";
		return 0;
	}
	return 1;
}

int tcp_hello_decode(const uint8_t *b, uint32_t len, struct tcp_hello *h, const char **why)
{
	struct tcp_hello d;

	if (len < TCP_HELLO_LEN) {
		*why = "short handshake";
		return -1;
	}
	if (!magic_version_ok(b, why))
		return -1;
	d.attr = cci__get16(b + 6);
	d.mss = cci__get32(b + 8);
	d.data_len = cci__get32(b + 12);
	d.id = cci__get64(b + 16);
	d.nonce = cci__get64(b + 24);
	if (d.attr > CCI_CONN_ATTR_UU) {
		*why = "unknown connection attribute";
		return -1;
	}
	if (d.data_len > CCI_CONN_REQ_LEN || d.data_len != len - TCP_HELLO_LEN) {
		*why = "connect payload length mismatch";
		return -1;
	}
	if (d.mss == 0) {
		*why = "zero max_send_size";
		return -1;
	}
	*h = d;
	return 0;
}

/* A reply is laid out as a HELLO without attribute and payload. */
void tcp_reply_encode(uint8_t *b, const struct tcp_reply *r)
{
	struct tcp_hello h = { .mss = r->mss, .id = r->id, .nonce = r->nonce };

	tcp_hello_encode(b, &h);
}

int tcp_reply_decode(const uint8_t *b, uint32_t len, struct tcp_reply *r, const char **why)
{
	if (len != TCP_REPLY_LEN) {
		*why = "handshake reply of the wrong size";
		return -1;
	}
	if (!magic_version_ok(b, why))
		return -1;
	if (cci__get16(b + 6) != 0 || cci__get32(b + 12) != 0) {
		*why = "reserved handshake fields set";
		return -1;
	}
	r->mss = cci__get32(b + 8);
	r->id = cci__get64(b + 16);
	r->nonce = cci__get64(b + 24);
	return 0;
}
