/*
 * sm.h - internal structures of the shared-memory transport.
 *
 * Objects and who owns them:
 *   struct sm_dev   dev->priv, from dev_configure/discover to dev_free.
 *   struct sm_ep    ep->priv (core allocation), from ep_create to ep_free.
 *   struct sm_conn  malloc'd; reached from the core connection through
 *                   *(struct sm_conn **)conn->priv.  Lives until the
 *                   application disconnected it (or the endpoint died) AND
 *                   no RECV event still points into its receive ring.
 *   struct sm_req   malloc'd; a connection request from accept(2) of the
 *                   listening socket until it is answered and its event
 *                   returned (or the endpoint died).
 *   struct sm_dial  malloc'd; a client connection's request (the server's
 *                   path, the payload) from cci_connect until the answer.
 *   struct sm_peer  malloc'd; a peer endpoint (its doorbell and page),
 *                   shared by every connection and request from or to it,
 *                   freed with the last reference (sm_peer.c).
 *   struct sm_pend  a queued send or RMA step, from the endpoint's pool
 *                   (plugins/common/op_pool.h): the application's within
 *                   send_buf_count, copy-RMA replies and completions of
 *                   RMAs whose data moved outside it.
 *
 * Locks, always taken in this order:
 *   sep->eng.lock the control thread's loop and its watchers (the loop
 *                 lock, see plugins/common/engine.h): held by the thread
 *                 except while it sleeps; connect, accept and disconnect
 *                 take it to start or stop a control socket's watcher.
 *   sep->lock     connection, request and dial lists, control sockets,
 *                 timers; taken by the control thread's callbacks.
 *   sep->rx_lock  the consumer side: rx_bits, the hot rings and the
 *                 pending list (sm_poll.c), every receive ring's read
 *                 and tail, the zombies and their last drops (conn_life.h).
 *                 progress() only try-locks it.  rx_bits changes under
 *                 sep->lock too, so the tick may read it.
 *   sc->tx_lock   the producer side of one connection: its transmit ring,
 *                 its queue, its state as seen by senders.
 *   sep->pool       the pending descriptors: the pool's own spinlock,
 *                   innermost.
 *   sep->reg_lock   this endpoint's registration table.
 *   sep->peer_lock  the table of peer endpoints and their references.
 *   sep->bit_lock   the free bits of the inbox (a ring's index).
 */
#ifndef CCI_SM_H
#define CCI_SM_H

#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "cci_plugin.h"
#include "clock.h"
#include "conn_base.h"
#include "conn_life.h"
#include "lock_held.h"
#include "log_due.h"
#include "op_pool.h"
#include "dlist.h"
#include "emu_rma.h"
#include "engine.h"
#include "progress_key.h"
#include "grow.h"
#include "iov.h"
#include "random.h"
#include "slist.h"
#include "spin.h"
#include "status.h"
#include "sm_ctl_wire.h"
#include "sm_inbox.h"
#include "sm_ring.h"

extern const struct cci_core *sm_core;

/* A full fence (the Dekker pairs of the inbox and of armed: sm_inbox.h).
 * ThreadSanitizer does not model atomic_thread_fence, and GCC says so
 * with a warning that CI's -Werror makes an error: under it a seq_cst
 * read-modify-write stands in, which it does model.  Every other build
 * gets the fence itself. */
#if defined(__SANITIZE_THREAD__)
static _Atomic int sm_fence_word;
#endif
static inline void sm_fence(void)
{
#if defined(__SANITIZE_THREAD__)
	atomic_fetch_add_explicit(&sm_fence_word, 0, memory_order_seq_cst);
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

#define SM_LOG(cat, ...) CCI__LOG(sm_core, (cat) | CCI_LOG_CTP, __VA_ARGS__)
#define SM_WARN(...) sm_core->log(CCI_LOG_WARN, __VA_ARGS__)
#define SM_ERR(...) sm_core->log(CCI_LOG_ERR, __VA_ARGS__)

/* A connection refused for lack of descriptors, memory or mappings is
 * logged under conn, and as a warning at most once a second per endpoint
 * (a storm past a limit fails thousands at once). */
#define SM_LIMIT_LOG(sep, ...)                          \
	do {                                            \
		if (sm_limit_warn_due(sep))             \
			SM_WARN(__VA_ARGS__);           \
		else                                    \
			SM_LOG(CCI_LOG_CONN, __VA_ARGS__); \
	} while (0)

#define SM_MSS_DEFAULT 8192 /* a plain literal: it is the table's default too */
#define SM_BUF_COUNT_DEFAULT 64u
/* Records above this many bytes ask for an idle progress to warm the ring
 * (sm_ring_warm); smaller ones find the few lines publish keeps cleared. */
#define SM_WARM_MIN 256u
#define SM_BUF_COUNT_MAX 65536u
#define SM_TICK_S 0.005             /* control thread timer tick */
#define SM_TICK_NS 5000000ull
#define SM_REQ_WAIT_NS 10000000000ull /* an accepted socket must ask within 10 s */
/* Sockets one call of the listening socket's watcher accepts (it holds
 * sep->lock meanwhile); the watcher fires again for the rest. */
#define SM_ACCEPT_BATCH 64
#define SM_SUN_PATH ((int)sizeof(((struct sockaddr_un *)0)->sun_path))
/* Rings progress reads directly at every poll (sm_poll.c): those that
 * brought records within the last SM_HOT_IDLE polls. */
#define SM_HOT 4
#define SM_HOT_IDLE 4096u
/* Rings the tick's sweep reads per tick (sm_loop.c): a record whose
 * inbox bit a peer cleared is seen within rings / SM_SWEEP_RINGS ticks. */
#define SM_SWEEP_RINGS 256u
/* progress = manual: an endpoint asleep on its OS handle with open
 * connections wakes this often at most for the sweep. */
#define SM_SWEEP_SLEEP_NS 1000000000ull
#define SM_NO_BIT UINT32_MAX

/* path= with room for "/<pid>/<id>" after it in a socket address. */
#define SM_BASE_SIZE (SM_SUN_PATH - 18)

/* Device settings (ini keys path=, mss=, rma=; the table in sm_plugin.c). */
struct sm_dev {
	char base[SM_SUN_PATH];
	uint32_t mss;
	int rma_copy; /* rma=copy: never use cross-memory attach */
	int manual;   /* progress=manual: no control thread (progress_key.h) */
};

/* ------------------------------------------------------------------------ */
/* The endpoint page: one memfd per endpoint, sealed, peers map it read-only */
/* ------------------------------------------------------------------------ */

#define SM_PAGE_MAGIC 0x50454d53u /* "SMEP" */
#define SM_PAGE_VERSION 3u
/* sm_ep_page.flags: the owner has an OS handle and may sleep on it, so a
 * sender must check armed after publishing (sm_ring_bell); without it the
 * owner only polls and senders skip the check and its full fence. */
#define SM_PAGE_SLEEPS 1u
/* Registrations one endpoint can hold at once.  The table is sparse: a
 * slot's page becomes memory only once a registration uses it, and freed
 * slots are reused before new ones, so the cost is about 32 bytes per
 * registration at the peak; the ceiling only reserves address space
 * (32 MiB per endpoint, and per peer that maps it). */
#define SM_REG_SLOTS (1u << 20)
#define SM_REG_LIVE (1u << 31)     /* in sm_reg_slot.flags: the entry is in use */

/*
 * One registration as peers see it.  Written only by the owner under
 * reg_lock as a seqlock: seq odd while the entry changes.  A handle names
 * its slot (cci__handle_hint: slot + 1), so a lookup reads one slot and
 * compares the key: a freed or reused slot has another key (or 0).
 */
struct sm_reg_slot {
	_Atomic uint32_t seq;
	_Atomic uint32_t flags;
	_Atomic uint64_t key;
	_Atomic uint64_t addr;
	_Atomic uint64_t len;
};

struct sm_ep_page {
	uint32_t magic;
	uint32_t version;
	uint32_t pid;
	uint32_t nslots;
	/* Slots [0, used) have been written at least once: a peer reads no
	 * slot above, so that a forged handle makes no page of the table
	 * appear.  Only grows; stored with release after the slot. */
	_Atomic uint32_t used;
	uint32_t flags;            /* SM_PAGE_*, set before any peer maps the page */
	char pad0[SM_LINE - 24];
	/* Set by the owner when it waits on its OS handle; a sender that sees
	 * it after publishing a record writes the owner's doorbell.  Cleared
	 * by the owner's progress (one spurious wake-up at most). */
	_Atomic uint32_t armed;
	char pad1[SM_LINE - 4];
	struct sm_reg_slot slots[SM_REG_SLOTS];
};

/* ------------------------------------------------------------------------ */
/* Control messages on the per-connection SOCK_SEQPACKET socket              */
/* ------------------------------------------------------------------------ */

/* Their layout and codec: sm_ctl_wire.h. */

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */

enum sm_pend_kind {
	SM_PEND_MSG,    /* a message copied in buf */
	SM_PEND_DONE,   /* an RMA whose data already moved: just its completion */
	SM_PEND_WRITE,  /* copy-mode RMA write: WR_DATA..., WR_END (+msg), then sc->rma_wait */
	SM_PEND_READ,   /* copy-mode RMA read: RD_REQ, then sc->rma_wait */
	SM_PEND_REPLY   /* target side: the answer to a WR_END or RD_REQ (emu_rma.h) */
};

/* A queued unit of transmit work; its fields are the sender's arguments. */
struct sm_pend {
	struct cci__op_link link; /* the pool's */
	struct sm_pend *next;
	uint8_t kind;
	int flags;
	void *context;
	int status;         /* completion status so far */
	uint32_t len;       /* bytes of buf to send (message or completion message) */
	uint64_t queued_ns; /* enqueue time, for the send timeout */
	struct cci__emu_rma_op rma; /* WRITE, READ, REPLY */
	char *buf;          /* mss bytes, after the struct */
};

struct sm_ep;

/*
 * A peer endpoint: its page (mapped read-only) and doorbell, named by the
 * page's memfd inode.  Every hello of an endpoint hands over the same
 * page and doorbell; the first maps and keeps them, the others take a
 * reference and close their copies (sm_peer.c), so a thousand
 * connections to one endpoint hold one descriptor and one mapping of it.
 */
struct sm_peer {
	struct sm_peer *next;       /* its chain in sep->peer_tab */
	uint64_t dev, ino;          /* the page's memfd */
	uint32_t refs;              /* connections and requests; under peer_lock */
	const struct sm_ep_page *page;
	size_t page_len;
	int bell;                   /* its doorbell eventfd, non-blocking */
	int sleeps;                 /* its page says SM_PAGE_SLEEPS */
	struct sm_inbox *inbox;     /* its inbox, mapped RW */
	size_t inbox_len;
};

/* What a peer's hello handed over, mapped, its descriptors closed. */
struct sm_hello_maps {
	void *seg;                  /* the peer's receive ring, mapped RW */
	size_t seg_len;
	struct sm_ring ring;        /* attached, checked once (the peer may change the header) */
	struct sm_peer *peer;       /* a reference */
};

/* A link of a list of struct sm_dial (CCI__DLIST_*). */
struct sm_dlink {
	struct sm_dlink *prev, *next;
};

/*
 * A client connection's request, until its answer: what a full backlog
 * makes it keep for a later attempt (sm_dial.c).  The connects waiting
 * for one server form its queue, a circle in order through prev and next;
 * the first of each is on sep->dialq (hl), so that a tick costs one
 * attempt per server, not one per waiting connect.  Under sep->lock.
 */
struct sm_dial {
	struct sm_dial *prev, *next; /* its server's queue while it waits */
	struct sm_dlink hl;         /* sep->dialq while it heads that queue */
	int queued, head;
	uint64_t key;               /* a hash of sa.sun_path, to find the queue */
	struct sm_conn *sc;
	int connected;              /* connect(2) succeeded: the request goes next */
	struct sockaddr_un sa;      /* the server's socket */
	uint32_t attr, data_len;
	uint8_t data[];             /* the connect payload */
};

/* A link of the tick's list of work (sep->timed); sm_conn_of_tlink finds
 * its connection. */
struct sm_tlink {
	struct sm_tlink *prev, *next;
};

struct sm_conn {
	struct cci__conn_base base; /* first; the state changes under tx_lock, the
	                             * timers under sep->lock */
	ev_io ctl_w;                /* its control socket, on the engine; the loop lock */
	struct sm_ep *sep;
	cci__conn_t *conn;          /* the core's; NULL once released */
	struct cci__conn_life life; /* held by itself and by each RECV event lent */
	struct sm_conn *prev, *next; /* sep->conns, or sep->zombies once disconnected */
	/* The tick visits only the connections that need it (sm_loop.c): for
	 * work on sep->timed, for their timers when sep->due says (base.due). */
	struct sm_tlink tl;         /* sep->timed; under sep->lock */
	int timed;                  /* on sep->timed */
	_Atomic int tick_asked;     /* on sep->asked, or being taken off it */
	struct sm_conn *ask_next;   /* its link there */
	struct sm_dial *dial;       /* client, until the answer */
	int sock;                   /* control socket, -1 once closed */
	_Atomic int fault;          /* a status the control thread must break with */
	pid_t peer_pid;
	uint32_t peer_mss;          /* server: the client's, until open */
	/* Server: its ACCEPT waits (descriptors) and is tried again at each
	 * tick until then; 0 when it does not wait.  Under sep->lock. */
	uint64_t answer_until_ns;
	uint32_t rx_bit;            /* our ring's inbox bit while we hold one, else SM_NO_BIT */
	/* Its receive ring's bit in our inbox (sc->rx.bit) names it in
	 * sep->rx_bits while open.  Under rx_lock: */
	int rx_hot;                 /* its slot in sep->hot, or -1 */
	int rx_pend;                /* on sep->pend: read at every poll until drained */
	struct sm_conn *pend_prev, *pend_next;
	_Atomic uint64_t rx_read_pub; /* rx.read as the last drain left it, for the sweep */

	/* Producer side, under tx_lock (the peer's doorbell and page also
	 * under rx_lock: a receiver that frees space rings it). */
	pthread_mutex_t tx_lock;
	struct sm_ring tx;
	_Atomic int tx_warm;        /* a big record left: warm tx at an idle progress */
	void *tx_seg;               /* the peer's receive ring segment, mapped RW */
	size_t tx_seg_len;
	struct sm_peer *peer;       /* the peer endpoint; the next four are its */
	const struct sm_ep_page *peer_page; /* mapped read-only */
	struct sm_inbox *peer_inbox; /* mapped RW */
	int peer_bell;              /* the peer's doorbell eventfd */
	int peer_sleeps;            /* its page says SM_PAGE_SLEEPS */
	struct sm_pend *txq, *txq_tail;
	struct sm_pend *rma_wait;   /* copy RMAs sent, waiting for their DONE */
	int rma_copy;               /* use the copy fallback for RMA */
	_Atomic int cma_busy;       /* cross-memory-attach copies running (for FENCE) */

	/* Consumer side, under sep->rx_lock. */
	struct sm_ring rx;
	void *rx_seg;               /* our receive ring segment */
	size_t rx_seg_len;
	int rx_fd;                  /* its memfd, until it went in a hello */
	int rx_dead;                /* the ring held garbage: not read any more */
	int rx_closed;              /* disconnected: freed at its last drop */

	/* Copy-mode RMA (emu_rma.h): the initiator's fields under tx_lock,
	 * the target's under rx_lock. */
	struct cci__emu_rma_conn rma;

	/* Keepalive, under sep->lock. */
	uint64_t seen_head;         /* the receive ring's head at the last visit of its timers */
};

/* A connection request on the server side.  Once its hello came, the
 * client's segments are mapped and the request holds one descriptor, its
 * socket, however long the application takes to answer. */
struct sm_req {
	ev_io w;                    /* its socket, active until posted; the loop lock */
	struct sm_ep *sep;
	struct sm_req *prev, *next; /* sep->reqs, then sep->posted */
	int sock;
	struct sm_hello_maps maps;  /* the client's, once its hello came */
	pid_t peer_pid;
	uint64_t since_ns;
	struct sm_ctl_hello hello;
};

struct sm_ep {
	cci__ep_t *ep;
	const struct sm_dev *dev;
	uint32_t mss;

	pthread_mutex_t lock;
	struct sm_conn *conns;
	struct sm_req *reqs;        /* waiting for their hello (timed) */
	struct sm_req *posted;      /* their event posted, waiting for the answer */
	/* What the tick visits (sm_loop.c): on timed, the connections with
	 * work (queued sends, a fault, an answer waiting for descriptors),
	 * which other threads ask for through the lock-free stack asked; in
	 * due, each connection whose timers run (connect deadline, keepalive,
	 * send timeout), by when they next need a visit.  Every connection
	 * holds a slot of due from sm_conn_new to its memory's release. */
	struct sm_tlink *timed;
	_Atomic(struct sm_conn *) asked;
	struct cci__due_heap due;

	cci__spinlock_t rx_lock;   /* spin.h: progress only ever try-locks it */
	_Atomic uint32_t rx_waiters; /* sm_rx_lock callers waiting: progress lets them in */
	/* The open connections by their receive ring's bit (NULL: none);
	 * rx_cap entries.  Under rx_lock and sep->lock. */
	struct sm_conn **rx_bits;
	uint32_t rx_cap;
	struct sm_conn *zombies;    /* disconnected, still held by RECV events */
	/* Which rings progress reads (sm_poll.c), under rx_lock: the hot
	 * ones (their bits kept set in the inbox: keep, a word per word of
	 * bits), the pending list (taken from the inbox, not drained yet). */
	struct sm_conn *hot[SM_HOT];
	uint64_t hot_last[SM_HOT];  /* polls at its last record */
	uint32_t nhot, hot_next;    /* the next slot to check for idleness */
	uint64_t polls;
	uint64_t *keep;             /* SM_INBOX_WORDS */
	struct sm_conn *pend;
	/* Private bitmaps of the same shape as the inbox, by ring bit:
	 * rings the tick's sweep found with records (found), connections
	 * whose queued sends progress flushes (flush) and whose rings it
	 * warms when idle (warm).  Marked by any thread, taken under rx_lock. */
	struct sm_inbox *found, *flush, *warm;
	uint32_t sweep_at;          /* the sweep's next bit; under sep->lock */

	/* Control thread: the shared engine, with the listening socket and
	 * every control socket; the tick runs while there is something to time.
	 * With progress=manual no thread: progress() runs the loop
	 * (cci__engine_poll). */
	struct cci__engine eng;
	ev_io listen_w;
	/* accept(2), or a request's descriptors, ran out: listen_w stopped
	 * until the tick; stays set until an accept finds a descriptor or
	 * finds the backlog empty (for the log). */
	int listen_paused;
	_Atomic uint64_t warned_ns; /* the last warning of a limit (SM_LIMIT_LOG) */
	struct sm_dlink *dialq;     /* the heads of the servers' queues of waiting connects */

	/* Peer endpoints, by their page's inode (sm_peer.c). */
	pthread_mutex_t peer_lock;
	struct sm_peer **peer_tab;  /* peer_cap chains, a power of two */
	uint32_t peer_cap, npeers;

	/* Naming. */
	int listen_fd;
	unsigned id;
	char sock_path[SM_SUN_PATH];

	/* Doorbell, endpoint page and inbox. */
	int bell_fd;
	int page_fd;
	struct sm_ep_page *page;
	size_t page_len;
	int inbox_fd;
	struct sm_inbox *inbox;
	size_t inbox_len;
	pthread_mutex_t bit_lock;
	uint32_t *bit_free;         /* freed bits, reused first (a stack) */
	uint32_t bit_nfree, bit_free_cap, bit_next;
	pthread_mutex_t reg_lock;
	uint32_t *reg_free;   /* freed slots, reused first (a stack) */
	uint32_t reg_nfree, reg_free_cap;

	struct cci__op_pool pool;   /* pending descriptors, see struct sm_pend */
	_Atomic uint32_t txq_busy;  /* connections with queued work */
};

static inline int sm_limit_warn_due(struct sm_ep *sep)
{
	return cci__log_due(&sep->warned_ns, 1000000000ull);
}

/*
 * rx_lock for the control thread and the other cold paths (a connection
 * joining or leaving rx_bits, arming).  Progress takes it in a loop and
 * holds it for a poll of the rings with work, so it is free only between two polls;
 * on a busy machine a waiter that merely spins would starve for time
 * slices on end (a storm of connects slowed to tens a second).  A waiter
 * announces itself and progress stays out until it is served.
 */
static inline void sm_rx_lock(struct sm_ep *sep)
{
	atomic_fetch_add_explicit(&sep->rx_waiters, 1, memory_order_relaxed);
	cci__spin_lock(&sep->rx_lock);
	atomic_fetch_sub_explicit(&sep->rx_waiters, 1, memory_order_relaxed);
}

/*
 * Ask the tick to visit sc (its queue filled, or its ring held garbage):
 * any thread, no lock, two atomic operations the first time and a load
 * until the tick took it.  Only while sc is open: sm_disconnect takes the stack
 * once no thread can ask any more, so nothing freed stays on it.
 */
static inline void sm_tick_ask(struct sm_conn *sc)
{
	struct sm_ep *sep = sc->sep;
	struct sm_conn *head;

	if (atomic_load_explicit(&sc->tick_asked, memory_order_relaxed) ||
	    atomic_exchange_explicit(&sc->tick_asked, 1, memory_order_acq_rel))
		return; /* asked already: a load, no store, until the tick took it */
	head = atomic_load_explicit(&sep->asked, memory_order_relaxed);
	do
		sc->ask_next = head;
	while (!atomic_compare_exchange_weak_explicit(&sep->asked, &head, sc, memory_order_release,
	                                              memory_order_relaxed));
}

/* Put sc on the pending list: progress reads its ring at every poll
 * until a read finds it drained (sm_poll.c); rx_lock held. */
static inline void sm_pend_push(struct sm_ep *sep, struct sm_conn *sc)
{
	if (sc->rx_pend)
		return;
	sc->rx_pend = 1;
	sc->pend_prev = NULL;
	sc->pend_next = sep->pend;
	if (sep->pend)
		sep->pend->pend_prev = sc;
	sep->pend = sc;
}

static inline void sm_pend_unlink(struct sm_ep *sep, struct sm_conn *sc)
{
	if (!sc->rx_pend)
		return;
	if (sc->pend_prev)
		sc->pend_prev->pend_next = sc->pend_next;
	else
		sep->pend = sc->pend_next;
	if (sc->pend_next)
		sc->pend_next->pend_prev = sc->pend_prev;
	sc->pend_prev = sc->pend_next = NULL;
	sc->rx_pend = 0;
}

static inline struct sm_conn *sm_conn_of_tlink(struct sm_tlink *l)
{
	return (struct sm_conn *)(void *)((char *)l - offsetof(struct sm_conn, tl));
}

static inline struct sm_ep *sm_ep_of(cci__ep_t *ep)
{
	return ep->priv;
}

static inline struct sm_conn *sm_conn_of(cci__conn_t *conn)
{
	return *(struct sm_conn **)conn->priv;
}

/* sm_path.c */
int sm_path_listen(struct sm_ep *sep, const char *service);
void sm_path_unlisten(struct sm_ep *sep);
int sm_uri_parse(const char *uri, char *path, size_t pathlen);

/* sm_peer.c */
/* Map what a hello (h, its descriptors fds) hands over into *m; fds are
 * closed either way.  CCI_EINVAL (*why says what) for segments that are
 * not what they must be, CCI_ENOMEM when this process lacks the memory,
 * mappings or descriptors. */
int sm_hello_map(struct sm_ep *sep, const struct sm_ctl_hello *h, int *fds,
                 struct sm_hello_maps *m, const char **why);
void sm_hello_unmap(struct sm_ep *sep, struct sm_hello_maps *m);
void sm_peer_put(struct sm_ep *sep, struct sm_peer *p);
/* Free the table (every reference is gone). */
void sm_peers_fini(struct sm_ep *sep);

/* sm_wire.c */
/* sm_ctl_recv: a message whose descriptors this process had no room for
 * (its descriptors ran out): they are lost. */
#define SM_CTL_RECV_NOFDS (-3)
/* sm_ctl_recv: a message with more descriptors than any message carries:
 * the peer breaks the protocol. */
#define SM_CTL_RECV_TOOMANY (-4)
int sm_ctl_send(int sock, uint16_t type, const struct sm_ctl_hello *body, const int *fds, int nfds);
int sm_ctl_recv(int sock, void *buf, size_t len, int *fds, int *nfds);
/* Send REQ or ACCEPT: h (its attr and payload filled in) with this side's
 * mss, pid and ring size, and the four descriptors the peer maps: sc's
 * receive ring, the endpoint's doorbell, page and inbox.  errno says why
 * not. */
int sm_hello_send(struct sm_conn *sc, int sock, uint16_t type, struct sm_ctl_hello *h);
int sm_peer_pid(int sock, pid_t *pid);

/* sm_conn.c */
/* A new connection, without its rings yet, with its slot in sep->due;
 * NULL when out of memory.  sep->lock held. */
struct sm_conn *sm_conn_new(struct sm_ep *sep, cci_conn_attribute_t attr, void *context);
int sm_conn_rx_create(struct sm_conn *sc);
void sm_conn_rx_drop(struct sm_conn *sc);
void sm_conn_attach(struct sm_conn *sc, struct sm_hello_maps *m);
void sm_conn_open(struct sm_conn *sc, const struct sm_ctl_hello *h, cci_event_type_t type);
void sm_conn_on_ctl(struct sm_conn *sc);
/* Watch the control socket of sc, open or about to be (PING, PONG,
 * DISCONNECT, hang-up), and run the tick; the loop lock and sep->lock
 * held.  Another thread than the loop's then wakes it (cci__engine_cmd). */
void sm_conn_watch(struct sm_conn *sc);
/* Stop watching sc's control socket and close it; the loop lock and
 * sep->lock held. */
void sm_conn_unwatch(struct sm_conn *sc);
void sm_conn_break(struct sm_conn *sc, int status);
int sm_conn_rx_release(struct sm_conn *sc);
/* The tick's list (sep->lock held): add sc; take sc off; move the
 * connections other threads asked for onto it. */
void sm_timed_add(struct sm_conn *sc);
void sm_timed_remove(struct sm_conn *sc);
void sm_timed_take_asked(struct sm_ep *sep);
/* The inbox's scan found the bits taken in word w: their open rings go on
 * the pending list (sm_inbox_found_fn; arg is the endpoint).  rx_lock held. */
void sm_conn_found(void *arg, uint32_t w, uint64_t taken);
/* The ring in hot slot i is no longer read at every poll: its bit is
 * taken back from the inbox with the word's other unkept bits, and those
 * rings go on the pending list; the caller fences before reading them.
 * rx_lock held. */
void sm_conn_hot_drop(struct sm_ep *sep, uint32_t i);
/* Free the inbox bits of the endpoint (at its release). */
void sm_bits_fini(struct sm_ep *sep);
/* Free everything of sc, without events, and give its slot in sep->due
 * back; sc is on no list, its watcher stopped.  sm_conn_destroy takes
 * sep->lock for the slot, sm_conn_destroy_locked is called with it. */
void sm_conn_destroy(struct sm_conn *sc);
void sm_conn_destroy_locked(struct sm_conn *sc);
int sm_disconnect(cci__conn_t *conn);
void sm_conn_timeouts_changed(cci__conn_t *conn);

/* sm_dial.c */
/* The tick: try the connects waiting for a full backlog again, each
 * server's in order up to the first that must still wait.  The loop lock
 * and sep->lock held. */
void sm_dial_retry(struct sm_ep *sep);
/* Client side: the connect failed; report and free.  sep->lock (and the
 * loop lock) held if sc is listed. */
void sm_connect_failed(struct sm_conn *sc, int status, int listed);
int sm_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
               cci_conn_attribute_t attr, void *context, const struct timeval *timeout);

/* sm_hs.c */
/* The watcher of the listening socket (sep->listen_w): take the
 * connections waiting on it. */
void sm_hs_on_listen(struct ev_loop *loop, ev_io *w, int revents);
/* The tick: watch the listening socket again, and accept, after
 * descriptors ran out; the loop lock and sep->lock held. */
void sm_hs_listen_resume(struct sm_ep *sep);
/* The tick: try sc's ACCEPT again (sc->answer_until_ns); 1 if it still waits,
 * -1 if sc is gone (failed), 0 once it is open (its timers are filed in
 * sep->due).  The loop lock and sep->lock held. */
int sm_hs_answer_retry(struct sm_conn *sc, uint64_t now);
void sm_req_drop(struct sm_ep *sep, struct sm_req *req);
void sm_req_free(struct sm_req *req);
int sm_accept(cci__evt_t *evt, void *context);
int sm_reject(cci__evt_t *evt);
void sm_request_done(cci__evt_t *evt);

/* sm_loop.c */
int sm_loop_start(struct sm_ep *sep);
/* sc's timers may be due sooner than sep->due says: a connect with a
 * deadline started, sc opened, or its keepalive or send timeout was set.
 * sep->lock held. */
void sm_due_note(struct sm_conn *sc);
/* The application is about to sleep on the OS handle (sm_arm); no lock held. */
void sm_loop_arm(struct sm_ep *sep);

/* sm_poll.c */
/* Read the rings that may hold records (the hot ones, those the inbox or
 * the sweep flags, the pending list); rx_lock held.  *got_p: records
 * handled.  CCI_ENOBUFS when nothing came and, on a ring read, the peer
 * waits for space only returned events can give. */
int sm_poll_rx(struct sm_ep *sep, int *got_p);
/* Is a record waiting, as far as the inbox, the sweep, the hot rings and
 * the pending list say?  For arm(); takes rx_lock. */
int sm_poll_pending(struct sm_ep *sep);
/* The tick: look for records in the next SM_SWEEP_RINGS rings, whatever
 * the inbox says, and flag those found (sep->found).  1 if any was.
 * sep->lock held. */
int sm_poll_sweep(struct sm_ep *sep);

/* sm_ep.c */
int sm_ep_create(cci__ep_t *ep, const char *service);
void sm_ep_stop(cci__ep_t *ep);
void sm_ep_free(cci__ep_t *ep);
int sm_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value);
int sm_arm(cci__ep_t *ep);
int sm_progress(cci__ep_t *ep);

/* sm_tx.c */
int sm_pool_resize(struct sm_ep *sep, uint32_t count);
void sm_pool_init(struct sm_ep *sep, uint32_t count);
struct sm_pend *sm_pend_get(struct sm_ep *sep, int ctl);
void sm_pend_put(struct sm_ep *sep, struct sm_pend *p);
void sm_txq_queue(struct sm_conn *sc, struct sm_pend *p);
/* 1 if sends may still wait (the queue is not empty, or another thread
 * held tx_lock). */
int sm_txq_flush(struct sm_conn *sc);
void sm_txq_flush_locked(struct sm_conn *sc);
void sm_txq_fail(struct sm_conn *sc, int status, int notify);
/* Flush the queues of the connections marked in sep->flush (a send was
 * queued); rx_lock held (rx_bits). */
void sm_tx_flush_marked(struct sm_ep *sep);
/* An idle progress (nothing arrived): warm the rings of connections that
 * sent a big record since (sm_ring_warm), marked in sep->warm. */
void sm_tx_warm_marked(struct sm_ep *sep);
int sm_tx_place(struct sm_conn *sc, uint16_t type, uint32_t aux, const struct iovec *iov,
                uint32_t iovcnt, uint32_t len);
/* After publishing records: mark sc's ring in the peer's inbox, and ring
 * its doorbell if it sleeps on its OS handle (armed); tx_lock held. */
void sm_ring_bell(struct sm_conn *sc);
/* The peer, if asleep on its OS handle, must flush sends it queued
 * (space freed in our receive ring); rx_lock held. */
void sm_peer_wake(struct sm_conn *sc);
int sm_send(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
            void *context, int flags);

/* sm_rx.c */
/* Post the payload of rec after its first skip bytes as a RECV event
 * (0: not now, the record stays for the next drain). */
int sm_rx_post_at(struct sm_ep *sep, struct sm_conn *sc, struct sm_rec *rec, uint32_t skip);
static inline int sm_rx_post(struct sm_ep *sep, struct sm_conn *sc, struct sm_rec *rec)
{
	return sm_rx_post_at(sep, sc, rec, 0);
}
void sm_rx_consume_release(struct sm_conn *sc, struct sm_rec *rec);
void sm_rx_fault(struct sm_conn *sc);
void sm_recv_returned(cci__evt_t *evt);

/* sm_rma.c */
int sm_rma_register(cci__ep_t *ep, cci__rma_reg_t *reg);
void sm_rma_deregister(cci__ep_t *ep, cci__rma_reg_t *reg);
int sm_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
           uint64_t local_offset, const struct cci_rma_handle *remote, uint64_t remote_offset,
           uint64_t data_len, void *context, int flags);
int sm_rma_on_record(struct sm_conn *sc, struct sm_rec *rec);

#endif /* CCI_SM_H */
