/*
 * server.h - the peer most tests talk to: a server process that publishes
 * its URI, answers connection requests as told, verifies every message it
 * receives (content, order on RO, duplicates, alignment), optionally
 * offers a registered RMA region surrounded by canaries and checks RMA
 * data when the completion message arrives, and obeys commands from the
 * test over a pipe.
 */
#ifndef CONFORMANCE_SERVER_H
#define CONFORMANCE_SERVER_H

#include "harness.h"

enum srv_action {
	SRV_ACCEPT = 0,
	SRV_REJECT,
	SRV_IGNORE,         /* hold the request, neither accept nor reject */
	SRV_RETURN          /* return the request's event unanswered */
};

struct srv_opts {
	enum srv_action action;
	int check_payload;        /* request payloads must follow the pattern */
	int decide_twice;         /* check a second accept/reject gives EINVAL */
	int echo;                 /* send every message back on its connection */
	int greet;                /* send one message on each new connection */
	unsigned accept_delay_ms; /* wait before answering a request */
	uint32_t recv_buf_count;  /* set CCI_OPT_ENDPT_RECV_BUF_COUNT if non-zero */
	uint32_t hold;            /* keep up to this many RECV events until 'r' */
	uint64_t rma_len;         /* register a target region of this size */
	int rma_flags;            /* its access flags */
	uint32_t extra_regs;      /* register this many 1-byte regions before it */
};

struct srv_stats {
	uint64_t requests, accepts, recvs, bytes, tiny;
	uint64_t order_errors, dups, corrupt, misaligned, bad_conn;
	uint64_t rma_notes, rma_bad, canary_bad;
	uint64_t sends_ok, sends_err, keepalives, enobufs, max_held;
	uint32_t last_req_len, last_req_attr, payload_bad;
	uint32_t conn_mss, dev_mss, conn_attr; /* of the last accepted connection */
	int32_t fds;                           /* the server's open descriptors ... */
	int64_t rss_kb;                        /* ... and resident KiB, at the report */
};

/* The test's view of a running server. */
struct srv {
	struct h_peer peer;
	char uri[512];
	struct cci_rma_handle handle;  /* the region's handle, when rma_len */
};

/* Commands (srv_cmd) and what the server does. */
#define SRV_CMD_SEND 's'        /* send arg 64-byte messages on connection 0 */
#define SRV_CMD_DISCONNECT 'd'  /* cci_disconnect() every connection */
#define SRV_CMD_DESTROY 'e'     /* cci_destroy_endpoint() */
#define SRV_CMD_DEREGISTER 'u'  /* cci_rma_deregister() the region */
#define SRV_CMD_REREGISTER 'n'  /* deregister the region, register it again:
                                 * srv_reregister() */
#define SRV_CMD_RELEASE 'r'     /* return held RECV events, stop holding */
#define SRV_CMD_FREEZE 'z'      /* stop itself (SIGSTOP) between two library calls */

/* Fork the server (before the test's own cci_init) and read its URI (and
 * RMA handle).  REQUIREs that it starts. */
void srv_start(struct srv *s, const struct srv_opts *o);
/* Send a command and wait (10 s) for its acknowledgement. */
void srv_cmd(struct srv *s, char cmd, uint32_t arg);
/* Have the server deregister its region and register it again; s->handle
 * becomes the new handle, the old one is returned in *old. */
void srv_reregister(struct srv *s, struct cci_rma_handle *old);
/* Have the server stop itself between two library calls, and wait (5 s)
 * until it is stopped.  SIGCONT resumes it, SIGKILL ends it. */
void srv_freeze(struct srv *s);
/* The server's counters now. */
void srv_snapshot(struct srv *s, struct srv_stats *st);
/* Stop the server (it drains its events, checks its memory, cleans up),
 * get its final counters and reap it. */
void srv_stop(struct srv *s, struct srv_stats *st);
/* End a test: stop the server (srv_stop) and tear the test's endpoint
 * down (h_teardown), in the order its progress mode needs.  With a
 * progress thread the server goes first, while the test's endpoint still
 * moves what it queued (a destroyed endpoint drops what is in flight).
 * With progress = manual the test's endpoint goes first: it moves nothing
 * unless called either way, and a server stopping while the test does not
 * poll waits out its bounds for the answers the test's side owes it (a
 * DISC's, a deregistration's: 2 s each over ofi), in every test. */
void srv_stop_and_teardown(struct srv *s, struct srv_stats *st, cci_endpoint_t *ep);

#endif /* CONFORMANCE_SERVER_H */
