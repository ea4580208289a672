/*
 * verbs_ep.c - endpoints and progress.
 *
 * ep_create binds a listening rdma_cm id to the device's address (which
 * picks the adapter), then opens on that adapter a protection domain, a
 * completion queue with its completion channel, a shared receive queue
 * of pre-posted buffers and a pool of send buffers.  The engine thread
 * (plugins/common/engine.h) watches three descriptors: the rdma_cm event
 * channel (verbs_hs.c), the completion channel, and the adapter's async
 * event fd (device and port failures); its tick runs cci__conn_tick for
 * every connection (connect deadline, send timeout, keepalive) and frees
 * connections that are done.  The completion channel's fd is also in the
 * OS handle, so an application blocked on it wakes with the adapter.
 *
 * progress() and the thread both drain the CQ, under sep->lock, and hand
 * each completion to the file whose concern it is: receives to
 * verbs_rx.c, verbs_hs.c or verbs_rma.c by message type, sends to
 * verbs_tx.c.
 *
 * progress = manual (an ini key, progress_key.h) starts no thread:
 * progress() runs the loop (cci__engine_poll).  With an OS handle the
 * loop's descriptors join the completion channel in it
 * (cci__engine_handle_join), and arm() sets its timer for the tick while
 * a connection is timed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "verbs.h"

#define VERBS_CQ_CONNS 16    /* queue pairs the CQ is first sized for */
#define VERBS_INLINE 64u     /* inline data asked of each queue pair */
#define VERBS_RD_ATOM_MAX 16

/* Endpoints of this process, for device events read by any of them. */
static pthread_mutex_t verbs_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct verbs_ep *verbs_live;

static int nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? CCI_ERROR : CCI_SUCCESS;
}

static int wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS: return CCI_SUCCESS;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_WR_FLUSH_ERR: return CCI_ERR_DISCONNECTED;
	case IBV_WC_RNR_RETRY_EXC_ERR: return CCI_ERR_RNR;
	case IBV_WC_REM_ACCESS_ERR: return CCI_ERR_RMA_HANDLE;
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_INV_REQ_ERR: return CCI_ERR_RMA_OP;
	default: return CCI_ERROR;
	}
}

/* ---- Completions ---- */

/* A bad message from vc's peer: the connection goes (never the endpoint). */
static void protocol_error(struct verbs_conn *vc, const char *why)
{
	VERBS_WARN("verbs: bad message from %s: %s; connection closed", vc->peer, why);
	if (vc->step == VERBS_STEP_OPEN)
		verbs_conn_break(vc, CCI_ERR_DISCONNECTED);
	else
		verbs_hs_fail(vc, CCI_ERROR);
}

/* Check h against vc's state and credits; NULL or why it is refused. */
static const char *msg_check(struct verbs_conn *vc, const struct verbs_hdr *h)
{
	if (!verbs_fsm_msg_ok(vc->step, vc->is_client, h->type))
		return "a message its connection's state does not allow";
	if (cci__credit_in(&vc->cr, h->credits) != CCI_SUCCESS)
		return "more credits returned than were granted";
	if (verbs_type_spends_credit(h->type) && cci__credit_rx(&vc->cr) != CCI_SUCCESS)
		return "more messages than the credits granted";
	if (h->type == VERBS_T_MSG && h->seq != vc->rx_seq)
		return "a message out of sequence";
	return NULL;
}

/* A control message (not MSG) in rb's buffer; rb is reposted. */
static void on_ctl(struct verbs_ep *sep, struct verbs_conn *vc, struct verbs_rxbuf *rb,
                   const struct verbs_hdr *h)
{
	const uint8_t *body = (const uint8_t *)rb->data + VERBS_HDR_LEN;

	if (h->type == VERBS_T_REQ || h->type == VERBS_T_ACCEPT || h->type == VERBS_T_REJECT)
		verbs_hs_on_msg(vc, h, body);
	else if (h->type == VERBS_T_PING)
		verbs_ctl_send(vc, VERBS_T_PONG, 0, NULL, 0);
	else if (h->type >= VERBS_T_MR_REQ)
		verbs_rma_on_msg(vc, h, body);
	verbs_rx_post(sep, rb);
	if (verbs_type_spends_credit(h->type))
		cci__credit_returned(&vc->cr);
}

static void on_recv(struct verbs_ep *sep, const struct ibv_wc *wc)
{
	struct verbs_rxbuf *rb = (struct verbs_rxbuf *)(uintptr_t)wc->wr_id;
	struct verbs_conn *vc = verbs_qp_find(sep, wc->qp_num);
	struct verbs_hdr h;
	const char *why = NULL;

	if (wc->status != IBV_WC_SUCCESS || !vc || vc->step == VERBS_STEP_DOWN) {
		/* A connection closed here may still get what its peer sent
		 * before it heard: dropped with the connection. */
		if (vc && vc->step != VERBS_STEP_DOWN && wc->status != IBV_WC_WR_FLUSH_ERR)
			protocol_error(vc, ibv_wc_status_str(wc->status));
		else if (vc && wc->status == IBV_WC_SUCCESS)
			VERBS_LOG(CCI_LOG_CONN, "verbs: %s: a message after the connection closed, "
			          "dropped with it", vc->peer);
		verbs_rx_post(sep, rb);
		return;
	}
	if (verbs_hdr_decode(rb->data, wc->byte_len, sep->mss, &h) != CCI_SUCCESS)
		why = "a malformed header";
	else
		why = msg_check(vc, &h);
	if (why) {
		protocol_error(vc, why);
		verbs_rx_post(sep, rb);
		return;
	}
	cci__ct_heard(&vc->base.timers, cci__now_ns());
	if (h.type == VERBS_T_MSG) {
		vc->rx_seq++;
		verbs_rx_deliver(sep, vc, rb, h.len);
	} else {
		on_ctl(sep, vc, rb, &h);
	}
	verbs_rmaq_flush(vc);
	verbs_credit_flush(vc);
	verbs_txq_flush(vc);
}

static void on_send(struct verbs_ep *sep, const struct ibv_wc *wc)
{
	struct verbs_conn *vc = verbs_qp_find(sep, wc->qp_num);
	int st = wc_status(wc->status);

	if (!vc)
		return;
	verbs_tx_complete(vc, wc->wr_id, st);
	if (st != CCI_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR) {
		VERBS_LOG(CCI_LOG_CONN, "verbs: %s: work request failed: %s", vc->peer,
		          ibv_wc_status_str(wc->status));
		if (vc->step == VERBS_STEP_OPEN)
			verbs_conn_break(vc, st);
		else
			verbs_hs_fail(vc, st);
		return;
	}
	verbs_rmaq_flush(vc);
	verbs_txq_flush(vc);
}

/* Drain the CQ; sep->lock held.  Returns the completions handled. */
static int cq_drain(struct verbs_ep *sep)
{
	struct ibv_wc wcs[VERBS_CQ_BATCH];
	int n, total = 0;

	while ((n = ibv_poll_cq(sep->cq, VERBS_CQ_BATCH, wcs)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wcs[i].opcode & IBV_WC_RECV)
				on_recv(sep, &wcs[i]);
			else
				on_send(sep, &wcs[i]);
		}
		total += n;
	}
	verbs_held_drain(sep);
	return total;
}

int verbs_progress(cci__ep_t *ep)
{
	struct verbs_ep *sep = verbs_ep_of(ep);
	int full;

	cci__engine_poll(&sep->eng); /* progress = manual: the loop's work */
	cci__engine_app_active(&sep->eng);
	pthread_mutex_lock(&sep->lock);
	cq_drain(sep);
	full = !cci__lender_can_take(&sep->lend);
	pthread_mutex_unlock(&sep->lock);
	return full ? CCI_ENOBUFS : CCI_SUCCESS;
}

/* progress = manual: does a connection wait for the tick (a connect, a
 * keepalive, a send's timeout)?  sep->lock held. */
static int manual_timed(const struct verbs_ep *sep)
{
	for (const struct verbs_conn *vc = sep->conns; vc; vc = vc->next)
		if (vc->step != VERBS_STEP_OPEN || vc->base.timers.ka_us || vc->txq || vc->flight ||
		    vc->rmaq)
			return 1;
	return 0;
}

/* The CQ notifies on its next completion after each event is handled
 * (the engine thread re-arms it before draining), so arming the OS handle
 * only has to look for what is already there, and, with progress =
 * manual, set the handle's timer for the tick while something is timed. */
int verbs_arm(cci__ep_t *ep)
{
	struct verbs_ep *sep = verbs_ep_of(ep);
	int n, timed;

	pthread_mutex_lock(&sep->lock);
	n = cq_drain(sep);
	timed = manual_timed(sep);
	pthread_mutex_unlock(&sep->lock);
	cci__engine_handle_arm(&sep->eng, timed ? (uint64_t)(VERBS_TICK_S * 1e9) : 0);
	return n > 0 ? CCI_EAGAIN : CCI_SUCCESS;
}

/* ---- The engine thread ---- */

static void on_cq_fd(struct ev_loop *loop, ev_io *w, int revents)
{
	struct verbs_ep *sep = w->data;
	struct ibv_cq *cq;
	void *cq_ctx;

	(void)loop;
	(void)revents;
	if (ibv_get_cq_event(sep->cc, &cq, &cq_ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		ibv_req_notify_cq(cq, 0);
	}
	pthread_mutex_lock(&sep->lock);
	cq_drain(sep);
	pthread_mutex_unlock(&sep->lock);
}

static void on_cm_fd(struct ev_loop *loop, ev_io *w, int revents)
{
	(void)loop;
	(void)revents;
	verbs_cm_drain(w->data);
}

/* What a device event says, copied so that the event can be acked
 * before any endpoint's lock is taken (destroying a queue pair waits for
 * its events to be acked). */
struct verbs_dev_event {
	enum ibv_event_type type;
	uint32_t qp_num;
	int port;
};

/* A device event for sep; sep->lock held. */
static void dev_event(struct verbs_ep *sep, const struct verbs_dev_event *ae)
{
	struct verbs_conn *vc;

	switch (ae->type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
		vc = verbs_qp_find(sep, ae->qp_num);
		if (vc)
			verbs_conn_break(vc, CCI_ERR_DISCONNECTED);
		break;
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		vc = verbs_qp_find(sep, ae->qp_num);
		if (vc)
			vc->qp_drained = 1;
		break;
	case IBV_EVENT_PORT_ERR:
		if (ae->port == sep->port)
			sep->failed = 1;
		break;
	case IBV_EVENT_DEVICE_FATAL:
	case IBV_EVENT_CQ_ERR:
	case IBV_EVENT_SRQ_ERR:
		sep->failed = 1;
		break;
	default:
		break;
	}
}

/* Read one async event of the adapter and give it to every endpoint on it. */
static void on_async_fd(struct ev_loop *loop, ev_io *w, int revents)
{
	struct verbs_ep *me = w->data;
	struct ibv_async_event ae;
	struct verbs_dev_event de = { 0 };

	(void)loop;
	(void)revents;
	if (ibv_get_async_event(me->ctx, &ae) != 0)
		return;
	de.type = ae.event_type;
	if (de.type == IBV_EVENT_QP_FATAL || de.type == IBV_EVENT_QP_REQ_ERR ||
	    de.type == IBV_EVENT_QP_ACCESS_ERR || de.type == IBV_EVENT_QP_LAST_WQE_REACHED)
		de.qp_num = ae.element.qp->qp_num;
	else if (de.type == IBV_EVENT_PORT_ERR || de.type == IBV_EVENT_PORT_ACTIVE)
		de.port = ae.element.port_num;
	ibv_ack_async_event(&ae);
	VERBS_LOG(CCI_LOG_EP, "verbs: %s: %s", me->dev->hca, ibv_event_type_str(de.type));
	pthread_mutex_lock(&verbs_live_lock);
	for (struct verbs_ep *sep = verbs_live; sep; sep = sep->live_next) {
		if (sep->ctx != me->ctx)
			continue;
		pthread_mutex_lock(&sep->lock);
		dev_event(sep, &de);
		pthread_mutex_unlock(&sep->lock);
	}
	pthread_mutex_unlock(&verbs_live_lock);
}

static uint64_t tick_oldest(void *pc)
{
	return verbs_tx_oldest(pc);
}

static void tick_ping(void *pc)
{
	verbs_ctl_send(pc, VERBS_T_PING, 0, NULL, 0);
}

static void tick_connect_expired(void *pc)
{
	verbs_hs_fail(pc, CCI_ETIMEDOUT);
}

static void tick_send_expired(void *pc)
{
	verbs_conn_break(pc, CCI_ETIMEDOUT);
}

static const struct cci__conn_tick_ops verbs_tick_ops = {
	.oldest_send_ns = tick_oldest,
	.ping = tick_ping,
	.connect_expired = tick_connect_expired,
	.send_expired = tick_send_expired,
};

/* The device failed: every connection breaks, the application is told once. */
static void dev_failed(struct verbs_ep *sep)
{
	for (struct verbs_conn *vc = sep->conns; vc; vc = vc->next) {
		if (vc->step == VERBS_STEP_OPEN)
			verbs_conn_break(vc, CCI_ERR_DEVICE_DEAD);
		else
			verbs_hs_fail(vc, CCI_ERR_DEVICE_DEAD);
	}
	VERBS_WARN("verbs: device %s port %u failed under an endpoint", sep->dev->hca, sep->port);
	verbs_core->post_dev_failed(sep->ep);
}

static void on_tick(void *owner, uint64_t now, int app_polled)
{
	struct verbs_ep *sep = owner;

	(void)app_polled;
	pthread_mutex_lock(&sep->lock);
	for (struct verbs_conn *vc = sep->conns; vc; vc = vc->next)
		cci__conn_tick(&vc->base, vc->conn, verbs_core, &verbs_tick_ops, vc, now);
	if (sep->failed == 1) {
		sep->failed = 2;
		dev_failed(sep);
	}
	cq_drain(sep);
	verbs_conns_reap(sep, now);
	pthread_mutex_unlock(&sep->lock);
}

static void on_cmd(void *owner, unsigned cmd)
{
	(void)owner;
	(void)cmd;
}

static void watch(struct verbs_ep *sep, ev_io *w, void (*cb)(struct ev_loop *, ev_io *, int),
                  int fd)
{
	ev_io_init(w, cb, fd, EV_READ);
	w->data = sep;
	ev_io_start(sep->eng.loop, w);
}

static int engine_start(struct verbs_ep *sep)
{
	int rc = cci__engine_init(&sep->eng, sep, VERBS_TICK_S, !sep->dev->manual, on_cmd, on_tick);

	if (rc != CCI_SUCCESS)
		return rc;
	watch(sep, &sep->cm_w, on_cm_fd, sep->cm_ch->fd);
	watch(sep, &sep->cq_w, on_cq_fd, sep->cc->fd);
	watch(sep, &sep->async_w, on_async_fd, sep->ctx->async_fd);
	if (sep->ep->os_epfd >= 0)
		rc = cci__engine_handle_join(&sep->eng, sep->ep->os_epfd);
	if (rc == CCI_SUCCESS)
		rc = cci__engine_start(&sep->eng);
	if (rc != CCI_SUCCESS) {
		ev_io_stop(sep->eng.loop, &sep->cm_w);
		ev_io_stop(sep->eng.loop, &sep->cq_w);
		ev_io_stop(sep->eng.loop, &sep->async_w);
		cci__engine_fini(&sep->eng);
	}
	return rc;
}

/* ---- Creating and destroying ---- */

/* The listening id, bound to the device's address and port (service). */
static int listen_open(struct verbs_ep *sep, const char *service)
{
	struct sockaddr_storage ss;
	char *end = NULL;
	unsigned long port = 0;

	if (service) {
		port = strtoul(service, &end, 10);
		if (!*service || *end || port > 65535)
			return CCI_EINVAL;
	}
	if (cci__addr_resolve(sep->dev->ip, (uint16_t)port, AF_UNSPEC, &ss, NULL) != CCI_SUCCESS)
		return CCI_EADDRNOTAVAIL;
	sep->cm_ch = rdma_create_event_channel();
	if (!sep->cm_ch || nonblock(sep->cm_ch->fd) != CCI_SUCCESS)
		return CCI_ENODEV;
	if (rdma_create_id(sep->cm_ch, &sep->listen_id, NULL, RDMA_PS_TCP) != 0)
		return cci__errno_status(errno);
	if (rdma_bind_addr(sep->listen_id, (struct sockaddr *)&ss) != 0 ||
	    rdma_listen(sep->listen_id, VERBS_BACKLOG) != 0) {
		int err = errno;

		VERBS_WARN("verbs: cannot listen on %s port %lu: %s", sep->dev->ip, port,
		           strerror(err));
		return err == EADDRINUSE ? CCI_EBUSY : CCI_EADDRNOTAVAIL;
	}
	sep->ctx = sep->listen_id->verbs;
	if (!sep->ctx || strcmp(ibv_get_device_name(sep->ctx->device), sep->dev->hca) != 0) {
		VERBS_WARN("verbs: address %s is not on adapter %s", sep->dev->ip, sep->dev->hca);
		return CCI_ENODEV;
	}
	sep->port = sep->listen_id->port_num ? sep->listen_id->port_num : sep->dev->port;
	return CCI_SUCCESS;
}

/* Sizes from the adapter's limits. */
static int limits_read(struct verbs_ep *sep)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;

	if (ibv_query_device(sep->ctx, &da) != 0 || ibv_query_port(sep->ctx, sep->port, &pa) != 0)
		return CCI_ENODEV;
	if (da.max_srq_wr <= 0) {
		VERBS_WARN("verbs: %s has no shared receive queues", sep->dev->hca);
		return CCI_ENODEV;
	}
	/* RMA chunks: a work request's length is 32 bits */
	sep->max_msg = pa.max_msg_sz && pa.max_msg_sz < (1u << 30) ? pa.max_msg_sz : (1u << 30);
	sep->rd_atom = (uint32_t)(da.max_qp_rd_atom < da.max_qp_init_rd_atom ? da.max_qp_rd_atom
	                                                                      : da.max_qp_init_rd_atom);
	if (sep->rd_atom > VERBS_RD_ATOM_MAX)
		sep->rd_atom = VERBS_RD_ATOM_MAX;
	sep->srq_max = (uint32_t)da.max_srq_wr;
	if (sep->srq_max > VERBS_BUF_COUNT_MAX + VERBS_RX_RESERVE)
		sep->srq_max = VERBS_BUF_COUNT_MAX + VERBS_RX_RESERVE;
	sep->sq_depth = sep->dev->sq_depth < (uint32_t)da.max_qp_wr ? sep->dev->sq_depth
	                                                            : (uint32_t)da.max_qp_wr;
	sep->cq_conns = VERBS_CQ_CONNS;
	sep->cq_depth = sep->srq_max + sep->sq_depth * VERBS_CQ_CONNS;
	if (sep->cq_depth > (uint32_t)da.max_cqe)
		sep->cq_depth = (uint32_t)da.max_cqe;
	if (sep->dev->recv_count + VERBS_RX_RESERVE > sep->srq_max)
		return CCI_ENOMEM;
	return CCI_SUCCESS;
}

static int queues_open(struct verbs_ep *sep)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = sep->srq_max, .max_sge = 1 } };

	sep->pd = ibv_alloc_pd(sep->ctx);
	sep->cc = sep->pd ? ibv_create_comp_channel(sep->ctx) : NULL;
	if (!sep->cc || nonblock(sep->cc->fd) != CCI_SUCCESS ||
	    nonblock(sep->ctx->async_fd) != CCI_SUCCESS)
		return CCI_ENOMEM;
	sep->cq = ibv_create_cq(sep->ctx, (int)sep->cq_depth, sep, sep->cc, 0);
	sep->srq = sep->cq ? ibv_create_srq(sep->pd, &sa) : NULL;
	if (!sep->srq || ibv_req_notify_cq(sep->cq, 0) != 0) {
		VERBS_WARN("verbs: %s: cannot create the endpoint's queues: %s", sep->dev->hca,
		           strerror(errno));
		return CCI_ENOMEM;
	}
	cci__lender_init(&sep->lend, sep->dev->recv_count);
	cci__op_pool_init(&sep->ops, sizeof(struct verbs_op), VERBS_SEND_COUNT_DEFAULT,
	                  cci__op_pool_no_grow, sep, NULL);
	if (verbs_rx_grow(sep, sep->dev->recv_count + VERBS_RX_RESERVE) != CCI_SUCCESS ||
	    verbs_ops_grow(sep, VERBS_SEND_COUNT_DEFAULT + VERBS_CTL_OPS) != CCI_SUCCESS)
		return CCI_ENOMEM;
	return CCI_SUCCESS;
}

static int uri_make(struct verbs_ep *sep, char **uri_p)
{
	char addr[INET6_ADDRSTRLEN + 8];

	cci__sockaddr_str(rdma_get_local_addr(sep->listen_id), addr, sizeof(addr));
	return asprintf(uri_p, "verbs://%s", addr) < 0 ? CCI_ENOMEM : CCI_SUCCESS;
}

/* Free what ep_create made, in reverse; safe on a partly made endpoint. */
static void ep_free(struct verbs_ep *sep)
{
	sep->closing = 1;
	verbs_conns_free_all(sep);
	verbs_mrs_free(sep);
	if (sep->listen_id)
		rdma_destroy_id(sep->listen_id);
	if (sep->srq)
		ibv_destroy_srq(sep->srq);
	if (sep->cq)
		ibv_destroy_cq(sep->cq);
	if (sep->cc)
		ibv_destroy_comp_channel(sep->cc);
	verbs_slabs_free(&sep->rx_slabs);
	cci__op_pool_fini(&sep->ops);
	verbs_slabs_free(&sep->op_slabs);
	if (sep->pd)
		ibv_dealloc_pd(sep->pd);
	if (sep->cm_ch)
		rdma_destroy_event_channel(sep->cm_ch);
	pthread_mutex_destroy(&sep->lock);
}

int verbs_ep_create(cci__ep_t *ep, const char *service)
{
	struct verbs_ep *sep = verbs_ep_of(ep);
	struct epoll_event ev = { .events = EPOLLIN };
	int rc;

	memset(sep, 0, sizeof(*sep));
	sep->ep = ep;
	sep->dev = ep->dev->priv;
	sep->mss = sep->dev->mss;
	sep->max_inline = VERBS_INLINE;
	pthread_mutex_init(&sep->lock, NULL);
	rc = listen_open(sep, service);
	if (rc == CCI_SUCCESS)
		rc = limits_read(sep);
	if (rc == CCI_SUCCESS)
		rc = queues_open(sep);
	if (rc == CCI_SUCCESS)
		rc = uri_make(sep, &ep->uri);
	if (rc == CCI_SUCCESS && ep->os_epfd >= 0 &&
	    epoll_ctl(ep->os_epfd, EPOLL_CTL_ADD, sep->cc->fd, &ev) != 0)
		rc = CCI_ERROR;
	if (rc == CCI_SUCCESS)
		rc = engine_start(sep);
	if (rc != CCI_SUCCESS) {
		ep_free(sep);
		return rc;
	}
	ep->recv_buf_count = cci__lender_limit(&sep->lend);
	ep->send_buf_count = cci__op_pool_limit(&sep->ops);
	pthread_mutex_lock(&verbs_live_lock);
	sep->live_next = verbs_live;
	verbs_live = sep;
	pthread_mutex_unlock(&verbs_live_lock);
	VERBS_LOG(CCI_LOG_EP, "verbs: endpoint %s on %s port %u", ep->uri, sep->dev->hca, sep->port);
	return CCI_SUCCESS;
}

void verbs_ep_stop(cci__ep_t *ep)
{
	struct verbs_ep *sep = verbs_ep_of(ep);

	pthread_mutex_lock(&verbs_live_lock);
	for (struct verbs_ep **pp = &verbs_live; *pp; pp = &(*pp)->live_next) {
		if (*pp == sep) {
			*pp = sep->live_next;
			break;
		}
	}
	pthread_mutex_unlock(&verbs_live_lock);
	cci__engine_stop(&sep->eng);
}

void verbs_ep_free(cci__ep_t *ep)
{
	struct verbs_ep *sep = verbs_ep_of(ep);

	ev_io_stop(sep->eng.loop, &sep->cm_w);
	ev_io_stop(sep->eng.loop, &sep->cq_w);
	ev_io_stop(sep->eng.loop, &sep->async_w);
	cci__engine_fini(&sep->eng);
	pthread_mutex_lock(&sep->lock);
	sep->closing = 1;
	pthread_mutex_unlock(&sep->lock);
	ep_free(sep);
}

/* Receive buffers can grow (within the shared queue) and the windows of
 * later connections follow; send operations grow freely. */
int verbs_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value)
{
	struct verbs_ep *sep = verbs_ep_of(ep);
	int rc = CCI_SUCCESS;

	if (value == 0 || value > VERBS_BUF_COUNT_MAX)
		return CCI_ERANGE;
	pthread_mutex_lock(&sep->lock);
	if (name == CCI_OPT_ENDPT_RECV_BUF_COUNT) {
		if (value + VERBS_RX_RESERVE > sep->rx_total)
			rc = verbs_rx_grow(sep, value + VERBS_RX_RESERVE - sep->rx_total);
		if (rc == CCI_SUCCESS)
			cci__lender_set_limit(&sep->lend, value);
	} else {
		if (value + VERBS_CTL_OPS > sep->op_total)
			rc = verbs_ops_grow(sep, value + VERBS_CTL_OPS - sep->op_total);
		if (rc == CCI_SUCCESS)
			cci__op_pool_set_limit(&sep->ops, value);
	}
	pthread_mutex_unlock(&sep->lock);
	return rc;
}
