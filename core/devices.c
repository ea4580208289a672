/*
 * devices.c - the device list: creation, discovery, ordering, freeing.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* conf_argv of a discovered device: empty, never NULL. */
static const char *const empty_argv[] = { NULL };

cci__dev_t *cci__dev_new(const struct cci_plugin *plugin, const char *name)
{
	cci__dev_t *dev, **grown;

	/* Zeroed, padding included: bindings read these structs by offset. */
	dev = calloc(1, sizeof(struct cci__dev_core));
	grown = realloc(cci__g.devs, sizeof(*grown) * (size_t)(cci__g.ndevs + 2));
	if (!dev || !grown) {
		free(dev);
		return NULL;
	}
	cci__g.devs = grown;
	dev->pub.name = strdup(name);
	if (!dev->pub.name) {
		free(dev);
		return NULL;
	}
	dev->pub.transport = plugin->transports[0];
	dev->pub.info = "";
	dev->pub.conf_argv = empty_argv;
	dev->pub.pci.domain = dev->pub.pci.bus = UINT32_MAX;
	dev->pub.pci.dev = dev->pub.pci.func = UINT32_MAX;
	dev->plugin = plugin;
	core_dev(dev)->priority = plugin->priority;
	cci__g.devs[cci__g.ndevs++] = dev;
	cci__g.devs[cci__g.ndevs] = NULL;
	return dev;
}

int cci__devices_discover(void)
{
	for (struct cci__plugin_mod *m = cci__g.plugins; m; m = m->next) {
		int rc;
		if (!m->initialized)
			continue;
		rc = m->ops->discover();
		if (rc != CCI_SUCCESS)
			LOG_WARN("plugin %s: device discovery failed: %s", m->ops->name,
			         cci_strerror(NULL, rc));
	}
	return CCI_SUCCESS;
}

/* up first, then the default, then priority, then rate; stable otherwise. */
static int dev_before(const struct cci__dev_core *a, const struct cci__dev_core *b)
{
	if (!a->dev.pub.up != !b->dev.pub.up)
		return a->dev.pub.up != 0;
	if (a->is_default != b->is_default)
		return a->is_default;
	if (a->priority != b->priority)
		return a->priority > b->priority;
	if (a->dev.pub.rate != b->dev.pub.rate)
		return a->dev.pub.rate > b->dev.pub.rate;
	return 0;
}

void cci__devices_sort(void)
{
	/* Insertion sort: a handful of devices, and it is stable. */
	for (int i = 1; i < cci__g.ndevs; i++) {
		cci__dev_t *d = cci__g.devs[i];
		int j = i - 1;
		while (j >= 0 && dev_before(core_dev(d), core_dev(cci__g.devs[j]))) {
			cci__g.devs[j + 1] = cci__g.devs[j];
			j--;
		}
		cci__g.devs[j + 1] = d;
	}
}

static void dev_free(cci__dev_t *dev)
{
	if (dev->plugin && dev->plugin->dev_free)
		dev->plugin->dev_free(dev);
	for (int i = 0; i < dev->conf_count; i++) {
		free(dev->conf[i].key);
		free(dev->conf[i].value);
	}
	free(dev->conf);
	if (dev->pub.conf_argv != empty_argv) {
		for (const char *const *a = dev->pub.conf_argv; *a; a++)
			free((char *)*a);
		free((void *)dev->pub.conf_argv);
	}
	free((char *)dev->pub.name);
	free(dev);
}

void cci__devices_free(void)
{
	for (int i = 0; i < cci__g.ndevs; i++)
		dev_free(cci__g.devs[i]);
	free(cci__g.devs);
	cci__g.devs = NULL;
	cci__g.ndevs = 0;
}

cci__dev_t *cci__dev_from_pub(cci_device_t *pub)
{
	for (int i = 0; i < cci__g.ndevs; i++)
		if (&cci__g.devs[i]->pub == pub)
			return cci__g.devs[i];
	return NULL;
}
