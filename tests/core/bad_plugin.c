/*
 * bad_plugin.c - broken plugins the core must refuse without crashing.
 * Built five times: BAD_ABI (a future ABI version), BAD_OPS (a mandatory
 * op missing), BAD_INIT (init fails), BAD_UNDEF (needs a symbol nothing
 * defines, so dlopen() fails), BAD_KEYS (a key's default outside its own
 * range).  And once as OLD_SIZE, a sound plugin whose table ends before
 * conf_keys, as one built before that member was added at the end: the
 * core must load it (members added at the end keep the ABI version).
 * PLUGIN_SYMBOL names the export.
 */
#include "cci_plugin.h"

#ifdef BAD_KEYS
static struct {
	uint32_t mss;
} bad_conf;

static const struct cci_conf_key bad_keys[] = {
	{ .name = "mss", .type = CCI_CONF_UINT, .min = 64, .max = 1024, .def = "8192",
	  .offset = 0, .size = sizeof(bad_conf.mss), .help = "a default outside its range" },
	{ .name = NULL },
};
#endif

#ifdef BAD_UNDEF
/* Defined nowhere: a module built against a library that is not there. */
extern int bad_plugin_missing_symbol(void);
#endif

static const char *const transports[] = { "bogus-" PLUGIN_NAME, NULL };

static int bad_init(const struct cci_core *core)
{
	(void)core;
#ifdef BAD_INIT
	return CCI_ENODEV;
#elif defined(BAD_UNDEF)
	return bad_plugin_missing_symbol();
#else
	return CCI_SUCCESS;
#endif
}

static int no_devices(void) { return CCI_SUCCESS; }
static int dev_configure(cci__dev_t *dev) { (void)dev; return CCI_EINVAL; }

#ifndef BAD_OPS
/* Present so that only the intended defect is found; never reached. */
static int ep_create(cci__ep_t *ep, const char *s) { (void)ep; (void)s; return CCI_ERROR; }
static void ep_stop(cci__ep_t *ep) { (void)ep; }
static void ep_free(cci__ep_t *ep) { (void)ep; }
static int progress(cci__ep_t *ep) { (void)ep; return CCI_SUCCESS; }
static int connect_(cci__ep_t *ep, const char *u, const void *d, uint32_t l,
                    cci_conn_attribute_t a, void *c, const struct timeval *t)
{
	(void)ep; (void)u; (void)d; (void)l; (void)a; (void)c; (void)t;
	return CCI_ERROR;
}
static int accept_(cci__evt_t *e, void *c) { (void)e; (void)c; return CCI_ERROR; }
static int reject_(cci__evt_t *e) { (void)e; return CCI_ERROR; }
static void request_done_(cci__evt_t *e) { (void)e; }
static int disconnect_(cci__conn_t *c) { (void)c; return CCI_ERROR; }
static int send_(cci__conn_t *c, const struct iovec *i, uint32_t n, uint32_t l, void *x, int f)
{
	(void)c; (void)i; (void)n; (void)l; (void)x; (void)f;
	return CCI_ERROR;
}
static int rma_(cci__conn_t *c, const void *m, uint32_t ml, cci__rma_reg_t *lh, uint64_t lo,
                const struct cci_rma_handle *rh, uint64_t ro, uint64_t len, void *x, int f)
{
	(void)c; (void)m; (void)ml; (void)lh; (void)lo; (void)rh; (void)ro; (void)len; (void)x;
	(void)f;
	return CCI_ERROR;
}
#endif

__attribute__((visibility("default"))) const struct cci_plugin PLUGIN_SYMBOL = {
#ifdef OLD_SIZE
	.size = offsetof(struct cci_plugin, conf_keys),
#else
	.size = sizeof(struct cci_plugin),
#endif
#ifdef BAD_ABI
	.abi_version = CCI_PLUGIN_ABI_VERSION + 100,
#else
	.abi_version = CCI_PLUGIN_ABI_VERSION,
#endif
	.name = PLUGIN_NAME,
	.transports = transports,
	.init = bad_init,
	.discover = no_devices,
	.dev_configure = dev_configure,
#ifndef BAD_OPS
	.ep_create = ep_create,
	.ep_stop = ep_stop,
	.ep_free = ep_free,
	.progress = progress,
	.connect = connect_,
	.accept = accept_,
	.reject = reject_,
	.request_done = request_done_,
	.disconnect = disconnect_,
	.send = send_,
	.rma = rma_,
#endif
#ifdef BAD_KEYS
	.conf_keys = bad_keys,
#endif
};
