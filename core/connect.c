/*
 * connect.c - the connection calls of the API: cci_connect, cci_accept,
 * cci_reject and cci_disconnect.  They check their arguments, claim a
 * request once, and drop a disconnected connection's queued events; the
 * wire is the plugin's.
 */
#include "core.h"
#include "spin.h"
#include "uri.h"

static int timeout_valid(const struct timeval *tv)
{
	return !tv || (tv->tv_sec >= 0 && tv->tv_usec >= 0 && tv->tv_usec < 1000000);
}

CCI_API int cci_connect(cci_endpoint_t *endpoint, const char *server_uri, const void *data_ptr,
                        uint32_t data_len, cci_conn_attribute_t attribute, const void *context,
                        int flags, const struct timeval *timeout)
{
	cci__ep_t *ep = cci__ep_live(endpoint);
	char scheme[16];
	const char *rest;

	static _Atomic int flags_logged;

	cci__flags_keep(flags, 0, &flags_logged, CCI_LOG_CONN, "cci_connect");
	if (!ep || !server_uri || data_len > CCI_CONN_REQ_LEN ||
	    (data_len > 0 && !data_ptr) || !timeout_valid(timeout) ||
	    (unsigned)attribute > CCI_CONN_ATTR_UU_MC_RX)
		return CCI_EINVAL;
	if (attribute == CCI_CONN_ATTR_UU_MC_TX || attribute == CCI_CONN_ATTR_UU_MC_RX) {
		LOG(CCI_LOG_CONN, "connect: transport %s has no multicast connections",
		    ep->dev->pub.transport);
		return CCI_EINVAL;
	}
	if (uri_split_scheme(server_uri, scheme, sizeof(scheme), &rest) != CCI_SUCCESS) {
		LOG(CCI_LOG_CONN, "connect: cannot parse URI \"%s\"", server_uri);
		return CCI_EINVAL;
	}
	if (!cci__plugin_serves(ep->plugin, scheme)) {
		LOG(CCI_LOG_CONN, "connect: URI \"%s\" is not for transport %s", server_uri,
		    ep->dev->pub.transport);
		return CCI_EINVAL;
	}
	return ep->plugin->connect(ep, server_uri, data_ptr, data_len, attribute, (void *)context,
	                           timeout);
}

/* Mark a request answered; CCI_EINVAL if it is not a lent, unanswered request. */
static int request_claim(cci__evt_t *e)
{
	int rc = CCI_EINVAL;

	if (!cci__evt_live(e) || e->ev.type != CCI_EVENT_CONNECT_REQUEST)
		return CCI_EINVAL;
	cci__spin_lock(&core_ep(e->ep)->lock);
	if (core_evt(e)->lent && !core_evt(e)->answered) {
		core_evt(e)->answered = 1;
		rc = CCI_SUCCESS;
	}
	cci__spin_unlock(&core_ep(e->ep)->lock);
	return rc;
}

CCI_API int cci_accept(cci_event_t *conn_req, const void *context)
{
	cci__evt_t *e = (cci__evt_t *)conn_req;
	int rc = request_claim(e);

	if (rc != CCI_SUCCESS)
		return rc;
	return e->ep->plugin->accept(e, (void *)context);
}

CCI_API int cci_reject(cci_event_t *conn_req)
{
	cci__evt_t *e = (cci__evt_t *)conn_req;
	int rc = request_claim(e);

	if (rc != CCI_SUCCESS)
		return rc;
	return e->ep->plugin->reject(e);
}

CCI_API int cci_disconnect(cci_connection_t *connection)
{
	cci__conn_t *c = cci__conn_live(connection);
	cci__ep_t *ep;
	int rc;

	/* A connection already freed (disconnected, or its endpoint
	 * destroyed) has a dead magic: CCI_EINVAL, as for a second call. */
	if (!c)
		return CCI_EINVAL;
	ep = c->ep;
	cci__spin_lock(&core_ep(ep)->lock);
	rc = core_conn(c)->disconnected ? CCI_EINVAL : CCI_SUCCESS;
	core_conn(c)->disconnected = 1;
	core_conn(c)->refs++; /* keep it alive until we are done here */
	cci__spin_unlock(&core_ep(ep)->lock);
	if (rc != CCI_SUCCESS) {
		cci__conn_release(c);
		return rc;
	}
	/* Events not yet handed out for it are dropped, before and after the
	 * plugin stops posting for it. */
	cci__evt_purge_conn(ep, c);
	rc = ep->plugin->disconnect(c);
	cci__evt_purge_conn(ep, c);
	LOG(CCI_LOG_CONN, "connection %p disconnected", (void *)c);
	cci__conn_release(c);
	return rc;
}
