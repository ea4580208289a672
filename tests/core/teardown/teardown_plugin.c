/*
 * teardown_plugin.c - a transport that only records its teardown, for
 * teardown_test.c: one device, endpoints that do nothing, and ep_close,
 * ep_stop and ep_free appending a line each to the file named by
 * CCI_TEARDOWN_LOG.  At ep_stop it also posts a connection request, as a
 * peer's request arriving during teardown would be, and records the
 * core's answer (it must be refused: no new work after close).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cci_plugin.h"

static const struct cci_core *core;
static int next_ep;
extern const struct cci_plugin cci_ctp_teardown_plugin;

static void record(const char *step, cci__ep_t *ep, int rc)
{
	const char *path = getenv("CCI_TEARDOWN_LOG");
	FILE *f = path ? fopen(path, "a") : NULL;

	if (!f)
		return;
	fprintf(f, "%s %s %d\n", step, ep->uri, rc);
	fclose(f);
}

static int td_init(const struct cci_core *c)
{
	core = c;
	return CCI_SUCCESS;
}

static int td_discover(void)
{
	cci__dev_t *dev = core->dev_add(&cci_ctp_teardown_plugin, "teardown0");

	if (!dev)
		return CCI_ENOMEM;
	dev->pub.up = 1;
	dev->pub.max_send_size = 1024;
	return CCI_SUCCESS;
}

static int td_dev_configure(cci__dev_t *dev)
{
	dev->pub.up = 1;
	dev->pub.max_send_size = 1024;
	return CCI_SUCCESS;
}

static int td_ep_create(cci__ep_t *ep, const char *service)
{
	char uri[32];

	(void)service;
	snprintf(uri, sizeof(uri), "teardown://%d", next_ep++);
	ep->uri = strdup(uri);
	return ep->uri ? CCI_SUCCESS : CCI_ENOMEM;
}

static void td_ep_close(cci__ep_t *ep) { record("close", ep, 0); }

static void td_ep_stop(cci__ep_t *ep)
{
	record("stop", ep, 0);
	record("request", ep, core->post_request(ep, CCI_CONN_ATTR_RO, NULL, 0, NULL));
}

static void td_ep_free(cci__ep_t *ep) { record("free", ep, 0); }

static int td_progress(cci__ep_t *ep) { (void)ep; return CCI_SUCCESS; }

static int td_connect(cci__ep_t *ep, const char *u, const void *d, uint32_t l,
                      cci_conn_attribute_t a, void *c, const struct timeval *t)
{
	(void)ep; (void)u; (void)d; (void)l; (void)a; (void)c; (void)t;
	return CCI_ENODEV;
}
static int td_accept(cci__evt_t *e, void *c) { (void)e; (void)c; return CCI_EINVAL; }
static int td_reject(cci__evt_t *e) { (void)e; return CCI_EINVAL; }
static void td_request_done(cci__evt_t *e) { (void)e; }
static int td_disconnect(cci__conn_t *c) { (void)c; return CCI_EINVAL; }
static int td_send(cci__conn_t *c, const struct iovec *i, uint32_t n, uint32_t l, void *x, int f)
{
	(void)c; (void)i; (void)n; (void)l; (void)x; (void)f;
	return CCI_ERR_DISCONNECTED;
}
static int td_rma(cci__conn_t *c, const void *m, uint32_t ml, cci__rma_reg_t *lh, uint64_t lo,
                  const struct cci_rma_handle *rh, uint64_t ro, uint64_t len, void *x, int f)
{
	(void)c; (void)m; (void)ml; (void)lh; (void)lo; (void)rh; (void)ro; (void)len; (void)x;
	(void)f;
	return CCI_ERR_DISCONNECTED;
}

static const char *const transports[] = { "teardown", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_teardown_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "teardown",
	.transports = transports,
	.init = td_init,
	.discover = td_discover,
	.dev_configure = td_dev_configure,
	.ep_create = td_ep_create,
	.ep_close = td_ep_close,
	.ep_stop = td_ep_stop,
	.ep_free = td_ep_free,
	.progress = td_progress,
	.connect = td_connect,
	.accept = td_accept,
	.reject = td_reject,
	.request_done = td_request_done,
	.disconnect = td_disconnect,
	.send = td_send,
	.rma = td_rma,
};
