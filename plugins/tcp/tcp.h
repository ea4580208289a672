/*
 * tcp.h - internal structures of the tcp transport.
 *
 * One TCP socket per connection, one listening socket per endpoint.  Frames
 * (tcp_wire.h) carry messages, acks and emulated RMA.  A reliable send
 * completes when the peer acknowledged it: acks ride on every frame and a
 * lone ACK frame goes out when nothing else does (at once when the sender
 * asked for it, else at the next tick).
 *
 * Threads.  Each endpoint has a progress thread running a libev loop: the
 * listening socket, handshakes, timers (one tick every TCP_TICK_S) and, when
 * the application stops polling, the connections' sockets ("thread mode").
 * While the application polls (cci_get_event calls progress()), the thread
 * leaves the sockets alone and progress() reads them itself with
 * recv(MSG_DONTWAIT) ("app mode"): no thread hop, no extra system call.
 * The tick switches modes.
 *
 * Objects and owners:
 *   struct tcp_ep    ep->priv, from ep_create to ep_free.
 *   struct tcp_conn  conn->priv of the core's connection; the core frees it
 *                    after core->conn_release() and the last lent event.
 *   struct tcp_req   malloc'd: an accepted socket until its request is
 *                    answered and the event returned (or the endpoint dies).
 *   struct tcp_op    a send or RMA in flight; from the endpoint's op list,
 *                    never freed before the endpoint.
 *   struct tcp_buf   a receive buffer lent with RECV events, or a copy buffer.
 *
 * Layers.  frame, pool -> tx -> rma -> conn -> rx -> hs -> loop -> ep ->
 * plugin: a file calls only those before it (README.md, "Source layout").  A lower
 * one leaves work for the loop with tcp_loop_cmd() (command bits) or state
 * it reads (tc->fault, sep->rx_starved); the one call upward is
 * tcp_op_get_app() running a progress pass through ep->plugin->progress.
 *
 * Locks, always taken in this order:
 *   sep->eng.lock   the libev loop and its watchers; held by the progress
 *                   thread except while it sleeps.  Connection set-up and
 *                   teardown (connect, accept, disconnect) take it.
 *   sep->lock       the receive side of every connection, the connection
 *                   lists and states; progress() takes it for a pass.
 *   tc->tx_lock     one connection's transmit side: queues, sequence numbers
 *                   (a spinlock: queue moves and non-blocking sends; taken
 *                   twice per message, where a mutex costs ~50 instructions).
 *   sep->ops        the op pool (plugins/common/op_pool.h): its own
 *                   spinlock, the innermost.
 *   sep->copy_lock  the copy buffers (a spinlock: a few pointer moves,
 *                   never held across a call that blocks).
 */
#ifndef CCI_TCP_H
#define CCI_TCP_H

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "cci_plugin.h"
#include "net_dev.h"
#include "net_io.h"
#include "tcp_wire.h"
#include "clock.h"
#include "conn_base.h"
#include "dlist.h"
#include "emu_rma.h"
#include "engine.h"
#include "grow.h"
#include "iov.h"
#include "lender.h"
#include "listen_guard.h"
#include "lock_held.h"
#include "op_pool.h"
#include "random.h"
#include "slist.h"
#include "spin.h"
#include "status.h"

extern const struct cci_core *tcp_core;

#define TCP_LOG(cat, ...) CCI__LOG(tcp_core, (cat) | CCI_LOG_CTP, __VA_ARGS__)
#define TCP_WARN(...) tcp_core->log(CCI_LOG_WARN, __VA_ARGS__)
#define TCP_ERR(...) tcp_core->log(CCI_LOG_ERR, __VA_ARGS__)

#define TCP_AM_MSS_DEFAULT 65536 /* a plain literal: it is the table's default too */
#define TCP_BUFSIZE_MAX (256u << 20)
#define TCP_RECV_COUNT_DEFAULT 64u    /* receive buffers (mss bytes each) */
#define TCP_OPS_PREALLOC 16u          /* ops made with the endpoint */
#define TCP_SEND_COUNT_DEFAULT 1024u  /* sends in flight: metadata, plus a copy only
                                       * of what the socket did not take */
#define TCP_BUF_COUNT_MAX 65536u
#define TCP_STAGE_LEN 16384u          /* read staging, one per endpoint */
#define TCP_DIRECT_MIN 2048u          /* payloads this big are read in place */
#define TCP_FRAG_LEN (1u << 20)       /* RMA data per frame we send */
#define TCP_FRAG_MAX (4u << 20)       /* RMA data per frame we accept */
#define TCP_TICK_S 0.01               /* timers and mode switches */
#define TCP_HS_TIMEOUT_NS 5000000000ull /* an accepted socket must say HELLO by then */
#define TCP_HS_MAX 256u               /* handshakes in progress; then accepting waits ... */
#define TCP_HS_EVICT_NS 1000000000ull /* ... unless the oldest has waited this long (dropped) */
#define TCP_NOFD_RETRY_NS 100000000ull /* out of descriptors: accept again after this */
#define TCP_NOFD_WARN_NS 10000000000ull /* ... saying so at most this often */
#define TCP_CONNECT_RETRY_NS 50000000ull /* a connect dropped by the server: again after
                                         * this, doubling ... */
#define TCP_CONNECT_RETRY_MAX_NS 1000000000ull /* ... up to this */
#define TCP_RETRY_LEVELS 6u           /* the waits between: 50 ms .. 800 ms, 1 s */
#define TCP_ACK_EVERY 16u             /* ack at once after this many frames */
#define TCP_ACK_BYTES (256u << 10)    /* ... or this many bytes */
#define TCP_CTL_LEN 1024u             /* queued control frames of a connection */
#define TCP_OP_IOV 8u                 /* payload pieces an op keeps */
#define TCP_GATHER_IOV 64u            /* iovecs per sendmsg */
#define TCP_ALONE_MIN (64u << 10)     /* frames this big are written one per call */
#define TCP_COPY_SMALL 4096u          /* copies up to this stay with their op */
#define TCP_COPY_QUEUED_MAX (8u << 20) /* copied bytes queued per endpoint before ENOBUFS */
#define TCP_LINEAR_MAX 512u           /* frames this small go out by send() from one copy */
#define TCP_BURST_FREE 4u             /* sends between two polls that leave at once */
#define TCP_HOLD_MAX 32u              /* frames held past them for one write */
#define TCP_ANSWERS_MAX TCP_BUF_COUNT_MAX /* answers to a peer's RMAs not yet written: its
                                           * RMAs in flight, within its send_buf_count */
#define TCP_RX_ROUNDS 64              /* reads per connection per pass */
#define TCP_POLL_DIRECT_MAX 4         /* up to this many sockets polled by recv */
#define TCP_FULL_SKIP 8               /* polls without a write after a full socket */

/* Why the listening socket is not watched (listen_guard.h): accept failed
 * for want of descriptors or memory (CCI__LISTEN_NOFD), or TCP_HS_MAX
 * handshakes wait for their HELLO. */
#define TCP_PAUSE_FULL CCI__LISTEN_OWN

/* Commands for the progress thread (engine command bits). */
#define TCP_CMD_TX 2u     /* a connection has queued bytes (thread mode) */
#define TCP_CMD_RX 4u     /* receive buffers came back: resume stalled reads */
#define TCP_CMD_FAULT 8u  /* a connection must be broken */
#define TCP_CMD_WAKE 16u  /* go to thread mode now */
#define TCP_CMD_FLUSH 32u /* write the frames held for a burst (tcp_tx.c) */

enum tcp_op_kind {
	TCP_OP_MSG,     /* an active message */
	TCP_OP_WRITE,   /* RMA write: WR_DATA..., WR_END with the message; then tc->rma_wait */
	TCP_OP_READ,    /* RMA read: RD_REQ, then tc->rma_wait; after DONE its message */
	TCP_OP_ANSWER   /* target side: the answer to a peer's WR_END or RD_REQ */
};

struct tcp_conn;

/* A send, an RMA, or the answer to a peer's RMA (a control op, outside
 * the application's budget), from the endpoint's op pool.  Fields after
 * link and before rma_pos are reset for every use; the rest is kept or
 * valid only by its count. */
struct tcp_op {
	struct cci__op_link link;  /* the pool's */
	struct tcp_op *next;       /* txq, infl or reads */
	struct tcp_conn *tc;
	uint8_t kind;
	uint8_t prepared;          /* the current frame is encoded ... */
	uint8_t frame_kind;        /* ... an RMA record of this kind */
	uint8_t reliable;
	uint8_t in_txq;            /* linked in tc->txq */
	uint8_t borrowed;          /* uiov points at the caller's bytes (copy before return) */
	int flags;
	void *context;
	int status;
	uint32_t hdr_len, piovcnt, uiovcnt;
	uint32_t len;              /* message bytes */
	uint64_t seq;              /* of the sequenced frame */
	uint64_t t_ns;             /* queued at (coarse clock), for the send timeout */
	uint64_t frame_len, frame_off, frame_data;
	struct cci__emu_rma_op rma; /* WRITE, READ, ANSWER */
	char *big;                 /* a copy buffer from the endpoint's cache, or NULL */
	uint32_t big_len;          /* bytes of it counted in sep->copy_queued */
	/* Kept across uses. */
	uint64_t rma_pos;          /* an RMA (set for each): tc->tx_seq when it was queued,
	                            * its place among the sends (tcp_conn_break) */
	char *buf;                 /* small copy buffer (TCP_COPY_SMALL bytes) */
	/* The frame being written: header, sub-header and payload pieces. */
	uint8_t hdr[TCP_HDR_LEN + TCP_SUB_MAX];
	struct iovec piov[TCP_OP_IOV];
	/* Message bytes: the caller's (borrowed, NO_COPY) or buf. */
	struct iovec uiov[TCP_OP_IOV];
};

/* A receive buffer or a big copy buffer (mss bytes); data follows the
 * header (16-byte aligned). */
struct tcp_buf {
	struct cci__lent lent;     /* a receive buffer on its way back */
	struct tcp_buf *next;
	struct tcp_buf *all_next;
};

static inline char *tcp_rb_data(struct tcp_buf *rb)
{
	return (char *)(rb + 1);
}

enum tcp_sink { TCP_SINK_NONE, TCP_SINK_BUF, TCP_SINK_MEM, TCP_SINK_DROP };

struct tcp_ep;

/* A link of a connection waiting to try again (sep->retry_head). */
struct tcp_rlink {
	struct tcp_rlink *next, *prev;
};

/* What a client's connection needs only until it opens: its HELLO (and
 * then the reply read over it) and the server's address, for a new
 * attempt.  An open connection, and every server connection, holds none. */
struct tcp_dial {
	uint8_t hs[TCP_HDR_LEN + TCP_HELLO_LEN + CCI_CONN_REQ_LEN];
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

struct tcp_conn {
	/* First.  State and timers change under sep->lock (a break holds
	 * tx_lock too); senders read the state without it, and the receive
	 * path stamps last_heard_ns with a relaxed store. */
	struct cci__conn_base base;
	cci__conn_t *conn;
	struct tcp_ep *sep;
	struct tcp_conn *next, *prev;  /* sep->conns */
	struct tcp_conn *gone_next;    /* in sep->gone while gone_listed (sep->lock) */
	int gone_listed;
	int fd;                        /* -1 once released (tcp_conn_release_gone) */
	_Atomic int fault;             /* status to break with (from a sender) */
	int in_rx;                     /* in sep->open, at open_idx */
	uint32_t open_idx;
	int in_epoll;                  /* in rx_epfd (see tcp_conn_watch_update) */
	char peer[64];
	uint32_t mss;

	/* Handshake (client), under the loop lock and sep->lock. */
	ev_io hs_w;
	struct tcp_dial *dial;         /* while it connects; freed once open */
	uint32_t hs_len, hs_off;
	uint64_t nonce;
	void *context;
	int hello_sent;                /* CONNECTING: our HELLO is out, the reply awaited */
	uint64_t retry_ns;             /* CONNECTING without a socket: try again then, ... */
	struct tcp_rlink retry;        /* ... linked in sep->retry_head[retry_level] */
	uint64_t retry_wait_ns;        /* the last wait (0: none yet), ... */
	uint32_t retry_level;          /* ... as doublings of the first (its FIFO) */

	/* Transmit side, under tx_lock. */
	cci__spinlock_t tx_lock;
	struct tcp_op *txq, *txq_tail;
	struct tcp_op *infl, *infl_tail;
	struct tcp_op *rma_wait;       /* RMAs sent, waiting for their DONE */
	uint64_t tx_seq;               /* next sequence number */
	uint64_t peer_acked;           /* highest ack the peer sent */
	uint32_t nanswers;             /* answers to the peer's RMAs not yet written */
	/* Emulated RMA (emu_rma.h): the initiator's fields under tx_lock, the
	 * target's under sep->lock. */
	struct cci__emu_rma_conn rma;
	uint8_t ctl[TCP_CTL_LEN];      /* encoded control frames */
	uint32_t ctl_len, ctl_off;
	_Atomic int tx_queued;         /* bytes wait in txq/ctl (set under tx_lock) */
	_Atomic int tx_full;           /* polls to skip after the socket was full */
	_Atomic int tx_listed;         /* on sep->tx_due ... */
	struct tcp_conn *tx_due_next;  /* ... linked by this (tcp_tx.c) */
	uint64_t burst_gen;            /* sep->progress_gen of the last send */
	uint32_t burst;                /* sends since the application last polled */
	uint32_t held;                 /* of them, frames held in txq for one write */
	ev_io w_w;                     /* writable watcher (thread mode) */
	int w_on;

	/* Receive side, under sep->lock. */
	_Atomic uint64_t rx_seq;       /* sequenced frames received */
	_Atomic uint64_t ack_sent;     /* the last ack value we sent */
	uint64_t ack_bytes;            /* payload bytes since the last ack */
	uint64_t ack_seen;             /* the peer's last ack value, as read */
	uint64_t ack_done;             /* ... and as applied to our queues */
	struct tcp_conn *ack_next;     /* in sep->ack_due while ack_listed */
	int ack_listed;
	int ack_now;
	/* Bytes read, not yet parsed (st_pos..st_end): during a pass in the
	 * endpoint's stage (sep->stage); a pass that ends with some left (its
	 * connection stalled for a receive buffer) keeps that stage here
	 * until they are parsed (tcp_rx.c), so an idle connection holds none. */
	uint8_t *kept;
	uint32_t st_pos, st_end;
	uint8_t fh[TCP_HDR_LEN + TCP_SUB_MAX];
	uint32_t fh_have;
	int fh_ready;                  /* fh decoded into h/sub, payload not begun */
	int in_payload;
	struct tcp_hdr h;
	struct cci__emu_rma_rec rec;   /* of an RMA frame */
	int sink;
	char *dst;
	uint64_t left;
	struct tcp_buf *rb;            /* the buffer being filled */
	struct tcp_op *rd_op;          /* the read whose data is arriving */
	int wr_verdict;                /* of the WR_END being read, for its DONE */
	int stalled;                   /* waits for a receive buffer */
	int drained;                   /* the last read emptied the socket */
	int big;                       /* the last read went straight to a payload */
	int yield;                     /* a big message was posted: end the pass */
};

/* A connection request, server side. */
enum tcp_req_state { TCP_REQ_READING, TCP_REQ_POSTED };
struct tcp_req {
	struct tcp_req *next, *prev;   /* sep->reqs (READING, oldest first) or sep->posted */
	struct tcp_ep *sep;
	int fd;
	int state;
	ev_io w;
	uint64_t t0_ns;                /* accepted at */
	uint64_t deadline_ns;
	char peer[64];
	uint8_t buf[TCP_HDR_LEN + TCP_HELLO_LEN + CCI_CONN_REQ_LEN];
	uint32_t have;
	struct tcp_hello hello;
};

struct tcp_ep {
	cci__ep_t *ep;
	const struct net_dev *dev;
	uint32_t mss;
	uint64_t id;                   /* random per incarnation */
	int listen_fd;
	int rx_epfd;                   /* every open connection socket */
	uint16_t port;

	/* Accepting, under the loop lock (tcp_hs.c).  While the guard has a
	 * pause reason, the listening socket is not watched: connection
	 * requests wait in its backlog.  A descriptor closed by the endpoint
	 * (a connection, a request, an attempt) tells it
	 * (cci__listen_fd_freed). */
	struct cci__listen_guard lg;
	_Atomic uint64_t connect_warned_ns; /* the last warning about a connect without a socket */
	/* Client connections waiting to try again, one FIFO per wait
	 * (retry_level): the members of one waited alike, so each is in due
	 * order and the tick looks at its head alone.  Both locks. */
	struct tcp_rlink *retry_head[TCP_RETRY_LEVELS], *retry_tail[TCP_RETRY_LEVELS];

	/* Progress thread (none with progress=manual: progress() runs the
	 * loop's work itself, cci__engine_poll). */
	int manual;
	struct cci__engine eng;        /* the loop; eng.lock is the loop lock; who
	                                * polls and the coarse clock (engine.h) */
	ev_io listen_w, rx_w;

	/* Connections, under lock. */
	pthread_mutex_t lock;
	struct tcp_conn *conns;        /* every connection, a connect waiting to try again
	                                * (fd -1) included */
	struct tcp_conn **open;        /* the readable ones */
	uint32_t nopen, open_cap;
	int watch_want, watch_failed;  /* the open sockets' rx_epfd membership, and
	                                * whether an update failed for some */
	struct tcp_req *reqs, *reqs_tail, *posted; /* reqs: oldest first (a FIFO) */
	uint32_t nreqs;
	_Atomic int nfaults;
	_Atomic int tx_busy;           /* connections with tx_queued */
	struct tcp_conn *_Atomic tx_due; /* connections with tx_queued, pushed by any
	                                  * thread, taken whole under lock (tcp_tx.c) */
	_Atomic uint64_t progress_gen; /* the application's progress calls */
	_Atomic int rx_starved;
	uint8_t *stage;                /* TCP_STAGE_LEN: every connection reads into
	                                * it in turn, under lock (tcp_rx.c) ... */
	uint8_t *stage_spare;          /* ... and one more, given back by a connection
	                                * that had kept one while stalled */
	struct tcp_conn *gone;         /* broken, their socket and buffers to release
	                                * at the next tick with the loop lock */
	struct tcp_conn *ack_due;      /* connections with acks read, not applied yet
	                                * (tcp_rx.c): a pass visits these, not every
	                                * open connection */
	struct cci__due_heap due;      /* connections by their timers' next visit (the
	                                * tick visits these, not every connection);
	                                * sep->lock */

	/* Op pool, and big copy buffers (mss bytes) lent to ops only until
	 * their bytes are in the socket, so a few warm ones serve a stream. */
	struct cci__op_pool ops;
	cci__spinlock_t copy_lock;
	struct tcp_buf *cb_free, *cb_all;
	_Atomic uint64_t copy_queued;

	/* Receive buffers: rb_free, rb_all, rb_count (made) and the lender's
	 * count under lock; they come back through the lender from any
	 * thread. */
	struct tcp_buf *rb_free, *rb_all;
	uint32_t rb_count;
	struct cci__lender lend;
};

static inline struct tcp_ep *tcp_ep_of(cci__ep_t *ep)
{
	return ep->priv;
}

static inline struct tcp_conn *tcp_conn_of(cci__conn_t *conn)
{
	return conn->priv;
}

static inline struct tcp_conn *tcp_conn_of_retry(struct tcp_rlink *l)
{
	return (struct tcp_conn *)((char *)l - offsetof(struct tcp_conn, retry));
}

/* tc no longer waits to try again (a no-op if it does not).  Both locks. */
static inline void tcp_retry_unlink(struct tcp_conn *tc)
{
	struct tcp_ep *sep = tc->sep;

	if (!tc->retry_ns)
		return;
	tc->retry_ns = 0;
	CCI__DQ_UNLINK(&sep->retry_head[tc->retry_level], &sep->retry_tail[tc->retry_level],
	               &tc->retry);
}

/* Where the payload of the frame being read goes: len bytes to dst (MEM),
 * into a receive buffer the rx side takes (BUF, dst NULL), or nowhere
 * (DROP; NONE when there is none).  Set by the rx and rma layers. */
static inline void tcp_rx_sink(struct tcp_conn *tc, int sink, char *dst, uint64_t len)
{
	tc->sink = sink;
	tc->dst = dst;
	tc->left = len;
}

/*
 * The loop's doorbell, the one way a layer leaves work for the loop: OR
 * command bits (TCP_CMD_*; 0 only wakes it) from any thread, without a
 * lock.  With progress=manual and an OS handle the engine wakes the
 * handle too, so that an application asleep on it comes to run the loop.
 */
static inline void tcp_loop_cmd(struct tcp_ep *sep, unsigned cmd)
{
	cci__engine_cmd(&sep->eng, cmd);
}

/* The ack for a frame being encoded: everything received so far, now
 * counted as sent (the rx side then owes no separate ACK for it).  Under
 * tx_lock. */
static inline uint64_t tcp_ack_take(struct tcp_conn *tc)
{
	uint64_t ack = atomic_load_explicit(&tc->rx_seq, memory_order_relaxed);

	atomic_store_explicit(&tc->ack_sent, ack, memory_order_relaxed);
	return ack;
}

/* tcp_ep.c */
int tcp_ep_create(cci__ep_t *ep, const char *service);
void tcp_ep_stop(cci__ep_t *ep);
void tcp_ep_free(cci__ep_t *ep);
int tcp_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value);

/* tcp_loop.c */
int tcp_loop_start(struct tcp_ep *sep);
int tcp_progress(cci__ep_t *ep);
int tcp_arm(cci__ep_t *ep);

/* tcp_hs.c */
/* TCP_NODELAY, and SO_SNDBUF/SO_RCVBUF of bufsize unless 0. */
void tcp_sock_opts(int fd, uint32_t bufsize);
/* Watch the listening socket, behind its guard (the loop lock held). */
void tcp_listen_init(struct tcp_ep *sep);
int tcp_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                cci_conn_attribute_t attr, void *context, const struct timeval *timeout);
int tcp_accept(cci__evt_t *evt, void *context);
int tcp_reject(cci__evt_t *evt);
void tcp_request_done(cci__evt_t *evt);
void tcp_req_free(struct tcp_req *req);
void tcp_hs_timers(struct tcp_ep *sep, uint64_t now);

/* tcp_conn.c */
void tcp_conn_init(struct tcp_conn *tc, struct tcp_ep *sep, cci__conn_t *conn, int fd);
int tcp_conn_open(struct tcp_conn *tc, uint32_t peer_mss);
void tcp_conn_break(struct tcp_conn *tc, int status, const char *why);
void tcp_connect_fail(struct tcp_conn *tc, int status, const char *why);
void tcp_conn_watch_update(struct tcp_ep *sep);
void tcp_faults_process(struct tcp_ep *sep);
void tcp_conn_destroy(struct tcp_conn *tc);
void tcp_conn_release_gone(struct tcp_ep *sep);
int tcp_disconnect(cci__conn_t *conn);
void tcp_conn_timers(struct tcp_ep *sep, uint64_t now, int with_loop);
void tcp_conn_ack_owed(struct tcp_conn *tc);
void tcp_conn_timeouts_changed(cci__conn_t *conn);

/* tcp_pool.c */
struct tcp_op *tcp_op_get(struct tcp_ep *sep, int force);
void tcp_op_put(struct tcp_ep *sep, struct tcp_op *op);
void tcp_pool_init(struct tcp_ep *sep);
void tcp_pool_fini(struct tcp_ep *sep);
int tcp_ops_prealloc(struct tcp_ep *sep, uint32_t n);
void tcp_op_copy_free(struct tcp_op *op);
/* Give back op's big copy buffer, if any: its bytes are in the socket (or
 * dropped).  Inline: most ops never have one. */
static inline void tcp_op_copy_release(struct tcp_op *op)
{
	if (op->big)
		tcp_op_copy_free(op);
}
/* Copy op's message bytes out of the caller's pieces (into op->buf or a
 * big buffer): 0 or CCI_ENOMEM. */
int tcp_op_copy_in(struct tcp_op *op, const struct iovec *iov, uint32_t iovcnt, uint32_t len);
struct tcp_buf *tcp_rb_get(struct tcp_ep *sep);
void tcp_rb_put(struct tcp_ep *sep, struct tcp_buf *rb);
int tcp_rb_available(struct tcp_ep *sep);
void tcp_recv_returned(cci__evt_t *evt);

/* tcp_tx.c */
struct tcp_op *tcp_op_get_app(struct tcp_conn *tc, int kind, int flags, void *context);
void tcp_txq_push(struct tcp_conn *tc, struct tcp_op *op, struct tcp_op **done);
void tcp_tx_flush(struct tcp_conn *tc, struct tcp_op **done);
void tcp_tx_flush_all(struct tcp_ep *sep);
void tcp_tx_due_forget(struct tcp_conn *tc);
void tcp_tx_flush_now(struct tcp_conn *tc, uint8_t ctl);
int tcp_tx_acked(struct tcp_conn *tc, uint64_t ack);
void tcp_ops_complete(struct tcp_ep *sep, struct tcp_op *done);
int tcp_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
             void *context, int flags);

/* tcp_frame.c */
void tcp_op_prepare(struct tcp_op *op);
uint32_t tcp_msg_linear(struct tcp_op *op, const struct iovec *iov, uint32_t iovcnt,
                        uint8_t *b, uint64_t *ack);
int tcp_op_frame_done(struct tcp_op *op);

/* tcp_rx.c */
void tcp_rx_poll(struct tcp_ep *sep);
void tcp_rx_ready(struct tcp_ep *sep);
void tcp_rx_acks_all(struct tcp_ep *sep);
void tcp_rx_ack_due_drop(struct tcp_conn *tc);
/* What tc kept staged goes back to the endpoint; tc reads no more. */
void tcp_rx_stage_drop(struct tcp_conn *tc);
void tcp_rx_resume(struct tcp_ep *sep);

/* tcp_rma.c */
int tcp_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
            uint64_t local_offset, const struct cci_rma_handle *remote, uint64_t remote_offset,
            uint64_t data_len, void *context, int flags);
int tcp_rma_frame_begin(struct tcp_conn *tc, const char **why);
int tcp_rma_frame_end(struct tcp_conn *tc, const char **why);

#endif /* CCI_TCP_H */
