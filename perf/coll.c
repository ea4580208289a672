/*
 * coll - allreduce (sum of doubles) and broadcast over cci, timed the way
 * coll_mpi times MPI_Allreduce and MPI_Bcast, for perf/coll_compare.
 *
 * The N ranks (a power of two, 2..64) are started by a launcher (mpirun
 * -np N, mpiexec.hydra -n N, cci_wire_launch -n N) and find each other
 * through libcci_wire: every rank publishes its endpoint URI, and rank r
 * connects to the ranks r ^ 2^k above it, the only partners the
 * algorithms below need.  Values travel in one of two ways (-m):
 *
 *   am   in active messages: a header and up to max_send_size - 24 bytes
 *        of payload, gathered with cci_sendv;
 *   rma  written by cci_rma into the peer's registered buffer, in chunks of
 *        -C bytes, each announced by the RMA's completion message (the
 *        header), which arrives after the data is in place.
 *
 * Allreduce: below -R bytes, or with fewer doubles than ranks, recursive
 * doubling (log2 N exchanges of the whole vector; what a partner sends
 * lands in a scratch slot of its step and is added once this rank's own
 * send of that step has gone).  From -R bytes on, Rabenseifner's
 * reduce-scatter by recursive halving, then an allgather by recursive
 * doubling: each rank moves 2 (N-1)/N of the vector instead of log2 N
 * whole vectors.  In the reduce-scatter a rank adds what arrives for step
 * k straight into its result as it arrives, whatever step it is at: that
 * region is one it keeps for every later step, so it is never sent again
 * and no sum is counted twice.  The half given away at step 0 leaves from
 * the input, so only the half kept is copied into the result first (at 2
 * ranks none: the arriving half is added to the input's).  The allgather's
 * data is the final block of its sender, copied (am) or written (rma)
 * straight into the result.
 *
 * Broadcast (root 0): a binomial tree, pipelined: a rank forwards each
 * fragment or chunk to its children as soon as it has it.  With rma a
 * child first tells its parent it is inside the call (READY), since the
 * parent writes into the child's result buffer.
 *
 * Every message carries the sequence number of its collective call (all
 * ranks make the same calls in the same order).  A partner can be one call
 * ahead; its messages are held, unreturned, and replayed when this rank
 * enters that call.  rma's reduce-scatter lands in one of two scratch
 * buffers by the parity of the call, so a partner one call ahead never
 * overwrites what this rank still adds.
 *
 * Timing, for each size: warm-up calls, a barrier (an 8-byte allreduce),
 * -i calls (or as many as fit -B bytes, at least 20), then each rank's
 * mean time per call, of which the largest over the ranks is printed by
 * rank 0, and one call more whose result is checked against the exact sum
 * (integer-valued doubles, so the order of additions does not matter).
 *
 * usage: LAUNCHER -n N coll -o allreduce|bcast [-m am|rma] [-S sizes]
 *                 [-i iters] [-B bytes] [-w warmup] [-p spin|yield|block]
 *                 [-R bytes] [-C bytes] [-t secs] [-c]
 */
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "cci.h"
#include "cci_wire.h"
#include "perf_util.h"
#include "coll_common.h"

#define C_MAX_RANKS 64
#define C_MAX_LOG 6
#define C_HELLO_MAGIC 0x434f4c4cu /* "COLL" */
#define C_HELD_MAX 8192
#define C_SMALL 256 /* bytes of data sent with cci_send, not cci_sendv */
/* How far an am broadcast's child may lag its parent: C_AM_EAGER bytes'
 * worth of calls, 2 to 1024 of them, as deep as an eager MPI broadcast
 * runs ahead (a parent held back every few calls stalls whenever its child
 * is off the core).  What the child holds meanwhile is bounded by it. */
#define C_AM_EAGER (1u << 20)

enum c_kind { K_HANDLES = 1, K_RD, K_RS, K_AG, K_BC, K_READY };

/* Every message starts with this; data follows it in am. */
struct c_hdr {
	uint32_t kind;
	uint32_t seq;  /* the collective call */
	uint32_t step;
	uint32_t len;  /* bytes of data */
	uint64_t off;  /* byte offset of the data in the vector */
};

struct c_handles {
	struct c_hdr h;
	struct cci_rma_handle out, scratch[2];
};

struct c_peer {
	cci_connection_t *conn;
	struct cci_rma_handle out, scratch[2];
	bool have_handles;
};

/* One transfer to one peer: [off, off + len) of the local buffer src
 * (rma: registered as src_h, at src_base's offset) to the same offset of
 * the peer's vector, or of its scratch slot. */
struct c_xfer {
	int peer;
	uint32_t kind, step;
	const unsigned char *src;
	uint64_t off, len, done;
	uint64_t dst_off;   /* where in the remote buffer the data lands (rma) */
	uint64_t src_off;   /* offset of src in its registration (rma) */
	cci_rma_handle_t *src_h;
	int dst_buf;        /* rma: 0 out, 1 scratch */
};

struct coll {
	struct coll_opts o;
	cci_wire_t *wire;
	int rank, n, logn;
	cci_endpoint_t *ep;
	int fd;
	uint32_t mss;       /* smallest max_send_size over the connections */
	struct c_peer peers[C_MAX_RANKS];
	unsigned partners, connected;
	/* buffers: in (allreduce input), out (result), scratch (landing) */
	unsigned char *in, *out, *scratch[2];
	uint64_t cap, scratch_cap;
	cci_rma_handle_t *in_h, *out_h, *scratch_h[2];
	/* the call in progress */
	uint32_t seq;
	uint64_t size;      /* bytes of this call */
	uint64_t got[2 * C_MAX_LOG + 1]; /* bytes arrived per step */
	uint32_t ready_seq[C_MAX_RANKS]; /* bcast: the last call each child entered */
	uint32_t ready_sent;             /* bcast: the last call this rank said so */
	bool rd;            /* this allreduce by recursive doubling */
	/* events of a later call, in arrival order */
	struct c_held {
		cci_event_t *ev;       /* the event, still lent to us */
		unsigned char *copy;   /* or, spilled, a copy of its message */
		uint32_t len;
		int peer;
	} held[C_HELD_MAX], replaying[C_HELD_MAX];
	unsigned nheld;
	/* transfers queued, sent in order as the send buffers allow */
	struct c_xfer q[2 * C_MAX_LOG + 2];
	unsigned qh, qt;
	uint64_t deadline_ns;
};

static void c_die_wire(struct coll *c, const char *what)
{
	perf_die("%s: %s", what, cci_wire_error(c->wire));
}

/* ------------------------------------------------------------ reduction */

/* dst = a + b, doubles (the first data of a region at 2 ranks: the
 * result is the input plus the partner's, no copy of the input first). */
static void add3(unsigned char *dst, const unsigned char *a, const unsigned char *b,
		 uint64_t len)
{
	double x, y;

	for (uint64_t i = 0; i < len; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		x += y;
		memcpy(dst + i, &x, 8);
	}
}

static void add_into(unsigned char *dst, const unsigned char *src, uint64_t len, bool max)
{
	double a, b;

	/* dst is 8-aligned (off is a multiple of 8); src may be a message */
	if (!max && ((uintptr_t)src & 7) == 0) {
		double *d = (double *)(void *)dst;
		const double *s = (const double *)(const void *)src;

		for (uint64_t i = 0; i < len / 8; i++)
			d[i] += s[i];
		return;
	}
	for (uint64_t i = 0; i < len; i += 8) {
		memcpy(&a, dst + i, 8);
		memcpy(&b, src + i, 8);
		a = max ? (a > b ? a : b) : a + b;
		memcpy(dst + i, &a, 8);
	}
}

/* ------------------------------------------------------------ events */

static bool c_op_max;

static void spill(struct coll *c);

/* A new call: the clock starts at its first wait (read then, not on the
 * path of a call that never waits). */
static void c_deadline(struct coll *c)
{
	c->deadline_ns = 0;
}

static bool c_late(struct coll *c)
{
	uint64_t now = perf_now_ns();

	if (!c->deadline_ns)
		c->deadline_ns = now + (uint64_t)c->o.timeout_s * 1000000000ull;
	return now > c->deadline_ns;
}

/* The next event; spins, yields or sleeps per -p; dies at the deadline.
 * once: NULL when there is none (after one yield with -p yield or block,
 * since the caller has sends to retry). */
static cci_event_t *c_next_event(struct coll *c, bool once)
{
	cci_event_t *ev;
	unsigned spins = 0;

	for (;;) {
		int rc = cci_get_event(c->ep, &ev);

		if (rc == CCI_SUCCESS)
			return ev;
		if (rc == CCI_ENOBUFS) {
			spill(c);
			continue;
		}
		if (rc != CCI_EAGAIN)
			perf_check(rc, "cci_get_event");
		if (once) {
			if (c->o.poll != COLL_POLL_SPIN)
				sched_yield();
			if (c_late(c))
				perf_die("rank %d: no progress for %u s (call %u)", c->rank,
					 c->o.timeout_s, c->seq);
			return NULL;
		}
		if (c->o.poll == COLL_POLL_BLOCK) {
			if (c_late(c) || !perf_block_on_fd(c->ep, c->fd, c->deadline_ns))
				perf_die("rank %d: no event for %u s (call %u)", c->rank,
					 c->o.timeout_s, c->seq);
			continue;
		}
		if (c->o.poll == COLL_POLL_YIELD)
			sched_yield();
		if (++spins % 1024 == 1 && c_late(c))
			perf_die("rank %d: no event for %u s (call %u)", c->rank,
				 c->o.timeout_s, c->seq);
	}
}

static int peer_of(struct coll *c, cci_connection_t *conn)
{
	return (int)((struct c_peer *)conn->context - c->peers);
}

/* Data of this call from peer p: where it lands, and what it completes. */
static void on_data(struct coll *c, int p, const struct c_hdr *h, const unsigned char *payload)
{
	uint64_t s = h->step;

	if (h->off + h->len > c->size || s >= 2 * C_MAX_LOG + 1)
		perf_die("rank %d: bad data from rank %d (kind %u, %" PRIu64 "+%u of %" PRIu64 ")",
			 c->rank, p, h->kind, h->off, h->len, c->size);
	switch (h->kind) {
	case K_RD: {
		/* the whole vector, into the scratch slot of its step */
		unsigned char *slot = c->scratch[c->seq & 1] + s * c->size;

		if (payload)
			memcpy(slot + h->off, payload, h->len);
		break;
	}
	case K_RS: {
		/* the scratch slot of step s starts at c->size - (c->size >> s) */
		const unsigned char *src = payload;

		if (!src)
			src = c->scratch[c->seq & 1] + (c->size - (c->size >> s)) +
			      (h->off - rs_region_start(c->rank, c->n, c->size, (int)s));
		if (c->logn == 1)
			add3(c->out + h->off, c->in + h->off, src, h->len);
		else
			add_into(c->out + h->off, src, h->len, c_op_max);
		break;
	}
	case K_AG:
	case K_BC:
		if (payload)
			memcpy(c->out + h->off, payload, h->len);
		break;
	default:
		perf_die("rank %d: unexpected kind %u from rank %d", c->rank, h->kind, p);
	}
	c->got[s] += h->len;
}

/* A message of this call (len bytes at data) from peer p. */
static void on_recv(struct coll *c, int p, const unsigned char *data, uint32_t len)
{
	struct c_hdr h;

	memcpy(&h, data, sizeof(h));
	if (h.kind == K_HANDLES) {
		struct c_handles m;

		if (len != sizeof(m))
			perf_die("rank %d: bad handles from rank %d", c->rank, p);
		memcpy(&m, data, sizeof(m));
		c->peers[p].out = m.out;
		c->peers[p].scratch[0] = m.scratch[0];
		c->peers[p].scratch[1] = m.scratch[1];
		c->peers[p].have_handles = true;
		return;
	}
	if (h.kind == K_READY) {
		if ((int32_t)(h.seq - c->ready_seq[p]) > 0)
			c->ready_seq[p] = h.seq;
		return;
	}
	if (len != sizeof(h) && len != sizeof(h) + h.len)
		perf_die("rank %d: a %u-byte message from rank %d says %u bytes",
			 c->rank, len, p, h.len);
	on_data(c, p, &h, len == sizeof(h) ? NULL : data + sizeof(h));
}

/* The call a message belongs to. */
static uint32_t seq_of(const struct coll *c, const unsigned char *data, uint32_t len)
{
	struct c_hdr h;

	if (len < sizeof(h))
		return c->seq;
	memcpy(&h, data, sizeof(h));
	/* a READY counts whenever it comes */
	return h.kind == K_HANDLES || h.kind == K_READY ? c->seq : h.seq;
}

/* Keep a message of a later call for when this rank enters it. */
static void hold(struct coll *c, struct c_held h, uint32_t s)
{
	if ((int32_t)(s - c->seq) < 0 || c->nheld == C_HELD_MAX)
		perf_die("rank %d: a message of call %u during call %u", c->rank, s, c->seq);
	c->held[c->nheld++] = h;
}

/* A message, from an event or a held copy: now or later. */
static bool deliver(struct coll *c, int p, const unsigned char *data, uint32_t len)
{
	if (len < sizeof(struct c_hdr))
		perf_die("rank %d: a %u-byte message from rank %d", c->rank, len, p);
	if (seq_of(c, data, len) != c->seq)
		return false;
	on_recv(c, p, data, len);
	return true;
}

/* cci_get_event ran out of receive buffers: the held events give theirs
 * back, their messages copied. */
static void spill(struct coll *c)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nheld; i++) {
		struct c_held *h = &c->held[i];

		if (!h->ev)
			continue;
		h->copy = malloc(h->len);
		if (!h->copy)
			perf_die("out of memory");
		memcpy(h->copy, h->ev->recv.ptr, h->len);
		cci_return_event(h->ev);
		h->ev = NULL;
		n++;
	}
	if (!n)
		perf_die("rank %d: cci_get_event: no receive buffer, none held", c->rank);
}

static void on_request(struct coll *c, cci_event_t *ev)
{
	uint32_t hello[2];

	if (ev->request.data_len != sizeof(hello))
		perf_die("rank %d: bad connection request", c->rank);
	memcpy(hello, ev->request.data_ptr, sizeof(hello));
	if (hello[0] != C_HELLO_MAGIC || hello[1] >= (uint32_t)c->n ||
	    !is_partner(c->rank, (int)hello[1]))
		perf_die("rank %d: unexpected connection request", c->rank);
	perf_check(cci_accept(ev, &c->peers[hello[1]]), "cci_accept");
}

/* Handle ev now, or hold it when it belongs to a later call. */
static void dispatch(struct coll *c, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_RECV: {
		int p = peer_of(c, ev->recv.connection);

		if (!deliver(c, p, ev->recv.ptr, ev->recv.len)) {
			hold(c, (struct c_held){ .ev = ev, .len = ev->recv.len, .peer = p },
			     seq_of(c, ev->recv.ptr, ev->recv.len));
			return;
		}
		break;
	}
	case CCI_EVENT_SEND:
		perf_check(ev->send.status, "send completion");
		break;
	case CCI_EVENT_CONNECT_REQUEST:
		on_request(c, ev);
		break;
	case CCI_EVENT_CONNECT:
	case CCI_EVENT_ACCEPT: {
		int st = ev->type == CCI_EVENT_CONNECT ? ev->connect.status : ev->accept.status;
		cci_connection_t *conn = ev->type == CCI_EVENT_CONNECT ?
					 ev->connect.connection : ev->accept.connection;

		perf_check(st, "connection");
		((struct c_peer *)(ev->type == CCI_EVENT_CONNECT ? ev->connect.context :
				   ev->accept.context))->conn = conn;
		if (conn->max_send_size < c->mss)
			c->mss = conn->max_send_size;
		c->connected++;
		break;
	}
	default:
		perf_die("rank %d: unexpected %s", c->rank, cci_event_type_str(ev->type));
	}
	cci_return_event(ev);
}

/* Replay what was held for this call, in arrival order. */
static void replay(struct coll *c)
{
	unsigned n = c->nheld;

	memcpy(c->replaying, c->held, n * sizeof(c->held[0]));
	c->nheld = 0;
	for (unsigned i = 0; i < n; i++) {
		struct c_held *h = &c->replaying[i];

		if (h->ev) {
			dispatch(c, h->ev);
		} else if (deliver(c, h->peer, h->copy, h->len)) {
			free(h->copy);
		} else {
			hold(c, *h, seq_of(c, h->copy, h->len));
		}
	}
}

/* ------------------------------------------------------------ sending */

static void enqueue(struct coll *c, struct c_xfer x)
{
	if (c->qt - c->qh == sizeof(c->q) / sizeof(c->q[0]))
		perf_die("rank %d: transfer queue full", c->rank);
	c->q[c->qt++ % (sizeof(c->q) / sizeof(c->q[0]))] = x;
}

/* One fragment or chunk of x; false when the send buffers are all busy. */
static bool send_piece(struct coll *c, struct c_xfer *x)
{
	struct c_peer *p = &c->peers[x->peer];
	struct c_hdr h = { .kind = x->kind, .seq = c->seq, .step = x->step,
			   .off = x->off + x->done };
	uint64_t left = x->len - x->done;
	int rc;

	/* a broadcast forwards only what it has */
	if (x->kind == K_BC && c->rank && left > c->got[0] - x->off - x->done)
		left = c->got[0] - x->off - x->done;

	if (c->o.rma) {
		cci_rma_handle_t *dst = x->dst_buf ? &p->scratch[c->seq & 1] : &p->out;

		h.len = (uint32_t)(left < c->o.chunk ? left : c->o.chunk);
		rc = cci_rma(p->conn, &h, sizeof(h), x->src_h, x->src_off + x->done, dst,
			     x->dst_off + x->done, h.len, NULL,
			     CCI_FLAG_WRITE | CCI_FLAG_SILENT);
	} else {
		uint64_t room = c->mss - sizeof(h);
		struct iovec iov[2] = { { &h, sizeof(h) } };

		h.len = (uint32_t)(left < room ? left : room);
		if (h.len <= C_SMALL) {
			/* one contiguous message: cci_send's path is shorter */
			unsigned char m[sizeof(h) + C_SMALL];

			memcpy(m, &h, sizeof(h));
			memcpy(m + sizeof(h), x->src + x->done, h.len);
			rc = cci_send(p->conn, m, (uint32_t)sizeof(h) + h.len, NULL,
				      CCI_FLAG_SILENT);
		} else {
			iov[1].iov_base = (void *)(uintptr_t)(x->src + x->done);
			iov[1].iov_len = h.len;
			rc = cci_sendv(p->conn, iov, 2, NULL, CCI_FLAG_SILENT);
		}
	}
	if (rc == CCI_ENOBUFS)
		return false;
	perf_check(rc, c->o.rma ? "cci_rma" : "cci_sendv");
	x->done += h.len;
	return true;
}

/* The calls a child may lag (rma: none, the parent writes into the
 * child's result), and how often it says READY: often enough that a
 * child in the call the parent waits for has said so. */
static uint32_t bc_lag(const struct coll *c)
{
	uint64_t calls = C_AM_EAGER / c->size;

	if (c->o.rma)
		return 0;
	return calls < 2 ? 2 : calls > 1024 ? 1024 : (uint32_t)calls;
}

static uint32_t bc_ready_every(const struct coll *c)
{
	uint32_t lag = bc_lag(c);

	return lag < 4 ? 1 : lag / 4;
}

/* Send what the queue holds until it is empty or the buffers are busy;
 * true when a send found them busy (CCI_ENOBUFS: retry soon). */
static bool push(struct coll *c)
{
	while (c->qh != c->qt) {
		struct c_xfer *x = &c->q[c->qh % (sizeof(c->q) / sizeof(c->q[0]))];

		if (x->kind == K_BC &&
		    (int32_t)(c->ready_seq[x->peer] + bc_lag(c) - c->seq) < 0)
			return false;
		/* a broadcast forwards only what it has */
		while (x->done < x->len &&
		       (x->kind != K_BC || c->rank == 0 || x->off + x->done < c->got[0]))
			if (!send_piece(c, x))
				return true;
		if (x->done < x->len)
			return false;
		c->qh++;
	}
	return false;
}


static void send_ctl(struct coll *c, int peer, uint32_t kind)
{
	struct c_hdr h = { .kind = kind, .seq = c->seq };
	int rc;

	while ((rc = cci_send(c->peers[peer].conn, &h, sizeof(h), NULL, CCI_FLAG_SILENT)) ==
	       CCI_ENOBUFS) {
		cci_event_t *ev = c_next_event(c, true);

		if (ev)
			dispatch(c, ev);
	}
	perf_check(rc, "cci_send");
}

/* ------------------------------------------------------------ algorithms */

static void begin(struct coll *c, uint64_t size)
{
	c->seq++;
	c->size = size;
	memset(c->got, 0, sizeof(c->got));
	c_deadline(c);
}

/* Send what can go and handle events until step has want bytes and
 * every transfer is posted.  With transfers waiting for send buffers (or
 * for a child's READY) it looks for events without sleeping and retries. */
static void wait_got(struct coll *c, int step, uint64_t want)
{
	for (;;) {
		cci_event_t *ev;
		bool busy = push(c);

		if (c->got[step] >= want && c->qh == c->qt)
			return;
		ev = c_next_event(c, busy);
		if (ev)
			dispatch(c, ev);
	}
}

/* A transfer of [off, off+len) of out to peer; dst_buf 1: its scratch at
 * dst_off instead of its out at off. */
static struct c_xfer out_xfer(struct coll *c, int peer, uint32_t kind, uint32_t step,
			      uint64_t off, uint64_t len, int dst_buf, uint64_t dst_off)
{
	return (struct c_xfer){ .peer = peer, .kind = kind, .step = step, .src = c->out + off,
				.off = off, .len = len, .src_off = off, .src_h = c->out_h,
				.dst_buf = dst_buf, .dst_off = dst_buf ? dst_off : off };
}

static void allreduce_rd(struct coll *c, uint64_t size)
{
	unsigned char *base = c->scratch[c->seq & 1];

	replay(c);
	for (int k = 0; k < c->logn; k++) {
		int p = c->rank ^ (1 << k);

		enqueue(c, out_xfer(c, p, K_RD, (uint32_t)k, 0, size, 1, (uint64_t)k * size));
		wait_got(c, k, size);
		add_into(c->out, base + (uint64_t)k * size, size, c_op_max);
	}
}

/* Reduce-scatter by recursive halving, steps k = 0..logn-1 with partners
 * at distance N/2, N/4, .. 1; then the allgather in reverse.  The half
 * given away at step 0 leaves from the input, unchanged so far; only the
 * half kept is copied into the result first, and at 2 ranks not even that
 * (the arriving half is added to the input's, add3). */
static void allreduce_rab(struct coll *c, uint64_t size)
{
	uint64_t kept0 = rs_region_start(c->rank, c->n, size, 0);

	if (c->logn > 1)
		memcpy(c->out + kept0, c->in + kept0, size / 2);
	replay(c);
	for (int k = 0; k < c->logn; k++) {
		int d = c->n >> (k + 1), p = c->rank ^ d;
		uint64_t part = size >> (k + 1);
		uint64_t give = rs_region_start(p, c->n, size, k);
		/* the partner's slot of step k in its scratch */
		struct c_xfer x = out_xfer(c, p, K_RS, (uint32_t)k, give, part, 1,
					   size - (size >> k));

		if (k == 0) {
			x.src = c->in + give;
			x.src_h = c->in_h;
		}
		enqueue(c, x);
		wait_got(c, k, part);
	}
	for (int k = c->logn - 1; k >= 0; k--) {
		int d = c->n >> (k + 1), p = c->rank ^ d;
		uint64_t part = size >> (k + 1);
		uint64_t mine = rs_region_start(c->rank, c->n, size, k);
		uint32_t step = (uint32_t)(2 * c->logn - 1 - k);

		enqueue(c, out_xfer(c, p, K_AG, step, mine, part, 0, 0));
		wait_got(c, (int)step, part);
	}
}

/* The sum (max: the largest) over the ranks of src's size bytes, into out. */
static void allreduce(struct coll *c, const void *src, uint64_t size, bool max)
{
	begin(c, size);
	c_op_max = max;
	c->rd = size < c->o.rab_from || size / 8 < (uint64_t)c->n || size % (8u * c->n);
	if (c->rd && size * c->logn > c->scratch_cap)
		perf_die("%" PRIu64 " bytes by recursive doubling: more than the scratch", size);
	if (!c->rd && (src != c->in || max))
		perf_die("reduce-scatter sums c->in only");
	if (c->rd) {
		memcpy(c->out, src, size);
		allreduce_rd(c, size);
	} else {
		allreduce_rab(c, size);
	}
	c_op_max = false;
}

/* Binomial tree from rank 0: the parent clears the highest set bit, the
 * children set each bit above it, largest subtree first. */
static void bcast(struct coll *c, uint64_t size)
{
	int top = 0;

	begin(c, size);
	replay(c);
	if (c->rank) {
		while ((2 << top) <= c->rank)
			top++;
		/* the parent lets this rank lag bc_lag() calls, at least
		 * bc_ready_every() - 1 */
		if (c->seq - c->ready_sent >= bc_ready_every(c)) {
			send_ctl(c, c->rank ^ (1 << top), K_READY);
			c->ready_sent = c->seq;
		}
		top++;
	}
	for (int k = c->logn - 1; k >= top; k--)
		enqueue(c, out_xfer(c, c->rank | (1 << k), K_BC, 0, 0, size, 0, 0));
	wait_got(c, 0, c->rank ? size : 0);
}

/* ------------------------------------------------------------ set-up */

static void c_open(struct coll *c)
{
	char why[512], *uri = NULL;

	if (cci_wire_init(&c->wire, why, sizeof(why)))
		perf_die("wire-up: %s", why);
	c->rank = cci_wire_rank(c->wire);
	c->n = cci_wire_size(c->wire);
	if (c->n < 2 || c->n > C_MAX_RANKS || (c->n & (c->n - 1)))
		perf_die("%d ranks: coll runs a power of two, 2..%d", c->n, C_MAX_RANKS);
	while ((1 << c->logn) < c->n)
		c->logn++;
	perf_check(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), "cci_init");
	c->fd = -1;
	perf_check(cci_create_endpoint(NULL, 0, &c->ep,
				       c->o.poll == COLL_POLL_BLOCK ? &c->fd : NULL),
		   "cci_create_endpoint");
	perf_set_ep(c->ep);
	perf_check(cci_get_opt(c->ep, CCI_OPT_ENDPT_URI, &uri), "cci_get_opt(URI)");
	if (cci_wire_put(c->wire, "coll_uri", uri) || cci_wire_fence(c->wire))
		c_die_wire(c, "publishing the URI");
	free(uri);
}

static void *c_alloc(uint64_t len)
{
	void *p;

	if (posix_memalign(&p, 4096, len))
		perf_die("cannot allocate %" PRIu64 " bytes", len);
	memset(p, 0, len);
	return p;
}

static void c_connect(struct coll *c)
{
	uint32_t hello[2] = { C_HELLO_MAGIC, (uint32_t)c->rank };
	struct c_handles m = { .h = { .kind = K_HANDLES } };

	c->mss = UINT32_MAX;
	c_deadline(c);
	for (int k = 0; k < c->logn; k++) {
		int p = c->rank ^ (1 << k);
		char *uri;

		c->partners++;
		if (p < c->rank)
			continue;
		if (cci_wire_get(c->wire, p, "coll_uri", &uri))
			c_die_wire(c, "a partner's URI");
		perf_check(cci_connect(c->ep, uri, hello, sizeof(hello), CCI_CONN_ATTR_RO,
				       &c->peers[p], 0, NULL), "cci_connect");
		free(uri);
	}
	while (c->connected < c->partners)
		dispatch(c, c_next_event(c, false));
	for (int k = 0; k < C_MAX_RANKS; k++)
		if (c->peers[k].conn == NULL && k < c->n && is_partner(c->rank, k))
			perf_die("rank %d: no connection to rank %d", c->rank, k);
	if (c->mss <= sizeof(struct c_hdr) + 8)
		perf_die("max_send_size %u is too small", c->mss);

	/* buffers and their registrations; scratch holds log2 N whole
	 * vectors below -R (recursive doubling), one vector above */
	c->cap = c->o.max_size;
	c->scratch_cap = c->o.rab_from * (uint64_t)c->logn;
	if (c->scratch_cap < c->cap)
		c->scratch_cap = c->cap;
	c->in = c_alloc(c->cap);
	c->out = c_alloc(c->cap);
	for (int i = 0; i < 2; i++) {
		c->scratch[i] = c_alloc(c->scratch_cap);
		perf_check(cci_rma_register(c->ep, c->scratch[i], c->scratch_cap,
					    CCI_FLAG_WRITE, &c->scratch_h[i]),
			   "cci_rma_register");
		m.scratch[i] = *c->scratch_h[i];
	}
	perf_check(cci_rma_register(c->ep, c->out, c->cap, CCI_FLAG_WRITE, &c->out_h),
		   "cci_rma_register");
	perf_check(cci_rma_register(c->ep, c->in, c->cap, 0, &c->in_h), "cci_rma_register");
	m.out = *c->out_h;
	for (int k = 0; k < c->logn; k++)
		perf_check(cci_send(c->peers[c->rank ^ (1 << k)].conn, &m, sizeof(m), NULL, 0),
			   "cci_send(handles)");
	for (;;) {
		unsigned have = 0;

		for (int k = 0; k < c->logn; k++)
			have += c->peers[c->rank ^ (1 << k)].have_handles;
		if (have == (unsigned)c->logn)
			break;
		dispatch(c, c_next_event(c, false));
	}
}

static void c_close(struct coll *c)
{
	/* a last allreduce: every rank has sent everything */
	double one = 1;

	allreduce(c, &one, 8, false);
	if (c->nheld)
		perf_die("rank %d: %u messages of a call never made", c->rank, c->nheld);
	/* and has taken its partners' last messages: then none is lost when a
	 * partner disconnects */
	if (cci_wire_barrier(c->wire))
		c_die_wire(c, "the last barrier");
	perf_check(cci_rma_deregister(c->ep, c->out_h), "cci_rma_deregister");
	perf_check(cci_rma_deregister(c->ep, c->in_h), "cci_rma_deregister");
	for (int i = 0; i < 2; i++)
		perf_check(cci_rma_deregister(c->ep, c->scratch_h[i]), "cci_rma_deregister");
	for (int k = 0; k < c->logn; k++)
		cci_disconnect(c->peers[c->rank ^ (1 << k)].conn);
	perf_check(cci_destroy_endpoint(c->ep), "cci_destroy_endpoint");
	perf_set_ep(NULL);
	perf_check(cci_finalize(), "cci_finalize");
	cci_wire_finalize(c->wire);
	free(c->in);
	free(c->out);
	free(c->scratch[0]);
	free(c->scratch[1]);
}

/* ------------------------------------------------------------ the run */

static void run_op(struct coll *c, uint64_t size)
{
	if (c->o.op == COLL_BCAST)
		bcast(c, size);
	else
		allreduce(c, c->in, size, false);
}

/* The largest over the ranks of v, on every rank. */
static double max_over_ranks(struct coll *c, double v)
{
	double m;

	allreduce(c, &v, 8, true);
	memcpy(&m, c->out, 8);
	return m;
}

static void barrier(struct coll *c)
{
	double z = 0;

	allreduce(c, &z, 8, false);
}

/* One call more, on fresh values, checked. */
static uint64_t check(struct coll *c, uint64_t size, uint32_t round)
{
	uint64_t bad;

	coll_fill(c->o.op, c->rank, round, c->in, c->out, size);
	run_op(c, size);
	bad = coll_verify(c->o.op, c->n, round, c->out, size);
	return (uint64_t)max_over_ranks(c, (double)bad);
}

static void measure(struct coll *c, uint64_t size, uint32_t round)
{
	uint32_t iters = coll_iters(&c->o, size), warm = iters / 10 + 1;
	uint64_t t0, bad;
	double us;

	coll_fill(c->o.op, c->rank, round, c->in, c->out, size);
	for (uint32_t i = 0; i < warm; i++)
		run_op(c, size);
	barrier(c);
	t0 = perf_now_ns();
	for (uint32_t i = 0; i < iters; i++)
		run_op(c, size);
	us = (double)(perf_now_ns() - t0) / 1e3 / iters;
	us = max_over_ranks(c, us);
	bad = check(c, size, round);
	if (c->rank == 0)
		coll_print_row(&c->o, c->o.rma ? "rma" : "am", c->n, size, iters, us, bad);
	if (bad)
		perf_die("%s of %" PRIu64 " bytes: %" PRIu64 " wrong values",
			 coll_op_name(c->o.op), size, bad);
}

int main(int argc, char **argv)
{
	static struct coll c;
	uint32_t round = 0;

	perf_set_prog("coll");
	coll_parse(&c.o, argc, argv, true);
	c_open(&c);
	c_connect(&c);
	if (c.rank == 0)
		coll_print_header(&c.o, c.o.rma ? "cci rma" : "cci am", c.n,
				  c.ep->device->transport);
	for (unsigned i = 0; i < c.o.nsizes; i++)
		measure(&c, c.o.sizes[i], ++round);
	c_close(&c);
	return EXIT_SUCCESS;
}
