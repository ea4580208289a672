/*
 * bench.h - what the streaming benchmarks (bandwidth, msgrate) share.
 *
 * Both programs are a client that streams operations to a server with a
 * bounded number in flight and a server that counts what arrives.  This
 * module holds the endpoint set-up, bounded event waits, the connect
 * payload, the control messages and the whole server, so the two programs
 * keep only their sweeps and their output.  Public API (cci.h) only.
 */
#ifndef CCI_PERF_BENCH_H
#define CCI_PERF_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "cci.h"
#include "perf_util.h"

#define BENCH_MAGIC 0x9e3779b97f4a7c15ull /* bytes do not count up by one */
#define BENCH_HELLO_MAGIC 0x7374726du     /* "strm" */
#define BENCH_VERSION 1
#define BENCH_MAX_RMA (1ull << 30)        /* largest RMA buffer a server grants */
#define BENCH_MAX_CONNS 256

enum bench_ctl_type { BCTL_HANDLE = 1, BCTL_END, BCTL_ACK, BCTL_DONE, BCTL_DONE_ACK };

/* The connect payload of every connection of a run. */
struct bench_hello {
	uint32_t magic;
	uint32_t version;
	uint32_t rma_op; /* 0, CCI_FLAG_WRITE or CCI_FLAG_READ */
	uint32_t nconns; /* connections the client opens */
	uint32_t index;  /* this connection's number, 0 .. nconns-1 */
	uint32_t pad;
	uint64_t rma_max;
};

/* Control messages start with a magic word no data payload can hold. */
struct bench_ctl {
	uint64_t magic;
	uint32_t type;
	uint32_t pad;
	uint64_t count;     /* END: data messages sent so far on all connections */
	uint64_t handle[4]; /* HANDLE: the serialized cci_rma_handle_t */
};

struct bench {
	const char *prog;
	/* options common to both programs */
	bool server, blocking, json, nocopy;
	const char *uri, *outfile, *device;
	cci_conn_attribute_t attr;
	double timeout_s;
	/* state */
	cci_endpoint_t *ep;
	cci_os_handle_t fd;
	cci_connection_t *conns[BENCH_MAX_CONNS];
	uint32_t nconns;
	uint32_t inflight[BENCH_MAX_CONNS]; /* SEND events pending per connection */
	uint64_t inflight_total;
	uint64_t sent_total; /* client: data messages since the connections opened */
	cci_event_t *stash; /* a RECV that arrived while streaming */
	cci_rma_handle_t *local_h;
	struct cci_rma_handle remote_h;
	unsigned char *buf;
	uint64_t buf_len;
};

/* The options both programs take: -s, -h URI, -o FILE, -D NAME, -c ATTR,
 * -b, -t SECS and --json (getopt code 'j').  True when c was one of them,
 * now stored in b; false leaves c to the program. */
bool bench_parse_common(struct bench *b, int c, const char *arg);
/* After getopt: dies unless exactly one of -s and -h was given and no
 * operand is left. */
void bench_check_common(const struct bench *b, int optind, int argc);

/* cci_init, the endpoint (-D, -b), "Opened <uri>", the -o file. */
void bench_open(struct bench *b);
/* Disconnects, deregisters, destroys the endpoint, finalizes, frees. */
void bench_close(struct bench *b);
void bench_alloc(struct bench *b, uint64_t len);

/* The next event; dies after the -t timeout without one. */
cci_event_t *bench_wait(struct bench *b);
/* One look for an event, never waiting. */
bool bench_poll(struct bench *b, cci_event_t **ev);
void bench_return(cci_event_t *ev);

/* Handles events until no SEND event is pending (a control message's
 * completion may still be due after the answer came). */
void bench_wait_idle(struct bench *b);

/* Client: opens b->nconns connections with the given mode, then (RMA)
 * takes the server's handle and registers the local buffer. */
void bench_connect(struct bench *b, uint32_t rma_op, uint64_t rma_max);

/*
 * Client: n operations of size bytes, spread round-robin over the first
 * nconns connections with at most window SEND events pending on each,
 * then END/ACK so the server has them all.  rma_op 0 sends messages.
 * Returns the nanoseconds from the first operation to the ACK.
 */
uint64_t bench_stream(struct bench *b, uint32_t nconns, uint32_t window,
		      uint32_t rma_op, uint64_t size, uint64_t n);

/*
 * Client: n messages of size bytes from nthreads sender threads, thread t
 * posting on connections t, t + nthreads, ... of the first nconns (at
 * least nthreads) with at most window SEND events pending on each; any
 * thread reaps any completion (bench_threads.c).  Then END/ACK as above.
 * Returns the nanoseconds from the threads' start to the ACK.
 */
uint64_t bench_stream_threads(struct bench *b, uint32_t nthreads, uint32_t nconns,
			      uint32_t window, uint64_t size, uint64_t n);

/* Client, once all n operations of a run completed: END/ACK, dying unless
 * the server counted exactly the data messages sent so far (n of them
 * data messages in this run, 0 for RMA).  The nanoseconds since t0. */
uint64_t bench_end_stream(struct bench *b, uint64_t n, uint64_t t0);

/* Client: tells the server it is done and waits for its answer. */
void bench_done(struct bench *b);

/* Server: accepts the client's connections, counts, exits when done. */
void bench_serve(struct bench *b);

#endif
