/*
 * sm_ctl_wire.c - the codec of the sm control messages (sm_ctl_wire.h):
 * pure functions over bytes, used by sm_wire.c's send and by every
 * receiver of the control sockets.
 */
#include <string.h>

#include "netorder.h"
#include "sm_ctl_wire.h"
#include "sm_ring.h"

static int is_hello(uint16_t type)
{
	return type == SM_CTL_REQ || type == SM_CTL_ACCEPT;
}

static int is_bare(uint16_t type)
{
	return type == SM_CTL_REJECT || type == SM_CTL_DISCONNECT || type == SM_CTL_PING ||
	       type == SM_CTL_PONG || type == SM_CTL_NORES || type == SM_CTL_BUSY;
}

size_t sm_ctl_encode(uint16_t type, const struct sm_ctl_hello *body, void *buf, size_t cap)
{
	struct sm_ctl_hdr h = { SM_CTL_MAGIC, SM_CTL_VERSION, type };
	size_t n = sizeof(h);

	uint8_t *b = buf;

	if (is_hello(type) && body && body->core.data_len <= CCI_CONN_REQ_LEN)
		n = SM_CTL_HELLO_HEAD + body->core.data_len;
	else if (!is_bare(type))
		return 0;
	if (cap < n)
		return 0;
	memcpy(b, &h, sizeof(h));
	if (n > sizeof(h)) { /* a hello: the core, sm's fields, the payload */
		b += sizeof(h);
		cci__hello_encode(b, &body->core);
		cci__put32(b + CCI__HELLO_LEN, body->pid);
		cci__put32(b + CCI__HELLO_LEN + 4, 0);
		cci__put64(b + CCI__HELLO_LEN + 8, body->ring_size);
		memcpy(b + CCI__HELLO_LEN + 16, body->data, body->core.data_len);
	}
	return n;
}

/* The fields of a hello after its header; out is all zero on entry. */
static int hello_decode(const void *buf, size_t len, int nfds, struct sm_ctl_hello *out,
                        const char **why_p)
{
	static const struct cci__hello_limits lim = { .mss_min = SM_MSS_MIN,
		                                      .mss_max = SM_MSS_MAX };
	const uint8_t *b = (const uint8_t *)buf + sizeof(out->hdr);
	uint32_t data_len;
	uint64_t rs;

	if (len < SM_CTL_HELLO_HEAD) {
		*why_p = "hello shorter than its fixed part";
		return CCI_EMSGSIZE;
	}
	data_len = cci__get32(b + 12); /* the core's; its length checks are sm's record's */
	if (data_len > CCI_CONN_REQ_LEN) {
		*why_p = "payload length over CCI_CONN_REQ_LEN";
		return CCI_EMSGSIZE;
	}
	if (len != SM_CTL_HELLO_HEAD + data_len) {
		*why_p = "record length disagrees with the payload length";
		return CCI_EMSGSIZE;
	}
	if (cci__hello_decode(b, out->hdr.type == SM_CTL_REQ ? CCI__HELLO_REQUEST
	                                                    : CCI__HELLO_ANSWER,
	                      &lim, &out->core, why_p) != CCI_SUCCESS)
		return CCI_EINVAL;
	out->pid = cci__get32(b + CCI__HELLO_LEN);
	rs = out->ring_size = cci__get64(b + CCI__HELLO_LEN + 8);
	if (cci__get32(b + CCI__HELLO_LEN + 4) != 0) {
		*why_p = "reserved hello bytes set";
		return CCI_EINVAL;
	}
	if (rs < SM_RING_MIN_SIZE || rs > SM_RING_MAX_SIZE || (rs & (rs - 1)) != 0) {
		*why_p = "ring size not a power of two in range";
		return CCI_EINVAL;
	}
	if (nfds != SM_HELLO_FDS) {
		*why_p = "shared-memory descriptors missing";
		return CCI_EINVAL;
	}
	memcpy(out->data, (const char *)buf + SM_CTL_HELLO_HEAD, out->core.data_len);
	return CCI_SUCCESS;
}

int sm_ctl_decode(const void *buf, size_t len, int nfds, struct sm_ctl_hello *msg,
                  const char **why_p)
{
	struct sm_ctl_hello out;
	const char *why = NULL;
	int rc = CCI_SUCCESS;

	memset(&out, 0, sizeof(out));
	if (!buf || len < sizeof(out.hdr)) {
		why = "shorter than a header";
		rc = CCI_EMSGSIZE;
		goto out;
	}
	memcpy(&out.hdr, buf, sizeof(out.hdr));
	if (out.hdr.magic != SM_CTL_MAGIC) {
		why = "bad magic";
		rc = CCI_EINVAL;
	} else if (out.hdr.version != SM_CTL_VERSION) {
		why = "unsupported version";
		rc = CCI_EINVAL;
	} else if (is_hello(out.hdr.type)) {
		rc = hello_decode(buf, len, nfds, &out, &why);
	} else if (!is_bare(out.hdr.type)) {
		why = "unknown message type";
		rc = CCI_EINVAL;
	} else if (len != sizeof(out.hdr)) {
		why = "bytes after a header-only message";
		rc = CCI_EMSGSIZE;
	} else if (nfds != 0) {
		why = "descriptors with a message that carries none";
		rc = CCI_EINVAL;
	}
out:
	if (rc == CCI_SUCCESS)
		memcpy(msg, &out, sizeof(out));
	if (why_p)
		*why_p = why;
	return rc;
}
