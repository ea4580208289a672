/*
 * plugin.h - entry points of a plugin's ops table that every plugin
 * writes the same way: taking the core's table at init, telling the core
 * what a device is, and freeing a device whose private data is one
 * malloc'd block.
 *
 * Lifetime: the core's table outlives the plugin (the core unloads the
 * plugin before it goes), so a plugin keeps the pointer in a global of
 * its own; dev->priv belongs to the plugin from dev_configure (or
 * discover) to dev_free.
 */
#ifndef CCI_COMMON_PLUGIN_H
#define CCI_COMMON_PLUGIN_H

#include <stdlib.h>

#include "cci_plugin.h"

/* The init step: refuse a core older than the table this plugin was
 * built against, else keep it in *slot. */
static inline int cci__plugin_take_core(const struct cci_core *core, const struct cci_core **slot)
{
	if (!core || core->size < sizeof(struct cci_core))
		return CCI_EINVAL;
	*slot = core;
	return CCI_SUCCESS;
}

/* What discover or dev_configure tells the core of dev: the plugin's
 * private data (dev_free's to free), whether the device is usable, its
 * largest message, its rate in bits per second (0 if unknown) and the
 * text of cci_device_t.info (the plugin's, alive as long as dev). */
static inline void cci__dev_publish(cci__dev_t *dev, void *priv, int up, uint32_t mss,
                                    uint64_t rate, const char *info)
{
	dev->priv = priv;
	dev->pub.up = (unsigned)up;
	dev->pub.max_send_size = mss;
	dev->pub.rate = rate;
	dev->pub.info = info;
}

/* dev_free of a plugin whose dev->priv is a single malloc'd block. */
static inline void cci__dev_free_priv(cci__dev_t *dev)
{
	free(dev->priv);
	dev->priv = NULL;
}

#endif /* CCI_COMMON_PLUGIN_H */
