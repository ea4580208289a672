/*
 * ofi_plugin.c - the libfabric transport's ops table and what every file of
 * it uses (clock, status mapping).
 */
#include <stdlib.h>
#include <time.h>

#include "ofi.h"

const struct cci_core *ofi_core;

static int ofi_init(const struct cci_core *core)
{
	if (!core || core->size < sizeof(struct cci_core))
		return CCI_EINVAL;
	ofi_core = core;
	return CCI_SUCCESS;
}

static void ofi_finalize(void)
{
	ofi_live_fini();
}

uint64_t ofi_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A libfabric error (positive FI_* value) as a CCI status. */
int ofi_fi_status(int fi_err)
{
	switch (fi_err) {
	case 0:
		return CCI_SUCCESS;
	case FI_EAGAIN:
		return CCI_EAGAIN;
	case FI_ENOMEM:
		return CCI_ENOMEM;
	case FI_EINVAL:
		return CCI_EINVAL;
	case FI_EADDRINUSE:
	case FI_EBUSY:
		return CCI_EBUSY;
	case FI_EADDRNOTAVAIL:
		return CCI_EADDRNOTAVAIL;
	case FI_ECONNREFUSED:
		return CCI_ECONNREFUSED;
	case FI_ETIMEDOUT:
		return CCI_ETIMEDOUT;
	case FI_ENODEV:
	case FI_ENODATA:
		return CCI_ENODEV;
	case FI_EMSGSIZE:
	case FI_ETOOSMALL:
		return CCI_EMSGSIZE;
	case FI_EACCES:
	case FI_EKEYREJECTED:
	case FI_ENOKEY:
		return CCI_ERR_RMA_HANDLE;
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_ESHUTDOWN:
	case FI_EHOSTDOWN:
	case FI_ENETDOWN:
	case FI_EHOSTUNREACH:
	case FI_ENETUNREACH:
	case FI_ECANCELED:
		return CCI_ERR_DISCONNECTED;
	case FI_EIO:
	case FI_EREMOTEIO:
		return CCI_ERR_RMA_OP;
	default:
		return CCI_ERROR;
	}
}

static void ofi_return_any(cci__evt_t *evt)
{
	if (evt->req_state)
		ofi_req_returned(evt);
	else
		ofi_return_event(evt);
}

static const char *ofi_strerror(cci__ep_t *ep, int status)
{
	(void)ep;
	if (status == CCI_ERR_RMA_OP)
		return "the provider failed an RMA operation at the target";
	return NULL;
}

static const char *const ofi_transports[] = { "ofi", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_ofi_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "ofi",
	.transports = ofi_transports,
	.priority = 40,
	.ep_priv_size = sizeof(struct ofi_ep),
	.conn_priv_size = sizeof(struct ofi_conn *),
	.init = ofi_init,
	.finalize = ofi_finalize,
	.discover = ofi_discover,
	.dev_configure = ofi_dev_configure,
	.dev_free = ofi_dev_free,
	.ep_create = ofi_ep_create,
	.ep_destroy = ofi_ep_destroy,
	.progress = ofi_progress,
	.arm = ofi_arm,
	.ep_set_buf_count = ofi_ep_set_buf_count,
	.conn_timeouts_changed = ofi_conn_timeouts_changed,
	.connect = ofi_connect,
	.accept = ofi_accept,
	.reject = ofi_reject,
	.disconnect = ofi_disconnect,
	.send = ofi_send,
	.rma_register = ofi_rma_register,
	.rma_deregister = ofi_rma_deregister,
	.rma = ofi_rma,
	.return_event = ofi_return_any,
	.strerror = ofi_strerror,
	.conf_keys = ofi_conf_keys,
};
