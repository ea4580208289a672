/*
 * verbs_conn.c - a connection's life after set-up: its queue pair, the
 * breaking of it (a QP error, the peer's disconnect, a send timeout),
 * cci_disconnect, the return of receive buffers and their credits, and
 * freeing once nothing refers to it.  sep->lock held unless said.
 */
#include <stdlib.h>
#include <string.h>

#include "verbs.h"

void verbs_qp_add(struct verbs_ep *sep, struct verbs_conn *vc)
{
	uint32_t b = vc->qp_num % VERBS_QP_HASH;

	vc->qnext = sep->qp_hash[b];
	sep->qp_hash[b] = vc;
}

struct verbs_conn *verbs_qp_find(struct verbs_ep *sep, uint32_t qp_num)
{
	for (struct verbs_conn *vc = sep->qp_hash[qp_num % VERBS_QP_HASH]; vc; vc = vc->qnext)
		if (vc->qp && vc->qp_num == qp_num)
			return vc;
	return NULL;
}

static void qp_del(struct verbs_ep *sep, struct verbs_conn *vc);

/* Destroy vc's queue pair (its id stays); a no-op without one. */
void verbs_qp_destroy(struct verbs_conn *vc)
{
	if (!vc->qp)
		return;
	qp_del(vc->sep, vc);
	rdma_destroy_qp(vc->id);
	vc->qp = NULL;
}

static void qp_del(struct verbs_ep *sep, struct verbs_conn *vc)
{
	for (struct verbs_conn **pp = &sep->qp_hash[vc->qp_num % VERBS_QP_HASH]; *pp;
	     pp = &(*pp)->qnext) {
		if (*pp == vc) {
			*pp = vc->qnext;
			return;
		}
	}
}

/* Room in the completion queue for one more queue pair's send queue. */
static int cq_fit(struct verbs_ep *sep)
{
	int conns = 0, want, err;

	for (struct verbs_conn *vc = sep->conns; vc; vc = vc->next)
		conns += vc->qp != NULL;
	if (conns < sep->cq_conns)
		return CCI_SUCCESS;
	want = (int)(sep->srq_max + sep->sq_depth * (uint32_t)(sep->cq_conns * 2));
	err = ibv_resize_cq(sep->cq, want); /* an errno value */
	if (err != 0) {
		VERBS_WARN("verbs: %s: the completion queue cannot grow to %d entries: %s",
		           sep->dev->hca, want, strerror(err));
		return CCI_ENOMEM;
	}
	sep->cq_conns *= 2;
	return CCI_SUCCESS;
}

/* An RC queue pair for vc's id on the endpoint's CQ and SRQ. */
int verbs_qp_create(struct verbs_conn *vc)
{
	struct verbs_ep *sep = vc->sep;
	struct ibv_qp_init_attr qa = {
		.send_cq = sep->cq, .recv_cq = sep->cq, .srq = sep->srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = sep->sq_depth, .max_send_sge = 1, .max_recv_sge = 1,
		         .max_inline_data = sep->max_inline },
	};
	int rc = cq_fit(sep);

	if (rc != CCI_SUCCESS)
		return rc;
	if (rdma_create_qp(vc->id, sep->pd, &qa) != 0) {
		rc = cci__errno_status(errno);
		VERBS_WARN("verbs: %s: cannot create a queue pair: %s", vc->peer, strerror(errno));
		return rc;
	}
	vc->qp = vc->id->qp;
	vc->qp_num = vc->qp->qp_num;
	vc->max_inline = qa.cap.max_inline_data;
	verbs_qp_add(sep, vc);
	return CCI_SUCCESS;
}

/* Stop using the queue pair and tell the peer (rdma_disconnect). */
static void cm_disconnect(struct verbs_conn *vc)
{
	if (vc->cm_connected) {
		vc->cm_connected = 0;
		rdma_disconnect(vc->id);
	}
}

void verbs_conn_down(struct verbs_conn *vc)
{
	vc->step = VERBS_STEP_DOWN;
	verbs_tx_fail_all(vc, vc->tx_err ? vc->tx_err : CCI_ERR_DISCONNECTED, 0);
	if (!vc->close_when_idle || !vc->flight)
		cm_disconnect(vc);
}

void verbs_conn_break(struct verbs_conn *vc, int status)
{
	if (!cci__conn_is_open(&vc->base))
		return;
	VERBS_LOG(CCI_LOG_CONN, "verbs: connection to %s broken: %s", vc->peer,
	          verbs_core->status_text(status));
	cci__conn_move(&vc->base, CCI__CONN_BROKEN, verbs_core, vc->conn);
	vc->tx_err = status;
	vc->step = VERBS_STEP_DOWN;
	verbs_tx_fail_all(vc, status, 1);
	cm_disconnect(vc);
}

/* Tell the peer its credits once enough are owed (they also ride on
 * every message). */
void verbs_credit_flush(struct verbs_conn *vc)
{
	if (vc->step == VERBS_STEP_OPEN && cci__credit_explicit_due(&vc->cr))
		verbs_ctl_send(vc, VERBS_T_CREDIT, 0, NULL, 0);
}

int verbs_disconnect(cci__conn_t *conn)
{
	struct verbs_conn *vc = verbs_conn_of(conn);
	struct verbs_ep *sep = vc->sep;

	pthread_mutex_lock(&sep->lock);
	cci__conn_move(&vc->base, CCI__CONN_CLOSED, verbs_core, conn);
	verbs_tx_fail_all(vc, CCI_ERR_DISCONNECTED, 0);
	verbs_held_drop(sep, vc);
	vc->step = VERBS_STEP_DOWN;
	cm_disconnect(vc);
	vc->conn = NULL;
	pthread_mutex_unlock(&sep->lock);
	verbs_core->conn_release(conn);
	return CCI_SUCCESS;
}

void verbs_conn_timeouts_changed(cci__conn_t *conn)
{
	struct verbs_conn *vc = verbs_conn_of(conn);

	cci__conn_keepalive_changed(&vc->base, conn, &vc->sep->lock);
}

/* The core hands back a RECV event's buffer (any thread, no lock held). */
void verbs_recv_returned(cci__evt_t *evt)
{
	struct verbs_ep *sep = verbs_ep_of(evt->ep);
	struct verbs_rxbuf *rb = evt->rx_buf;

	cci__lender_return(&sep->lend, &rb->back);
	pthread_mutex_lock(&sep->lock);
	verbs_rx_collect(sep);
	pthread_mutex_unlock(&sep->lock);
}

/* Destroy vc's queue pair and id and free it; its operations are free
 * once the queue pair is gone. */
static void conn_free(struct verbs_ep *sep, struct verbs_conn *vc)
{
	verbs_qp_destroy(vc);
	verbs_tx_fail_all(vc, CCI_ERR_DISCONNECTED, 0);
	while (vc->flight) {
		struct verbs_op *op = vc->flight;
		vc->flight = op->next;
		verbs_op_put(sep, op);
	}
	if (vc->id)
		rdma_destroy_id(vc->id);
	cci__peer_reg_free_all(&vc->mrc);
	free(vc->req_data);
	free(vc);
}

/* May vc be freed now?  Down, released, unreferenced, disconnected, and
 * its queue pair has handed back the shared queue's buffers it held
 * (IBV_EVENT_QP_LAST_WQE_REACHED, or VERBS_DRAIN_NS passed without it). */
static int conn_done(struct verbs_conn *vc, uint64_t now)
{
	if (vc->step != VERBS_STEP_DOWN || vc->conn || vc->refs || vc->cm_connected)
		return 0;
	if (!vc->qp || vc->qp_drained)
		return 1;
	if (!vc->reap_ns)
		vc->reap_ns = now;
	return now - vc->reap_ns >= VERBS_DRAIN_NS;
}

/* Free the connections that are done (the engine thread, from its tick). */
void verbs_conns_reap(struct verbs_ep *sep, uint64_t now)
{
	for (struct verbs_conn **pp = &sep->conns; *pp;) {
		struct verbs_conn *vc = *pp;

		if (vc->close_when_idle && !vc->flight)
			cm_disconnect(vc);
		if (!conn_done(vc, now)) {
			pp = &vc->next;
			continue;
		}
		*pp = vc->next;
		conn_free(sep, vc);
	}
}

/* The endpoint closes: every connection goes, without events. */
void verbs_conns_free_all(struct verbs_ep *sep)
{
	while (sep->conns) {
		struct verbs_conn *vc = sep->conns;

		sep->conns = vc->next;
		verbs_held_drop(sep, vc);
		vc->step = VERBS_STEP_DOWN;
		cm_disconnect(vc);
		if (vc->conn) {
			verbs_core->conn_release(vc->conn);
			vc->conn = NULL;
		}
		conn_free(sep, vc);
	}
}
