/*
 * ofi.h - internal structures of the libfabric transport.
 *
 * One CCI endpoint is one libfabric FI_EP_RDM endpoint with its own
 * fabric, domain, address vector and completion queue.  CCI connections
 * are a handshake of small messages on top of it; every message starts
 * with a header (ofi_wire.h, network byte order).
 *
 * Objects and who owns them:
 *   struct ofi_dev    dev->priv, from dev_configure/discover to dev_free.
 *   struct ofi_ep     ep->priv (core allocation), ep_create to ep_free.
 *   struct ofi_conn   malloc'd, reference counted: the connection table
 *                     holds one reference until cci_disconnect (or the
 *                     endpoint's end); every operation the provider owns
 *                     and every receive buffer lent to the application
 *                     hold one more.  Reached from the core connection
 *                     through *(struct ofi_conn **)conn->priv.
 *   struct ofi_req    malloc'd; a connection request from its arrival
 *                     until it is answered and its event returned.
 *   struct ofi_op     one send, RMA or control message; from the
 *                     endpoint's pool (slabs freed at ep_free).
 *   struct ofi_rxbuf  a pre-posted receive buffer; from the endpoint's
 *                     slabs, posted to the provider, or lent to the
 *                     application as a RECV event, or held (out of
 *                     order, or waiting for a free receive slot).
 *
 * Locks, always taken in this order:
 *   sep->eng.lock   the progress engine's loop and its watchers (the CQ
 *                   wait fd, the poll timer, the pidfds) and the thread's
 *                   polling state (poll_ns).  Only the progress thread
 *                   takes it: it holds it while its callbacks run, and
 *                   they take the locks below inside it.  Other threads
 *                   never do; they send an engine command (OFI_CMD_*).
 *   sep->cq_lock    one reader of the completion queue at a time; also
 *                   guards the connection table (slots), the backlog and
 *                   the control queues' flush passes.
 *                   progress() and the thread only try-lock it to read.
 *   sep->lock       connection lists (conns, gone) and the due heap,
 *                   requests, peers, the list of pid watches and their
 *                   counts.
 *   oc->lock        one connection: credits, sequence numbers, queues,
 *                   operations in flight, its receive state, its timers.
 *   sep->mr_lock    registrations (sep->mrs); nothing is taken inside it.
 *   sep->pool_lock  the free lists of operations and the control queues;
 *   sep->rx_lock    the free list of receive buffers.  These two are
 *                   never held together.
 *   sep->disc_lock  the DISCs awaiting an answer; nothing is taken inside.
 * Fields declared _Atomic (C11 <stdatomic.h>, every access explicit with
 * its memory order) are read or written without these locks: the
 * endpoint's receive and control counts, the touched list and the count
 * of connections connecting, tx_pending and the head of the
 * control queues' peer list, the connections' refs, pidw and handshake
 * flags, the peers' cut and probe answer, the pid watches' dead, the
 * requests' cancelled; credits owed are counted without the lock too
 * (credit.h).  hot_ns (the polling switch) is the loop's, under its lock.
 */
#ifndef CCI_OFI_H
#define CCI_OFI_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "cci_plugin.h"
#include "clock.h"
#include "conn_base.h"
#include "conn_life.h"
#include "credit.h"
#include "engine.h"
#include "progress_key.h"
#include "iov.h"
#include "lender.h"
#include "lock_held.h"
#include "op_pool.h"
#include "peer_reg.h"
#include "random.h"
#include "dlist.h"
#include "slist.h"
#include "spin.h"
#include "status.h"
#include "ofi_wire.h"

extern const struct cci_core *ofi_core;
extern const struct cci_plugin cci_ctp_ofi_plugin;

#define OFI_LOG(cat, ...) CCI__LOG(ofi_core, (cat) | CCI_LOG_CTP, __VA_ARGS__)
#define OFI_WARN(...) ofi_core->log(CCI_LOG_WARN, __VA_ARGS__)
#define OFI_ERR(...) ofi_core->log(CCI_LOG_ERR, __VA_ARGS__)

#define OFI_API_VERSION FI_VERSION(1, 17)
#define OFI_MSS_DEFAULT 65536         /* payload bytes of one message; a plain literal: the table's default */
#define OFI_RECV_COUNT_DEFAULT 64u    /* recv_buf_count */
#define OFI_SEND_COUNT_DEFAULT 128u   /* send_buf_count: a window in flight and as many queued */
#define OFI_BUF_COUNT_MAX 65536u
#define OFI_RX_RESERVE 16u            /* receive buffers for control messages */
#define OFI_PEER_IDLE_NS 2000000000ull /* an unused AV entry is removed after this */
#define OFI_TICK_NS 5000000ull        /* progress thread timer */
#define OFI_PROBE_AFTER_NS 10000000ull /* a connect unanswered this long: is anybody there (tcp)? */
#define OFI_PROBE_EVERY_NS 1000000000ull /* and again this often while somebody is */
#define OFI_PROBE_WAIT_NS 1000000000ull /* a probe unanswered this long tells nothing */
#define OFI_CTL_KEEP_NS 10000000000ull /* a REJECT or CANCEL the provider refuses this long is dropped */
#define OFI_EXIT_JOIN_NS 1000000000ull /* at exit, progress threads get this long to stop */
#define OFI_MR_DONE_WAIT_NS 2000000000ull /* cci_rma_deregister waits this long for peers' MR_DONE */
#define OFI_MAX_CONNS 65535u          /* slots of the connection table */
#define OFI_PROV_LEN 64
#define OFI_INJECT_MAX 4096u          /* bytes we stage on the stack for fi_inject */

/* Commands for the progress thread (engine command bits). */
#define OFI_CMD_ARM 1u              /* the application armed its OS handle */
#define OFI_CMD_PIDW 2u             /* a peer process to watch (sep->pidws) */

/* ---- Wire: ofi_wire.h ---- */

/* The largest control message body: a REQ with the client's address and
 * the connect payload. */
#define OFI_CTL_BODY_MAX (OFI_HELLO_LEN + OFI_ADDR_MAX + CCI_CONN_REQ_LEN)

/* ---- Devices ---- */

struct ofi_dev {
	struct fi_info *info;       /* the chosen fi_getinfo entry (our copy) */
	char core_name[OFI_PROV_LEN]; /* provider before ';', the URI's provider */
	char node[64];              /* iface=: bind to this address, or "" */
	uint32_t mss;
	int manual;                 /* progress = manual: no progress thread */
	char info_text[256];
};

/* ---- Operations and receive buffers ---- */

enum ofi_op_kind {
	OFI_OP_MSG,   /* an application message */
	OFI_OP_CTL,   /* a control message (ours, no event) */
	OFI_OP_RMA    /* an RMA: data, then its completion message, then the event */
};

struct ofi_conn;

/* What a completion's op_context points at (the byte after fctx). */
enum ofi_obj { OFI_OBJ_OP = 1, OFI_OBJ_RX = 2 };

struct ofi_op {
	struct fi_context2 fctx;    /* first: libfabric's, FI_CONTEXT2 mode */
	uint8_t obj;                /* OFI_OBJ_OP */
	struct cci__op_link link;   /* the endpoint's ops or ctl_ops pool's */
	struct ofi_op *next;        /* msgq, peer->ctlq */
	struct ofi_op *rnext;       /* rmaq */
	struct ofi_op *inext, *iprev; /* the connection's operations in flight */
	struct ofi_conn *oc;        /* holds a reference while set */
	uint8_t kind;               /* MSG and RMA count against send_buf_count */
	uint8_t in_msgq, in_rmaq;
	uint8_t in_flight;          /* owned by the provider; on oc->inflight when
	                             * posted from the connection's queues */
	uint8_t tracked;            /* counted in sep->ctl_out */
	uint8_t reported;           /* the core was told (or never will be) */
	uint8_t data_done;          /* RMA: the data moved (or failed) */
	uint8_t nocopy;
	uint8_t ctl_type;           /* OFI_OP_CTL: enum ofi_type */
	uint32_t aux;               /* OFI_OP_CTL: the header's aux */
	int flags;                  /* the caller's CCI flags */
	int status;
	uint32_t call_seq;          /* MSG, RMA: its place among the connection's calls */
	struct ofi_op *fnext;       /* ofi_tx_fail_all's list */
	void *context;
	uint32_t len;               /* payload bytes after the header */
	uint64_t stamp_ns;          /* when queued, for the send timeout */
	const void *ubuf;           /* NO_COPY: the caller's bytes */
	struct ofi_peer *peer;      /* OFI_OP_CTL without a connection: its reference */
	/* RMA */
	void *laddr;
	void *ldesc;
	uint64_t key, roff, rlen;   /* remote core key, offset, length */
	char *buf;                  /* OFI_HDR_LEN + mss bytes */
	void *desc;                 /* buf's memory descriptor (FI_MR_LOCAL) */
};

struct ofi_rxbuf {
	struct fi_context2 fctx;    /* first */
	uint8_t obj;                /* OFI_OBJ_RX */
	struct ofi_rxbuf *next;     /* free list, backlog, held list */
	struct cci__lent lent;      /* returned by the application (sep->lend) */
	struct ofi_conn *oc;        /* while lent or held: a reference */
	uint32_t len;               /* payload bytes */
	uint32_t seq;
	uint32_t off;               /* where the payload starts: OFI_HDR_LEN, or 0 */
	char *data;                 /* header then payload (or payload alone) */
	void *desc;
};

/* A slab of operations or receive buffers, freed with the endpoint. */
struct ofi_slab {
	struct ofi_slab *next;
	void *mem;                  /* the objects */
	void *bufs;                 /* their data buffers */
	struct fid_mr *mr;          /* bufs registered (FI_MR_LOCAL) */
};

/* ---- Connections ---- */

struct ofi_peer;
struct ofi_pidw;

struct ofi_conn {
	/* First: the state (CONNECTING while a client's REQ is unanswered and
	 * until a server's ACCEPT is sent) and the timers; moved and ticked
	 * under lock. */
	struct cci__conn_base base;
	struct ofi_ep *sep;
	cci__conn_t *conn;          /* the core's; NULL once released */
	struct ofi_conn *prev, *next; /* sep->conns, then sep->gone (dlists: thousands
	                             * leave them one by one) */
	int retired;                /* on sep->gone, its id free: broken, and the
	                             * application has not disconnected it yet
	                             * (ofi_conn_retire); sep->lock */
	uint64_t broken_ns;         /* when it broke (the coarse clock); lock */
	struct cci__conn_life life; /* held by the table and by what is in flight */
	uint32_t id;                /* ours: slot | generation << 16 */
	uint32_t peer_id;
	struct ofi_peer *peer;
	struct ofi_pidw *_Atomic pidw; /* the peer process, when on this host; set
	                             * once, under lock (read unlocked too) */
	/* On sep->touched (ofi_conn_touch), holding a reference, until the
	 * tick files it in sep->due. */
	_Atomic int touched;
	struct ofi_conn *touch_next;
	uint64_t nonce;
	uint64_t start_ns;          /* client: when cci_connect was called */
	_Atomic int refused;        /* client: nobody is at the server's address */
	_Atomic int req_posted;     /* client: the provider took our REQ */
	int end_status;             /* client: the timer ended the connect with this
	                             * (sep->ended), or 0 */
	struct ofi_conn *end_next;  /* sep->ended */
	int is_client;
	struct ofi_proc peer_proc;  /* the peer's process, from its hello */
	int attr;
	int imm;                    /* headers of messages to the peer go as CQ data */

	pthread_mutex_t lock;
	struct cci__credit cr;      /* credit.h: owed is counted without the lock */
	uint32_t tx_seq;
	uint32_t call_seq;          /* sends and RMAs queued so far */
	struct ofi_op *msgq, *msgq_tail;  /* messages in call order, not yet posted */
	struct ofi_op *rmaq, *rmaq_tail;  /* RMAs not yet started */
	struct ofi_op *inflight, *inflight_tail; /* owned by the provider, oldest first */
	uint32_t rma_busy;          /* RMA data operations in flight (FENCE) */
	struct cci__peer_reg *mrc;  /* peer registrations known (or asked about) */
	uint32_t mr_req_next;       /* the last MR_REQ's id (peer_reg.h) */
	struct ofi_lkey *lent;      /* our keys the peer learned (MR_REP), ofi_rma.c */
	struct ofi_lkey *done_due;  /* MR_INVALs to confirm once the RMAs of their
	                             * key in flight are done */
	uint32_t rx_next;           /* RO: next sequence to deliver */
	struct ofi_rxbuf *held;     /* arrived early (RO gap, or before CONNECT) */
};

/* A core key on one of a connection's lists (ofi_rma.c). */
struct ofi_lkey {
	struct ofi_lkey *next;
	uint64_t key;
	int inval;                  /* lent: MR_INVAL sent, its MR_DONE awaited */
};

/* A connection request at the server.  The core answers it at most once
 * (accept or reject), so it needs no state of its own. */
struct ofi_req {
	struct ofi_req *next;
	_Atomic int cancelled;      /* the client gave up */
	struct ofi_peer *peer;
	struct ofi_hello hello;
};

/* A provider address in the AV, shared by the connections to it. */
struct ofi_peer {
	struct ofi_peer *next;
	fi_addr_t fa;
	int refs;                   /* 0: unused since idle_ns, removed later */
	_Atomic int cut;            /* removed from the AV (ofi_live.c) */
	/* Control messages the provider refused, in order (ofi_tx.c); under
	 * sep->pool_lock. */
	struct ofi_op *ctlq, *ctlq_tail;
	struct ofi_peer *ctlq_next; /* sep->ctlq_peers */
	int ctlq_listed;
	_Atomic uint32_t ctl_queued; /* the length of ctlq */
	uint64_t idle_ns;
	struct ofi_pidw *owner;     /* shm: the process whose region addr names, or NULL */
	/* tcp: is anybody listening at addr (ofi_reach.c)?  Under sep->lock. */
	int probe_fd;               /* a connect under way, or -1 */
	_Atomic int probe_refused;  /* the last probe's answer, nobody listens */
	uint64_t probe_ns;          /* when the last probe started, 0: never */
	size_t len;
	uint8_t addr[OFI_ADDR_MAX];
};

/* A peer process of this host, watched through a pidfd. */
struct ofi_pidw {
	ev_io io_w;                 /* first: the pidfd on the engine, started by it */
	struct ofi_pidw *next;
	uint32_t pid;
	uint64_t start;
	int fd;
	int refs;                   /* 0: unused since idle_ns, closed later */
	_Atomic int dead;           /* set by the progress thread, read anywhere */
	uint64_t idle_ns;
};

/* A registration (reg->priv). */
struct ofi_mr {
	struct ofi_mr *prev, *next; /* sep->mrs */
	struct fid_mr *mr;
	uint64_t key;               /* the core key */
	uint64_t prov_key;
	void *desc;
	int exported;               /* a peer learned its key (set under the core's
	                             * registration lock, read once the core
	                             * dropped the registration) */
};

/* ---- Endpoints ---- */

struct ofi_ep {
	cci__ep_t *ep;
	struct ofi_ep *live_next;   /* ofi_live.c's list of this process */
	const struct ofi_dev *dev;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *fep;
	int wait_fd;                /* the CQ's FI_WAIT_FD, or -1 */
	uint32_t mss;
	uint64_t mr_mode;
	size_t inject_size;         /* the provider's, at most OFI_INJECT_MAX */
	size_t iov_limit;
	uint64_t rma_flags;         /* op flags for fi_writemsg/fi_readmsg */
	int imm;                    /* remote CQ data of 8 bytes: we take OFI_HELLO_IMM */
	int reach;                  /* how we learn that nobody is at an address: OFI_REACH_BY_* */
	uint8_t addr[OFI_ADDR_MAX]; /* our name */
	size_t addr_len;
	struct ofi_proc self;

	cci__spinlock_t cq_lock;
	struct ofi_conn **slots;    /* OFI_MAX_CONNS + 1, index 0 unused */
	uint16_t *slot_gen;
	uint16_t gen_salt;          /* random: ids differ between endpoint lives */
	uint32_t slot_hint;
	struct ofi_rxbuf *backlog, *backlog_tail; /* delivered in order, waiting for a slot */
	uint64_t cq_seen;           /* completions handled */

	pthread_mutex_t lock;
	struct ofi_conn *conns;
	struct ofi_conn *gone;      /* out of service, freed at their last reference */
	struct cci__conn_graves freeable; /* those of gone whose last hold went */
	/* The connections of conns by when the tick next visits them
	 * (conn_due.h): a tick looks at those due and no other. */
	struct cci__due_heap due;
	/* Connections whose next visit may be sooner than filed, pushed from
	 * any thread without sep->lock (ofi_conn_touch), taken whole by the
	 * tick. */
	struct ofi_conn *_Atomic touched;
	_Atomic uint32_t connecting; /* connections in CCI__CONN_CONNECTING */
	struct ofi_conn *_Atomic ended; /* connects the timer ended, each with a reference,
	                             * for progress to fail (read unlocked as a hint) */
	struct ofi_req *reqs;
	struct ofi_peer *peers;
	uint32_t npeers;            /* peers in the AV (not cut) */
	uint32_t peer_max;          /* the provider's most (domain_attr->ep_cnt), 0: none */
	struct ofi_pidw *pidws;
	pthread_mutex_t mr_lock;    /* mrs; taken last, nothing inside it */
	struct ofi_mr *mrs;

	/* Receive buffers. */
	cci__spinlock_t rx_lock;
	struct cci__lender lend;    /* RECV events out, within recv_buf_count (cq_lock) */
	struct ofi_slab *rx_slabs;
	struct ofi_rxbuf *rx_free;
	_Atomic uint32_t rx_posted; /* buffers the provider holds */

	/* Operations, from slabs added on need (ofi_pool.c). */
	cci__spinlock_t pool_lock;  /* op_slabs and the control queues below */
	struct ofi_slab *op_slabs;
	struct cci__op_pool ops;    /* messages and RMAs (buffers of mss), send_buf_count */
	struct cci__op_pool ctl_ops; /* control messages (buffers of OFI_CTL_BODY_MAX) */
	/* Peers with control messages queued (pool_lock; the head read
	 * unlocked as a hint). */
	struct ofi_peer *_Atomic ctlq_peers;
	struct ofi_peer *ctlq_peers_tail;
	_Atomic uint32_t ctl_out;   /* tracked control messages alive */
	/* DISCs awaiting their DISC_ACK (ofi_disc.c), under disc_lock;
	 * disc_out is their number, read without it. */
	cci__spinlock_t disc_lock;
	struct ofi_disc_wait *disc_waits;
	uint32_t disc_n, disc_cap;
	uint64_t disc_procs_ns;     /* when teardown last looked for exited peers */
	_Atomic uint32_t disc_out;

	/* Progress thread (ofi_loop.c); its watchers are the loop lock's, and
	 * so are poll_ns and hot_ns.  Who polls is the engine's (engine.h). */
	struct cci__engine eng;
	ev_io cq_w;                 /* wait_fd, while the thread sleeps on it */
	struct cci__engine_timer poll_t; /* polls the CQ, or retries after fi_trywait */
	uint64_t poll_ns;           /* poll_t's period, 0 while it does not poll; with
	                             * progress = manual, the OS handle's (cq_lock) */
	uint64_t hot_ns;            /* last arm or completion the thread saw */
	uint64_t arm_seen;          /* progress = manual: cq_seen at the last arm (cq_lock) */
	_Atomic int tx_pending;     /* some connection has queued work */
};

static inline struct ofi_ep *ofi_ep_of(cci__ep_t *ep)
{
	return ep->priv;
}

static inline struct ofi_conn *ofi_conn_of(cci__conn_t *conn)
{
	return *(struct ofi_conn **)conn->priv;
}

/* The connection of id, or NULL; cq_lock held (it guards the table). */
static inline struct ofi_conn *ofi_conn_lookup(struct ofi_ep *sep, uint32_t id)
{
	struct ofi_conn *oc = sep->slots[id & 0xffffu];

	return (oc && oc->id == id) ? oc : NULL;
}

static inline int ofi_conn_state(const struct ofi_conn *oc)
{
	return cci__conn_state(&oc->base);
}

static inline void ofi_conn_ref(struct ofi_conn *oc)
{
	cci__conn_hold(&oc->life);
}

/*
 * oc's timers or the tick's own work on it (credits owed, a probe of a
 * peer that grants none, a retirement) may be due before the time it is
 * filed for in sep->due: the next tick visits it, and files it again.
 * From any thread, with or without oc->lock (never sep->lock needed:
 * the data path holds oc->lock alone, which comes after it); oc must be
 * held by the caller.  Costs one load while oc is already waiting.
 */
static inline void ofi_conn_touch(struct ofi_conn *oc)
{
	struct ofi_ep *sep = oc->sep;
	struct ofi_conn *top;

	if (atomic_load_explicit(&oc->touched, memory_order_relaxed) ||
	    atomic_exchange_explicit(&oc->touched, 1, memory_order_acq_rel))
		return;
	ofi_conn_ref(oc); /* dropped by the tick that takes it */
	top = atomic_load_explicit(&sep->touched, memory_order_relaxed);
	do
		oc->touch_next = top;
	while (!atomic_compare_exchange_weak_explicit(&sep->touched, &top, oc,
	                                              memory_order_release, memory_order_relaxed));
}

/* Move oc to state to (enum cci__conn_state); oc->lock held.  Every move
 * changes what the tick has to do with it. */
static inline void ofi_conn_move(struct ofi_conn *oc, int to)
{
	if (cci__conn_state(&oc->base) == CCI__CONN_CONNECTING && to != CCI__CONN_CONNECTING)
		atomic_fetch_sub_explicit(&oc->sep->connecting, 1, memory_order_relaxed);
	cci__conn_move(&oc->base, to, ofi_core, oc->conn);
	ofi_conn_touch(oc);
}

/* The peer process of oc (NULL: not on this host, or not known yet),
 * with or without oc->lock. */
static inline struct ofi_pidw *ofi_conn_pidw(struct ofi_conn *oc)
{
	return atomic_load_explicit(&oc->pidw, memory_order_acquire);
}

int ofi_pidw_exited(const struct ofi_pidw *w);

/* Has oc's peer, reached through shared memory (FI_ADDR_STR: shm),
 * exited?  libfabric 1.17's shm provider spins for good on a send or
 * write to a process that died holding its region lock (see
 * ofi_pidw_unreachable), so each RMA and each RMA's completion message
 * asks first: one poll of the peer's pidfd.  Plain messages do not (a
 * system call per message); their peer's exit is seen by the loop. */
static inline int ofi_conn_shm_peer_exited(struct ofi_conn *oc)
{
	return oc->sep->info->addr_format == FI_ADDR_STR && ofi_pidw_exited(ofi_conn_pidw(oc));
}

/* The last hold (never the table's: it goes first, at ofi_conn_unlist)
 * makes oc freeable: it joins sep->freeable (conn_life.h's graves), and
 * the progress thread frees it (ofi_conns_sweep).  oc is not touched
 * after the push. */
static inline void ofi_conn_unref(struct ofi_conn *oc)
{
	struct ofi_ep *sep = oc->sep;

	if (cci__conn_drop(&oc->life))
		cci__conn_graves_push(&sep->freeable, &oc->life);
}

/* Where an application message's payload goes in its op's buffer: after
 * the header, or at the (cache-line aligned) start when the header
 * travels as CQ data. */
static inline char *ofi_op_payload(const struct ofi_conn *oc, const struct ofi_op *op)
{
	return op->buf + (oc->imm ? 0 : OFI_HDR_LEN);
}

/* ofi_lib.c: libfabric's exported functions, looked up at first use */
struct ofi_lib {
	int loaded;
	int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
	               const struct fi_info *hints, struct fi_info **info);
	void (*freeinfo)(struct fi_info *info);
	struct fi_info *(*dupinfo)(const struct fi_info *info);
	int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
	const char *(*strerror)(int errnum);
	uint32_t (*version)(void);
};
extern struct ofi_lib ofi_lib;
int ofi_lib_load(const char **why);

/* Signal dispositions (ofi_signal.c): every signal's, saved by
 * ofi_sig_save; ofi_sig_keep puts back each one changed since.  by names
 * what changed them, for the log. */
struct ofi_sigs {
	struct sigaction act[NSIG];
};
void ofi_sig_save(struct ofi_sigs *s);
void ofi_sig_keep(const struct ofi_sigs *s, const char *by);
/* After the provider's endpoint, saved before it by ofi_sig_save: puts
 * back the ignored signals it changed and records the handlers it
 * installed over the others; ofi_sig_provider_forget puts back what those
 * handlers replaced where they are still installed (at exit, before
 * libfabric's destructor frees what they read). */
void ofi_sig_provider_note(const struct ofi_sigs *s);
void ofi_sig_provider_forget(void);
/* dlopen(name, flags) keeping every signal's disposition as it was. */
void *ofi_sig_dlopen(const char *name, int flags);

/* The files below are listed from the bottom layer up: each calls only
 * functions of the files above it (README.md, "Source layout"). */

/* ofi_fd.c */
struct ofi_fds {                /* descriptors without FD_CLOEXEC */
	int *fd;
	uint32_t n, cap;
	int failed;
};
int ofi_fds_snap(struct ofi_fds *s);
void ofi_fds_cloexec_new(struct ofi_fds *before);
int ofi_sa_match(const struct sockaddr *a, socklen_t alen, const void *b, size_t blen, int b_any);
void ofi_fds_cloexec_tcp(int (*ours)(const struct sockaddr *local, socklen_t llen,
                                     const struct sockaddr *peer, socklen_t plen, void *arg),
                         void *arg);

/* ofi_status.c */
int ofi_fi_status(int fi_err);

/* ofi_reach.c */
enum ofi_reach {
	OFI_REACH_UNKNOWN,          /* cannot tell: let the provider try */
	OFI_REACH_NOBODY,           /* no endpoint is there */
	OFI_REACH_THERE,
	OFI_REACH_PENDING           /* a probe is under way */
};
enum ofi_reach_by {
	OFI_REACH_BY_NONE,
	OFI_REACH_BY_SHM,           /* the shm region's owner (shm) */
	OFI_REACH_BY_PROBE          /* the listener, or a TCP connect to it (tcp;ofi_rxm) */
};
void ofi_reach_shm_self(const uint8_t *addr, size_t len);
void ofi_reach_shm_unlink_own(const uint8_t *addr, size_t len);
int ofi_reach_shm(const uint8_t *addr, size_t len, uint32_t *pid_p);
int ofi_reach_listener(const uint8_t *addr, size_t len);
int ofi_reach_probe(const uint8_t *addr, size_t len, int *fd_p);
int ofi_reach_probe_poll(int *fd_p);
void ofi_reach_probe_cancel(int *fd_p);

/* ofi_dev.c */
extern const struct cci_conf_key ofi_conf_keys[];
int ofi_discover(void);
int ofi_dev_configure(cci__dev_t *dev);
void ofi_dev_free(cci__dev_t *dev);
int ofi_getinfo(const char *prov, const char *domain, const char *fabric, const char *node,
                const char *service, struct fi_info **list_p);

/* ofi_addr.c */
int ofi_uri_make(struct ofi_ep *sep, char **uri_p);
int ofi_uri_parse(struct ofi_ep *sep, const char *uri, uint8_t *addr, size_t *len_p);
int ofi_service_check(const struct fi_info *info, const char *service);
int ofi_peer_get(struct ofi_ep *sep, const uint8_t *addr, size_t len, struct ofi_peer **peer_p);
int ofi_peer_owner_gone(const struct ofi_peer *peer);
struct ofi_pidw *ofi_peer_owner_ref(struct ofi_ep *sep, struct ofi_peer *peer);
void ofi_peer_probe(struct ofi_peer *peer, uint64_t since, uint64_t now, int may_connect);
void ofi_peers_probe_poll(struct ofi_ep *sep, uint64_t now);
int ofi_peer_refused(const struct ofi_peer *peer, uint64_t since);
void ofi_peer_put(struct ofi_ep *sep, struct ofi_peer *peer);
void ofi_peer_put_locked(struct ofi_peer *peer);
void ofi_peers_free(struct ofi_ep *sep);
void ofi_peers_sweep(struct ofi_ep *sep, uint64_t now);
void ofi_proc_self(struct ofi_proc *p);
/* Has the process p of this host exited (its pid gone or reused)? */
int ofi_proc_exited(const struct ofi_proc *p);
struct ofi_pidw *ofi_pidw_get(struct ofi_ep *sep, const struct ofi_proc *p);
int ofi_pidw_unreachable(const struct ofi_ep *sep, const struct ofi_pidw *w);
void ofi_pidw_put(struct ofi_pidw *w);
const char *ofi_peer_text(const struct ofi_ep *sep, const struct ofi_peer *peer, char *buf,
                          size_t cap);

/* ofi_pool.c */
int ofi_rx_grow(struct ofi_ep *sep, uint32_t count);
void ofi_rx_repost(struct ofi_ep *sep, struct ofi_rxbuf *rb);
void ofi_ops_init(struct ofi_ep *sep, uint32_t send_buf_count);
struct ofi_op *ofi_op_get(struct ofi_ep *sep, uint8_t kind);
void ofi_op_put(struct ofi_ep *sep, struct ofi_op *op);
void ofi_pool_fini(struct ofi_ep *sep);
int ofi_mr_reg(struct ofi_ep *sep, void *buf, size_t len, uint64_t access, uint64_t key,
               struct fid_mr **mr_p);

/* ofi_tx.c */
#define OFI_CTL_ORDERED 1u  /* keep its place behind the connection's queued messages */
#define OFI_CTL_TRACKED 2u  /* with a completion (failure noticed, destroy waits for it) */
int ofi_ctl_send(struct ofi_conn *oc, uint8_t type, uint32_t aux, const void *body,
                 uint32_t len, unsigned flags);
int ofi_ctl_to(struct ofi_ep *sep, struct ofi_peer *peer, uint32_t dst, uint8_t type,
               const void *body, uint32_t len);
void ofi_ctlq_flush(struct ofi_ep *sep);
int ofi_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
             void *context, int flags);
void ofi_msgq_push(struct ofi_conn *oc, struct ofi_op *op);
void ofi_msgq_flush(struct ofi_conn *oc);
void ofi_op_report(struct ofi_op *op, int status);
void ofi_op_done(struct ofi_ep *sep, struct ofi_op *op);
struct ofi_conn *ofi_tx_complete(struct ofi_ep *sep, struct ofi_op *op, int status);
void ofi_tx_fail_all(struct ofi_conn *oc, int status, int notify);
void ofi_flight_add(struct ofi_conn *oc, struct ofi_op *op);
void ofi_flight_del(struct ofi_conn *oc, struct ofi_op *op);
void ofi_tx_credits_in(struct ofi_conn *oc, uint32_t n);
void ofi_credit_maybe(struct ofi_conn *oc, int force);
void ofi_conn_break(struct ofi_conn *oc, int status);

/* ofi_rx.c */
void ofi_rx_collect(struct ofi_ep *sep);
int ofi_rx_msg(struct ofi_ep *sep, struct ofi_conn *oc, struct ofi_rxbuf *rb,
               const struct ofi_hdr *h, uint32_t len);
void ofi_backlog_drain(struct ofi_ep *sep);
void ofi_held_drain(struct ofi_conn *oc);
void ofi_held_free(struct ofi_conn *oc);

/* ofi_rma.c */
int ofi_rma_register(cci__ep_t *ep, cci__rma_reg_t *reg);
struct ofi_mr *ofi_mr_unlist(struct ofi_ep *sep, cci__rma_reg_t *reg, int *lent_p);
uint32_t ofi_mr_invalidate(struct ofi_ep *sep, uint64_t key, struct ofi_conn ***v_p);
int ofi_mr_confirmed(struct ofi_conn *oc, uint64_t key);
void ofi_mr_unconfirmed(struct ofi_conn *oc, uint64_t key);
void ofi_mr_close(cci__rma_reg_t *reg, struct ofi_mr *m);
void ofi_keys_free(struct ofi_conn *oc);
int ofi_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
            uint64_t local_offset, const struct cci_rma_handle *remote, uint64_t remote_offset,
            uint64_t data_len, void *context, int flags);
void ofi_rmaq_flush(struct ofi_conn *oc);
void ofi_rma_complete(struct ofi_ep *sep, struct ofi_op *op, int status);
void ofi_on_mr_msg(struct ofi_conn *oc, const struct ofi_msg *m);
void ofi_mrs_free(struct ofi_ep *sep);

/* ofi_live.c */
void ofi_live_add(struct ofi_ep *sep);
void ofi_live_del(struct ofi_ep *sep);
int ofi_live_gone(const struct ofi_ep *sep, const uint8_t *addr, size_t len);
void ofi_peer_cut(struct ofi_ep *sep, struct ofi_peer *p);
void ofi_live_fini(void);

/* ofi_disc.c */
struct ofi_disc_wait {
	uint32_t id;                /* our connection's id, which the answer names */
	uint64_t until_ns;          /* given up then */
	struct ofi_proc proc;       /* the peer's process on this host, else pid 0 */
};
void ofi_disc_await(struct ofi_conn *oc);
void ofi_disc_answered(struct ofi_ep *sep, uint32_t id);
void ofi_disc_expire(struct ofi_ep *sep, uint64_t now, int check_procs);
void ofi_disc_waits_free(struct ofi_ep *sep);
void ofi_disc_on_msg(struct ofi_conn *oc, struct ofi_ep *sep, const struct ofi_hdr *h);

/* ofi_conn.c */
struct ofi_conn *ofi_conn_new(struct ofi_ep *sep, cci_conn_attribute_t attr, void *context);
void ofi_conn_unlist(struct ofi_conn *oc, int cq_held);
void ofi_conn_retire(struct ofi_conn *oc);
int ofi_disconnect(cci__conn_t *conn);
void ofi_conn_timeouts_changed(cci__conn_t *conn);
void ofi_conns_sweep(struct ofi_ep *sep);
void ofi_conns_close_all(struct ofi_ep *sep);
void ofi_conns_free_all(struct ofi_ep *sep);

/* ofi_hs.c */
int ofi_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                cci_conn_attribute_t attr, void *context, const struct timeval *timeout);
int ofi_accept(cci__evt_t *evt, void *context);
int ofi_reject(cci__evt_t *evt);
void ofi_request_done(cci__evt_t *evt);
void ofi_on_conn_msg(struct ofi_ep *sep, struct ofi_conn *oc, const struct ofi_msg *m);
void ofi_connect_timeout(struct ofi_conn *oc);
void ofi_connect_refused(struct ofi_conn *oc);
void ofi_reqs_free(struct ofi_ep *sep);

/* ofi_loop.c */
int ofi_progress(cci__ep_t *ep);
void ofi_rma_deregister(cci__ep_t *ep, cci__rma_reg_t *reg);
void ofi_progress_locked(struct ofi_ep *sep);
void ofi_recv_returned(cci__evt_t *evt);
int ofi_thread_start(struct ofi_ep *sep);
void ofi_thread_stop(struct ofi_ep *sep);
int ofi_arm(cci__ep_t *ep);

/* ofi_ep.c */
int ofi_ep_create(cci__ep_t *ep, const char *service);
void ofi_ep_stop(cci__ep_t *ep);
void ofi_ep_free(cci__ep_t *ep);
int ofi_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value);

#endif /* CCI_OFI_H */
