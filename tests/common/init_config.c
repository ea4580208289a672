/*
 * init_config.c - see init_config.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "init_config.h"

cci_device_t *init_config_first_device(const char *text, const char *ctp)
{
	char path[64];
	cci_device_t *const *devs;
	uint32_t caps;
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "/tmp/cci-test-%d.ini", (int)getpid());
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		return NULL;
	setenv("CCI_CONFIG", path, 1);
	setenv("CCI_CTP", ctp, 1);
	rc = cci_init(CCI_ABI_VERSION, 0, &caps);
	unlink(path);
	CU_ASSERT_EQUAL(rc, CCI_SUCCESS);
	if (rc != CCI_SUCCESS || cci_get_devices(&devs) != CCI_SUCCESS || !devs[0])
		return NULL;
	return devs[0];
}

cci_device_t *init_device_named(const char *name)
{
	cci_device_t *const *devs = NULL;

	if (cci_get_devices(&devs) != CCI_SUCCESS)
		return NULL;
	for (int i = 0; devs[i]; i++)
		if (strcmp(devs[i]->name, name) == 0)
			return devs[i];
	return NULL;
}
