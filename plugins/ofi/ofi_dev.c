/*
 * ofi_dev.c - devices: which libfabric providers we can use, discovery
 * without a config file, and the ini keys of a config section.
 *
 * A provider is usable when fi_getinfo offers it FI_EP_RDM endpoints with
 * FI_MSG | FI_RMA under the mode and memory-registration bits we handle,
 * with room for 8 KiB messages, AND the core provider (the name before
 * any ';', e.g. tcp in "tcp;ofi_rxm") offers FI_RMA itself.  That last
 * rule keeps RMA a transfer by the provider into the peer's memory: rxm
 * hands RMA to the core provider's endpoints (tcp, verbs), while a
 * utility layer over a datagram provider (udp;ofi_rxd) would emulate it,
 * so "provider = udp" is refused with a message saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ifaddr.h"
#include "ofi.h"
#include "plugin.h"

#define OFI_MR_HANDLED (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | \
                        FI_MR_ENDPOINT)
#define OFI_MAX_DEVS 32

enum ofi_key {
	OFI_KEY_PROVIDER, OFI_KEY_DOMAIN, OFI_KEY_IFACE, OFI_KEY_MSS, OFI_KEY_PROGRESS, OFI_KEY_COUNT
};

/* Settings of a config section before resolution; "" when absent. */
struct ofi_conf {
	char provider[OFI_PROV_LEN], domain[OFI_PROV_LEN], iface[OFI_PROV_LEN];
	uint32_t mss;
	int manual; /* progress = manual (progress_key.h) */
	int kv[OFI_KEY_COUNT]; /* the conf entry of each key, for messages; -1 if absent */
};

/* The ini keys, as plugins/ofi/README.md lists them. */
const struct cci_conf_key ofi_conf_keys[] = {
	[OFI_KEY_PROVIDER] = {
		.name = "provider", .type = CCI_CONF_STRING,
		.offset = offsetof(struct ofi_conf, provider), .size = OFI_PROV_LEN,
		.help = "a libfabric provider, full (tcp;ofi_rxm) or core (tcp); one missing on "
		        "this host makes a device that is down (default: the first usable one)" },
	[OFI_KEY_DOMAIN] = {
		.name = "domain", .type = CCI_CONF_STRING,
		.offset = offsetof(struct ofi_conf, domain), .size = OFI_PROV_LEN,
		.help = "a libfabric domain name (fi_info's domain:), e.g. eth0 or mlx5_0 "
		        "(default: the provider's first)" },
	[OFI_KEY_IFACE] = {
		.name = "iface", .type = CCI_CONF_STRING,
		.offset = offsetof(struct ofi_conf, iface), .size = OFI_PROV_LEN,
		.help = "a network interface; the endpoint binds to its address (default: any)" },
	[OFI_KEY_MSS] = {
		.name = "mss", .type = CCI_CONF_UINT, .min = OFI_MSS_MIN, .max = OFI_MSS_MAX,
		.def = CCI_CONF_NUM(OFI_MSS_DEFAULT), .offset = offsetof(struct ofi_conf, mss),
		.size = sizeof(uint32_t),
		.help = "largest message, in bytes, capped by the provider" },
	[OFI_KEY_PROGRESS] = CCI__PROGRESS_KEY(struct ofi_conf, manual),
	[OFI_KEY_COUNT] = { .name = NULL },
};

/* A string key of the section, NULL when it is absent (a given one is never empty). */
static const char *given(const char *value)
{
	return value[0] ? value : NULL;
}

/* fi_getinfo for the endpoints we open (RDM, FI_MSG | FI_RMA, the modes
 * we handle) of provider prov, domain and fabric when given (else any),
 * bound to node and service when given.  0 or a negative FI_* error. */
int ofi_getinfo(const char *prov, const char *domain, const char *fabric, const char *node,
                const char *service, struct fi_info **list_p)
{
	struct fi_info *h = ofi_lib.dupinfo(NULL);
	int rc = -FI_ENOMEM;

	if (h && (!prov || (h->fabric_attr->prov_name = strdup(prov))) &&
	    (!domain || (h->domain_attr->name = strdup(domain))) &&
	    (!fabric || (h->fabric_attr->name = strdup(fabric)))) {
		h->ep_attr->type = FI_EP_RDM;
		h->caps = FI_MSG | FI_RMA;
		h->mode = FI_CONTEXT | FI_CONTEXT2;
		h->domain_attr->mr_mode = OFI_MR_HANDLED;
		h->domain_attr->threading = FI_THREAD_SAFE;
		h->addr_format = FI_FORMAT_UNSPEC;
		rc = ofi_lib.getinfo(OFI_API_VERSION, node, service, node || service ? FI_SOURCE : 0,
		                     h, list_p);
	}
	ofi_lib.freeinfo(h);
	return rc;
}

static void core_name_of(const char *prov, char *out, size_t len)
{
	size_t n = strcspn(prov, ";");

	if (n >= len)
		n = len - 1;
	memcpy(out, prov, n);
	out[n] = '\0';
}

/* Does the core provider itself (no utility layer) offer FI_RMA? */
static int core_has_rma(const char *core)
{
	struct fi_info *h = ofi_lib.dupinfo(NULL), *list = NULL;
	int found = 0;

	if (!h || !(h->fabric_attr->prov_name = strdup(core))) {
		ofi_lib.freeinfo(h);
		return 0;
	}
	h->caps = FI_RMA;
	h->mode = ~0ull;
	h->domain_attr->mr_mode = OFI_MR_HANDLED | FI_MR_RAW | FI_MR_RMA_EVENT | FI_MR_MMU_NOTIFY |
	                          FI_MR_HMEM;
	if (ofi_lib.getinfo(OFI_API_VERSION, NULL, NULL, 0, h, &list) == 0) {
		for (struct fi_info *fi = list; fi && !found; fi = fi->next)
			found = strcmp(fi->fabric_attr->prov_name, core) == 0 &&
			        (fi->caps & FI_RMA);
		ofi_lib.freeinfo(list);
	}
	ofi_lib.freeinfo(h);
	return found;
}

/* NULL if fi can carry this transport, else why not. */
static const char *info_unusable(const struct fi_info *fi)
{
	char core[OFI_PROV_LEN];

	core_name_of(fi->fabric_attr->prov_name, core, sizeof(core));
	if (!(fi->caps & FI_RMA) || !core_has_rma(core))
		return "it lacks FI_RMA (RMA would be emulated over datagrams by a utility "
		       "layer, not done by the provider)";
	if (fi->ep_attr->max_msg_size < OFI_MSS_MIN + OFI_HDR_LEN)
		return "its largest message is below 8 KiB";
	if (fi->domain_attr->mr_mode & ~(int)OFI_MR_HANDLED & ~FI_MR_HMEM & ~FI_MR_BASIC)
		return "it needs memory-registration modes this plugin does not handle";
	if (fi->tx_attr->iov_limit < 1 || fi->rx_attr->iov_limit < 1)
		return "it takes no I/O vectors";
	return NULL;
}

/* Fill dev from fi (copied); the device is up, its mss at most the
 * provider's largest message. */
static int dev_publish(cci__dev_t *dev, const struct fi_info *fi, const char *node, uint32_t mss,
                       int manual)
{
	uint64_t max = fi->ep_attr->max_msg_size - OFI_HDR_LEN;
	struct ofi_dev *d = calloc(1, sizeof(*d));

	if (!d || !(d->info = ofi_lib.dupinfo(fi))) {
		free(d);
		return CCI_ENOMEM;
	}
	core_name_of(fi->fabric_attr->prov_name, d->core_name, sizeof(d->core_name));
	snprintf(d->node, sizeof(d->node), "%s", node ? node : "");
	d->mss = max < mss ? (uint32_t)max : mss;
	d->manual = manual;
	snprintf(d->info_text, sizeof(d->info_text),
	         "libfabric provider %s, domain %s, fabric %s (RDM endpoints)",
	         fi->fabric_attr->prov_name, fi->domain_attr->name, fi->fabric_attr->name);
	cci__dev_publish(dev, d, 1, d->mss, 0, d->info_text);
	return CCI_SUCCESS;
}

static int name_seen(char seen[][OFI_PROV_LEN], int n, const char *core)
{
	for (int i = 0; i < n; i++)
		if (strcmp(seen[i], core) == 0)
			return 1;
	return 0;
}

/* Discovery: one device per usable provider, named ofi-<provider>. */
int ofi_discover(void)
{
	struct fi_info *list = NULL;
	char seen[OFI_MAX_DEVS][OFI_PROV_LEN], name[OFI_PROV_LEN + 8];
	const char *why = NULL;
	int nseen = 0, rc;

	if (ofi_lib_load(&why) != CCI_SUCCESS) {
		OFI_LOG(CCI_LOG_INIT, "ofi: no devices: %s", why);
		return CCI_SUCCESS;
	}
	rc = ofi_getinfo(NULL, NULL, NULL, NULL, NULL, &list);
	if (rc == -FI_ENOMEM)
		return CCI_ENOMEM;
	if (rc != 0) {
		OFI_LOG(CCI_LOG_INIT, "ofi: no provider offers RDM endpoints: %s", ofi_lib.strerror(-rc));
		return CCI_SUCCESS;
	}
	for (struct fi_info *fi = list; fi && nseen < OFI_MAX_DEVS; fi = fi->next) {
		const char *why;
		cci__dev_t *dev;

		core_name_of(fi->fabric_attr->prov_name, seen[nseen], OFI_PROV_LEN);
		if (name_seen(seen, nseen, seen[nseen]))
			continue;
		why = info_unusable(fi);
		if (why) {
			OFI_LOG(CCI_LOG_INIT, "ofi: provider %s skipped: %s", fi->fabric_attr->prov_name, why);
			nseen++;
			continue;
		}
		snprintf(name, sizeof(name), "ofi-%s", seen[nseen++]);
		dev = ofi_core->dev_add(&cci_ctp_ofi_plugin, name);
		if (!dev || dev_publish(dev, fi, NULL, OFI_MSS_DEFAULT, 0) != CCI_SUCCESS)
			break;
		OFI_LOG(CCI_LOG_INIT, "ofi: device %s: %s", name, dev->pub.info);
	}
	ofi_lib.freeinfo(list);
	return CCI_SUCCESS;
}

/* Does entry fi match the provider= value (full name or core name)? */
static int prov_matches(const struct fi_info *fi, const char *want)
{
	char core[OFI_PROV_LEN];

	if (!want || strcmp(fi->fabric_attr->prov_name, want) == 0)
		return 1;
	core_name_of(fi->fabric_attr->prov_name, core, sizeof(core));
	return strcmp(core, want) == 0;
}

/* The device could not be resolved on this host: keep it, down. */
static void dev_down(cci__dev_t *dev, const struct ofi_conf *c, const char *why)
{
	const char *prov = given(c->provider) ? c->provider : "any";
	struct ofi_dev *d = calloc(1, sizeof(*d));

	OFI_WARN("ofi: device [%s] (provider %s): %s; the device is down", dev->pub.name, prov,
	         why);
	if (!d)
		return;
	snprintf(d->info_text, sizeof(d->info_text), "libfabric provider %s: %s", prov, why);
	cci__dev_publish(dev, d, 0, OFI_MSS_MIN, 0, d->info_text);
}

/* Pick the entry for c among list; CCI_EINVAL (after conf_error) if the
 * named provider exists but cannot be used. */
static int conf_pick(cci__dev_t *dev, const struct ofi_conf *c, struct fi_info *list,
                     const char *node)
{
	const char *want = given(c->provider), *why = NULL;

	for (struct fi_info *fi = list; fi; fi = fi->next) {
		if (!prov_matches(fi, want))
			continue;
		why = info_unusable(fi);
		if (!why)
			return dev_publish(dev, fi, node, c->mss, c->manual);
		if (want) {
			ofi_core->conf_error(dev, c->kv[OFI_KEY_PROVIDER], "provider %s refused: %s",
			                     fi->fabric_attr->prov_name, why);
			return CCI_EINVAL;
		}
	}
	dev_down(dev, c, why ? why : "no RDM endpoint of it on this host");
	return CCI_SUCCESS;
}

int ofi_dev_configure(cci__dev_t *dev)
{
	struct ofi_conf c = { 0 };
	struct fi_info *list = NULL;
	char node[64] = "", why[160];
	const char *lib_why = NULL;
	int rc;

	rc = ofi_core->conf_parse(dev, ofi_conf_keys, &c, c.kv);
	if (rc != CCI_SUCCESS)
		return rc;
	if (ofi_lib_load(&lib_why) != CCI_SUCCESS) {
		dev_down(dev, &c, lib_why);
		return CCI_SUCCESS;
	}
	if (given(c.iface) && !cci__if_addr_str(c.iface, node, sizeof(node))) {
		ofi_core->conf_error(dev, c.kv[OFI_KEY_IFACE], "\"%s\" has no IP address on this host",
		                     c.iface);
		return CCI_EINVAL;
	}
	rc = ofi_getinfo(given(c.provider), given(c.domain), NULL, given(node), NULL, &list);
	if (rc == -FI_ENOMEM)
		return CCI_ENOMEM;
	if (rc != 0) {
		snprintf(why, sizeof(why), "not available here (fi_getinfo: %s)", ofi_lib.strerror(-rc));
		dev_down(dev, &c, why);
		return CCI_SUCCESS;
	}
	rc = conf_pick(dev, &c, list, given(node));
	ofi_lib.freeinfo(list);
	return rc;
}

void ofi_dev_free(cci__dev_t *dev)
{
	struct ofi_dev *d = dev->priv;

	if (d && d->info) /* a device that is down may have none, and no libfabric */
		ofi_lib.freeinfo(d->info);
	cci__dev_free_priv(dev);
}
