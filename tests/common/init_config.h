/*
 * init_config.h - cci_init in this process with a configuration written
 * by the test, for transport suites that run their cases in-process, and
 * finding a device of it by name.
 */
#ifndef CCI_TEST_INIT_CONFIG_H
#define CCI_TEST_INIT_CONFIG_H

#include <cci.h>

/*
 * Write text to a file of this process's own, run cci_init with
 * CCI_CONFIG naming it and CCI_CTP=ctp, and remove the file.  Returns the
 * first device, or NULL when any step failed (a CUnit assertion records
 * a failed cci_init).  The caller finalizes.
 */
cci_device_t *init_config_first_device(const char *text, const char *ctp);

/* After cci_init: the device of the configuration section name, or NULL. */
cci_device_t *init_device_named(const char *name);

#endif /* CCI_TEST_INIT_CONFIG_H */
