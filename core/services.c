/*
 * services.c - the table of core services handed to every plugin.
 */
#include "core.h"

const struct cci_core cci__core_services = {
	.size = sizeof(struct cci_core),
	.log_mask = &cci__log_mask,
	.log = cci__log,
	.dev_add = cci__dev_new,
	.conf_error = cci__conf_error,
	.conn_alloc = cci__conn_alloc,
	.conn_release = cci__conn_release,
	.post_recv = cci__post_recv,
	.post_connect = cci__post_connect,
	.post_accept = cci__post_accept,
	.post_request = cci__post_request,
	.post_keepalive_timedout = cci__post_keepalive_timedout,
	.post_dev_failed = cci__post_dev_failed,
	.send_done = cci__send_done,
	.rma_lookup = cci__rma_lookup,
	.status_text = cci__status_text,
	.conf_parse = cci__conf_parse,
	.plugin_note = cci__plugin_note,
	.rma_with_reg = cci__rma_with_reg,
};
