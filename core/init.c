/*
 * init.c - reference-counted start and stop of the library, the device list.
 */
#include <stdlib.h>

#include "core.h"

static void library_teardown(void)
{
	cci__eps_destroy_all_locked();
	cci__devices_free();
	cci__plugins_unload();
}

static int library_setup(void)
{
	const char *config = getenv("CCI_CONFIG");
	int rc;

	cci__log_init();
	rc = cci__plugins_load(&cci__core_services);
	if (rc == CCI_SUCCESS) {
		if (config && *config)
			rc = cci__config_load(config);
		else
			rc = cci__devices_discover();
	}
	if (rc != CCI_SUCCESS) {
		library_teardown();
		return rc;
	}
	cci__devices_sort();
	LOG(CCI_LOG_INIT, "%d device(s)%s%s", cci__g.ndevs, config ? " from " : "",
	    config ? config : "");
	return CCI_SUCCESS;
}

CCI_API int cci_init(uint32_t abi_ver, uint32_t flags, uint32_t *caps)
{
	static _Atomic int flags_logged;
	int rc = CCI_SUCCESS;

	/* caps is an output CCI 2 required; no init flag is defined. */
	if (abi_ver != CCI_ABI_VERSION || !caps)
		return CCI_EINVAL;
	cci__flags_keep((int)flags, 0, &flags_logged, CCI_LOG_INIT, "cci_init");
	pthread_mutex_lock(&cci__g.lock);
	if (cci__g.refcount == 0)
		rc = library_setup();
	if (rc == CCI_SUCCESS)
		cci__g.refcount++;
	pthread_mutex_unlock(&cci__g.lock);
	if (rc == CCI_SUCCESS)
		*caps = 0;
	return rc;
}

CCI_API int cci_finalize(void)
{
	int rc = CCI_SUCCESS;

	pthread_mutex_lock(&cci__g.lock);
	if (cci__g.refcount == 0)
		rc = CCI_ERROR;
	else if (--cci__g.refcount == 0)
		library_teardown();
	pthread_mutex_unlock(&cci__g.lock);
	return rc;
}

CCI_API int cci_get_devices(cci_device_t *const **devices)
{
	/* struct cci__dev starts with its public part, so the arrays alias. */
	return cci__list_handout((void *const *)&cci__g.devs, &cci__g.ndevs,
	                         (const void *const **)(void *)devices);
}

CCI_API int cci_get_device_priority(cci_device_t *device, int *priority, int *is_default)
{
	cci__dev_t *dev;
	int rc = CCI_SUCCESS;

	if (!device || !priority || !is_default)
		return CCI_EINVAL;
	pthread_mutex_lock(&cci__g.lock);
	if (cci__g.refcount == 0) {
		rc = CCI_ERROR;
	} else if ((dev = cci__dev_from_pub(device)) == NULL) {
		rc = CCI_EINVAL;
	} else {
		*priority = core_dev(dev)->priority;
		*is_default = core_dev(dev)->is_default;
	}
	pthread_mutex_unlock(&cci__g.lock);
	return rc;
}
