/*
 * rpc.h - a small remote procedure call runtime on CCI, in the spirit of
 * GridRPC: a server registers named procedures, a client calls them by
 * name, one at a time (rpc_call) or with many calls in flight
 * (rpc_call_async, then rpc_wait or rpc_test), each matched to its reply
 * by a call id.
 *
 * Data movement: an argument or result of at most RPC_INLINE_MAX bytes
 * travels inside the request or reply message.  A larger argument stays in
 * the caller's buffer, which the client registers for RMA; the request
 * carries the RMA handle, offset and length, and the server pulls the
 * bytes with an RMA READ before it runs the procedure.  A result larger
 * than RPC_INLINE_MAX is pushed by the server with an RMA WRITE straight
 * into the caller's result buffer (registered the same way); the reply
 * rides on that RMA as its completion message, so it arrives only once the
 * data is in place.
 *
 * Failures: every call completes exactly once, with a status.  The server
 * reports unknown procedures, oversized arguments and procedure failures
 * in the reply.  A server that dies or stops answering is noticed by the
 * connection's keepalive, by probes while calls wait, and by any failed
 * send; then every pending call completes with RPC_EDEAD (or
 * RPC_ETIMEDOUT past the call timeout) within that bound, and later calls
 * fail at once.
 *
 * Threads: a client or a server is used by one thread at a time; run
 * several clients in several threads if needed.  Each object has its own
 * CCI endpoint and is driven only by calls on it (no hidden thread).
 */
#ifndef CCI_EX_RPC_H
#define CCI_EX_RPC_H

#include <stddef.h>
#include <stdint.h>

/* Arguments and results up to this size travel inside the messages. */
#define RPC_INLINE_MAX 1024
/* Longest procedure name, without its terminating NUL. */
#define RPC_NAME_MAX 31

/* Statuses: the return value of every function and the outcome of a call. */
enum rpc_status {
	RPC_OK = 0,
	RPC_EAGAIN,     /* rpc_test: the call is still in flight */
	RPC_ENOPROC,    /* the server has no procedure of that name */
	RPC_EPROC,      /* the procedure failed: see rpc_reply.proc_rc */
	RPC_E2BIG,      /* argument larger than the server accepts */
	RPC_ERMA,       /* the server could not read the argument or write the result */
	RPC_EDEAD,      /* the connection to the server is broken */
	RPC_ETIMEDOUT,  /* no reply within the call timeout */
	RPC_EBUSY,      /* the client has max_inflight calls in flight already */
	RPC_EINVAL,     /* a bad argument, or an unknown call id */
	RPC_ENOMEM,
	RPC_EPROTO,     /* a malformed message */
	RPC_ECCI        /* a CCI call failed; stderr says which */
};

/* A sentence for a status; static, never freed. */
const char *rpc_strerror(int status);

/* ------------------------------------------------------------ server */

/*
 * A procedure.  arg points at arg_len bytes (read-only, valid during the
 * call).  result points at result_cap bytes: the smaller of the caller's
 * result buffer and the server's max_result.  The procedure writes at most
 * result_cap bytes there, sets *result_len_p and returns 0; any other
 * return value is a failure, handed to the caller as RPC_EPROC with that
 * value in rpc_reply.proc_rc.  It runs on the server's thread, inside
 * rpc_server_progress().
 */
typedef int (*rpc_proc_t)(const void *arg, size_t arg_len, void *result,
			  size_t result_cap, size_t *result_len_p);

struct rpc_server_opts {
	const char *device;   /* CCI device name; NULL: the default device */
	const char *service;  /* cci_create_endpoint_at() service; NULL: any */
	size_t max_arg;       /* largest argument accepted; 0: 16 MiB */
	size_t max_result;    /* largest result buffer offered; 0: 16 MiB */
};

struct rpc_server_stats {
	uint64_t calls;       /* replies sent, errors included */
	uint32_t clients;     /* connections accepted so far */
	uint32_t open;        /* connections not yet closed */
};

struct rpc_server;

/*
 * Open a server: cci_init(), an endpoint, nothing registered.  opts may be
 * NULL.  *server_p is written on success; rpc_server_destroy() frees it.
 */
int rpc_server_create(const struct rpc_server_opts *opts,
		      struct rpc_server **server_p);

/* The URI clients pass to rpc_client_open(); owned by the server. */
const char *rpc_server_uri(const struct rpc_server *server);

/* Register fn under name (1..RPC_NAME_MAX bytes, copied).  A name already
 * registered gives RPC_EINVAL. */
int rpc_register(struct rpc_server *server, const char *name, rpc_proc_t fn);

/*
 * Serve: accept clients, run the procedures they call and reply, for up
 * to timeout_ms milliseconds (sleeping on the endpoint's OS handle while
 * there is nothing to do; 0: only what is pending now).  Returns RPC_OK,
 * or RPC_ECCI when the endpoint failed.  A client that says goodbye is
 * disconnected once its last reply has completed; one whose connection
 * breaks, once its last operation has failed.
 */
int rpc_server_progress(struct rpc_server *server, uint32_t timeout_ms);

void rpc_server_stats(const struct rpc_server *server,
		      struct rpc_server_stats *stats);

/* Disconnect every client, free the server, cci_finalize(). */
void rpc_server_destroy(struct rpc_server *server);

/* ------------------------------------------------------------ client */

struct rpc_client_opts {
	const char *device;          /* CCI device; NULL: the default device */
	uint32_t max_inflight;       /* calls in flight at most; 0: 64 */
	uint32_t keepalive_ms;       /* server silent this long: dead; 0: 1000 */
	uint32_t call_timeout_ms;    /* a call unanswered this long breaks the
	                              * connection (RPC_ETIMEDOUT); 0: none */
	uint32_t connect_timeout_ms; /* 0: 5000 */
};

/* A call in flight; ids are never reused by one client. */
typedef uint64_t rpc_call_id_t;

/* How a call ended, when it reached the server. */
struct rpc_reply {
	size_t result_len;  /* bytes written to the result buffer */
	int proc_rc;        /* the procedure's return value (RPC_EPROC) */
};

struct rpc_client;

/*
 * Connect to the server at uri (its rpc_server_uri()), waiting for the
 * answer up to the connect timeout.  opts may be NULL.  *client_p is
 * written on success; rpc_client_close() frees it.
 */
int rpc_client_open(const char *uri, const struct rpc_client_opts *opts,
		    struct rpc_client **client_p);

/*
 * Start a call of proc with arg_len bytes at arg, the result going to
 * result (result_cap bytes; NULL when 0).  *id_p names the call for
 * rpc_wait()/rpc_test().  An inline argument is copied before the call
 * returns; a larger one (over RPC_INLINE_MAX) is read by the server from
 * arg, so arg stays valid and unchanged until the call completes.  The
 * result buffer belongs to the runtime until then.  Returns RPC_EBUSY
 * when max_inflight calls are in flight (complete some first), RPC_EDEAD
 * once the connection is broken, RPC_E2BIG for arguments over 4 GiB.
 */
int rpc_call_async(struct rpc_client *client, const char *proc,
		   const void *arg, size_t arg_len, void *result,
		   size_t result_cap, rpc_call_id_t *id_p);

/*
 * Wait for call id to complete and return its status; reply_p (may be
 * NULL) receives the result length and the procedure's return value.  The
 * id is forgotten afterwards (a second wait gives RPC_EINVAL).  Waiting
 * makes progress on every call of the client.  Bounded: a dead server is
 * noticed within the keepalive timeout.
 */
int rpc_wait(struct rpc_client *client, rpc_call_id_t id,
	     struct rpc_reply *reply_p);

/* As rpc_wait(), without waiting: RPC_EAGAIN while the call is in flight
 * (the id stays valid), else its status as rpc_wait() gives it. */
int rpc_test(struct rpc_client *client, rpc_call_id_t id,
	     struct rpc_reply *reply_p);

/* rpc_call_async() then rpc_wait(). */
int rpc_call(struct rpc_client *client, const char *proc, const void *arg,
	     size_t arg_len, void *result, size_t result_cap,
	     struct rpc_reply *reply_p);

/* Calls in flight (started and not yet waited for or tested complete). */
uint32_t rpc_client_inflight(const struct rpc_client *client);

/*
 * Wait (bounded, as rpc_wait()) for the calls still in flight, say goodbye
 * to the server, disconnect, free the client and cci_finalize().  Ids of
 * calls not yet waited for become invalid.
 */
void rpc_client_close(struct rpc_client *client);

#endif /* CCI_EX_RPC_H */
