/*
 * sm_ctl_wire.h - the control messages on an sm connection's
 * SOCK_SEQPACKET socket, and their codec (sm_ctl_wire.c).
 *
 * One message per record: a header, and for REQ and ACCEPT the hello
 * with the connect payload.  The peer is another process of the same user
 * on this host, so the header's layout is the host's; the hello is every
 * transport's core (plugins/common/hello.h) then sm's own fields.  What a
 * peer sends is still checked field by field, since a crashed or hostile
 * peer sends anything.
 * The codec is pure (no I/O, no allocation, no endpoint state) and fuzzed
 * by tests/fuzz/sm_ctl_fuzz.c.
 */
#ifndef CCI_SM_CTL_WIRE_H
#define CCI_SM_CTL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cci.h"
#include "../common/hello.h"

#define SM_MSS_MIN 64u
#define SM_MSS_MAX 1048576u

/* The backlog of an endpoint's listening socket (the kernel caps it at
 * net.core.somaxconn): how many connects wait there for the server.  A
 * client that finds it full waits and tries again (sm_dial.c). */
#define SM_BACKLOG 4096

#define SM_CTL_MAGIC 0x4c54434du /* "MCTL" */
#define SM_CTL_VERSION 2u /* 2: a hello carries the inbox */

enum sm_ctl_type {
	SM_CTL_REQ = 1,        /* client -> server, fds: ring, doorbell, ep page, inbox */
	SM_CTL_ACCEPT = 2,     /* server -> client, fds: ring, doorbell, ep page, inbox */
	SM_CTL_REJECT = 3,
	SM_CTL_DISCONNECT = 4,
	SM_CTL_PING = 5,
	SM_CTL_PONG = 6,
	/* server -> client, instead of an answer: the server lacks the
	 * descriptors, memory or mappings the connection needs */
	SM_CTL_NORES = 7,
	/* server -> client, instead of an answer: the server had no
	 * descriptor left to receive the request's; the client asks again */
	SM_CTL_BUSY = 8,
	SM_CTL_LAST = SM_CTL_BUSY
};

struct sm_ctl_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
};

/* REQ and ACCEPT, decoded; data is used by REQ only.  On the wire: the
 * header, the hello core (attribute, mss, payload length; sm grants no
 * credits and sends no nonce), pid (4 bytes), 4 zero bytes, ring_size (8),
 * then the payload. */
struct sm_ctl_hello {
	struct sm_ctl_hdr hdr;
	struct cci__hello core;
	uint32_t pid;
	uint64_t ring_size;  /* data bytes of the sender's receive ring */
	uint8_t data[CCI_CONN_REQ_LEN];
};

/* receive ring memfd, doorbell eventfd, endpoint page memfd, inbox memfd */
#define SM_HELLO_FDS 4
/* The fixed part of a hello on the wire, before its payload. */
#define SM_CTL_HELLO_HEAD (sizeof(struct sm_ctl_hdr) + CCI__HELLO_LEN + 16u)

/*
 * Write the message of type into buf (cap bytes): the header, then for
 * REQ and ACCEPT the fields of *body after its header and
 * body->core.data_len payload bytes.  The bytes written, or 0 for an unknown type, a missing
 * body, a payload over CCI_CONN_REQ_LEN or a buffer too small.
 */
size_t sm_ctl_encode(uint16_t type, const struct sm_ctl_hello *body, void *buf, size_t cap);

/*
 * Decode the len bytes of one received record that came with nfds
 * descriptors.  CCI_SUCCESS: *msg holds the header (and for REQ and
 * ACCEPT the hello; the payload bytes past data_len are zero).
 * CCI_EMSGSIZE for a length that is not the type's, CCI_EINVAL for a bad
 * magic, version, type, field or descriptor count; *why_p (static text)
 * says which, and *msg is untouched.  Checked here: the payload length
 * against the record and CCI_CONN_REQ_LEN, mss within
 * [SM_MSS_MIN, SM_MSS_MAX], a ring size the ring code can attach, the
 * connection attribute of a REQ, no payload in an ACCEPT, and
 * SM_HELLO_FDS descriptors with a hello, none with anything else.
 */
int sm_ctl_decode(const void *buf, size_t len, int nfds, struct sm_ctl_hello *msg,
                  const char **why_p);

#endif /* CCI_SM_CTL_WIRE_H */
