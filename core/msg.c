/*
 * msg.c - cci_send, cci_sendv and the completion path shared with RMA.
 *
 * CCI_FLAG_BLOCKING is done here for every transport: the plugin gets a
 * waiter as the context and the core drives progress until send_done()
 * fills it in.
 */
#include <sched.h>
#include <stdlib.h>

#include "core.h"
#include "msg.h"

#define SEND_FLAGS (CCI_FLAG_BLOCKING | CCI_FLAG_NO_COPY | CCI_FLAG_SILENT)
#define MAX_IOV 1024

void cci__send_done(cci__conn_t *conn, void *context, int flags, int status)
{
	cci__ep_t *ep = conn->ep;
	cci__evt_t *e;

	if (flags & CCI_FLAG_BLOCKING) {
		struct cci__waiter *w = context;
		w->status = status;
		atomic_store_explicit(&w->done, 1, memory_order_release);
		return;
	}
	if (flags & CCI_FLAG_SILENT)
		return;
	e = cci__evt_get(ep);
	if (!e) {
		LOG_ERR("endpoint %s: out of memory: a send completion (status %d) is lost",
		        ep->uri, status);
		return;
	}
	e->ev.send.type = CCI_EVENT_SEND;
	e->ev.send.status = (cci_status_t)status;
	e->ev.send.connection = &conn->pub;
	e->ev.send.context = context;
	e->conn = conn;
	cci__evt_post(ep, e);
}

int cci__wait_blocking(cci__ep_t *ep, struct cci__waiter *w)
{
	unsigned spins = 0;

	while (!atomic_load_explicit(&w->done, memory_order_acquire)) {
		ep->plugin->progress(ep);
		/* Leave the core to a progress thread if the wait is long. */
		if (++spins % 1024 == 0)
			sched_yield();
	}
	return w->status;
}

static int send_common(cci__conn_t *c, const struct iovec *iov, uint32_t iovcnt, uint32_t len,
                       const void *context, int flags)
{
	struct cci__waiter w = { 0, CCI_SUCCESS };
	int rc;

	if (len > c->pub.max_send_size)
		return CCI_EMSGSIZE;
	if (core_conn(c)->disconnected)
		return CCI_ERR_DISCONNECTED;
	if (flags & CCI_FLAG_BLOCKING)
		context = &w;
	rc = c->ep->plugin->send(c, iov, iovcnt, len, (void *)context, flags);
	/* Out of send buffers: what frees them may need progress, which a
	 * sender that never asks for events makes only here when the
	 * endpoint has no thread of its own (progress = manual). */
	if (rc == CCI_ENOBUFS)
		c->ep->plugin->progress(c->ep);
	if (rc != CCI_SUCCESS || !(flags & CCI_FLAG_BLOCKING))
		return rc;
	return cci__wait_blocking(c->ep, &w);
}

CCI_API int cci_send(cci_connection_t *connection, const void *msg_ptr, uint32_t msg_len,
                     const void *context, int flags)
{
	struct iovec iov = { (void *)msg_ptr, msg_len };

	static _Atomic int flags_logged;

	flags = cci__flags_keep(flags, SEND_FLAGS, &flags_logged, CCI_LOG_MSG, "cci_send");
	if (!cci__conn_live(connection))
		return cci__conn_is_dead(connection) ? CCI_ERR_DISCONNECTED : CCI_EINVAL;
	if (msg_len > 0 && !msg_ptr)
		return CCI_EINVAL;
	return send_common((cci__conn_t *)connection, &iov, msg_len ? 1 : 0, msg_len, context,
	                   flags);
}

CCI_API int cci_sendv(cci_connection_t *connection, const struct iovec *data, uint32_t iovcnt,
                      const void *context, int flags)
{
	uint64_t len = 0;

	static _Atomic int flags_logged;

	flags = cci__flags_keep(flags, SEND_FLAGS, &flags_logged, CCI_LOG_MSG, "cci_sendv");
	if (!cci__conn_live(connection))
		return cci__conn_is_dead(connection) ? CCI_ERR_DISCONNECTED : CCI_EINVAL;
	if ((iovcnt > 0 && !data) || iovcnt > MAX_IOV)
		return CCI_EINVAL;
	for (uint32_t i = 0; i < iovcnt; i++) {
		if (data[i].iov_len > 0 && !data[i].iov_base)
			return CCI_EINVAL;
		len += data[i].iov_len;
		if (len > UINT32_MAX)
			return CCI_EMSGSIZE;
	}
	return send_common((cci__conn_t *)connection, data, iovcnt, (uint32_t)len, context, flags);
}
