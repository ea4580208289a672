/*
 * ofi_rma.c - RMA: registrations, the exchange that gives an initiator
 * the provider key behind a core key, and fi_write/fi_read.
 *
 * The core fixes the handle (random core key, address, length, flags), so
 * an initiator cannot find the provider's key in it.  On the first RMA
 * naming a core key on a connection, the initiator asks the target
 * (MR_REQ); the target checks the key against its registrations (the
 * core's table and ours) and answers MR_REP with the provider key, the
 * address to use, the length and the access flags of the registration,
 * or a refusal.  The initiator caches the answer per connection and
 * checks every later RMA's range and access against it, never against
 * the handle's own (possibly forged) fields: a forged or deregistered
 * handle never reaches the provider.
 *
 * Deregistration: a provider must never see an RMA naming a key the
 * target closed.  libfabric 1.17's shm drops such an RMA without a
 * completion and its sender can send nothing more to that peer
 * (-FI_EAGAIN for good); its tcp fails the target's connection, and
 * with it every operation between the two endpoints.  So a registration
 * some peers learned stays open in the provider until each of them
 * confirmed it knows: the target sends MR_INVAL on every connection that
 * learned the key (conn->lent); the initiator forgets the key (a later
 * RMA naming it asks again and is refused) and, once no RMA of its own
 * naming the key is in flight, answers MR_DONE.  cci_rma_deregister
 * waits for those answers (ofi_loop.c), up to OFI_MR_DONE_WAIT_NS,
 * reading the CQ meanwhile; a connection whose peer does not answer in
 * time is broken before the key closes.  An RMA the initiator posted
 * before it read MR_INVAL therefore still lands in the registration, and
 * cci_rma_deregister returns once it has.
 *
 * Completion: the data moves with FI_DELIVERY_COMPLETE where the provider
 * takes it; the completion message (if any) is sent only after the data
 * operation completed, so it is delivered after the data.  On RO it holds
 * its place among the connection's sends from the moment of the call.
 * FENCE: the RMA waits until every earlier RMA data operation of the
 * connection has completed.
 */
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "ofi.h"

/* ---- Registrations (target side) ---- */

int ofi_rma_register(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	struct ofi_ep *sep = ofi_ep_of(ep);
	struct ofi_mr *m = calloc(1, sizeof(*m));
	uint64_t access = FI_READ | FI_WRITE;
	int rc;

	if (!m)
		return CCI_ENOMEM;
	if (reg->flags & CCI_FLAG_READ)
		access |= FI_REMOTE_READ;
	if (reg->flags & CCI_FLAG_WRITE)
		access |= FI_REMOTE_WRITE;
	m->key = cci__handle_key(&reg->handle);
	/* Ask for the core key itself: random, so a stale key never names a
	 * new registration (providers with FI_MR_PROV_KEY pick their own). */
	rc = ofi_mr_reg(sep, reg->start, reg->length, access, m->key, &m->mr);
	if (rc == CCI_ERR_RMA_HANDLE)
		rc = ofi_mr_reg(sep, reg->start, reg->length, access, 0, &m->mr);
	if (rc != CCI_SUCCESS) {
		free(m);
		return rc;
	}
	m->prov_key = fi_mr_key(m->mr);
	m->desc = fi_mr_desc(m->mr);
	pthread_mutex_lock(&sep->mr_lock);
	CCI__DLIST_PUSH(&sep->mrs, m);
	pthread_mutex_unlock(&sep->mr_lock);
	/* A peer's MR_REQ may already find reg in the core (mr_export). */
	atomic_store_explicit(&reg->priv, m, memory_order_release);
	return CCI_SUCCESS;
}

/* The registration leaves the endpoint's list (sep->mrs); *lent_p: a
 * peer learned its key (ofi_mr_invalidate then).  NULL if registering it
 * never finished. */
struct ofi_mr *ofi_mr_unlist(struct ofi_ep *sep, cci__rma_reg_t *reg, int *lent_p)
{
	struct ofi_mr *m = reg->priv;

	*lent_p = 0;
	if (!m)
		return NULL;
	pthread_mutex_lock(&sep->mr_lock);
	CCI__DLIST_UNLINK(&sep->mrs, m);
	*lent_p = m->exported;
	pthread_mutex_unlock(&sep->mr_lock);
	return m;
}

static struct ofi_lkey *key_find(struct ofi_lkey *head, uint64_t key)
{
	for (; head && head->key != key; head = head->next)
		;
	return head;
}

static int key_add(struct ofi_lkey **headp, uint64_t key)
{
	struct ofi_lkey *k;

	if (key_find(*headp, key))
		return CCI_SUCCESS;
	k = calloc(1, sizeof(*k));
	if (!k)
		return CCI_ENOMEM;
	k->key = key;
	k->next = *headp;
	*headp = k;
	return CCI_SUCCESS;
}

static void key_del(struct ofi_lkey **headp, uint64_t key)
{
	for (struct ofi_lkey **pp = headp; *pp; pp = &(*pp)->next) {
		if ((*pp)->key == key) {
			struct ofi_lkey *k = *pp;
			*pp = k->next;
			free(k);
			return;
		}
	}
}

void ofi_keys_free(struct ofi_conn *oc)
{
	for (struct ofi_lkey *k; CCI__SLIST_POP(&oc->lent, k, next);)
		free(k);
	for (struct ofi_lkey *k; CCI__SLIST_POP(&oc->done_due, k, next);)
		free(k);
}

/* MR_INVAL to oc, which learned key; 1 if its MR_DONE is to be waited
 * for.  A peer that cannot be told (a local process gone, no memory) is
 * cut off.  A local peer that is stopped is told all the same: it must
 * read MR_INVAL before any RMA it posts once it runs again (over shm the
 * send spins until it runs if it stopped inside libfabric, as any send
 * to it does).  oc->lock held. */
static int mr_inval_send(struct ofi_conn *oc, uint64_t key)
{
	struct ofi_lkey *k = key_find(oc->lent, key);
	uint8_t body[CCI__PEER_REG_KEY_LEN];
	int rc;

	assert(cci__mutex_held(&oc->lock));
	if (!k || ofi_conn_state(oc) != CCI__CONN_OPEN)
		return 0;
	if (ofi_pidw_exited(ofi_conn_pidw(oc))) {
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
		return 0;
	}
	cci__peer_reg_key_encode(key, body);
	rc = ofi_ctl_send(oc, OFI_T_MR_INVAL, 0, body, sizeof(body), 0);
	if (rc != CCI_SUCCESS) {
		ofi_conn_break(oc, rc == CCI_ERR_DISCONNECTED ? rc : CCI_ENOMEM);
		return 0;
	}
	k->inval = 1;
	return 1;
}

/*
 * Tell every peer that learned key that it is being deregistered.
 * Returns how many answers (MR_DONE) to wait for, their connections in
 * *v_p (malloc'd, a reference on each, NULL when 0).  A connection that
 * cannot be waited for (no memory for the list) is broken: its peer may
 * not post an RMA with the key once it closes.
 */
uint32_t ofi_mr_invalidate(struct ofi_ep *sep, uint64_t key, struct ofi_conn ***v_p)
{
	struct ofi_conn **v = NULL;
	uint32_t n = 0, cap = 0;

	pthread_mutex_lock(&sep->lock);
	for (struct ofi_conn *oc = sep->conns; oc; oc = oc->next) {
		pthread_mutex_lock(&oc->lock);
		if (mr_inval_send(oc, key)) {
			if (cci__grow(&v, n, &cap, 16, sizeof(*v)) == CCI_SUCCESS) {
				ofi_conn_ref(oc);
				v[n++] = oc;
			} else {
				ofi_conn_break(oc, CCI_ENOMEM);
			}
		}
		pthread_mutex_unlock(&oc->lock);
	}
	pthread_mutex_unlock(&sep->lock);
	*v_p = v;
	return n;
}

/* Has oc's peer answered MR_INVAL about key, or left? */
int ofi_mr_confirmed(struct ofi_conn *oc, uint64_t key)
{
	int done;

	pthread_mutex_lock(&oc->lock);
	done = ofi_conn_state(oc) != CCI__CONN_OPEN || !key_find(oc->lent, key);
	pthread_mutex_unlock(&oc->lock);
	return done;
}

/* oc's peer did not answer in time: it must not reach the closed key. */
void ofi_mr_unconfirmed(struct ofi_conn *oc, uint64_t key)
{
	char text[128];

	pthread_mutex_lock(&oc->lock);
	if (ofi_conn_state(oc) == CCI__CONN_OPEN) {
		OFI_WARN("ofi: the peer %s of connection %08x did not confirm the deregistration "
		         "of a region it had used within %llu ms: connection broken",
		         ofi_peer_text(oc->sep, oc->peer, text, sizeof(text)), oc->id,
		         (unsigned long long)(OFI_MR_DONE_WAIT_NS / 1000000));
		/* Told even if stopped: once it runs, it reads MR_INVAL and DISC
		 * before anything else of ours, and its RMAs in flight fail. */
		ofi_ctl_send(oc, OFI_T_DISC, 0, NULL, 0, 0);
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
	}
	key_del(&oc->lent, key);
	pthread_mutex_unlock(&oc->lock);
}

/* The provider's registration closes; reg->priv (m) is freed. */
void ofi_mr_close(cci__rma_reg_t *reg, struct ofi_mr *m)
{
	if (!m)
		return;
	fi_close(&m->mr->fid);
	reg->priv = NULL;
	free(m);
}

void ofi_mrs_free(struct ofi_ep *sep)
{
	for (struct ofi_mr *m; CCI__SLIST_POP(&sep->mrs, m, next);) {
		fi_close(&m->mr->fid);
		free(m);
	}
}

/* rma_with_reg's callback: describe reg in the MR_REP at arg for a peer
 * and mark it exported. */
static int mr_export(cci__rma_reg_t *reg, void *arg)
{
	struct cci__peer_reg_rep *rep = arg;
	struct ofi_mr *m = atomic_load_explicit(&reg->priv, memory_order_acquire);

	if (!m)
		return CCI_ERR_RMA_HANDLE; /* still being registered */
	m->exported = 1;
	rep->flags = (uint32_t)reg->flags;
	rep->rkey = m->prov_key;
	rep->addr = (uint64_t)(uintptr_t)reg->start;
	rep->len = reg->length;
	return CCI_SUCCESS;
}

/* Answer an MR_REQ; oc->lock held.  A key handed out is remembered on
 * the connection (oc->lent), for its deregistration to tell the peer;
 * one that cannot be remembered is not handed out. */
static void on_mr_req(struct ofi_conn *oc, uint32_t req_id, uint64_t key)
{
	struct cci__peer_reg_rep rep = { .key = key };
	uint8_t body[CCI__PEER_REG_REP_LEN];

	assert(cci__mutex_held(&oc->lock));
	rep.status = ofi_core->rma_with_reg(oc->sep->ep, key, mr_export, &rep);
	if (rep.status == CCI_SUCCESS && key_add(&oc->lent, key) != CCI_SUCCESS) {
		memset(&rep, 0, sizeof(rep));
		rep.key = key;
		rep.status = CCI_ERR_RMA_HANDLE;
	}
	if (!(oc->sep->mr_mode & FI_MR_VIRT_ADDR))
		rep.addr = 0; /* the initiator's offsets are the registration's */
	cci__peer_reg_rep_encode(&rep, body);
	ofi_ctl_send(oc, OFI_T_MR_REP, req_id, body, sizeof(body), 0);
}

/* ---- The initiator's cache of peer registrations (peer_reg.h) ---- */

/* cci__peer_reg_gate's callback: the MR_REQ about key. */
static int mr_req_send(void *oc, uint32_t req_id, uint64_t key)
{
	uint8_t body[CCI__PEER_REG_KEY_LEN];

	cci__peer_reg_key_encode(key, body);
	return ofi_ctl_send(oc, OFI_T_MR_REQ, req_id, body, sizeof(body), 0);
}

/* Is an RMA naming key in flight on oc? */
static int rma_key_busy(const struct ofi_conn *oc, uint64_t key)
{
	for (const struct ofi_op *op = oc->inflight; op; op = op->inext)
		if (op->kind == OFI_OP_RMA && !op->data_done && op->key == key)
			return 1;
	return 0;
}

static void mr_done_send(struct ofi_conn *oc, uint64_t key)
{
	uint8_t body[CCI__PEER_REG_KEY_LEN];

	cci__peer_reg_key_encode(key, body);
	if (ofi_conn_state(oc) == CCI__CONN_OPEN)
		ofi_ctl_send(oc, OFI_T_MR_DONE, 0, body, sizeof(body), 0);
}

/* MR_INVAL: forget the answer about key (one per key, see rmaq_head): a
 * later RMA naming it asks again and the target refuses it.  MR_DONE
 * goes back once the RMAs naming it in flight are done (rma_finish);
 * without memory to remember that, none does, and the target breaks the
 * connection when it stops waiting. */
static void on_mr_inval(struct ofi_conn *oc, uint64_t key)
{
	struct cci__peer_reg *c = cci__peer_reg_find(oc->mrc, key);

	if (c && c->state != CCI__PEER_REG_ASKED)
		free(cci__peer_reg_unlink(&oc->mrc, key));
	if (!rma_key_busy(oc, key))
		mr_done_send(oc, key);
	else if (key_add(&oc->done_due, key) != CCI_SUCCESS)
		OFI_WARN("ofi: no memory to confirm a deregistration on connection %08x", oc->id);
}

/* An RMA naming key is done: the MR_DONE waiting for it may go. */
static void mr_done_due(struct ofi_conn *oc, uint64_t key)
{
	if (!key_find(oc->done_due, key) || rma_key_busy(oc, key))
		return;
	key_del(&oc->done_due, key);
	mr_done_send(oc, key);
}

static void on_mr_rep(struct ofi_conn *oc, uint32_t req_id, const struct cci__peer_reg_rep *r)
{
	if (cci__peer_reg_learn(oc->mrc, req_id, r) != CCI_SUCCESS)
		OFI_LOG(CCI_LOG_RMA, "ofi: %08x: an RMA key answer nobody asked for: ignored", oc->id);
	ofi_rmaq_flush(oc);
}

/* The peer confirmed our MR_INVAL about key (one it was sent). */
static void on_mr_done(struct ofi_conn *oc, uint64_t key)
{
	const struct ofi_lkey *k = key_find(oc->lent, key);

	if (k && k->inval)
		key_del(&oc->lent, key);
}

/* MR_REQ, MR_REP, MR_INVAL, MR_DONE on oc, decoded (ofi_wire.c); oc->lock
 * held.  MR_DONE: the peer will not name key again (ofi_mr_confirmed). */
void ofi_on_mr_msg(struct ofi_conn *oc, const struct ofi_msg *m)
{
	if (m->hdr.type == OFI_T_MR_REQ)
		on_mr_req(oc, m->hdr.aux, m->u.key);
	else if (m->hdr.type == OFI_T_MR_REP)
		on_mr_rep(oc, m->hdr.aux, &m->u.mr_rep);
	else if (m->hdr.type == OFI_T_MR_INVAL)
		on_mr_inval(oc, m->u.key);
	else
		on_mr_done(oc, m->u.key);
}

/* ---- Operations ---- */

static ssize_t rma_post(struct ofi_conn *oc, struct ofi_op *op, uint64_t raddr, uint64_t rkey)
{
	struct ofi_ep *sep = oc->sep;
	struct iovec iov = { op->laddr, op->rlen };
	struct fi_rma_iov riov = { .addr = raddr, .len = op->rlen, .key = rkey };
	void *desc = op->ldesc;
	struct fi_msg_rma m = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
	                        .addr = oc->peer->fa, .rma_iov = &riov, .rma_iov_count = 1,
	                        .context = op };
	ssize_t rc;

	if (op->flags & CCI_FLAG_READ)
		return fi_readmsg(sep->fep, &m, FI_COMPLETION);
	rc = fi_writemsg(sep->fep, &m, sep->rma_flags);
	if ((rc == -FI_EBADFLAGS || rc == -FI_EOPNOTSUPP) && (sep->rma_flags & FI_DELIVERY_COMPLETE)) {
		/* The provider's default completion then; the completion
		 * message still follows the data on one ordered path. */
		sep->rma_flags &= ~(uint64_t)FI_DELIVERY_COMPLETE;
		rc = fi_writemsg(sep->fep, &m, sep->rma_flags);
	}
	return rc;
}

static void rma_finish(struct ofi_op *op, int status);

static void rmaq_pop(struct ofi_conn *oc)
{
	struct ofi_op *op = oc->rmaq;

	CCI__FIFO_SHIFT(&oc->rmaq, &oc->rmaq_tail, rnext);
	op->rnext = NULL;
	op->in_rmaq = 0;
}

/* Start the head of the RMA queue.  1: go on, 0: stop. */
static int rmaq_head(struct ofi_conn *oc, struct ofi_op *op)
{
	struct cci__peer_reg_rma rma = { .key = op->key, .roff = op->roff, .len = op->rlen,
	                                 .is_read = (op->flags & CCI_FLAG_READ) != 0,
	                                 .fenced = (op->flags & CCI_FLAG_FENCE) && oc->rma_busy > 0 };
	uint64_t raddr = 0, rkey = 0;
	ssize_t rc;
	int st = cci__peer_reg_gate(&oc->mrc, &oc->mr_req_next, &rma, mr_req_send, oc, &raddr,
	                            &rkey);

	if (st == CCI_EAGAIN)
		return 0; /* waits for the target's answer, or for earlier RMAs */
	if (st != CCI_SUCCESS) {
		rmaq_pop(oc);
		rma_finish(op, st);
		return 1;
	}
	if (ofi_conn_shm_peer_exited(oc)) {
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
		return 0;
	}
	rc = rma_post(oc, op, raddr, rkey);
	if (rc == -FI_EAGAIN) {
		atomic_store_explicit(&oc->sep->tx_pending, 1, memory_order_relaxed);
		return 0;
	}
	rmaq_pop(oc);
	if (rc != 0) {
		OFI_LOG(CCI_LOG_RMA, "ofi: RMA on %08x: %s", oc->id, ofi_lib.strerror((int)-rc));
		rma_finish(op, CCI_ERR_RMA_OP);
		return 1;
	}
	oc->rma_busy++;
	ofi_flight_add(oc, op);
	return 1;
}

/* oc->lock held. */
void ofi_rmaq_flush(struct ofi_conn *oc)
{
	assert(cci__mutex_held(&oc->lock));
	while (oc->rmaq && ofi_conn_state(oc) == CCI__CONN_OPEN && rmaq_head(oc, oc->rmaq))
		;
}

/*
 * The data of op moved (or failed, or was refused before moving): send
 * its completion message, or complete it.  oc->lock held.
 */
static void rma_finish(struct ofi_op *op, int status)
{
	struct ofi_conn *oc = op->oc;
	int posted = op->in_flight;

	if (posted)
		oc->rma_busy--; /* its data operation was posted */
	ofi_flight_del(oc, op);
	op->data_done = 1;
	if (posted && oc->done_due)
		mr_done_due(oc, op->key);
	if (op->status == CCI_SUCCESS)
		op->status = status;
	if (op->status == CCI_SUCCESS && op->len > 0 && ofi_conn_state(oc) == CCI__CONN_OPEN) {
		if (!op->in_msgq)
			ofi_msgq_push(oc, op);
		ofi_msgq_flush(oc);
	} else if (op->in_msgq) {
		ofi_msgq_flush(oc); /* RO: it completes when its turn comes */
	} else {
		ofi_op_report(op, op->status);
		ofi_op_done(oc->sep, op);
	}
	/* op may be gone now */
	if (status == CCI_ERR_DISCONNECTED)
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
}

/* The provider is done with op: its data moved (or failed), or its
 * completion message left (then it is ofi_tx_complete's).  Progress. */
void ofi_rma_complete(struct ofi_ep *sep, struct ofi_op *op, int status)
{
	struct ofi_conn *oc = op->oc;

	pthread_mutex_lock(&oc->lock);
	if (op->data_done) {
		pthread_mutex_unlock(&oc->lock);
		ofi_tx_complete(sep, op, status); /* never a connection request */
		return;
	}
	rma_finish(op, status);
	ofi_rmaq_flush(oc);
	pthread_mutex_unlock(&oc->lock);
}

int ofi_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
            uint64_t local_offset, const struct cci_rma_handle *remote, uint64_t remote_offset,
            uint64_t data_len, void *context, int flags)
{
	struct ofi_conn *oc = ofi_conn_of(conn);
	struct ofi_mr *lm = local->priv;
	struct ofi_op *op;

	pthread_mutex_lock(&oc->lock);
	if (ofi_conn_state(oc) != CCI__CONN_OPEN) {
		pthread_mutex_unlock(&oc->lock);
		return CCI_ERR_DISCONNECTED;
	}
	op = ofi_op_get(oc->sep, OFI_OP_RMA);
	if (!op) {
		pthread_mutex_unlock(&oc->lock);
		return CCI_ENOBUFS;
	}
	op->oc = oc;
	ofi_conn_ref(oc);
	op->context = context;
	op->flags = flags;
	op->stamp_ns = cci__engine_now(&oc->sep->eng);
	op->laddr = (char *)local->start + local_offset;
	op->ldesc = lm ? lm->desc : NULL;
	op->key = cci__handle_key(remote);
	op->roff = remote_offset;
	op->rlen = data_len;
	op->len = msg_len;
	if (msg_len)
		memcpy(ofi_op_payload(oc, op), msg_ptr, msg_len);
	op->call_seq = oc->call_seq++;
	op->in_rmaq = 1;
	CCI__FIFO_PUSH(&oc->rmaq, &oc->rmaq_tail, op, rnext);
	if (msg_len && oc->attr == CCI_CONN_ATTR_RO)
		ofi_msgq_push(oc, op);
	ofi_rmaq_flush(oc);
	pthread_mutex_unlock(&oc->lock);
	return CCI_SUCCESS;
}
