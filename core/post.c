/*
 * post.c - the event services of struct cci_core: one call per event a
 * plugin reports, so that no plugin fills a union cci_event by hand.
 *
 * Each takes an event from the endpoint's pool, fills the application's
 * view, queues it (cci__evt_post: the event holds a reference on its
 * connection and rings the OS handle) and returns CCI_SUCCESS.  When no
 * event can be had the loss is logged here, naming the event and the
 * endpoint, and CCI_ENOMEM tells the plugin to take back what stood behind
 * it (a receive buffer, a request).
 */
#include <string.h>

#include "core.h"

static cci__evt_t *evt_for(cci__ep_t *ep, cci_event_type_t type)
{
	cci__evt_t *e = cci__evt_get(ep);

	if (!e)
		LOG_ERR("endpoint %s: out of memory: a %s event is lost", ep->uri ? ep->uri : "?",
		        cci_event_type_str(type));
	return e;
}

int cci__post_recv(cci__conn_t *conn, void *ptr, uint32_t len, void *rx_buf)
{
	cci__evt_t *e = evt_for(conn->ep, CCI_EVENT_RECV);

	if (!e)
		return CCI_ENOMEM;
	e->ev.recv.type = CCI_EVENT_RECV;
	e->ev.recv.len = len;
	e->ev.recv.ptr = ptr;
	e->ev.recv.connection = &conn->pub;
	e->conn = conn;
	e->rx_buf = rx_buf;
	cci__evt_post(conn->ep, e);
	return CCI_SUCCESS;
}

/* CONNECT and ACCEPT share their layout; a failed attempt names no
 * connection. */
static int post_conn_result(cci__ep_t *ep, cci_event_type_t type, void *context, int status,
                            cci__conn_t *conn)
{
	cci__evt_t *e = evt_for(ep, type);

	if (!e)
		return CCI_ENOMEM;
	if (status != CCI_SUCCESS)
		conn = NULL;
	e->ev.connect.type = type;
	e->ev.connect.status = (cci_status_t)status;
	e->ev.connect.context = context;
	e->ev.connect.connection = conn ? &conn->pub : NULL;
	e->conn = conn;
	cci__evt_post(ep, e);
	return CCI_SUCCESS;
}

int cci__post_connect(cci__ep_t *ep, void *context, int status, cci__conn_t *conn)
{
	return post_conn_result(ep, CCI_EVENT_CONNECT, context, status, conn);
}

int cci__post_accept(cci__ep_t *ep, void *context, int status, cci__conn_t *conn)
{
	return post_conn_result(ep, CCI_EVENT_ACCEPT, context, status, conn);
}

int cci__post_request(cci__ep_t *ep, cci_conn_attribute_t attr, const void *data,
                      uint32_t len, void *req_state)
{
	cci__evt_t *e;

	if (atomic_load_explicit(&core_ep(ep)->closing, memory_order_acquire)) {
		LOG(CCI_LOG_EP, "endpoint %s is closing: a connection request is refused",
		    ep->uri ? ep->uri : "?");
		return CCI_ERR_DISCONNECTED;
	}
	if (len > CCI_CONN_REQ_LEN) {
		LOG_ERR("endpoint %s: a connection request with %u bytes of data (at most %u) "
		        "is refused", ep->uri ? ep->uri : "?", len, CCI_CONN_REQ_LEN);
		return CCI_EINVAL;
	}
	e = evt_for(ep, CCI_EVENT_CONNECT_REQUEST);
	if (!e)
		return CCI_ENOMEM;
	if (len > 0)
		memcpy(core_evt(e)->req_data, data, len);
	e->ev.request.type = CCI_EVENT_CONNECT_REQUEST;
	e->ev.request.data_len = len;
	e->ev.request.data_ptr = core_evt(e)->req_data; /* never NULL, even with no data */
	e->ev.request.attribute = attr;
	e->req_state = req_state;
	cci__evt_post(ep, e);
	return CCI_SUCCESS;
}

int cci__post_keepalive_timedout(cci__conn_t *conn)
{
	cci__evt_t *e = evt_for(conn->ep, CCI_EVENT_KEEPALIVE_TIMEDOUT);

	if (!e)
		return CCI_ENOMEM;
	e->ev.keepalive.type = CCI_EVENT_KEEPALIVE_TIMEDOUT;
	e->ev.keepalive.connection = &conn->pub;
	e->conn = conn;
	cci__evt_post(conn->ep, e);
	return CCI_SUCCESS;
}

int cci__post_dev_failed(cci__ep_t *ep)
{
	cci__evt_t *e = evt_for(ep, CCI_EVENT_ENDPOINT_DEVICE_FAILED);

	if (!e)
		return CCI_ENOMEM;
	e->ev.dev_failed.type = CCI_EVENT_ENDPOINT_DEVICE_FAILED;
	e->ev.dev_failed.endpoint = &ep->pub;
	cci__evt_post(ep, e);
	return CCI_SUCCESS;
}
