/*
 * verbs_plugin.c - the verbs transport's ops table: the one file that
 * names every entry point, and that no other file calls.
 */
#include "verbs.h"

const struct cci_core *verbs_core;

static int verbs_init(const struct cci_core *core)
{
	if (!core || core->size < offsetof(struct cci_core, conf_parse) + sizeof(void *))
		return CCI_EINVAL;
	verbs_core = core;
	return CCI_SUCCESS;
}

static const char *verbs_strerror(cci__ep_t *ep, int status)
{
	(void)ep;
	if (status == CCI_ERR_RMA_OP)
		return "the adapter failed an RMA operation at the target";
	if (status == CCI_ERR_RNR)
		return "the peer had no receive buffer posted for too long";
	return NULL;
}

static const char *const verbs_transports[] = { "verbs", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_verbs_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "verbs",
	.transports = verbs_transports,
	.priority = 40,
	.ep_priv_size = sizeof(struct verbs_ep),
	.conn_priv_size = sizeof(struct verbs_conn *),
	.init = verbs_init,
	.discover = verbs_discover,
	.dev_configure = verbs_dev_configure,
	.dev_free = verbs_dev_free,
	.ep_create = verbs_ep_create,
	.ep_stop = verbs_ep_stop,
	.ep_free = verbs_ep_free,
	.progress = verbs_progress,
	.arm = verbs_arm,
	.ep_set_buf_count = verbs_ep_set_buf_count,
	.conn_timeouts_changed = verbs_conn_timeouts_changed,
	.connect = verbs_connect,
	.accept = verbs_accept,
	.reject = verbs_reject,
	.request_done = verbs_request_done,
	.disconnect = verbs_disconnect,
	.send = verbs_send,
	.rma_register = verbs_rma_register,
	.rma_deregister = verbs_rma_deregister,
	.rma = verbs_rma,
	.recv_returned = verbs_recv_returned,
	.strerror = verbs_strerror,
	.conf_keys = verbs_conf_keys,
};
