/*
 * verbs_proto.h - the protocol of the verbs transport that does not touch
 * a device: the wire header and control bodies (verbs_wire.c), the hello
 * carried in rdma_cm private data (verbs_wire.c), which messages spend a
 * credit and the send queue's rules (verbs_sq.c), the registration-key
 * messages and the initiator's cache of a peer's registrations
 * (plugins/common/peer_reg_wire.c, peer_reg.c) and the connection set-up
 * steps (verbs_fsm.c).  Nothing here includes
 * libibverbs or librdmacm, so the unit tests (tests/unit/verbs_*_test.c)
 * and the fuzzer (tests/fuzz/verbs_wire_fuzz.c) run on machines without
 * an RDMA device.
 *
 * Every multi-byte field travels in network byte order (big-endian),
 * written by the encoders through netorder.h; the registration-key bodies
 * are the common ones (peer_reg_wire.h).  Decoders never trust a length
 * or a type they did not check.
 */
#ifndef CCI_VERBS_PROTO_H
#define CCI_VERBS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "cci.h"
/* By path: the unit tests and the fuzzer build this header with this
 * folder alone on their include path. */
#include "../common/credit.h"
#include "../common/hello.h"
#include "../common/netorder.h"
#include "../common/peer_reg_wire.h"

#define VERBS_WIRE_VERSION 2           /* 2: network byte order, the common key bodies */
#define VERBS_HELLO_MAGIC 0x43434956u /* "CCIV" on the wire: a CCI verbs peer */

#define VERBS_MSS_MIN 1024u           /* a connect payload (CCI_CONN_REQ_LEN) fits one message */
#define VERBS_MSS_MAX (1u << 20)
#define VERBS_MSS_DEFAULT 8192        /* a plain literal: the ini table's default */
#define VERBS_WINDOW_MAX 256u         /* credits one side may grant the other */

/* ---- Wire header: first 16 bytes of every SEND ---- */

enum verbs_type {
	VERBS_T_MSG = 1,      /* application message (len payload bytes) */
	VERBS_T_REQ = 2,      /* client -> server: the CCI connect payload */
	VERBS_T_ACCEPT = 3,   /* server -> client: the application accepted */
	VERBS_T_REJECT = 4,   /* server -> client: the application rejected */
	VERBS_T_CREDIT = 5,   /* only the credits field */
	VERBS_T_PING = 6,     /* keepalive probe */
	VERBS_T_PONG = 7,
	VERBS_T_MR = 8,       /* the registration-key messages from here (peer_reg_wire.h) */
	VERBS_T_MR_REQ = VERBS_T_MR + CCI__PEER_REG_MSG_REQ,
	VERBS_T_MR_REP = VERBS_T_MR + CCI__PEER_REG_MSG_REP,
	VERBS_T_MR_INVAL = VERBS_T_MR + CCI__PEER_REG_MSG_INVAL, /* no DONE: see README */
	VERBS_T_MAX = VERBS_T_MR_INVAL
};

struct verbs_hdr {
	uint8_t type;       /* enum verbs_type */
	uint8_t version;    /* VERBS_WIRE_VERSION */
	uint16_t credits;   /* receive buffers given back to the receiver of this */
	uint32_t seq;       /* MSG: per-connection sequence number (a check of RC order) */
	uint32_t len;       /* body bytes after the header */
	uint32_t aux;       /* MR_REQ/MR_REP: request id */
};
#define VERBS_HDR_LEN 16u
#define VERBS_RKEY_MAX UINT32_MAX     /* an ibv_mr's rkey: wider answers are refused */

/* Write h into out (VERBS_HDR_LEN bytes); h->version is ignored (ours is written). */
void verbs_hdr_encode(const struct verbs_hdr *h, void *out);

/*
 * Read and check the header of a received SEND of n bytes at buf: the
 * version is ours, the type known, len is exactly n - VERBS_HDR_LEN,
 * within mss for MSG and REQ (REQ: within CCI_CONN_REQ_LEN too), and the
 * exact body size of every control type.  Returns CCI_SUCCESS, or
 * CCI_EMSGSIZE (short or oversized), CCI_EINVAL (version, type, body
 * size); *h is written on success only.
 */
int verbs_hdr_decode(const void *buf, size_t n, uint32_t mss, struct verbs_hdr *h);

/* ---- The hello: rdma_cm private data of CONNECT_REQUEST and ESTABLISHED ---- */

/*
 * RC connection requests carry at most 56 bytes of private data on
 * InfiniBand (rdma_cm's own header takes the rest of the CM MAD), so the
 * hello holds only what the queue pairs need before the first message:
 * the attribute, the message size, the credits granted and the length
 * of the connect payload, which follows as the first message (REQ) once
 * the connection is established.  The receiver may get the private data
 * zero-padded to the transport's maximum; trailing bytes are ignored.
 */
enum verbs_hello_kind { VERBS_HELLO_CONNECT = 1, VERBS_HELLO_ACCEPT = 2 };

/* On the wire: magic (4), version (1), kind (1), 2 zero bytes, then the
 * hello core (plugins/common/hello.h): the attribute (CONNECT), mss,
 * the credits granted to the receiver of the hello, the length of the REQ
 * message to come (CONNECT, 0..1024) and the nonce (ACCEPT echoes it). */
struct verbs_hello {
	uint8_t kind;       /* enum verbs_hello_kind */
	struct cci__hello core;
};
#define VERBS_HELLO_LEN (8u + CCI__HELLO_LEN)
#define VERBS_PRIVATE_DATA_MAX 56u /* RC REQ on InfiniBand, the smallest limit */

void verbs_hello_encode(const struct verbs_hello *h, void *out);
/*
 * Check private data of n bytes (NULL or short: refused) as a hello of
 * kind: magic, version, kind, attribute, mss in VERBS_MSS_MIN..MAX,
 * credits 1..VERBS_WINDOW_MAX, data_len <= CCI_CONN_REQ_LEN.  Returns
 * CCI_SUCCESS or CCI_EINVAL, and writes a reason (static) to *why_p.
 */
int verbs_hello_decode(const void *pd, size_t n, int kind, struct verbs_hello *h,
                       const char **why_p);

/* ---- Credits (plugins/common/credit.h), the send queue (verbs_sq.c) ---- */

/* Does a message of type spend a credit (MSG, REQ, ACCEPT, REJECT)?
 * Control messages do not: their buffers are posted again at once from a
 * reserve the receiver keeps beyond the windows. */
int verbs_type_spends_credit(int type);

/*
 * Selective signalling.  Sends are posted unsignaled except when the
 * send queue would otherwise fill with unreaped requests (every
 * sq_depth / 2), every VERBS_SIGNAL_EVERY sends, or when last is set
 * (nothing else is queued behind it: its completion must be seen).  An
 * unsignaled request completes when a later signaled one on the same
 * queue pair does (RC completes in order); an error completion is always
 * reported.  unsignaled is the run of unsignaled requests just before.
 */
#define VERBS_SIGNAL_EVERY 16u
int verbs_signal_wanted(uint32_t unsignaled, uint32_t sq_depth, int last);

/*
 * Send-queue accounting by serial numbers: every work request of a queue
 * pair gets the next serial; posted is the last one posted, done the
 * last one known complete.  May need more requests be posted on a queue
 * of sq_depth?  (Unsignaled requests stay counted until a later signaled
 * one completes.)
 */
int verbs_sq_fits(uint64_t posted, uint64_t done, uint64_t need, uint32_t sq_depth);
/* Work requests of an RMA of rlen bytes in chunks of max_msg (> 0), plus
 * one for its completion message when it has one. */
uint64_t verbs_rma_wrs(uint64_t rlen, uint64_t max_msg, int has_msg);
/*
 * The completion of request done_serial with status came: what does the
 * operation whose last request is op_serial get?  Earlier operations
 * completed (RC completes in order): CCI_SUCCESS; the one the request
 * belongs to: status; later ones: -1, not complete yet.
 */
int verbs_op_status(uint64_t op_serial, uint64_t done_serial, int status);

/* ---- Connection set-up steps (verbs_fsm.c) ---- */

/* Where a connection is in its set-up, besides the shared base's state. */
enum verbs_step {
	VERBS_STEP_ADDR = 0,  /* client: resolving the address */
	VERBS_STEP_ROUTE,     /* client: resolving the route */
	VERBS_STEP_CM,        /* client: rdma_connect sent; server: rdma_accept sent */
	VERBS_STEP_ANSWER,    /* client: established, REQ sent, waiting for ACCEPT/REJECT */
	VERBS_STEP_WAIT_REQ,  /* server: established, waiting for the REQ message */
	VERBS_STEP_DECIDE,    /* server: the request is with the application */
	VERBS_STEP_OPEN,
	VERBS_STEP_DOWN       /* failed, broken, rejected or closed: waiting to be freed */
};

/* The rdma_cm events a connection's id can get, without librdmacm's enum. */
enum verbs_cm_ev {
	VERBS_CM_ADDR_RESOLVED, VERBS_CM_ADDR_ERROR, VERBS_CM_ROUTE_RESOLVED, VERBS_CM_ROUTE_ERROR,
	VERBS_CM_ESTABLISHED, VERBS_CM_REJECTED, VERBS_CM_UNREACHABLE, VERBS_CM_CONNECT_ERROR,
	VERBS_CM_DISCONNECTED, VERBS_CM_DEVICE_REMOVAL, VERBS_CM_TIMEWAIT_EXIT, VERBS_CM_OTHER
};

enum verbs_act {
	VERBS_ACT_NONE = 0,   /* nothing to do (a late or harmless event) */
	VERBS_ACT_RESOLVE_ROUTE,
	VERBS_ACT_CONNECT,    /* create the queue pair and rdma_connect */
	VERBS_ACT_SEND_REQ,   /* client: established, send the connect payload */
	VERBS_ACT_WAIT_REQ,   /* server: established, wait for REQ */
	VERBS_ACT_FAIL,       /* the attempt fails with *status_p (CONNECT event, or dropped at a server) */
	VERBS_ACT_BREAK,      /* an open connection broke: sends fail with *status_p */
	VERBS_ACT_DEVICE      /* the device went away under the endpoint */
};

/* What to do on rdma_cm event ev in step (is_client: our side started it). */
enum verbs_act verbs_fsm_cm(int step, int is_client, int ev, int *status_p);

/* May a message of type arrive in step?  1 yes, 0 no (a protocol error:
 * the connection fails or breaks). */
int verbs_fsm_msg_ok(int step, int is_client, int type);

#endif /* CCI_VERBS_PROTO_H */
