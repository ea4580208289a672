/*
 * sm_plugin.c - the shared-memory transport's ops table, its device and
 * its ini keys.
 */
#include <stdio.h>
#include <stdlib.h>

#include "plugin.h"
#include "sm.h"

const struct cci_core *sm_core;

extern const struct cci_plugin cci_ctp_sm_plugin;

static const char sm_info[] =
	"shared memory between processes of this host (rings in memfd segments, "
	"RMA by cross-memory attach)";

static int sm_init(const struct cci_core *core)
{
	return cci__plugin_take_core(core, &sm_core);
}

/* path= must be absolute: endpoint URIs are sm://<path>/<pid>/<id>. */
static int path_check(const char *value, void *field, char *why, size_t whylen)
{
	(void)field;
	if (value[0] == '/')
		return CCI_SUCCESS;
	snprintf(why, whylen, "is not an absolute path");
	return CCI_EINVAL;
}

static const char *const sm_rma_modes[] = { "cma", "copy", NULL };

/* The ini keys, as plugins/sm/README.md lists them. */
static const struct cci_conf_key sm_conf_keys[] = {
	{ .name = "path", .type = CCI_CONF_STRING, .check = path_check,
	  .offset = offsetof(struct sm_dev, base), .size = SM_BASE_SIZE,
	  .help = "absolute directory of the endpoints' sockets; endpoint URIs read "
	          "sm://<path>/<pid>/<id> (default /tmp/cci-sm-<uid>)" },
	{ .name = "mss", .type = CCI_CONF_UINT, .min = SM_MSS_MIN, .max = SM_MSS_MAX,
	  .def = CCI_CONF_NUM(SM_MSS_DEFAULT), .offset = offsetof(struct sm_dev, mss),
	  .size = sizeof(uint32_t), .help = "largest message, in bytes" },
	{ .name = "rma", .type = CCI_CONF_CHOICE, .choices = sm_rma_modes, .def = "cma",
	  .offset = offsetof(struct sm_dev, rma_copy), .size = sizeof(int),
	  .help = "how RMA moves data: cma copies straight between the processes "
	          "(falling back to copy when the kernel forbids it), copy goes through "
	          "shared bounce buffers" },
	CCI__PROGRESS_KEY(struct sm_dev, manual),
	{ .name = NULL },
};

/* The device's settings: the defaults, then for a configured device (dev)
 * its ini keys; without dev, the device is added (discovery). */
static int sm_dev_configure(cci__dev_t *dev)
{
	struct sm_dev *d = calloc(1, sizeof(*d));
	int rc = CCI_ENOMEM;

	if (!d)
		return CCI_ENOMEM;
	snprintf(d->base, sizeof(d->base), "/tmp/cci-sm-%u", (unsigned)geteuid());
	d->mss = SM_MSS_DEFAULT;
	if (dev)
		rc = sm_core->conf_parse(dev, sm_conf_keys, d, NULL);
	else if ((dev = sm_core->dev_add(&cci_ctp_sm_plugin, "sm")) != NULL)
		rc = CCI_SUCCESS;
	if (rc != CCI_SUCCESS) {
		free(d);
		return rc;
	}
	cci__dev_publish(dev, d, 1, d->mss, 0, sm_info);
	return CCI_SUCCESS;
}

static int sm_discover(void)
{
	return sm_dev_configure(NULL);
}

static const char *const sm_transports[] = { "sm", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_sm_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "sm",
	.transports = sm_transports,
	.priority = 50,
	.ep_priv_size = sizeof(struct sm_ep),
	.conn_priv_size = sizeof(struct sm_conn *),
	.init = sm_init,
	.discover = sm_discover,
	.dev_configure = sm_dev_configure,
	.dev_free = cci__dev_free_priv,
	.ep_create = sm_ep_create,
	.ep_stop = sm_ep_stop,
	.ep_free = sm_ep_free,
	.progress = sm_progress,
	.arm = sm_arm,
	.ep_set_buf_count = sm_ep_set_buf_count,
	.conn_timeouts_changed = sm_conn_timeouts_changed,
	.connect = sm_connect,
	.accept = sm_accept,
	.reject = sm_reject,
	.request_done = sm_request_done,
	.disconnect = sm_disconnect,
	.send = sm_send,
	.rma_register = sm_rma_register,
	.rma_deregister = sm_rma_deregister,
	.rma = sm_rma,
	.recv_returned = sm_recv_returned,
	.conf_keys = sm_conf_keys,
};
