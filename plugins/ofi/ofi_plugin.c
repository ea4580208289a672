/*
 * ofi_plugin.c - the libfabric transport's ops table: the one file that
 * names every entry point, and that no other file calls.
 */
#include "ofi.h"
#include "plugin.h"

const struct cci_core *ofi_core;

static int ofi_init(const struct cci_core *core)
{
	return cci__plugin_take_core(core, &ofi_core);
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
	.finalize = ofi_live_fini, /* the process's record of its endpoints (ofi_live.c) */
	.discover = ofi_discover,
	.dev_configure = ofi_dev_configure,
	.dev_free = ofi_dev_free,
	.ep_create = ofi_ep_create,
	.ep_stop = ofi_ep_stop,
	.ep_free = ofi_ep_free,
	.progress = ofi_progress,
	.arm = ofi_arm,
	.ep_set_buf_count = ofi_ep_set_buf_count,
	.conn_timeouts_changed = ofi_conn_timeouts_changed,
	.connect = ofi_connect,
	.accept = ofi_accept,
	.reject = ofi_reject,
	.request_done = ofi_request_done,
	.disconnect = ofi_disconnect,
	.send = ofi_send,
	.rma_register = ofi_rma_register,
	.rma_deregister = ofi_rma_deregister,
	.rma = ofi_rma,
	.recv_returned = ofi_recv_returned,
	.strerror = ofi_strerror,
	.conf_keys = ofi_conf_keys,
};
