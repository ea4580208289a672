/*
 * verbs_hs.c - connection set-up through librdmacm.
 *
 * Client: rdma_resolve_addr, rdma_resolve_route, a queue pair, then
 * rdma_connect with a hello in the private data (attribute, message
 * size, credits granted, connect payload length: RC connection requests
 * carry only 56 bytes of private data on InfiniBand).  Server: on
 * CONNECT_REQUEST it checks the hello, creates its queue pair and
 * answers rdma_accept with its own hello.  Once ESTABLISHED the client
 * sends the CCI connect payload (up to 1024 bytes) as the first message
 * (REQ); the server hands it to the application as CONNECT_REQUEST, and
 * sends ACCEPT or REJECT as a message, after which a rejected connection
 * is disconnected.  The steps and what may happen in each are pure logic
 * (verbs_fsm.c); rdma_cm events are drained by the engine thread.
 */
#include <stdlib.h>
#include <string.h>

#include "uri.h"
#include "verbs.h"

static struct verbs_conn *conn_new(struct verbs_ep *sep, int is_client)
{
	struct verbs_conn *vc = calloc(1, sizeof(*vc));

	if (!vc)
		return NULL;
	vc->sep = sep;
	vc->is_client = is_client;
	vc->next = sep->conns;
	sep->conns = vc;
	return vc;
}

/* Receive buffers granted to each peer: a share of the endpoint's. */
static uint32_t window_of(const struct verbs_ep *sep)
{
	uint32_t w = cci__lender_limit(&sep->lend) / 8;

	return w < 4 ? 4 : w > VERBS_WINDOW_MAX ? VERBS_WINDOW_MAX : w;
}

/* The client's attempt failed: CONNECT event with status, then down. */
static void connect_fail(struct verbs_conn *vc, int status)
{
	cci__conn_t *conn = vc->conn;

	VERBS_LOG(CCI_LOG_CONN, "verbs: connect to %s failed: %s", vc->peer,
	          verbs_core->status_text(status));
	cci__conn_move(&vc->base, CCI__CONN_FAILED, verbs_core, conn);
	vc->tx_err = status;
	verbs_conn_down(vc);
	vc->conn = NULL;
	verbs_core->post_connect(vc->sep->ep, vc->context, status, NULL);
	if (conn)
		verbs_core->conn_release(conn);
}

/* The set-up of vc fails: a client's application gets its CONNECT
 * event; a server's never heard of it, unless the request event is out
 * (accept and reject then find the connection down). */
void verbs_hs_fail(struct verbs_conn *vc, int status)
{
	if (vc->step == VERBS_STEP_DOWN)
		return;
	if (vc->is_client) {
		connect_fail(vc, status);
		return;
	}
	VERBS_LOG(CCI_LOG_CONN, "verbs: connection from %s dropped during set-up: %s", vc->peer,
	          verbs_core->status_text(status));
	cci__conn_move(&vc->base, CCI__CONN_FAILED, verbs_core, NULL);
	verbs_conn_down(vc);
}

int verbs_connect(cci__ep_t *ep, const char *uri, const void *data, uint32_t data_len,
                  cci_conn_attribute_t attr, void *context, const struct timeval *timeout)
{
	struct verbs_ep *sep = verbs_ep_of(ep);
	struct sockaddr_storage dst, src;
	char scheme[16], host[256];
	const char *rest;
	struct verbs_conn *vc;
	uint16_t port;
	int rc;

	if (uri_split_scheme(uri, scheme, sizeof(scheme), &rest) != 0 ||
	    strcmp(scheme, "verbs") != 0 || uri_parse_host_port(rest, host, sizeof(host), &port) != 0)
		return CCI_EINVAL;
	if (cci__addr_resolve(host, port, AF_UNSPEC, &dst, NULL) != CCI_SUCCESS ||
	    cci__addr_resolve(sep->dev->ip, 0, AF_UNSPEC, &src, NULL) != CCI_SUCCESS)
		return CCI_EADDRNOTAVAIL;
	pthread_mutex_lock(&sep->lock);
	vc = conn_new(sep, 1);
	rc = vc ? CCI_SUCCESS : CCI_ENOMEM;
	if (vc) {
		snprintf(vc->peer, sizeof(vc->peer), "%s", rest);
		vc->attr = attr;
		vc->context = context;
		vc->req_len = data_len;
		vc->req_data = malloc(data_len ? data_len : 1);
		vc->conn = verbs_core->conn_alloc(ep, attr, context);
		rc = vc->req_data && vc->conn ? cci__random64(&vc->nonce) : CCI_ENOMEM;
	}
	if (rc == CCI_SUCCESS) {
		*(struct verbs_conn **)vc->conn->priv = vc;
		if (data_len)
			memcpy(vc->req_data, data, data_len);
		cci__ct_connecting(&vc->base.timers, timeout, cci__now_ns());
		if (rdma_create_id(sep->cm_ch, &vc->id, vc, RDMA_PS_TCP) != 0 ||
		    rdma_resolve_addr(vc->id, (struct sockaddr *)&src, (struct sockaddr *)&dst,
		                      VERBS_RESOLVE_MS) != 0)
			rc = cci__errno_status(errno);
	}
	if (rc != CCI_SUCCESS && vc) {
		if (vc->conn)
			verbs_core->conn_release(vc->conn);
		vc->conn = NULL;
		cci__conn_move(&vc->base, CCI__CONN_FAILED, verbs_core, NULL);
		vc->step = VERBS_STEP_DOWN; /* reaped by the engine thread */
	}
	pthread_mutex_unlock(&sep->lock);
	return rc;
}

/* Client, route resolved: queue pair, then rdma_connect with our hello. */
static int client_connect(struct verbs_conn *vc)
{
	struct verbs_ep *sep = vc->sep;
	struct verbs_hello h = { .kind = VERBS_HELLO_CONNECT, .core = { .attr = (uint8_t)vc->attr,
	                         .mss = sep->mss, .credits = window_of(sep), .data_len = vc->req_len,
	                         .nonce = vc->nonce }};
	uint8_t pd[VERBS_HELLO_LEN];
	struct rdma_conn_param p = { .private_data = pd, .private_data_len = sizeof(pd),
	                             .responder_resources = (uint8_t)sep->rd_atom,
	                             .initiator_depth = (uint8_t)sep->rd_atom,
	                             .retry_count = 7, .rnr_retry_count = 7 };
	int rc = verbs_qp_create(vc);

	if (rc != CCI_SUCCESS)
		return rc;
	vc->cr.window = h.core.credits;
	verbs_hello_encode(&h, pd);
	if (rdma_connect(vc->id, &p) != 0)
		return cci__errno_status(errno);
	vc->cm_connected = 1;
	vc->step = VERBS_STEP_CM;
	return CCI_SUCCESS;
}

/* Client, established: the server's hello, then the connect payload. */
static int client_established(struct verbs_conn *vc, const void *pd, size_t pdlen)
{
	struct verbs_hello h;
	const char *why = NULL;

	if (verbs_hello_decode(pd, pdlen, VERBS_HELLO_ACCEPT, &h, &why) != CCI_SUCCESS ||
	    h.core.nonce != vc->nonce) {
		VERBS_WARN("verbs: %s answered with a bad hello: %s", vc->peer,
		           why ? why : "not the nonce we sent");
		return CCI_ERROR;
	}
	cci__credit_init(&vc->cr, h.core.credits, vc->cr.window);
	vc->peer_mss = h.core.mss;
	vc->step = VERBS_STEP_ANSWER;
	return verbs_ctl_send(vc, VERBS_T_REQ, 0, vc->req_data, vc->req_len);
}

/* Server: a connection request on the listening id; CCI_SUCCESS once
 * accepted at the rdma_cm level (then it owns id), else the caller
 * rejects and destroys id. */
static int server_request(struct verbs_ep *sep, struct rdma_cm_id *id,
                          const struct rdma_conn_param *req)
{
	const void *pd = req->private_data;
	size_t pdlen = req->private_data_len;
	struct verbs_hello h, ours = { .kind = VERBS_HELLO_ACCEPT, .core = { .mss = sep->mss,
	                               .credits = window_of(sep) }};
	uint8_t out[VERBS_HELLO_LEN];
	struct rdma_conn_param p = { .private_data = out, .private_data_len = sizeof(out),
	                             .responder_resources = (uint8_t)sep->rd_atom,
	                             .initiator_depth = (uint8_t)sep->rd_atom,
	                             .retry_count = 7, .rnr_retry_count = 7 };
	struct verbs_conn *vc;
	const char *why = NULL;
	char peer[INET6_ADDRSTRLEN + 8];

	cci__sockaddr_str(rdma_get_peer_addr(id), peer, sizeof(peer));
	if (verbs_hello_decode(pd, pdlen, VERBS_HELLO_CONNECT, &h, &why) != CCI_SUCCESS) {
		VERBS_WARN("verbs: connection request from %s refused: %s", peer, why);
		return CCI_EINVAL;
	}
	vc = conn_new(sep, 0);
	if (!vc)
		return CCI_ENOMEM;
	snprintf(vc->peer, sizeof(vc->peer), "%s", peer);
	vc->id = id;
	id->context = vc;
	vc->attr = h.core.attr;
	vc->peer_mss = h.core.mss;
	vc->req_len = h.core.data_len;
	ours.core.nonce = h.core.nonce;
	cci__credit_init(&vc->cr, h.core.credits, ours.core.credits);
	cci__ct_connecting(&vc->base.timers, NULL, 0);
	vc->base.timers.deadline_ns = cci__now_ns() + VERBS_SERVER_HS_NS;
	/* RDMA READ depths: ours, within what the client offered (the
	 * request reports them from our side already). */
	if (req->responder_resources < p.responder_resources)
		p.responder_resources = req->responder_resources;
	if (req->initiator_depth < p.initiator_depth)
		p.initiator_depth = req->initiator_depth;
	verbs_hello_encode(&ours, out);
	if (verbs_qp_create(vc) != CCI_SUCCESS || rdma_accept(id, &p) != 0) {
		VERBS_WARN("verbs: connection request from %s: cannot accept: %s", peer,
		           strerror(errno));
		verbs_qp_destroy(vc);
		vc->id = NULL; /* the caller rejects and destroys it */
		cci__conn_move(&vc->base, CCI__CONN_FAILED, verbs_core, NULL);
		vc->step = VERBS_STEP_DOWN;
		return CCI_ERROR;
	}
	vc->cm_connected = 1;
	vc->step = VERBS_STEP_CM;
	return CCI_SUCCESS;
}

static int cm_ev_of(enum rdma_cm_event_type t)
{
	switch (t) {
	case RDMA_CM_EVENT_ADDR_RESOLVED: return VERBS_CM_ADDR_RESOLVED;
	case RDMA_CM_EVENT_ADDR_ERROR: return VERBS_CM_ADDR_ERROR;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: return VERBS_CM_ROUTE_RESOLVED;
	case RDMA_CM_EVENT_ROUTE_ERROR: return VERBS_CM_ROUTE_ERROR;
	case RDMA_CM_EVENT_ESTABLISHED: return VERBS_CM_ESTABLISHED;
	case RDMA_CM_EVENT_REJECTED: return VERBS_CM_REJECTED;
	case RDMA_CM_EVENT_UNREACHABLE: return VERBS_CM_UNREACHABLE;
	case RDMA_CM_EVENT_CONNECT_ERROR: return VERBS_CM_CONNECT_ERROR;
	case RDMA_CM_EVENT_DISCONNECTED: return VERBS_CM_DISCONNECTED;
	case RDMA_CM_EVENT_DEVICE_REMOVAL: return VERBS_CM_DEVICE_REMOVAL;
	case RDMA_CM_EVENT_TIMEWAIT_EXIT: return VERBS_CM_TIMEWAIT_EXIT;
	default: return VERBS_CM_OTHER;
	}
}

/* Carry out what verbs_fsm_cm decided for vc. */
static void cm_act(struct verbs_conn *vc, int act, int status, const void *pd, size_t pdlen)
{
	int rc = CCI_SUCCESS;

	switch (act) {
	case VERBS_ACT_RESOLVE_ROUTE:
		vc->step = VERBS_STEP_ROUTE;
		if (rdma_resolve_route(vc->id, VERBS_RESOLVE_MS) != 0)
			rc = CCI_EADDRNOTAVAIL;
		break;
	case VERBS_ACT_CONNECT:
		rc = client_connect(vc);
		break;
	case VERBS_ACT_SEND_REQ:
		rc = client_established(vc, pd, pdlen);
		break;
	case VERBS_ACT_WAIT_REQ:
		vc->step = VERBS_STEP_WAIT_REQ;
		break;
	case VERBS_ACT_FAIL:
		/* Never connected: nothing to disconnect.  A peer's disconnect
		 * is answered by ours (both sides call rdma_disconnect). */
		if (status != CCI_ERR_DISCONNECTED)
			vc->cm_connected = 0;
		rc = status;
		break;
	case VERBS_ACT_BREAK:
		verbs_conn_break(vc, status);
		break;
	case VERBS_ACT_DEVICE:
		verbs_conn_break(vc, status);
		vc->sep->failed = 1;
		break;
	default:
		break;
	}
	if (rc != CCI_SUCCESS)
		verbs_hs_fail(vc, rc);
}

/* One rdma_cm event (already copied and acked, except for a request). */
static void cm_event(struct verbs_ep *sep, struct rdma_cm_event *e)
{
	struct verbs_conn *vc = e->id->context;
	int status = CCI_ERROR, act;

	if (e->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct rdma_cm_id *id = e->id;
		int rc = server_request(sep, id, &e->param.conn);
		if (rc != CCI_SUCCESS)
			rdma_reject(id, NULL, 0);
		rdma_ack_cm_event(e);
		if (rc != CCI_SUCCESS)
			rdma_destroy_id(id);
		return;
	}
	if (!vc) {
		if (e->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
			sep->failed = 1;
		rdma_ack_cm_event(e);
		return;
	}
	act = verbs_fsm_cm(vc->step, vc->is_client, cm_ev_of(e->event), &status);
	if (act == VERBS_ACT_FAIL || act == VERBS_ACT_BREAK)
		VERBS_LOG(CCI_LOG_CONN, "verbs: %s: %s (status %d) in step %d", vc->peer,
		          rdma_event_str(e->event), e->status, vc->step);
	cm_act(vc, act, status, e->param.conn.private_data, e->param.conn.private_data_len);
	rdma_ack_cm_event(e);
}

/* Every pending rdma_cm event of the endpoint (engine thread). */
void verbs_cm_drain(struct verbs_ep *sep)
{
	struct rdma_cm_event *e;

	pthread_mutex_lock(&sep->lock);
	while (rdma_get_cm_event(sep->cm_ch, &e) == 0)
		cm_event(sep, e);
	pthread_mutex_unlock(&sep->lock);
}

/* The server got the connect payload: the application decides. */
static void on_req(struct verbs_conn *vc, const uint8_t *body, uint32_t len)
{
	if (len != vc->req_len) {
		VERBS_WARN("verbs: connection request from %s: payload of %u bytes, %u announced",
		           vc->peer, len, vc->req_len);
		verbs_hs_fail(vc, CCI_EINVAL);
		return;
	}
	vc->step = VERBS_STEP_DECIDE;
	vc->refs++; /* the request event's */
	if (verbs_core->post_request(vc->sep->ep, vc->attr, body, len, vc) != CCI_SUCCESS) {
		vc->refs--;
		verbs_hs_fail(vc, CCI_ENOMEM);
	}
}

/* The client got the answer. */
static void on_answer(struct verbs_conn *vc, int accepted)
{
	cci__conn_t *conn = vc->conn;

	if (!accepted) {
		connect_fail(vc, CCI_ECONNREFUSED);
		return;
	}
	vc->step = VERBS_STEP_OPEN;
	conn->pub.max_send_size = vc->peer_mss < vc->sep->mss ? vc->peer_mss : vc->sep->mss;
	cci__conn_move(&vc->base, CCI__CONN_OPEN, verbs_core, conn);
	cci__ct_arm(&vc->base.timers, conn->keepalive_us, cci__now_ns());
	VERBS_LOG(CCI_LOG_CONN, "verbs: connected to %s", vc->peer);
	verbs_core->post_connect(vc->sep->ep, vc->context, CCI_SUCCESS, conn);
}

void verbs_hs_on_msg(struct verbs_conn *vc, const struct verbs_hdr *h, const uint8_t *body)
{
	if (h->type == VERBS_T_REQ)
		on_req(vc, body, h->len);
	else
		on_answer(vc, h->type == VERBS_T_ACCEPT);
}

int verbs_accept(cci__evt_t *evt, void *context)
{
	struct verbs_conn *vc = evt->req_state;
	struct verbs_ep *sep = vc->sep;
	cci__conn_t *conn = NULL;
	int status = CCI_ERR_DISCONNECTED;

	pthread_mutex_lock(&sep->lock);
	if (vc->step == VERBS_STEP_DECIDE) {
		conn = verbs_core->conn_alloc(sep->ep, vc->attr, context);
		status = conn ? CCI_SUCCESS : CCI_ENOMEM;
	}
	if (conn) {
		*(struct verbs_conn **)conn->priv = vc;
		vc->conn = conn;
		conn->pub.max_send_size = vc->peer_mss < sep->mss ? vc->peer_mss : sep->mss;
		vc->step = VERBS_STEP_OPEN;
		cci__conn_move(&vc->base, CCI__CONN_OPEN, verbs_core, conn);
		cci__ct_arm(&vc->base.timers, conn->keepalive_us, cci__now_ns());
		verbs_ctl_send(vc, VERBS_T_ACCEPT, 0, NULL, 0);
	} else if (vc->step == VERBS_STEP_DECIDE) {
		verbs_ctl_send(vc, VERBS_T_REJECT, 0, NULL, 0); /* no memory for it */
		vc->close_when_idle = 1;
		cci__conn_move(&vc->base, CCI__CONN_FAILED, verbs_core, NULL);
		verbs_conn_down(vc);
	}
	verbs_core->post_accept(sep->ep, context, status, conn);
	pthread_mutex_unlock(&sep->lock);
	return CCI_SUCCESS;
}

int verbs_reject(cci__evt_t *evt)
{
	struct verbs_conn *vc = evt->req_state;
	struct verbs_ep *sep = vc->sep;

	pthread_mutex_lock(&sep->lock);
	if (vc->step == VERBS_STEP_DECIDE) {
		verbs_ctl_send(vc, VERBS_T_REJECT, 0, NULL, 0);
		vc->close_when_idle = 1; /* disconnect once REJECT is delivered */
		cci__conn_move(&vc->base, CCI__CONN_FAILED, verbs_core, NULL);
		verbs_conn_down(vc);
	}
	pthread_mutex_unlock(&sep->lock);
	return CCI_SUCCESS;
}

void verbs_request_done(cci__evt_t *evt)
{
	struct verbs_conn *vc = evt->req_state;

	pthread_mutex_lock(&vc->sep->lock);
	vc->refs--;
	pthread_mutex_unlock(&vc->sep->lock);
}
