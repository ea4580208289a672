/*
 * ar.h - the parts of the allreduce example: one rank's state (ar_rank.c),
 * its network (ar_net.c: endpoint, URI files, connections, events), the
 * algorithm (ar_algo.c: recursive doubling), the two ways values travel
 * (ar_am.c: in active messages; ar_rma.c: written by RMA into the peer's
 * registered inbox, announced by the RMA's completion message) and the
 * integration (ar_pi.c).  Started by a launcher, a rank reaches the ranks
 * of its own host through an sm endpoint and the others through a second
 * endpoint (tcp, sock, ...): the algorithm does not know which.
 *
 * Messages are fixed-size structs in the host's byte order: the ranks run
 * on hosts of one architecture.
 */
#ifndef CCI_EX_AR_H
#define CCI_EX_AR_H

#include <stdbool.h>
#include <stdint.h>

#include <cci.h>
#include <cci_wire.h>

#define AR_MAX_RANKS 8
#define AR_MAX_STEPS 8     /* fold-in, up to 3 doubling rounds, fold-out */
#define AR_STASH 64        /* values that arrived before they are wanted */
#define AR_HELLO_MAGIC 0x41524c4cu /* "ARLL" */

enum ar_msg_type { AR_MSG_VALUE = 1, AR_MSG_WRITTEN, AR_MSG_HANDLE };

/* Every message.  VALUE carries value; WRITTEN says the value of (iter,
 * step) is in the receiver's inbox; HANDLE carries the sender's inbox
 * registration. */
struct ar_msg {
	uint32_t type;
	uint32_t iter, step;
	uint32_t pad;
	double value;
	uint64_t handle[4];
};

/* The connect payload. */
struct ar_hello {
	uint32_t magic;
	uint32_t rank, n;
};

/*
 * An endpoint and what lives on it.  A rank has up to two: one on an sm
 * device for the ranks of its own host, one on another transport (tcp by
 * default) for the ranks of other hosts.  RMA registrations belong to an
 * endpoint, so each has its own handles of the inbox and outbox.
 */
struct ar_link {
	cci_device_t *dev;
	cci_endpoint_t *ep;
	int fd;                        /* its OS handle, for poll() */
	const char *key;               /* its URI's key in libcci_wire */
	cci_rma_handle_t *inbox_h, *outbox_h;
};

enum { AR_LINK_HOST, AR_LINK_NET, AR_LINKS };

/* A peer: its connection is the context of that CCI connection. */
struct ar_peer {
	int rank;
	bool partner;                  /* the algorithm talks to it */
	struct ar_link *link;          /* the endpoint that reaches it */
	cci_connection_t *conn;
	struct cci_rma_handle inbox;   /* RMA: where to write its values */
	bool have_inbox;
};

struct ar_value {
	bool used;
	int src;
	uint32_t iter, step;
	double v;
};

struct ar_rank;

/* How values travel.  post() sends v for (iter, step) to peer; on_recv()
 * takes a message of the exchange's kind from src. */
struct ar_exchange {
	const char *name;
	int (*setup)(struct ar_rank *r);
	int (*post)(struct ar_rank *r, struct ar_peer *peer, uint32_t iter,
		    uint32_t step, double v);
	int (*on_recv)(struct ar_rank *r, struct ar_peer *src, const struct ar_msg *m);
	void (*teardown)(struct ar_rank *r);
};

extern const struct ar_exchange ar_am_exchange;
extern const struct ar_exchange ar_rma_exchange;

/* What the launcher hands every rank. */
struct ar_config {
	int n;
	const struct ar_exchange *ex;
	unsigned iters;               /* timed allreduces */
	uint64_t intervals;
	double reference;             /* the single-process result */
	const char *dir;              /* URI files and the result */
	cci_wire_t *wire;             /* or, started by a launcher: URIs through
	                               * it, and rank 0 prints the result */
	const char *net_device;       /* -x: the device (or transport) for ranks
	                               * of other hosts; NULL: the first up
	                               * device that is not sm */
	bool show_links;              /* -V: print the transport of each partner */
	unsigned time_limit_s;
};

struct ar_rank {
	const struct ar_config *cfg;
	int rank;
	struct ar_link links[AR_LINKS]; /* ep NULL: not opened */
	unsigned next_link;           /* where progress looks first */
	struct ar_peer peers[AR_MAX_RANKS];
	unsigned partners, connected;
	struct ar_value stash[AR_STASH];
	uint32_t inflight;            /* sends and RMAs awaiting their SEND event */
	uint64_t deadline_ns;
	/* RMA: values land in inbox, leave from outbox; one slot per step,
	 * two iterations deep (a peer is never more than one ahead) */
	double inbox[2][AR_MAX_STEPS], outbox[2][AR_MAX_STEPS];
	bool out_busy[2][AR_MAX_STEPS];
};

/* "allreduce[rank]: message" on stderr. */
void ar_log(const struct ar_rank *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ar_log("WHAT: <cci_strerror>") when rc is not CCI_SUCCESS; returns rc. */
int ar_check(const struct ar_rank *r, int rc, const char *what);

/* One rank's whole life; the process exit status. */
int ar_rank_main(const struct ar_config *cfg, int rank);

/* Mark r's partners (ar_algo.c). */
void ar_schedule(struct ar_rank *r);

/* The sum of every rank's `in`, into *out, identical on every rank. */
int ar_allreduce(struct ar_rank *r, uint32_t iter, double in, double *out);

/* Network (ar_net.c).  Every wait is bounded by r->deadline_ns.
 * ar_net_open opens the endpoints r's partners need and publishes their
 * URIs. */
int ar_net_open(struct ar_rank *r);
int ar_net_connect(struct ar_rank *r);
/* Handle one event of any endpoint, waiting for it until the deadline. */
int ar_net_progress(struct ar_rank *r);
/* Send m to peer, riding out CCI_ENOBUFS; the buffer is free on return. */
int ar_net_send(struct ar_rank *r, struct ar_peer *peer, const struct ar_msg *m);
/* Wait until every send and RMA has completed. */
int ar_net_drain(struct ar_rank *r);
void ar_net_close(struct ar_rank *r);

/* The stash of early values. */
int ar_stash_put(struct ar_rank *r, int src, uint32_t iter, uint32_t step, double v);
/* Wait (making progress) for the value from src for (iter, step). */
int ar_stash_wait(struct ar_rank *r, int src, uint32_t iter, uint32_t step, double *v);

/* The midpoint rule for 4/(1+x^2) on [0,1] in `intervals` pieces, over
 * pieces [first, last) (ar_pi.c). */
double ar_pi_partial(uint64_t intervals, uint64_t first, uint64_t last);

#endif /* CCI_EX_AR_H */
