/*
 * sm_rma.c - RMA: the registration table peers read, single-copy
 * transfers by cross-memory attach, and the copy fallback through the
 * rings.
 *
 * The table lives in the endpoint page (read-only to peers).  The
 * initiator validates key, range and access against the TARGET's table,
 * never trusting the address of the handle, so a forged or deregistered
 * handle never reaches memory; then one process_vm_writev/readv moves the
 * bytes.  The check and the copy are not atomic with respect to a
 * deregistration racing with the RMA on the target: such a program is
 * already wrong, and with the fallback the check happens at the target.
 *
 * Copy fallback (ini rma=copy, or the kernel refuses cross-memory attach):
 * writes travel as WR_FRAG records {key, offset} + bytes that the target
 * checks with core->rma_lookup() before writing a byte, closed by a WR_END
 * carrying the completion message; the target answers RMA_ACK.  Reads send
 * RD_REQ; the target checks it, streams RD_FRAG records back and ends with
 * RMA_ACK.  A read occupies the head of its connection's queue until its
 * ACK, so its completion message keeps its place among the sends, and
 * FENCE waits for every earlier copy RMA to be acknowledged.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "sm.h"

#define SM_RMA_FALLBACK 1000

/* ------------------------------------------------------------------------ */
/* Registration table                                                        */
/* ------------------------------------------------------------------------ */

/* Seqlock write of one slot; reg_lock held. */
static void slot_write(struct sm_reg_slot *s, uint64_t key, uint64_t addr, uint64_t len,
                       uint32_t flags)
{
	uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);

	/* Release stores of the fields keep the odd seq before them, and the
	 * reader's acquire loads keep its second seq load after them: the
	 * seqlock's ordering without fences (which ThreadSanitizer cannot
	 * follow, and on x86 all of these are plain moves). */
	atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
	__atomic_store_n(&s->key, key, __ATOMIC_RELEASE);
	__atomic_store_n(&s->addr, addr, __ATOMIC_RELEASE);
	__atomic_store_n(&s->len, len, __ATOMIC_RELEASE);
	__atomic_store_n(&s->flags, flags, __ATOMIC_RELEASE);
	atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

/*
 * A freed slot if there is one, else the next never used.  The free
 * stack always has room for every slot in use, so that deregistration
 * cannot fail.
 */
int sm_rma_register(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	struct sm_ep *sep = sm_ep_of(ep);
	uint32_t used, i;
	int rc = CCI_ENOMEM;

	pthread_mutex_lock(&sep->reg_lock);
	used = atomic_load_explicit(&sep->page->used, memory_order_relaxed);
	if (sep->reg_nfree > 0) {
		i = sep->reg_free[--sep->reg_nfree];
	} else if (used == SM_REG_SLOTS) {
		SM_WARN("sm: %s: more than %u registrations", ep->uri, SM_REG_SLOTS);
		goto out;
	} else {
		if (cci__grow(&sep->reg_free, used, &sep->reg_free_cap, 64, sizeof(*sep->reg_free)) !=
		    CCI_SUCCESS)
			goto out;
		i = used;
	}
	slot_write(&sep->page->slots[i], cci__handle_key(&reg->handle),
	           (uint64_t)(uintptr_t)reg->start, reg->length,
	           (uint32_t)(reg->flags | SM_REG_LIVE));
	if (i == used) /* after the slot: a peer that sees used sees the slot */
		atomic_store_explicit(&sep->page->used, used + 1, memory_order_release);
	cci__handle_set_hint(&reg->handle, i + 1);
	reg->priv = (void *)(uintptr_t)(i + 1);
	rc = CCI_SUCCESS;
out:
	pthread_mutex_unlock(&sep->reg_lock);
	return rc;
}

void sm_rma_deregister(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	struct sm_ep *sep = sm_ep_of(ep);
	uint32_t i = (uint32_t)(uintptr_t)reg->priv;

	if (i == 0)
		return;
	pthread_mutex_lock(&sep->reg_lock);
	slot_write(&sep->page->slots[i - 1], 0, 0, 0, 0);
	sep->reg_free[sep->reg_nfree++] = i - 1;
	pthread_mutex_unlock(&sep->reg_lock);
	reg->priv = NULL;
}

struct slot_view {
	uint64_t key, addr, len;
	uint32_t flags;
};

/* A seqlock read.  The owner may die mid-update (odd seq forever): after
 * SLOT_READ_TRIES yields the slot reads as empty, so that lookup fails
 * instead of spinning on a dead peer. */
#define SLOT_READ_TRIES 100000u
static void slot_read(const struct sm_reg_slot *s, struct slot_view *v)
{
	uint32_t s1, s2, tries = 0;

	do {
		while ((s1 = atomic_load_explicit(&s->seq, memory_order_acquire)) & 1u) {
			if (++tries > SLOT_READ_TRIES) {
				memset(v, 0, sizeof(*v));
				return;
			}
			sched_yield(); /* the owner is mid-update */
		}
		v->key = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
		v->addr = __atomic_load_n(&s->addr, __ATOMIC_ACQUIRE);
		v->len = __atomic_load_n(&s->len, __ATOMIC_ACQUIRE);
		v->flags = __atomic_load_n(&s->flags, __ATOMIC_ACQUIRE);
		s2 = atomic_load_explicit(&s->seq, memory_order_relaxed);
	} while (s1 != s2);
}

/* The target's address of [off, off+len) of a remote handle, checked
 * against the target's table: the one slot the handle names. */
static int peer_lookup(const struct sm_ep_page *pg, const struct cci_rma_handle *h, uint64_t off,
                       uint64_t len, int access, uint64_t *addr)
{
	uint32_t hint = cci__handle_hint(h);
	struct slot_view v;

	if (hint == 0 || hint > atomic_load_explicit(&pg->used, memory_order_acquire))
		return CCI_ERR_RMA_HANDLE;
	slot_read(&pg->slots[hint - 1], &v);
	if (v.key != cci__handle_key(h) || v.key == 0 || !(v.flags & SM_REG_LIVE))
		return CCI_ERR_RMA_HANDLE;
	if (((int)v.flags & access) != access)
		return CCI_ERR_RMA_HANDLE;
	if (off > v.len || len > v.len - off)
		return CCI_EINVAL;
	*addr = v.addr + off;
	return CCI_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Cross-memory attach                                                       */
/* ------------------------------------------------------------------------ */

static int cma_move(pid_t pid, char *local, uint64_t remote, uint64_t len, int write)
{
	while (len > 0) {
		struct iovec l = { local, len }, r = { (void *)(uintptr_t)remote, len };
		ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
		                  : process_vm_readv(pid, &l, 1, &r, 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (errno == EPERM || errno == ENOSYS || errno == EACCES)
				return SM_RMA_FALLBACK;
			SM_LOG(CCI_LOG_RMA, "sm: %s of pid %d failed: %s",
			       write ? "process_vm_writev" : "process_vm_readv", (int)pid,
			       strerror(errno));
			return errno == ESRCH ? CCI_ERR_DISCONNECTED : CCI_ERR_RMA_OP;
		}
		if (n == 0)
			return CCI_ERR_RMA_OP;
		local += n;
		remote += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return CCI_SUCCESS;
}

/* The data moved: deliver the completion message, then complete. */
static int cma_finish(struct sm_conn *sc, const void *msg, uint32_t msg_len, void *context,
                      int flags)
{
	struct iovec iov = { (void *)msg, msg_len };
	struct sm_pend *p;

	pthread_mutex_lock(&sc->tx_lock);
	if (!cci__conn_is_open(&sc->base)) {
		pthread_mutex_unlock(&sc->tx_lock);
		return CCI_ERR_DISCONNECTED;
	}
	if (!sc->txq && (msg_len == 0 || sm_tx_place(sc, SM_REC_MSG, 0, &iov, 1, msg_len) ==
	                                         CCI_SUCCESS)) {
		pthread_mutex_unlock(&sc->tx_lock);
		sm_core->send_done(sc->conn, context, flags, CCI_SUCCESS);
		return CCI_SUCCESS;
	}
	/* A descriptor even past send_buf_count: the data has already moved. */
	p = sm_pend_get(sc->sep, 1);
	if (!p) {
		pthread_mutex_unlock(&sc->tx_lock);
		return CCI_ENOMEM;
	}
	p->kind = SM_PEND_DONE;
	p->context = context;
	p->flags = flags;
	p->len = msg_len;
	if (msg_len)
		memcpy(p->buf, msg, msg_len);
	sm_txq_queue(sc, p);
	pthread_mutex_unlock(&sc->tx_lock);
	return CCI_SUCCESS;
}

/* Single copy by the kernel; SM_RMA_FALLBACK when it refuses. */
static int rma_cma(struct sm_conn *sc, char *local, const struct cci_rma_handle *remote,
                   uint64_t roff, uint64_t len, int flags)
{
	int write = (flags & CCI_FLAG_WRITE) != 0, rc;
	uint64_t raddr = 0;
	pid_t pid;

	pthread_mutex_lock(&sc->tx_lock);
	rc = cci__conn_is_open(&sc->base) ? CCI_SUCCESS : CCI_ERR_DISCONNECTED;
	if (rc == CCI_SUCCESS)
		rc = peer_lookup(sc->peer_page, remote, roff, len,
		                 write ? CCI_FLAG_WRITE : CCI_FLAG_READ, &raddr);
	pid = sc->peer_pid;
	pthread_mutex_unlock(&sc->tx_lock);
	if (rc != CCI_SUCCESS)
		return rc;
	if (flags & CCI_FLAG_FENCE)
		while (atomic_load(&sc->cma_busy) > 0)
			sched_yield();
	atomic_fetch_add(&sc->cma_busy, 1);
	rc = cma_move(pid, local, raddr, len, write);
	atomic_fetch_sub(&sc->cma_busy, 1);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Copy fallback: initiator                                                  */
/* ------------------------------------------------------------------------ */

static int rma_copy_start(struct sm_conn *sc, const void *msg, uint32_t msg_len, char *local,
                          const struct cci_rma_handle *remote, uint64_t roff, uint64_t len,
                          void *context, int flags)
{
	struct sm_pend *p;

	pthread_mutex_lock(&sc->tx_lock);
	if (!cci__conn_is_open(&sc->base)) {
		pthread_mutex_unlock(&sc->tx_lock);
		return CCI_ERR_DISCONNECTED;
	}
	p = sm_pend_get(sc->sep, 0);
	if (!p) {
		pthread_mutex_unlock(&sc->tx_lock);
		return CCI_ENOBUFS;
	}
	p->kind = (flags & CCI_FLAG_WRITE) ? SM_PEND_WRITE : SM_PEND_READ;
	p->context = context;
	p->flags = flags;
	p->len = msg_len;
	if (msg_len)
		memcpy(p->buf, msg, msg_len);
	p->op_id = ++sc->next_op_id;
	p->key = cci__handle_key(remote);
	p->roff = roff;
	p->laddr = local;
	p->total = len;
	sm_txq_queue(sc, p);
	pthread_mutex_unlock(&sc->tx_lock);
	return CCI_SUCCESS;
}

int sm_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
           uint64_t local_offset, const struct cci_rma_handle *remote, uint64_t remote_offset,
           uint64_t data_len, void *context, int flags)
{
	struct sm_conn *sc = sm_conn_of(conn);
	char *laddr = (char *)local->start + local_offset;
	int rc = SM_RMA_FALLBACK;

	if (!sc->rma_copy) {
		rc = rma_cma(sc, laddr, remote, remote_offset, data_len, flags);
		if (rc == CCI_SUCCESS)
			return cma_finish(sc, msg_ptr, msg_len, context, flags);
		if (rc != SM_RMA_FALLBACK)
			return rc;
		SM_WARN("sm: the kernel refuses cross-memory attach to pid %d (%s); RMA on this "
		        "connection goes through the rings", (int)sc->peer_pid, strerror(errno));
		sc->rma_copy = 1;
	}
	return rma_copy_start(sc, msg_ptr, msg_len, laddr, remote, remote_offset, data_len,
	                      context, flags);
}

/* ------------------------------------------------------------------------ */
/* Copy fallback: records arriving (progress, rx_lock held)                  */
/* ------------------------------------------------------------------------ */

/* Queue the reply to the initiator: len bytes of read data at addr (none
 * for a write or a refused read), then the ACK with status. */
static void reply_queue(struct sm_conn *sc, uint32_t op_id, int status, void *addr, uint64_t len)
{
	struct sm_pend *p = sm_pend_get(sc->sep, 1);

	if (!p) {
		sm_rx_fault(sc);
		return;
	}
	p->kind = SM_PEND_REPLY;
	p->op_id = op_id;
	p->status = status;
	p->laddr = addr;
	p->total = len;
	pthread_mutex_lock(&sc->tx_lock);
	if (cci__conn_is_open(&sc->base)) {
		sm_txq_queue(sc, p);
		p = NULL;
	}
	pthread_mutex_unlock(&sc->tx_lock);
	if (p)
		sm_pend_put(sc->sep, p);
}

static void on_wr_frag(struct sm_conn *sc, struct sm_rec *rec)
{
	const uint64_t *h = sm_rec_payload(rec);
	uint64_t dlen = rec->len - SM_FRAG_HDR;
	void *addr;

	if (rec->aux != sc->wr_op) {
		sc->wr_op = rec->aux;
		sc->wr_status = CCI_SUCCESS;
	}
	if (sc->wr_status != CCI_SUCCESS)
		return;
	sc->wr_status = sm_core->rma_lookup(sc->sep->ep, h[0], h[1], dlen, CCI_FLAG_WRITE, &addr);
	if (sc->wr_status == CCI_SUCCESS)
		memcpy(addr, h + 2, dlen);
}

/* The end of a write: deliver its message (it follows the data), then ACK. */
static int on_wr_end(struct sm_conn *sc, struct sm_rec *rec)
{
	uint32_t op = rec->aux;
	int status = op == sc->wr_op ? sc->wr_status : CCI_ERR_RMA_OP;

	if (status == CCI_SUCCESS && rec->len > 0) {
		if (!sm_rx_post(sc->sep, sc, rec))
			return 0;
	} else {
		sm_rx_consume_release(sc, rec);
	}
	reply_queue(sc, op, status, NULL, 0);
	return 1;
}

static void on_rd_req(struct sm_conn *sc, struct sm_rec *rec)
{
	const uint64_t *rq = sm_rec_payload(rec);
	void *addr = NULL;
	int rc = sm_core->rma_lookup(sc->sep->ep, rq[0], rq[1], rq[2], CCI_FLAG_READ, &addr);

	reply_queue(sc, rec->aux, rc, addr, rc == CCI_SUCCESS ? rq[2] : 0);
}

/* Read data for the read at the head of our queue. */
static void on_rd_frag(struct sm_conn *sc, struct sm_rec *rec)
{
	const uint64_t *h = sm_rec_payload(rec);
	uint64_t dlen = rec->len - SM_FRAG_HDR;
	struct sm_pend *p;

	pthread_mutex_lock(&sc->tx_lock);
	p = sc->txq;
	if (p && p->kind == SM_PEND_READ && p->op_id == rec->aux && h[0] <= p->total &&
	    dlen <= p->total - h[0])
		memcpy(p->laddr + h[0], h + 2, dlen);
	pthread_mutex_unlock(&sc->tx_lock);
}

static void on_ack(struct sm_conn *sc, struct sm_rec *rec)
{
	int32_t status;
	struct sm_pend *p, **pp;

	memcpy(&status, sm_rec_payload(rec), sizeof(status));
	pthread_mutex_lock(&sc->tx_lock);
	p = sc->txq;
	if (p && p->kind == SM_PEND_READ && p->op_id == rec->aux) {
		/* Now just its completion message and completion, in queue order. */
		p->kind = SM_PEND_DONE;
		p->status = status;
		if (status != CCI_SUCCESS)
			p->len = 0;
	} else {
		for (pp = &sc->rma_wait; (p = *pp) != NULL; pp = &p->next) {
			if (p->op_id == rec->aux) {
				*pp = p->next;
				sm_core->send_done(sc->conn, p->context, p->flags, status);
				sm_pend_put(sc->sep, p);
				break;
			}
		}
	}
	sm_txq_flush_locked(sc); /* the read's completion, or a FENCE that waited for this */
	pthread_mutex_unlock(&sc->tx_lock);
}

/* A copy-RMA record; consumes it.  0 if it must be retried later. */
int sm_rma_on_record(struct sm_conn *sc, struct sm_rec *rec)
{
	uint32_t min = rec->type == SM_REC_RD_REQ ? 24u : rec->type == SM_REC_RMA_ACK ? 4u : 0u;

	if (rec->type == SM_REC_WR_FRAG || rec->type == SM_REC_RD_FRAG)
		min = SM_FRAG_HDR;
	if (rec->len < min || rec->type > SM_REC_RMA_ACK || rec->type < SM_REC_WR_FRAG) {
		sm_rx_fault(sc);
		return 0;
	}
	switch (rec->type) {
	case SM_REC_WR_END:
		return on_wr_end(sc, rec);
	case SM_REC_WR_FRAG:
		on_wr_frag(sc, rec);
		break;
	case SM_REC_RD_REQ:
		on_rd_req(sc, rec);
		break;
	case SM_REC_RD_FRAG:
		on_rd_frag(sc, rec);
		break;
	case SM_REC_RMA_ACK:
		on_ack(sc, rec);
		break;
	}
	sm_rx_consume_release(sc, rec);
	return 1;
}
