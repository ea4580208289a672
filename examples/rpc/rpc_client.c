/*
 * rpc_client.c - the client's connection: open, event handling, failure
 * detection and close.  The calls themselves are in rpc_call.c.
 */
#include <stdlib.h>
#include <string.h>

#include "ex_util.h"
#include "rpc_client_int.h"
#include "rpc_log.h"
#include "rpc_wire.h"

#define RPC_DEFAULT_INFLIGHT 64
#define RPC_DEFAULT_KEEPALIVE_MS 1000
#define RPC_DEFAULT_CONNECT_MS 5000
#define RPC_DRAIN_MAX 64           /* events handled per poll once awake */
#define RPC_SCAN_NS 10000000ull    /* call timeouts are looked at this often */
#define RPC_BYE_MS 2000            /* how long the goodbye may take */

static void opts_defaults(struct rpc_client_opts *o)
{
	if (!o->max_inflight)
		o->max_inflight = RPC_DEFAULT_INFLIGHT;
	if (o->max_inflight >= 1u << RPC_SLOT_BITS)
		o->max_inflight = (1u << RPC_SLOT_BITS) - 1;
	if (!o->keepalive_ms)
		o->keepalive_ms = RPC_DEFAULT_KEEPALIVE_MS;
	if (!o->connect_timeout_ms)
		o->connect_timeout_ms = RPC_DEFAULT_CONNECT_MS;
}

void rpc_client_break(struct rpc_client *c, int status)
{
	if (c->dead)
		return;
	c->dead = status;
	for (uint32_t i = 0; i < c->o.max_inflight; i++)
		if (c->slots[i].state == SLOT_PENDING)
			rpc_slot_complete(c, &c->slots[i], status, 0, 0);
	/* Disconnecting drops the events still queued for the connection,
	 * so nothing refers to it afterwards. */
	if (c->conn)
		cci_disconnect(c->conn);
	c->conn = NULL;
	c->sends = 0;
}

/* One event; returns the status to break the connection with, or RPC_OK.
 * The caller breaks only after returning the event. */
static int client_handle(struct rpc_client *c, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_SEND:
		if (c->sends)
			c->sends--;
		if (ev->send.status == CCI_SUCCESS)
			return RPC_OK;
		rpc_log("request failed: %s",
			cci_strerror(c->ep, ev->send.status));
		return RPC_EDEAD;
	case CCI_EVENT_RECV:
		c->last_heard_ns = ex_now_ns();
		rpc_client_on_reply(c, ev->recv.ptr, ev->recv.len);
		return RPC_OK;
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		rpc_log("server silent for %u ms: giving up on it", c->o.keepalive_ms);
		return RPC_EDEAD;
	case CCI_EVENT_ENDPOINT_DEVICE_FAILED:
		rpc_log("device failed");
		return RPC_EDEAD;
	case CCI_EVENT_CONNECT_REQUEST:
		cci_reject(ev); /* a client serves nobody */
		return RPC_OK;
	default:
		return RPC_OK;
	}
}

/* Handle ev and give it back, then break the connection if it said so. */
static void client_dispatch(struct rpc_client *c, cci_event_t *ev)
{
	int brk = c->dead ? RPC_OK : client_handle(c, ev);

	cci_return_event(ev);
	if (brk)
		rpc_client_break(c, brk);
}

/*
 * A connection whose peer died with nothing of ours in flight gives no
 * event (the transports watch the keepalive of open connections only),
 * yet a send on it fails at once.  So while calls wait and the server has
 * been silent for a quarter of the keepalive, send it a probe.
 */
static void client_probe(struct rpc_client *c)
{
	uint64_t now = ex_now_ns();
	uint64_t quiet = (uint64_t)c->o.keepalive_ms * 250000ull;
	int rc;

	if (c->dead || !c->pending || now - c->last_heard_ns < quiet)
		return;
	c->last_heard_ns = now;
	rc = cci_send(c->conn, c->ping, RPC_REQ_HDR, NULL, 0);
	if (rc == CCI_SUCCESS) {
		c->sends++;
	} else if (rc != CCI_ENOBUFS) {
		rpc_cci_fail(rc, "probe");
		rpc_client_break(c, RPC_EDEAD);
	}
}

void rpc_client_poll(struct rpc_client *c, uint64_t deadline_ns)
{
	cci_event_t *ev;
	int rc = ex_event_wait(c->ep, c->fd, deadline_ns, &ev);

	for (int n = 0; rc == CCI_SUCCESS && n < RPC_DRAIN_MAX; n++) {
		client_dispatch(c, ev);
		rc = cci_get_event(c->ep, &ev);
	}
	if (rc == CCI_SUCCESS)
		client_dispatch(c, ev);
	else if (rc != CCI_EAGAIN && rc != CCI_ETIMEDOUT && rc != CCI_ENOBUFS)
		rpc_client_break(c, rpc_cci_fail(rc, "cci_get_event"));
	if (c->o.call_timeout_ms && ex_now_ns() - c->last_scan_ns > RPC_SCAN_NS) {
		c->last_scan_ns = ex_now_ns();
		rpc_slots_check_timeouts(c);
	}
	client_probe(c);
}

int rpc_client_send(struct rpc_client *c, uint32_t len)
{
	uint64_t deadline = ex_deadline_ms(c->o.keepalive_ms);

	while (!c->dead) {
		int rc = cci_send(c->conn, c->msg, len, NULL, 0);

		if (rc == CCI_SUCCESS) {
			c->sends++;
			return RPC_OK;
		}
		if (rc != CCI_ENOBUFS) {
			rpc_cci_fail(rc, "cci_send");
			rpc_client_break(c, RPC_EDEAD);
		} else if (ex_now_ns() > deadline) {
			rpc_log("no send buffer for %u ms", c->o.keepalive_ms);
			rpc_client_break(c, RPC_EDEAD);
		} else {
			/* completions free send buffers: wait for one */
			rpc_client_poll(c, ex_deadline_ms(1));
		}
	}
	return c->dead;
}

/* Wait for the CONNECT event of our request and adopt the connection. */
static int client_connected(struct rpc_client *c)
{
	uint64_t deadline = ex_deadline_ms(c->o.connect_timeout_ms + 1000);
	cci_event_t *ev;

	for (;;) {
		int rc = ex_event_wait(c->ep, c->fd, deadline, &ev);

		if (rc != CCI_SUCCESS)
			return rpc_cci_fail(rc, "waiting for the connection");
		if (ev->type == CCI_EVENT_CONNECT)
			break;
		cci_return_event(ev);
	}
	int status = ev->connect.status;

	c->conn = ev->connect.connection;
	cci_return_event(ev);
	return rpc_cci_fail(status, "connect");
}

/*
 * The keepalive notices a stopped or unreachable server; the probes of
 * client_probe() a dead one.  The send timeout stays off: sm's send timer
 * can break a healthy connection when a send is queued just as its tick
 * starts, and the keepalive bounds a server that stopped reading anyway.
 */
static int client_set_keepalive(struct rpc_client *c)
{
	uint32_t us = c->o.keepalive_ms * 1000u;
	int rc = cci_set_opt(c->conn, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &us);

	return rpc_cci_fail(rc, "cci_set_opt(keepalive)");
}

static int client_connect(struct rpc_client *c, const char *uri)
{
	unsigned char hello[RPC_HELLO_LEN];
	struct rpc_req ping = { .kind = RPC_KIND_PING };
	struct timeval tv = {
		.tv_sec = c->o.connect_timeout_ms / 1000,
		.tv_usec = (c->o.connect_timeout_ms % 1000) * 1000,
	};
	int rc;

	rpc_hello_encode(hello);
	rpc_req_encode(&ping, c->ping);
	rc = cci_connect(c->ep, uri, hello, sizeof(hello), CCI_CONN_ATTR_RO, c,
			 0, &tv);
	if (rc != CCI_SUCCESS)
		return rpc_cci_fail(rc, "cci_connect");
	rc = client_connected(c);
	if (rc == RPC_OK)
		rc = client_set_keepalive(c);
	if (rc != RPC_OK)
		return rc;
	if (c->conn->max_send_size <= RPC_REQ_HDR) {
		rpc_log("messages of %u bytes are too small", c->conn->max_send_size);
		return RPC_EPROTO;
	}
	c->inline_max = c->conn->max_send_size - RPC_REQ_HDR;
	if (c->inline_max > RPC_INLINE_MAX)
		c->inline_max = RPC_INLINE_MAX;
	c->msg = malloc(RPC_REQ_HDR + c->inline_max);
	return c->msg ? RPC_OK : RPC_ENOMEM;
}

static int client_endpoint(struct rpc_client *c)
{
	cci_device_t *dev = ex_find_device(c->o.device);
	int rc;

	if (c->o.device && !dev) {
		rpc_log("no device %s", c->o.device);
		return RPC_EINVAL;
	}
	rc = cci_create_endpoint(dev, 0, &c->ep, &c->fd);
	return rpc_cci_fail(rc, "cci_create_endpoint");
}

int rpc_client_open(const char *uri, const struct rpc_client_opts *opts,
		    struct rpc_client **client_p)
{
	struct rpc_client *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return RPC_ENOMEM;
	if (opts)
		c->o = *opts;
	opts_defaults(&c->o);
	rc = rpc_cci_fail(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), "cci_init");
	if (rc != RPC_OK)
		goto err_free;
	rc = client_endpoint(c);
	if (rc != RPC_OK)
		goto err_finalize;
	rc = rpc_slots_init(c);
	if (rc == RPC_OK)
		rc = client_connect(c, uri);
	if (rc != RPC_OK)
		goto err_destroy;
	*client_p = c;
	return RPC_OK;

err_destroy:
	rpc_slots_fini(c);
	free(c->msg);
	cci_destroy_endpoint(c->ep);
err_finalize:
	cci_finalize();
err_free:
	free(c);
	return rc;
}

uint32_t rpc_client_inflight(const struct rpc_client *c)
{
	return c->inflight;
}

/* Tell the server we are done, so that it can drop our connection once
 * its last reply has completed, and wait for that message to arrive. */
static void client_bye(struct rpc_client *c)
{
	struct rpc_req bye = { .kind = RPC_KIND_BYE };
	uint64_t deadline = ex_deadline_ms(RPC_BYE_MS);

	rpc_req_encode(&bye, c->msg);
	if (rpc_client_send(c, RPC_REQ_HDR) != RPC_OK)
		return;
	while (!c->dead && c->sends && ex_now_ns() < deadline)
		rpc_client_poll(c, deadline);
}

void rpc_client_close(struct rpc_client *c)
{
	uint64_t deadline = ex_deadline_ms(c->o.keepalive_ms + RPC_BYE_MS);

	/* replies may still write into the callers' buffers: let them land */
	while (c->pending && !c->dead && ex_now_ns() < deadline)
		rpc_client_poll(c, deadline);
	if (!c->dead)
		client_bye(c);
	rpc_client_break(c, RPC_EDEAD);
	rpc_slots_fini(c);
	cci_destroy_endpoint(c->ep);
	cci_finalize();
	free(c->msg);
	free(c);
}
