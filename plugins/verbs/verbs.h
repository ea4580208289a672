/*
 * verbs.h - internal structures of the verbs transport (libibverbs RC
 * queue pairs, connections set up with librdmacm).
 *
 * The protocol that needs no device lives in verbs_proto.h (pure, unit
 * tested); this header and the files that include it are the thin layer
 * of calls into libibverbs and librdmacm.
 *
 * One CCI endpoint: an rdma_cm event channel and a listening id bound to
 * the device's address, a protection domain, one completion queue with
 * its completion channel, and a shared receive queue (SRQ) of pre-posted
 * buffers.  One CCI connection: one RC queue pair on that CQ and SRQ.
 *
 * Objects and who owns them:
 *   struct verbs_dev    dev->priv, from dev_configure/discover to dev_free.
 *   struct verbs_ep     ep->priv (core allocation), ep_create to ep_free.
 *   struct verbs_conn   calloc'd at connect or at a connection request;
 *                       on sep->conns until reaped (verbs_conns_reap):
 *                       once down, released by the application (conn
 *                       NULL) and with no receive buffer lent (refs 0).
 *                       The core connection reaches it through
 *                       *(struct verbs_conn **)conn->priv.
 *   struct verbs_op     one send, RMA or control message, from the
 *                       endpoint's pool; its buffer is registered memory.
 *   struct verbs_rxbuf  a receive buffer: posted to the SRQ, or lent to the
 *                       application as a RECV event, or held (no event
 *                       could be had yet).
 *
 * Locks, in this order: sep->eng.lock (the engine thread's loop, held
 * while its callbacks run; application threads never take it), then
 * sep->lock (everything else of the endpoint: connections, queues, the
 * CQ, pools, registrations).  verbs_live_lock (verbs_ep.c) guards the
 * process's list of endpoints, for device events.
 */
#ifndef CCI_VERBS_H
#define CCI_VERBS_H

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "cci_plugin.h"
#include "clock.h"
#include "conn_base.h"
#include "engine.h"
#include "progress_key.h"
#include "ifaddr.h"
#include "iov.h"
#include "lender.h"
#include "op_pool.h"
#include "random.h"
#include "slist.h"
#include "status.h"
#include "verbs_proto.h"

extern const struct cci_core *verbs_core;
extern const struct cci_plugin cci_ctp_verbs_plugin;

#define VERBS_LOG(cat, ...) CCI__LOG(verbs_core, (cat) | CCI_LOG_CTP, __VA_ARGS__)
#define VERBS_WARN(...) verbs_core->log(CCI_LOG_WARN, __VA_ARGS__)

#define VERBS_NAME_LEN 64
#define VERBS_SQ_DEFAULT 128          /* send queue depth of a queue pair */
#define VERBS_BACKLOG 4096            /* connect requests rdma_cm holds for ep_create's id */
#define VERBS_RECV_COUNT_DEFAULT 256  /* receive buffers of an endpoint */
#define VERBS_SEND_COUNT_DEFAULT 128  /* application sends in flight or queued */
#define VERBS_BUF_COUNT_MAX 65536u
#define VERBS_RX_RESERVE 32u          /* receive buffers for control messages */
#define VERBS_CTL_OPS 64u             /* operations for control messages */
#define VERBS_RESOLVE_MS 2000         /* address and route resolution */
#define VERBS_SERVER_HS_NS 30000000000ull /* a server drops a client silent this long after rdma_accept */
#define VERBS_TICK_S 0.01
#define VERBS_QP_HASH 256u
#define VERBS_DRAIN_NS 1000000000ull /* wait this long at most for LAST_WQE_REACHED */
#define VERBS_CQ_BATCH 32

/* ---- Devices ---- */

struct verbs_dev {
	char hca[VERBS_NAME_LEN];   /* ibv_get_device_name */
	uint8_t port;
	char ip[INET6_ADDRSTRLEN];  /* the address endpoints bind to */
	uint32_t mss;
	uint32_t sq_depth;
	uint32_t recv_count;
	int manual;                 /* progress = manual: no progress thread */
	char info[256];
};

/* ---- Operations and receive buffers ---- */

enum verbs_op_kind { VERBS_OP_MSG, VERBS_OP_CTL, VERBS_OP_RMA };

struct verbs_conn;

struct verbs_op {
	struct cci__op_link link;   /* the endpoint's pool's */
	struct verbs_op *next;      /* txq, rmaq, flight */
	uint8_t kind;               /* enum verbs_op_kind */
	uint8_t user;               /* counted against send_buf_count (!link.ctl) */
	uint8_t reported;           /* the core was told, or never will be */
	uint8_t is_read, fence;
	uint8_t spends_credit;      /* MSG, REQ, ACCEPT, REJECT, an RMA's message */
	uint8_t type;               /* enum verbs_type of its SEND (an RMA's: MSG) */
	uint32_t aux;               /* the header's aux */
	int flags;                  /* the caller's CCI flags */
	void *context;
	uint64_t serial;            /* of its last work request, once posted */
	uint64_t stamp_ns;          /* when queued, for the send timeout */
	uint32_t len;               /* bytes in buf: header then payload */
	/* RMA */
	struct ibv_mr *lmr;
	char *laddr;
	uint64_t key, roff, rlen;
	uint64_t raddr;             /* checked against the peer's answer (verbs_reg.c) */
	uint32_t rkey;
	/* Kept across uses: the op's registered buffer. */
	uint32_t lkey;              /* of buf's slab */
	char *buf;                  /* VERBS_HDR_LEN + mss bytes of its slab */
};

struct verbs_rxbuf {
	struct verbs_rxbuf *next;   /* held list */
	struct verbs_conn *vc;      /* while lent or held: counted in vc->refs */
	char *data;                 /* VERBS_HDR_LEN + mss bytes of a slab */
	uint32_t lkey;
	uint32_t len;               /* payload bytes */
	uint8_t lent;
	struct cci__lent back;      /* on sep->lend's stack once its event came back */
};

/* Registered memory for receive buffers or operations, freed with the endpoint. */
struct verbs_slab {
	struct verbs_slab *next;
	void *objs;                 /* the verbs_rxbuf or verbs_op array */
	char *mem;                  /* their buffers */
	struct ibv_mr *mr;
};

/* A local registration (reg->priv), on sep->mrs. */
struct verbs_mr {
	struct verbs_mr *next;
	cci__rma_reg_t *reg;
	struct ibv_mr *mr;
	uint64_t key;               /* the core key */
};

/* ---- Connections ---- */

struct verbs_conn {
	struct cci__conn_base base; /* first: state and timers, under sep->lock */
	struct verbs_ep *sep;
	cci__conn_t *conn;          /* the core's; NULL before it exists and once released */
	struct verbs_conn *next;    /* sep->conns */
	struct verbs_conn *qnext;   /* sep->qp_hash */
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	uint32_t qp_num;
	int is_client, attr, step;  /* step: enum verbs_step */
	int refs;                   /* receive buffers lent or held, the request event */
	int cm_connected;           /* rdma_connect/rdma_accept done, not yet rdma_disconnect */
	int close_when_idle;        /* REJECT sent: disconnect once it completed */
	int qp_drained;             /* IBV_EVENT_QP_LAST_WQE_REACHED: no SRQ buffer left in it */
	uint64_t reap_ns;           /* when it was first found ready to be freed */
	int tx_err;                 /* what senders get once broken */
	void *context;              /* client: cci_connect's */
	uint64_t nonce;
	uint32_t peer_mss, req_len, max_inline;
	uint8_t *req_data;          /* client: the connect payload, sent after ESTABLISHED */
	struct cci__credit cr;
	uint32_t tx_seq, rx_seq;
	struct verbs_op *txq, *txq_tail;       /* waiting for credits or send-queue room */
	struct verbs_op *rmaq, *rmaq_tail;     /* RMAs waiting for MR_REP or a fence */
	struct verbs_op *flight, *flight_tail; /* posted, oldest first */
	uint64_t serial_posted, serial_done;
	uint32_t unsignaled;        /* the run of unsignaled requests just posted */
	uint32_t rma_busy;          /* RMAs posted and not complete (FENCE waits for 0) */
	struct cci__peer_reg *mrc;
	uint32_t mr_req_next;
	char peer[INET6_ADDRSTRLEN + 8]; /* for messages */
};

/* ---- Endpoints ---- */

struct verbs_ep {
	cci__ep_t *ep;
	const struct verbs_dev *dev;
	struct verbs_ep *live_next;
	struct rdma_event_channel *cm_ch;
	struct rdma_cm_id *listen_id;
	struct ibv_context *ctx;    /* rdma_cm's, of the bound device */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	uint8_t port;
	uint32_t mss, sq_depth, cq_depth, max_inline, rd_atom;
	uint64_t max_msg;           /* largest work request (port attribute) */
	int cq_conns;               /* queue pairs the CQ is sized for */

	pthread_mutex_t lock;
	struct verbs_conn *conns;
	struct verbs_conn *qp_hash[VERBS_QP_HASH];
	struct verbs_mr *mrs;
	int failed;                 /* the device failed: ENDPOINT_DEVICE_FAILED posted */
	int closing;

	/* Receive buffers: recv_buf_count for the windows, VERBS_RX_RESERVE
	 * more; RECV events lend at most recv_buf_count (lender.h). */
	struct verbs_slab *rx_slabs;
	uint32_t rx_total, srq_max;
	struct cci__lender lend;
	struct verbs_rxbuf *held, *held_tail;

	/* Operations: send_buf_count user ones, VERBS_CTL_OPS control ones,
	 * in slabs of registered buffers added when the count rises (the pool
	 * never grows on the message path). */
	struct verbs_slab *op_slabs;
	struct cci__op_pool ops;
	uint32_t op_total;

	struct cci__engine eng;
	ev_io cm_w, cq_w, async_w;
};

static inline struct verbs_ep *verbs_ep_of(cci__ep_t *ep)
{
	return ep->priv;
}

static inline struct verbs_conn *verbs_conn_of(cci__conn_t *conn)
{
	return *(struct verbs_conn **)conn->priv;
}

/* The files below are listed from the bottom layer up: each calls only
 * functions of the files above it (README.md, "Source layout"). */

/* verbs_dev.c */
extern const struct cci_conf_key verbs_conf_keys[];
int verbs_discover(void);
int verbs_dev_configure(cci__dev_t *dev);
void verbs_dev_free(cci__dev_t *dev);

/* verbs_pool.c */
int verbs_ops_grow(struct verbs_ep *sep, uint32_t count);
struct verbs_op *verbs_op_get(struct verbs_ep *sep, int user);
void verbs_op_put(struct verbs_ep *sep, struct verbs_op *op);
int verbs_rx_grow(struct verbs_ep *sep, uint32_t count);
int verbs_rx_post(struct verbs_ep *sep, struct verbs_rxbuf *rb);
void verbs_slabs_free(struct verbs_slab **head);

/* verbs_tx.c */
/* Append op to the queue head/tail (txq, rmaq, flight: in order). */
int verbs_ctl_send(struct verbs_conn *vc, uint8_t type, uint32_t aux, const void *body,
                   uint32_t len);
void verbs_txq_push(struct verbs_conn *vc, struct verbs_op *op);
void verbs_txq_flush(struct verbs_conn *vc);
int verbs_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
               void *context, int flags);
void verbs_tx_complete(struct verbs_conn *vc, uint64_t serial, int status);
void verbs_tx_fail_all(struct verbs_conn *vc, int status, int notify);
uint64_t verbs_tx_oldest(const struct verbs_conn *vc);

/* verbs_rx.c */
void verbs_rx_deliver(struct verbs_ep *sep, struct verbs_conn *vc, struct verbs_rxbuf *rb,
                      uint32_t len);
void verbs_held_drain(struct verbs_ep *sep);
void verbs_held_drop(struct verbs_ep *sep, struct verbs_conn *vc);
void verbs_rx_collect(struct verbs_ep *sep);

/* verbs_conn.c */
void verbs_qp_add(struct verbs_ep *sep, struct verbs_conn *vc);
struct verbs_conn *verbs_qp_find(struct verbs_ep *sep, uint32_t qp_num);
int verbs_qp_create(struct verbs_conn *vc);
void verbs_qp_destroy(struct verbs_conn *vc);
void verbs_conn_break(struct verbs_conn *vc, int status);
void verbs_conn_down(struct verbs_conn *vc);
void verbs_credit_flush(struct verbs_conn *vc);
int verbs_disconnect(cci__conn_t *conn);
void verbs_conn_timeouts_changed(cci__conn_t *conn);
void verbs_recv_returned(cci__evt_t *evt);
void verbs_conns_reap(struct verbs_ep *sep, uint64_t now);
void verbs_conns_free_all(struct verbs_ep *sep);

/* verbs_rma.c */
int verbs_rma_register(cci__ep_t *ep, cci__rma_reg_t *reg);
void verbs_rma_deregister(cci__ep_t *ep, cci__rma_reg_t *reg);
int verbs_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
              uint64_t local_offset, const struct cci_rma_handle *remote, uint64_t remote_offset,
              uint64_t data_len, void *context, int flags);
void verbs_rmaq_flush(struct verbs_conn *vc);
void verbs_rma_on_msg(struct verbs_conn *vc, const struct verbs_hdr *h, const uint8_t *body);
void verbs_mrs_free(struct verbs_ep *sep);

/* verbs_hs.c */
int verbs_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                  cci_conn_attribute_t attr, void *context, const struct timeval *timeout);
int verbs_accept(cci__evt_t *evt, void *context);
int verbs_reject(cci__evt_t *evt);
void verbs_request_done(cci__evt_t *evt);
void verbs_hs_on_msg(struct verbs_conn *vc, const struct verbs_hdr *h, const uint8_t *body);
void verbs_hs_fail(struct verbs_conn *vc, int status);
void verbs_cm_drain(struct verbs_ep *sep);

/* verbs_ep.c */
int verbs_ep_create(cci__ep_t *ep, const char *service);
void verbs_ep_stop(cci__ep_t *ep);
void verbs_ep_free(cci__ep_t *ep);
int verbs_progress(cci__ep_t *ep);
int verbs_arm(cci__ep_t *ep);
int verbs_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value);

#endif /* CCI_VERBS_H */
