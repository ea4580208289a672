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
 * Copy mode (ini rma=copy, or the kernel refuses cross-memory attach):
 * the emulated RMA of plugins/common/emu_rma.h, each of its records one
 * SM_REC_RMA ring record (framed in sm_tx.c).  The target checks every
 * fragment with core->rma_lookup() before a byte moves and answers the
 * end of a write or of a read with DONE; the RMA completes when DONE
 * arrives, and FENCE waits for every earlier copy RMA to complete.
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
	atomic_store_explicit(&s->key, key, memory_order_release);
	atomic_store_explicit(&s->addr, addr, memory_order_release);
	atomic_store_explicit(&s->len, len, memory_order_release);
	atomic_store_explicit(&s->flags, flags, memory_order_release);
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
		v->key = atomic_load_explicit(&s->key, memory_order_acquire);
		v->addr = atomic_load_explicit(&s->addr, memory_order_acquire);
		v->len = atomic_load_explicit(&s->len, memory_order_acquire);
		v->flags = atomic_load_explicit(&s->flags, memory_order_acquire);
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
/* Copy mode: initiator                                                      */
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
	cci__emu_rma_op_init(&sc->rma, &p->rma, flags, cci__handle_key(remote), roff, local, len,
	                     msg_len);
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
/* Copy mode: records arriving (progress, rx_lock held)                      */
/* ------------------------------------------------------------------------ */

/* Queue the target's answer to WR_END (status) or RD_REQ r. */
static void answer_queue(struct sm_conn *sc, const struct cci__emu_rma_rec *r, int status)
{
	struct sm_pend *p = sm_pend_get(sc->sep, 1);

	if (!p) {
		sm_rx_fault(sc);
		return;
	}
	p->kind = SM_PEND_REPLY;
	cci__emu_rma_answer_init(&sc->rma, &p->rma, r, status);
	pthread_mutex_lock(&sc->tx_lock);
	if (cci__conn_is_open(&sc->base)) {
		sm_txq_queue(sc, p);
		p = NULL;
	}
	pthread_mutex_unlock(&sc->tx_lock);
	if (p)
		sm_pend_put(sc->sep, p);
}

/* The copy RMA of id waiting for its DONE, unlinked when unlink; tx_lock held. */
static struct sm_pend *rma_waiting(struct sm_conn *sc, uint32_t id, int unlink)
{
	struct sm_pend *p, **pp;

	for (pp = &sc->rma_wait; (p = *pp) != NULL; pp = &p->next)
		if (p->rma.id == id) {
			if (unlink)
				*pp = p->next;
			return p;
		}
	return NULL;
}

/* RD_DATA or DONE for one of our RMAs: 0, or -1 when the peer broke the
 * protocol. */
static int initiator_in(struct sm_conn *sc, const struct cci__emu_rma_rec *r, const char *data,
                        uint64_t dlen)
{
	int done = r->kind == CCI__EMU_RMA_DONE, rc = -1;
	struct sm_pend *p;

	pthread_mutex_lock(&sc->tx_lock);
	p = rma_waiting(sc, r->op, 0);
	if (p && !done) {
		rc = cci__emu_rma_read_in(&p->rma, r, data, dlen);
	} else if (p && cci__emu_rma_done_in(&sc->rma, &p->rma, r) == 0) {
		rma_waiting(sc, r->op, 1);
		p->status = p->rma.status;
		if (cci__emu_rma_msg_due(&p->rma)) {
			p->kind = SM_PEND_DONE; /* the completion message, then the completion */
			sm_txq_queue(sc, p);
		} else {
			sm_core->send_done(sc->conn, p->context, p->flags, p->status);
			sm_pend_put(sc->sep, p);
		}
		sm_txq_flush_locked(sc); /* a FENCE may have waited for this one */
		rc = 0;
	}
	pthread_mutex_unlock(&sc->tx_lock);
	return rc;
}

/* An SM_REC_RMA record; consumes it.  0 if it must be retried later. */
int sm_rma_on_record(struct sm_conn *sc, struct sm_rec *rec)
{
	const struct cci__emu_rma_limits lim = { sc->sep->mss, sc->sep->mss, 1 };
	const char *body = sm_rec_payload(rec), *data = body + CCI__EMU_RMA_HDR_LEN, *why = NULL;
	uint64_t dlen = rec->len - CCI__EMU_RMA_HDR_LEN;
	struct cci__emu_rma_rec r;
	int status;

	if (rec->type != SM_REC_RMA || rec->len < CCI__EMU_RMA_HDR_LEN ||
	    cci__emu_rma_decode((const uint8_t *)body, dlen, &lim, &r, &why) != 0) {
		SM_WARN("sm: RMA record from pid %d: %s", (int)sc->peer_pid,
		        why ? why : "unknown record type or too short");
		sm_rx_fault(sc);
		return 0;
	}
	switch (r.kind) {
	case CCI__EMU_RMA_WR_DATA:
		cci__emu_rma_write_in(&sc->rma, &r, data, dlen);
		break;
	case CCI__EMU_RMA_WR_END:
		/* Its message follows the data: delivered only if all landed. */
		status = cci__emu_rma_wr_end(&sc->rma, &r);
		if (status == CCI_SUCCESS && r.len > 0 && !sm_rx_post_at(sc->sep, sc, rec, CCI__EMU_RMA_HDR_LEN))
			return 0; /* no event to lend: again at the next drain, with the same verdict */
		answer_queue(sc, &r, status);
		if (status == CCI_SUCCESS && r.len > 0)
			return 1; /* lent with its RECV event */
		break;
	case CCI__EMU_RMA_RD_REQ:
		answer_queue(sc, &r, CCI_SUCCESS);
		break;
	default: /* RD_DATA, DONE */
		if (initiator_in(sc, &r, data, dlen) != 0) {
			SM_WARN("sm: RMA record from pid %d answers no RMA of ours", (int)sc->peer_pid);
			sm_rx_fault(sc);
			return 0;
		}
		break;
	}
	sm_rx_consume_release(sc, rec);
	return 1;
}
