/*
 * sock.h - internal structures of the sock transport (UDP, sock://).
 *
 * One UDP socket per endpoint carries every connection; a datagram names
 * its connection by the receiver's token (a random 32-bit tag over the
 * connection's slot in sep->slots) and must come from the peer's address.
 * RO and RU connections run the reliability of sock_rel.h over sequenced
 * datagrams (sock_dgram.h); UU connections send plain datagrams.
 *
 * Threads and locks.  Everything of an endpoint is guarded by sep->lock:
 * connections, their reliability state, op and buffer pools, the socket's
 * batches.  The progress engine (plugins/common/engine.h) runs a tick
 * (timers, handshakes) and, while the application does not poll, watches
 * the socket ("thread mode"); its callbacks hold sep->eng.lock and take
 * sep->lock inside it.  Application calls take sep->lock only.  Receive
 * buffers come back from any thread through the lender (lender.h),
 * collected by the next pass under the lock.  With progress = manual there
 * is no engine: progress() does the tick's work itself.
 *
 * Layers (README.md): dgram (codec) -> tx -> rma -> conn -> hs -> rx ->
 * ep -> plugin.  A file calls only those before it; tx never calls rx.
 *
 * Objects and owners:
 *   struct sock_ep     ep->priv, from ep_create to ep_free.
 *   struct sock_conn   conn->priv; the core frees it after conn_release()
 *                      and the last lent event.
 *   struct sock_op     a send, an RMA, or the answer to a peer's RMA;
 *                      from the endpoint's pool.
 *   struct sock_txd    one sequenced datagram until the peer acks it.
 *   struct sock_rxbuf  a received message, lent with its RECV event.
 *   struct sock_held   a copy of an early datagram (RO/RU order).
 *   struct sock_req    a connection request, from its HELLO until the
 *                      event comes back (then, if rejected, remembered
 *                      for SOCK_DECIDED_NS to answer repeated HELLOs).
 *   struct sock_gone   the client of a server connection that closed,
 *                      remembered for SOCK_DECIDED_NS (sock_conn.c).
 */
#ifndef CCI_SOCK_H
#define CCI_SOCK_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "cci_plugin.h"
#include "clock.h"
#include "conn_base.h"
#include "emu_rma.h"
#include "engine.h"
#include "grow.h"
#include "iov.h"
#include "lender.h"
#include "lock_held.h"
#include "log_due.h"
#include "random.h"
#include "net_dev.h"
#include "op_pool.h"
#include "slist.h"
#include "sock_dgram.h"
#include "sock_rel.h"
#include "status.h"

extern const struct cci_core *sock_core;

#define SOCK_LOG(cat, ...) CCI__LOG(sock_core, (cat) | CCI_LOG_CTP, __VA_ARGS__)
#define SOCK_WARN(...) sock_core->log(CCI_LOG_WARN, __VA_ARGS__)
#define SOCK_ERR(...) sock_core->log(CCI_LOG_ERR, __VA_ARGS__)

#define SOCK_MSS_DEFAULT 65536       /* a plain literal: the key table's default */
#define SOCK_MSS_MIN 64u
#define SOCK_MSS_MAX (8u << 20)
#define SOCK_BUFSIZE_MAX (256u << 20)
#define SOCK_BUFSIZE_DEFAULT (4u << 20) /* SO_RCVBUF/SO_SNDBUF when bufsize = 0 */
#define SOCK_WINDOW_MAX 256u         /* datagrams granted to each peer, at most ... */
#define SOCK_WINDOW_MIN 16u          /* ... and at least (sock_ep.c: window_size) */
#define SOCK_REL_SLOTS 512u          /* sock_rel window slots each way */
#define SOCK_RECV_COUNT_DEFAULT 64u
#define SOCK_SEND_COUNT_DEFAULT 1024u
#define SOCK_BUF_COUNT_MAX 65536u
#define SOCK_RX_BATCH 16u            /* datagrams per recvmmsg */
#define SOCK_RX_ROUNDS 8u            /* recvmmsg calls per pass at most */
#define SOCK_TX_BATCH 32u            /* datagrams per sendmmsg */
#define SOCK_TX_GATHER_MAX 256u      /* a lone datagram's payload copied for sendto */
#define SOCK_SMALL 256u              /* receive buffers of this size have their own list */
#define SOCK_TICK_S 0.01
#define SOCK_TICK_NS 10000000ull
#define SOCK_HS_RETRY_NS 100000000ull     /* HELLO again after 100 ms, doubling ... */
#define SOCK_HS_RETRY_MAX_NS 1000000000ull /* ... up to 1 s */
#define SOCK_DECIDED_NS 30000000000ull    /* answered requests and closed server
                                           * connections are remembered this long */
#define SOCK_REQS_MAX 1024u          /* requests waiting for the application */
#define SOCK_GONE_MAX 4096u          /* closed server connections remembered at most */
#define SOCK_WARN_EVERY_NS 10000000000ull /* a warning a storm repeats: at most this often */
#define SOCK_HS_BURST 256u           /* HELLOs sent per tick at most (the others wait) */
#define SOCK_ICMP_PROBE_NS 50000000ull /* an open connection whose peer's port is said
                                       * closed: probed this often ... */
#define SOCK_ICMP_CONFIRM 3u           /* ... and broken after this many ICMP errors ... */
#define SOCK_ICMP_SILENCE_NS 200000000ull /* ... and this long without a word from it */
#define SOCK_READS_MAX 256u          /* peer reads answered at once per connection */

enum sock_op_kind {
	SOCK_OP_MSG,    /* an active message */
	SOCK_OP_WRITE,  /* RMA write: WR_DATA..., WR_END, the completion message */
	SOCK_OP_READ,   /* RMA read: RD_REQ; after its DONE, the completion message */
	SOCK_OP_ANSWER  /* the answer to a peer's WR_END (DONE) or RD_REQ (RD_DATA..., DONE) */
};

enum sock_op_phase {
	SOCK_PH_RMA,    /* emulated-RMA records (emu_rma.h) */
	SOCK_PH_MSG,    /* the message's fragments */
	SOCK_PH_DONE    /* everything pushed */
};

struct sock_conn;

struct sock_op {
	struct cci__op_link link;  /* the endpoint's op pool's; link.ctl: not the application's */
	TAILQ_ENTRY(sock_op) q;    /* sc->txq while it has datagrams to push */
	TAILQ_ENTRY(sock_op) live; /* sc->ops from start to completion, oldest first */
	struct sock_conn *sc;
	uint8_t kind, phase, in_txq, remote_wait; /* remote_wait: an RMA waits for its DONE */
	int flags, status;
	void *context;
	uint64_t t_ns;             /* queued at, for the send timeout */
	uint32_t txd_out;          /* datagrams pushed, not yet acknowledged */
	/* The message: a copy in buf or the caller's bytes. */
	const char *msg;
	uint32_t len, msg_off;
	struct cci__emu_rma_op rma; /* WRITE, READ, ANSWER */
	/* Kept across uses: the copy buffer. */
	char *buf;
	uint32_t cap;
};

/* A sequenced datagram awaiting its ack; the handle given to sock_rel. */
struct sock_txd {
	struct sock_txd *next;
	struct sock_op *op;
	uint8_t type;
	union sock_dg_sub sub;
	const char *data;
	uint32_t len;
};

/* A received message lent to the application; data follows the header. */
struct sock_rxbuf {
	struct cci__lent lent;     /* lent with a RECV event, on its way back */
	struct sock_rxbuf *next;   /* free list or sc->pend queue */
	struct sock_rxbuf *all_next;
	uint64_t token;            /* the connection it came on */
	uint32_t cap, len, dgs;    /* dgs: datagrams to grant again when returned */
};
#define SOCK_RB_HDR ((sizeof(struct sock_rxbuf) + 15u) & ~(size_t)15u)

static inline char *sock_rb_data(struct sock_rxbuf *rb)
{
	return (char *)rb + SOCK_RB_HDR;
}

/* A datagram that arrived early, kept until its turn. */
struct sock_held {
	struct sock_held *next;
	uint32_t len;
	int delivered;             /* RU: a whole message handed out early */
	uint8_t data[];
};

struct sock_ep;

/* Who asked for a connection: the client's token and address.  Server
 * connections and requests are indexed by it (tsearch trees in sock_ep),
 * so that a repeated HELLO finds its answer. */
struct sock_peer_key {
	uint64_t token;
	const struct sockaddr_storage *addr;
};

struct sock_conn {
	struct cci__conn_base base; /* first */
	cci__conn_t *conn;
	struct sock_ep *sep;
	LIST_ENTRY(sock_conn) link; /* sep->conns */
	TAILQ_ENTRY(sock_conn) hs_link; /* sep->connecting, while in_connecting */
	int in_connecting;         /* client: a HELLO is to be sent again */
	struct sock_peer_key key;  /* (peer_token, peer): in sep->by_peer while in_index */
	int in_index;
	int slot_gone;             /* its slot and due place given back */
	int is_server;             /* accepted here */
	struct sock_conn *broken_next; /* in sep->broken while broken_listed */
	int broken_listed;
	uint64_t suspect_ns;       /* an ICMP error said the peer's port is closed at this
	                            * time, and nothing was heard from it since ... */
	uint32_t icmp_count;       /* ... of so many such errors */
	uint64_t last_probe_ns;    /* the last PING sent to a suspect peer */
	uint64_t token, peer_token;
	uint32_t slot;
	struct sockaddr_storage peer;
	socklen_t peerlen;
	char peer_str[64];
	int attr, reliable;
	uint32_t mss;              /* largest message, both ways */
	uint32_t frag;             /* data bytes of our largest datagram to the peer */
	struct sock_rel rel;
	int rel_on;
	LIST_ENTRY(sock_conn) timed_link; /* sep->timed while timed: ... */
	int timed;                 /* ... it may have a reliability timer set */
	uint64_t isn;

	/* Client handshake. */
	uint8_t *hello;
	uint32_t hello_len;
	uint64_t hs_next_ns, hs_wait_ns;
	void *context;

	/* Transmit. */
	TAILQ_HEAD(, sock_op) txq;
	TAILQ_HEAD(, sock_op) ops;
	uint32_t nanswers;         /* answers to the peer's RMAs not complete */
	uint32_t uu_seq;
	struct cci__emu_rma_conn rma; /* emulated RMA, both sides (emu_rma.h) */

	/* Receive. */
	struct sock_rxbuf *asm_rb; /* the message being reassembled */
	uint32_t asm_have;
	int rx_drop;               /* drop the next message: a refused write's completion */
	struct sock_rxbuf *pend, *pend_tail; /* whole messages waiting for a buffer slot */
	int in_pend;
	struct sock_conn *pend_next;
	uint64_t uu_top, uu_bits;  /* UU duplicate filter */
	int uu_any;
	int touched;
	struct sock_conn *touch_next;
	/* The ack that came on the last data datagram, applied by
	 * sock_tx_finish: after the message it carried is delivered, not on
	 * the way to it (sock_tx_ack_keep). */
	struct sock_rel_ack ack_kept;
	uint64_t ack_kept_ns;
	int ack_kept_set;
};

/* A connection request, server side. */
struct sock_req {
	LIST_ENTRY(sock_req) link;  /* sep->reqs, newest first */
	TAILQ_ENTRY(sock_req) done_link; /* sep->decided while done */
	struct sock_peer_key key;   /* in sep->req_index */
	struct sock_ep *sep;
	struct sockaddr_storage from;
	socklen_t fromlen;
	char peer_str[64];
	struct sock_dg_hello hello;
	int answered, accepted, done;
	uint64_t expire_ns;         /* done (rejected): forgotten at this time */
};

/* The client of a server connection that closed: its HELLOs, repeated or
 * late, are ignored for SOCK_DECIDED_NS (they asked for the connection
 * that closed, not for a new one). */
struct sock_gone {
	TAILQ_ENTRY(sock_gone) link; /* sep->gone, oldest first */
	struct sock_peer_key key;    /* in sep->gone_index */
	struct sockaddr_storage addr;
	uint64_t expire_ns;
};

struct sock_stats {
	uint64_t rx_dgrams, tx_dgrams;
	uint64_t bad;        /* refused by the decoder */
	uint64_t foreign;    /* unknown token, wrong address or wrong state */
	uint64_t uu_dup;     /* UU duplicates dropped */
	uint64_t uu_drop;    /* UU messages dropped (no buffer) */
	uint64_t rma_refused;
	uint64_t send_err;
	uint64_t icmp_ignored; /* ICMP errors not naming a pending connect */
	uint64_t hello_dropped; /* HELLOs dropped: too many requests wait */
	uint64_t hello_gone;    /* HELLOs for a server connection that closed */
};

struct sock_txslot {
	uint8_t hdr[SOCK_DG_HDR_LEN + SOCK_DG_SUB_MAX];
	struct iovec iov[2];
};

struct sock_ep {
	cci__ep_t *ep;
	const struct net_dev *dev;
	int fd;
	int family;
	uint16_t port;
	uint32_t mss;
	uint32_t dgram;             /* largest datagram we receive */
	uint32_t window;            /* datagrams granted to each peer */
	int manual;
	struct cci__engine eng;     /* who polls, the tick (engine.h); no thread
	                             * with progress = manual */
	int eng_on;
	ev_io rx_w;
	uint32_t idle_polls;        /* empty polls since the clock was last read */

	pthread_mutex_t lock;
	struct sock_conn **slots;
	uint32_t nslots;
	uint32_t slot_top;          /* slots below this have been used */
	uint32_t *slot_free;        /* freed slots below slot_top, a stack ... */
	uint32_t nslot_free, slot_free_cap; /* ... with room for slot_top of them */
	LIST_HEAD(, sock_conn) conns;
	TAILQ_HEAD(, sock_conn) connecting; /* client connections awaiting an answer, oldest
	                                     * first */
	uint32_t hs_budget;         /* HELLOs that may still go out before the next tick */
	void *by_peer;              /* tsearch root: open connections by sock_peer_key */
	TAILQ_HEAD(, sock_gone) gone; /* closed server connections, oldest first ... */
	void *gone_index;           /* ... by sock_peer_key */
	uint32_t ngone;
	int closing;                /* the endpoint is being destroyed */
	LIST_HEAD(, sock_req) reqs;
	TAILQ_HEAD(, sock_req) decided; /* reqs done (rejected), oldest first */
	void *req_index;            /* tsearch root: reqs by sock_peer_key */
	uint32_t nreqs;
	_Atomic uint64_t hello_warned_ns; /* the last warning of a HELLO dropped */
	uint64_t rng;               /* xorshift state: jitter of HELLO retries */
	struct cci__due_heap due;   /* connections by when their connect deadline,
	                             * keepalive, send timeout or ICMP suspicion next
	                             * need the tick (conn_due.h): the tick visits
	                             * these, not every connection */
	uint64_t timer_ns;          /* earliest reliability timer of any connection */
	LIST_HEAD(, sock_conn) timed; /* the connections that may have one: the
	                             * timers visit these, not every connection */
	struct sock_conn *pend;     /* connections with messages waiting for a buffer */
	struct sock_conn *touched;  /* connections this pass moved */
	struct sock_conn *broken;   /* broken, what they hold to release at the next
	                             * tick (sock_conn_release_broken) */

	struct cci__op_pool ops;
	struct sock_txd *txd_free;
	void **txd_chunks;
	uint32_t ntxd_chunks;
	struct sock_rxbuf *rb_small, *rb_big, *rb_all;
	struct cci__lender lend;    /* receive buffers lent with RECV events */
	struct sock_held *hd_free;

	/* Socket batches. */
	struct mmsghdr rx_mh[SOCK_RX_BATCH];
	struct iovec rx_iov[SOCK_RX_BATCH];
	struct sockaddr_storage rx_from[SOCK_RX_BATCH];
	uint8_t *rx_mem;
	int rx_bulk, rx_last;       /* sock_rx_poll's mode, and whether the last poll found any */
	int errq_due;               /* a send consumed an ICMP error: read the error queue */
	struct mmsghdr tx_mh[SOCK_TX_BATCH];
	struct sock_txslot tx_slot[SOCK_TX_BATCH];
	uint32_t ntx;
	uint8_t tx_one[SOCK_DG_HDR_LEN + SOCK_DG_SUB_MAX + SOCK_TX_GATHER_MAX];

	struct sock_stats stats;
};

static inline struct sock_ep *sock_ep_of(cci__ep_t *ep)
{
	return ep->priv;
}

static inline struct sock_conn *sock_conn_of(cci__conn_t *conn)
{
	return conn->priv;
}

/* ---- sock_tx.c: datagrams out, ops, acks in, completions ---- */
void sock_tx_emit(struct sock_ep *sep, const struct sockaddr_storage *to, socklen_t tolen,
                  struct sock_dg *d, const void *data, uint32_t len);
void sock_tx_flush(struct sock_ep *sep);
void sock_tx_ctl(struct sock_conn *sc, uint8_t type, uint8_t flags);
void sock_op_pool_init(struct sock_ep *sep);
struct sock_op *sock_op_get(struct sock_ep *sep, int kind, int app);
/* Is op the application's (a completion event, and within its budget)? */
static inline int sock_op_app(const struct sock_op *op)
{
	return !op->link.ctl;
}
void sock_op_put(struct sock_ep *sep, struct sock_op *op);
int sock_op_copy_in(struct sock_op *op, const struct iovec *iov, uint32_t iovcnt, uint32_t len);
void sock_op_queue(struct sock_conn *sc, struct sock_op *op);
void sock_op_maybe_done(struct sock_op *op);
void sock_tx_pump(struct sock_conn *sc, uint64_t now);
void sock_tx_note_timer(struct sock_conn *sc);
void sock_tx_acked(struct sock_conn *sc, const struct sock_dg *d, uint64_t now);
void sock_tx_ack_keep(struct sock_conn *sc, const struct sock_dg *d, uint64_t now);
void sock_tx_finish(struct sock_ep *sep, uint64_t now);
void sock_tx_timers(struct sock_conn *sc, uint64_t now);
void sock_tx_fail_all(struct sock_conn *sc, int status, int report);
void sock_tx_ops_free(struct sock_ep *sep);
void sock_conn_touch(struct sock_conn *sc);
int sock_tx_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
                 void *context, int flags);

/* ---- sock_rma.c ---- */
int sock_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
             uint64_t local_offset, const struct cci_rma_handle *remote,
             uint64_t remote_offset, uint64_t data_len, void *context, int flags);
/* An RMA datagram of the peer, in order; return 0 or a status that
 * breaks the connection (a protocol violation). */
int sock_rma_rx(struct sock_conn *sc, const struct sock_dg *d, uint64_t now);

/* ---- sock_conn.c ---- */
int sock_conn_slot(struct sock_ep *sep, struct sock_conn *sc);
void sock_conn_slot_release(struct sock_ep *sep, struct sock_conn *sc);
struct sock_conn *sock_conn_find(struct sock_ep *sep, uint64_t token);
int sock_peer_key_cmp(const void *a, const void *b);
/* Connections by the peer's token and address (once the peer's token is
 * known): repeated HELLOs and ICMP errors find theirs. */
int sock_conn_index(struct sock_conn *sc);
struct sock_conn *sock_conn_by_peer(struct sock_ep *sep, const struct sock_peer_key *k);
/* Did a server connection for the client k close less than
 * SOCK_DECIDED_NS ago? */
int sock_conn_gone(struct sock_ep *sep, const struct sock_peer_key *k);
void sock_conn_gone_free_all(struct sock_ep *sep);
int sock_conn_rel_init(struct sock_conn *sc, uint64_t tx_isn, uint64_t rx_isn,
                       uint32_t peer_window);
void sock_conn_open(struct sock_conn *sc, uint64_t now);
void sock_conn_break(struct sock_conn *sc, int status, const char *why);
void sock_conn_destroy(struct sock_conn *sc);
void sock_conn_release_broken(struct sock_ep *sep);
void sock_conn_icmp_refused(struct sock_ep *sep, const struct sockaddr_storage *ss, uint8_t type,
                            uint64_t token, uint64_t now);
void sock_conn_tick(struct sock_ep *sep, uint64_t now);
void sock_conn_due_run(struct sock_ep *sep, uint64_t now);
void sock_conn_timers(struct sock_ep *sep, uint64_t now);
void sock_connect_fail(struct sock_conn *sc, int status, const char *why);
int sock_disconnect(cci__conn_t *conn);
void sock_conn_timeouts_changed(cci__conn_t *conn);

/* ---- sock_rx.c ---- */
void sock_rx_batch_init(struct sock_ep *sep);
int sock_rx_poll(struct sock_ep *sep, uint64_t *now_p);
void sock_rx_errqueue(struct sock_ep *sep);
void sock_rx_back(struct sock_ep *sep);
void sock_rx_pend(struct sock_ep *sep);
void sock_rb_free_all(struct sock_ep *sep);
void sock_recv_returned(cci__evt_t *evt);

/* ---- sock_hs.c ---- */
int sock_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                 cci_conn_attribute_t attr, void *context, const struct timeval *timeout);
int sock_accept(cci__evt_t *evt, void *context);
int sock_reject(cci__evt_t *evt);
void sock_request_done(cci__evt_t *evt);
void sock_hs_rx(struct sock_ep *sep, const struct sock_dg *d,
                const struct sockaddr_storage *from, socklen_t fromlen, uint64_t now);
void sock_hs_tick(struct sock_ep *sep, uint64_t now);
void sock_hs_free_all(struct sock_ep *sep);

/* ---- sock_ep.c ---- */
int sock_ep_create(cci__ep_t *ep, const char *service);
void sock_ep_stop(cci__ep_t *ep);
void sock_ep_free(cci__ep_t *ep);
int sock_progress(cci__ep_t *ep);
int sock_arm(cci__ep_t *ep);
int sock_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value);

/* Is ss (len) the address sc talks to? */
int sock_addr_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b);

#endif /* CCI_SOCK_H */
