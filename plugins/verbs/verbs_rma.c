/*
 * verbs_rma.c - RMA: registrations (ibv_reg_mr), the exchange that turns
 * a peer's CCI handle into its memory region's remote key (MR_REQ, the
 * target checks the core key, range and access before it answers,
 * MR_REP; MR_INVAL when it deregisters), and RDMA WRITE and READ.
 *
 * An RMA waits on vc->rmaq until the peer's answer for its handle is
 * known and, with CCI_FLAG_FENCE, until every earlier RMA of the
 * connection completed (cci__peer_reg_gate, which checks it then); it
 * then joins the send queue (verbs_tx.c posts its data and completion
 * message).  The messages' bodies are plugins/common/peer_reg_wire.h's.
 * sep->lock held unless said.
 */
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

int verbs_rma_register(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	struct verbs_ep *sep = verbs_ep_of(ep);
	struct verbs_mr *m = calloc(1, sizeof(*m));
	int access = IBV_ACCESS_LOCAL_WRITE;

	if (!m)
		return CCI_ENOMEM;
	if (reg->flags & CCI_FLAG_WRITE)
		access |= IBV_ACCESS_REMOTE_WRITE;
	if (reg->flags & CCI_FLAG_READ)
		access |= IBV_ACCESS_REMOTE_READ;
	m->mr = ibv_reg_mr(sep->pd, reg->start, reg->length, access);
	if (!m->mr) {
		int rc = cci__errno_status(errno);

		VERBS_LOG(CCI_LOG_RMA, "verbs: ibv_reg_mr of %llu bytes: %s",
		          (unsigned long long)reg->length, strerror(errno));
		free(m);
		return rc == CCI_ERROR ? CCI_ENOMEM : rc;
	}
	m->reg = reg;
	m->key = cci__handle_key(&reg->handle);
	reg->priv = m;
	pthread_mutex_lock(&sep->lock);
	m->next = sep->mrs;
	sep->mrs = m;
	pthread_mutex_unlock(&sep->lock);
	return CCI_SUCCESS;
}

/* Peers that may hold the key are told it is gone before the region is. */
void verbs_rma_deregister(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	struct verbs_ep *sep = verbs_ep_of(ep);
	struct verbs_mr *m = reg->priv;
	uint8_t body[CCI__PEER_REG_KEY_LEN];

	if (!m)
		return;
	cci__peer_reg_key_encode(m->key, body);
	pthread_mutex_lock(&sep->lock);
	for (struct verbs_mr **pp = &sep->mrs; *pp; pp = &(*pp)->next) {
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	}
	for (struct verbs_conn *vc = sep->conns; vc; vc = vc->next)
		if (vc->step == VERBS_STEP_OPEN)
			verbs_ctl_send(vc, VERBS_T_MR_INVAL, 0, body, sizeof(body));
	pthread_mutex_unlock(&sep->lock);
	ibv_dereg_mr(m->mr);
	free(m);
	reg->priv = NULL;
}

void verbs_mrs_free(struct verbs_ep *sep)
{
	while (sep->mrs) {
		struct verbs_mr *m = sep->mrs;

		sep->mrs = m->next;
		ibv_dereg_mr(m->mr);
		m->reg->priv = NULL;
		free(m);
	}
}

/* cci__peer_reg_gate's callback: the MR_REQ about key. */
static int mr_req_send(void *vc, uint32_t req_id, uint64_t key)
{
	uint8_t body[CCI__PEER_REG_KEY_LEN];

	cci__peer_reg_key_encode(key, body);
	return verbs_ctl_send(vc, VERBS_T_MR_REQ, req_id, body, sizeof(body));
}

static void rmaq_pop(struct verbs_conn *vc)
{
	CCI__FIFO_SHIFT(&vc->rmaq, &vc->rmaq_tail, next);
}

/* Fail op before anything was posted. */
static void rma_refuse(struct verbs_conn *vc, struct verbs_op *op, int status)
{
	VERBS_LOG(CCI_LOG_RMA, "verbs: %s: RMA refused before posting: %s", vc->peer,
	          verbs_core->status_text(status));
	if (vc->conn && !op->reported)
		verbs_core->send_done(vc->conn, op->context, op->flags, status);
	verbs_op_put(vc->sep, op);
}

/* Move what may go from the RMA queue to the send queue, in order. */
void verbs_rmaq_flush(struct verbs_conn *vc)
{
	while (vc->rmaq && vc->step == VERBS_STEP_OPEN) {
		struct verbs_op *op = vc->rmaq;
		struct cci__peer_reg_rma rma = { .key = op->key, .roff = op->roff, .len = op->rlen,
		                                 .is_read = op->is_read,
		                                 .fenced = op->fence && vc->rma_busy };
		uint64_t rkey = 0;
		int st = cci__peer_reg_gate(&vc->mrc, &vc->mr_req_next, &rma, mr_req_send, vc,
		                            &op->raddr, &rkey);

		if (st == CCI_EAGAIN)
			break;
		rmaq_pop(vc);
		if (st != CCI_SUCCESS) {
			rma_refuse(vc, op, st);
			continue;
		}
		op->rkey = (uint32_t)rkey; /* within VERBS_RKEY_MAX: checked by the decoder */
		vc->rma_busy++;
		verbs_txq_push(vc, op);
	}
	verbs_txq_flush(vc);
}

int verbs_rma(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len, cci__rma_reg_t *local,
              uint64_t local_offset, const struct cci_rma_handle *remote, uint64_t remote_offset,
              uint64_t data_len, void *context, int flags)
{
	struct verbs_conn *vc = verbs_conn_of(conn);
	struct verbs_ep *sep = vc->sep;
	struct verbs_mr *m = local->priv;
	struct verbs_op *op;
	int rc = CCI_SUCCESS;

	pthread_mutex_lock(&sep->lock);
	if (!cci__conn_is_open(&vc->base)) {
		rc = vc->tx_err ? vc->tx_err : CCI_ERR_DISCONNECTED;
	} else if (!m) {
		rc = CCI_ERR_RMA_HANDLE;
	} else if (!(op = verbs_op_get(sep, 1))) {
		rc = CCI_ENOBUFS;
	} else {
		*op = (struct verbs_op){ .buf = op->buf, .lkey = op->lkey, .user = 1,
		                         .kind = VERBS_OP_RMA, .type = VERBS_T_MSG,
		                         .spends_credit = msg_len != 0, .flags = flags,
		                         .context = context, .is_read = (flags & CCI_FLAG_READ) != 0,
		                         .fence = (flags & CCI_FLAG_FENCE) != 0, .lmr = m->mr,
		                         .laddr = (char *)local->start + local_offset,
		                         .key = cci__handle_key(remote), .roff = remote_offset,
		                         .rlen = data_len, .stamp_ns = cci__now_ns() };
		if (msg_len) {
			memcpy(op->buf + VERBS_HDR_LEN, msg_ptr, msg_len);
			op->len = VERBS_HDR_LEN + msg_len;
		}
		CCI__FIFO_PUSH(&vc->rmaq, &vc->rmaq_tail, op, next);
		verbs_rmaq_flush(vc);
	}
	pthread_mutex_unlock(&sep->lock);
	cci__engine_app_active(&sep->eng);
	return rc;
}

/* Answer an MR_REQ: only a key of ours, registered now, gets its remote key. */
static void on_mr_req(struct verbs_conn *vc, uint32_t req_id, const uint8_t *body)
{
	struct cci__peer_reg_rep rep = { .status = CCI_ERR_RMA_HANDLE,
	                                 .key = cci__peer_reg_key_decode(body) };
	uint8_t out[CCI__PEER_REG_REP_LEN];
	void *addr;

	if (verbs_core->rma_lookup(vc->sep->ep, rep.key, 0, 1, 0, &addr) == CCI_SUCCESS) {
		for (struct verbs_mr *m = vc->sep->mrs; m; m = m->next) {
			if (m->key != rep.key)
				continue;
			rep = (struct cci__peer_reg_rep){ .status = CCI_SUCCESS, .key = m->key,
			                             .flags = (uint32_t)m->reg->flags, .rkey = m->mr->rkey,
			                             .addr = (uint64_t)(uintptr_t)m->reg->start,
			                             .len = m->reg->length };
			break;
		}
	}
	if (rep.status != CCI_SUCCESS)
		VERBS_LOG(CCI_LOG_RMA, "verbs: %s asked for an unknown RMA key: refused", vc->peer);
	cci__peer_reg_rep_encode(&rep, out);
	verbs_ctl_send(vc, VERBS_T_MR_REP, req_id, out, sizeof(out));
}

void verbs_rma_on_msg(struct verbs_conn *vc, const struct verbs_hdr *h, const uint8_t *body)
{
	struct cci__peer_reg_rep rep;
	const char *why = NULL;

	switch (h->type) {
	case VERBS_T_MR_REQ:
		on_mr_req(vc, h->aux, body);
		break;
	case VERBS_T_MR_REP:
		if (cci__peer_reg_rep_decode(body, h->len, VERBS_RKEY_MAX, &rep, &why) != CCI_SUCCESS)
			VERBS_LOG(CCI_LOG_RMA, "verbs: %s: an RMA key answer refused: %s", vc->peer, why);
		else if (cci__peer_reg_learn(vc->mrc, h->aux, &rep) != CCI_SUCCESS)
			VERBS_LOG(CCI_LOG_RMA, "verbs: %s: an RMA key answer nobody asked for: ignored",
			          vc->peer);
		verbs_rmaq_flush(vc);
		break;
	case VERBS_T_MR_INVAL:
		free(cci__peer_reg_unlink(&vc->mrc, cci__peer_reg_key_decode(body)));
		break;
	default:
		break;
	}
}
