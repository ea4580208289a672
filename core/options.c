/*
 * options.c - cci_set_opt and cci_get_opt.  Values live in the core's
 * endpoint and connection objects; the plugin is told when a change needs
 * its action.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

static int is_conn_opt(cci_opt_name_t name)
{
	return name == CCI_OPT_CONN_SEND_TIMEOUT || name == CCI_OPT_CONN_KEEPALIVE_TIMEOUT;
}

/* A connection the application may still use: live and not disconnected. */
static cci__conn_t *handle_conn(const void *handle)
{
	cci__conn_t *c = cci__conn_live(handle);

	return c && !core_conn(c)->disconnected ? c : NULL;
}

static int ep_set_opt(cci__ep_t *ep, cci_opt_name_t name, uint32_t v)
{
	int rc = CCI_SUCCESS;

	switch (name) {
	case CCI_OPT_ENDPT_SEND_TIMEOUT:
		ep->send_timeout_us = v;
		return CCI_SUCCESS;
	case CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT:
		ep->keepalive_us = v;
		return CCI_SUCCESS;
	case CCI_OPT_ENDPT_RECV_BUF_COUNT:
	case CCI_OPT_ENDPT_SEND_BUF_COUNT:
		if (v == 0)
			return CCI_ERANGE;
		if (ep->plugin->ep_set_buf_count)
			rc = ep->plugin->ep_set_buf_count(ep, name, v);
		if (rc == CCI_SUCCESS) {
			if (name == CCI_OPT_ENDPT_RECV_BUF_COUNT)
				ep->recv_buf_count = v;
			else
				ep->send_buf_count = v;
		}
		return rc;
	default:
		return CCI_EINVAL; /* get-only or unknown */
	}
}

static int conn_set_opt(cci__conn_t *c, cci_opt_name_t name, uint32_t v)
{
	if (name == CCI_OPT_CONN_SEND_TIMEOUT)
		c->send_timeout_us = v;
	else
		c->keepalive_us = v;
	if (c->ep->plugin->conn_timeouts_changed)
		c->ep->plugin->conn_timeouts_changed(c);
	return CCI_SUCCESS;
}

CCI_API int cci_set_opt(cci_opt_handle_t *handle, cci_opt_name_t name, const void *val)
{
	uint32_t v;

	if (!handle || !val || (unsigned)name > CCI_OPT_CONN_KEEPALIVE_TIMEOUT)
		return CCI_EINVAL;
	if (name == CCI_OPT_ENDPT_URI || name == CCI_OPT_ENDPT_RMA_ALIGN)
		return CCI_EINVAL;
	memcpy(&v, val, sizeof(v));
	/* The handle must be a live object of the option's kind. */
	if (is_conn_opt(name))
		return handle_conn(handle) ? conn_set_opt((cci__conn_t *)handle, name, v) : CCI_EINVAL;
	return cci__ep_live(handle) ? ep_set_opt((cci__ep_t *)handle, name, v) : CCI_EINVAL;
}

static int ep_get_opt(cci__ep_t *ep, cci_opt_name_t name, void *val)
{
	uint32_t v;

	switch (name) {
	case CCI_OPT_ENDPT_URI: {
		char *copy = strdup(ep->uri ? ep->uri : "");
		if (!copy)
			return CCI_ENOMEM;
		*(char **)val = copy;
		return CCI_SUCCESS;
	}
	case CCI_OPT_ENDPT_RMA_ALIGN:
		memcpy(val, &ep->rma_align, sizeof(ep->rma_align));
		return CCI_SUCCESS;
	case CCI_OPT_ENDPT_SEND_TIMEOUT:
		v = ep->send_timeout_us;
		break;
	case CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT:
		v = ep->keepalive_us;
		break;
	case CCI_OPT_ENDPT_RECV_BUF_COUNT:
		v = ep->recv_buf_count;
		break;
	case CCI_OPT_ENDPT_SEND_BUF_COUNT:
		v = ep->send_buf_count;
		break;
	default:
		return CCI_EINVAL;
	}
	memcpy(val, &v, sizeof(v));
	return CCI_SUCCESS;
}

CCI_API int cci_get_opt(cci_opt_handle_t *handle, cci_opt_name_t name, void *val)
{
	if (!handle || !val || (unsigned)name > CCI_OPT_CONN_KEEPALIVE_TIMEOUT)
		return CCI_EINVAL;
	if (is_conn_opt(name)) {
		const cci__conn_t *c = handle_conn(handle);
		if (!c)
			return CCI_EINVAL;
		uint32_t v = name == CCI_OPT_CONN_SEND_TIMEOUT ? c->send_timeout_us : c->keepalive_us;
		memcpy(val, &v, sizeof(v));
		return CCI_SUCCESS;
	}
	if (!cci__ep_live(handle))
		return CCI_EINVAL;
	return ep_get_opt((cci__ep_t *)handle, name, val);
}
