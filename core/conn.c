/*
 * conn.c - connection set-up and teardown calls, connection objects.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "spin.h"
#include "uri.h"

#define CONN_ALIGN 64

/*
 * The core part lives in a shell (shell.c) and the plugin's part in an
 * allocation of its own, so that a freed connection's shell can stay
 * mapped, with a dead magic, at the size of every other shell.
 */
cci__conn_t *cci__conn_alloc(cci__ep_t *ep, cci_conn_attribute_t attr, void *context)
{
	size_t priv = (ep->plugin->conn_priv_size + CONN_ALIGN - 1) / CONN_ALIGN * CONN_ALIGN;
	cci__conn_t *c = cci__shell_alloc();

	if (!c)
		return NULL;
	c->priv = aligned_alloc(CONN_ALIGN, priv ? priv : CONN_ALIGN);
	if (!c->priv) {
		cci__shell_free(c);
		return NULL;
	}
	memset(c->priv, 0, priv);
	c->pub.max_send_size = ep->dev->pub.max_send_size;
	c->pub.endpoint = &ep->pub;
	c->pub.attribute = attr;
	c->pub.context = context;
	c->ep = ep;
	c->send_timeout_us = ep->send_timeout_us;
	c->keepalive_us = ep->keepalive_us;
	core_conn(c)->refs = 1; /* the plugin's, dropped by cci__conn_release() */
	core_conn(c)->magic = CCI__MAGIC_CONN;
	return c;
}

/* The last reference is gone: later calls naming c see a dead magic. */
void cci__conn_free(cci__conn_t *c)
{
	if (!c)
		return;
	core_conn(c)->magic = CCI__MAGIC_DEAD_CONN;
	free(c->priv);
	c->priv = NULL;
	cci__shell_free(c);
}

void cci__conn_release(cci__conn_t *c)
{
	cci__ep_t *ep = c->ep;
	int last;

	cci__spin_lock(&core_ep(ep)->lock);
	last = (--core_conn(c)->refs == 0);
	cci__spin_unlock(&core_ep(ep)->lock);
	if (last)
		cci__conn_free(c);
}

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

	static int flags_logged;

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
