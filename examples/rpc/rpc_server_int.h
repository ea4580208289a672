/*
 * rpc_server_int.h - the server's state, shared by its endpoint half
 * (rpc_server.c: create, accept, events, close) and its call half
 * (rpc_serve.c: requests, RMA jobs, replies and the send queue).
 */
#ifndef CCI_EX_RPC_SERVER_INT_H
#define CCI_EX_RPC_SERVER_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <cci.h>

#include "rpc.h"
#include "rpc_wire.h"

#define RPC_MAX_PROCS 64

/*
 * One client.  It is the context of its CCI connection, so every event
 * names it.  busy counts what may still produce an event or a send for it
 * (operations posted and not completed, actions queued); the connection
 * is closed and this freed only when busy is 0 after the client's BYE or
 * a failure, so no event can outlive it.
 */
struct rpc_sconn {
	struct rpc_server *srv;
	cci_connection_t *conn;
	uint32_t inline_max;        /* result bytes that fit a reply */
	uint32_t busy;
	bool bye, broken;
	struct rpc_sconn *prev, *next;
};

enum rpc_job_stage { JOB_READ, JOB_WRITE };

/*
 * A call that moves data by RMA.  It owns buf (the argument pulled from
 * the client, if remote, then the result) and buf's registration, from
 * the request until the last RMA completes.
 */
struct rpc_job {
	struct rpc_sconn *sc;
	enum rpc_job_stage stage;
	rpc_proc_t fn;
	struct rpc_req req;          /* req.arg is not valid: the message is gone */
	unsigned char *buf;
	uint64_t arg_len;            /* bytes of buf holding the argument */
	uint64_t res_cap, res_len;   /* the result follows the argument */
	cci_rma_handle_t *h;
	unsigned char rep[RPC_REP_HDR]; /* completion message of the WRITE */
	struct rpc_job *prev, *next;    /* the server's list */
};

/* An operation waiting for a send buffer: a message (job NULL; the bytes
 * are copied here) or the next RMA of a job. */
struct rpc_action {
	struct rpc_action *next;
	struct rpc_sconn *sc;
	struct rpc_job *job;
	uint32_t len;
	unsigned char msg[];
};

struct rpc_proc_entry {
	char name[RPC_NAME_MAX + 1];
	rpc_proc_t fn;
};

struct rpc_server {
	struct rpc_server_opts o;
	cci_endpoint_t *ep;
	int fd;                          /* the endpoint's OS handle */
	char *uri;
	struct rpc_proc_entry procs[RPC_MAX_PROCS];
	unsigned nprocs;
	struct rpc_sconn *conns;
	struct rpc_job *jobs;
	struct rpc_action *queue, *queue_tail;
	unsigned char *scratch;          /* inline results, RPC_INLINE_MAX */
	struct rpc_server_stats stats;
};

/* A request arrived from sc (len bytes at msg, valid during the call). */
void rpc_serve_request(struct rpc_sconn *sc, const void *msg, uint32_t len);

/* The SEND event of a reply (job NULL) or of a job's RMA. */
void rpc_serve_completion(struct rpc_sconn *sc, struct rpc_job *job, int status);

/* Post queued operations while send buffers last. */
void rpc_serve_flush(struct rpc_server *s);

/* Close sc if it is done (BYE or broken) and nothing is in flight. */
void rpc_sconn_maybe_close(struct rpc_sconn *sc);

/* Free every job and queued action (the endpoint is going away). */
void rpc_serve_fini(struct rpc_server *s);

#endif /* CCI_EX_RPC_SERVER_INT_H */
