/*
 * strerror.c - a sentence for every status.
 */
#include "core.h"

const char *cci__status_text(int status)
{
	switch (status) {
	case CCI_SUCCESS: return "success";
	case CCI_ERROR: return "generic error";
	case CCI_ERR_DISCONNECTED: return "connection closed or broken";
	case CCI_ERR_RNR: return "receiver not ready (no receive buffer)";
	case CCI_ERR_DEVICE_DEAD: return "device failed";
	case CCI_ERR_RMA_HANDLE: return "RMA handle unknown, stale or without the needed access";
	case CCI_ERR_RMA_OP: return "RMA operation failed at the target";
	case CCI_ERR_NOT_IMPLEMENTED: return "not implemented";
	case CCI_ERR_NOT_FOUND: return "not found";
	case CCI_EINVAL: return "invalid argument";
	case CCI_ETIMEDOUT: return "timed out";
	case CCI_ENOMEM: return "out of memory";
	case CCI_ENODEV: return "no usable device";
	case CCI_ENETDOWN: return "network down";
	case CCI_EBUSY: return "resource busy";
	case CCI_ERANGE: return "value out of range";
	case CCI_EAGAIN: return "nothing available now, try again";
	case CCI_ENOBUFS: return "no buffer available";
	case CCI_EMSGSIZE: return "message larger than the connection's max_send_size";
	case CCI_ENOMSG: return "no message of the wanted kind";
	case CCI_EADDRNOTAVAIL: return "address not available";
	case CCI_ECONNREFUSED: return "connection refused";
	default: return "unknown status";
	}
}

CCI_API const char *cci_strerror(cci_endpoint_t *endpoint, enum cci_status status)
{
	const cci__ep_t *ep = cci__ep_live(endpoint); /* a dead one: the core's text */

	if (ep && ep->plugin && ep->plugin->strerror) {
		const char *s = ep->plugin->strerror((cci__ep_t *)ep, status);
		if (s)
			return s;
	}
	return cci__status_text(status);
}
