/*
 * t_init.c - cci_init/cci_finalize, the device list and the config file.
 * Each test runs in a fresh process, so the library starts uninitialised
 * and CCI_CONFIG can be set before the first cci_init().
 */
#include "tests.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void wrong_abi_is_einval(void)
{
	uint32_t caps = 77;

	CHECK_RC(cci_init(CCI_ABI_VERSION - 1, 0, &caps), CCI_EINVAL);
	CHECK_RC(cci_init(CCI_ABI_VERSION + 1, 0, &caps), CCI_EINVAL);
	CHECK_RC(cci_init(0, 0, &caps), CCI_EINVAL);
	CHECKF(caps == 77, "caps written by a failed cci_init (%u)", caps);
	CHECK_RC(cci_finalize(), CCI_ERROR); /* a failed init does not count */
}

/* CCI 2 ignored init flags (none is defined); programs pass what they
 * passed to it. */
static void init_flags_are_ignored(void)
{
	uint32_t caps = 77;

	CHECK_RC(cci_init(CCI_ABI_VERSION, 1, &caps), CCI_SUCCESS);
	CHECK(caps == 0);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_ERROR);
}

static void init_sets_caps_and_refuses_null(void)
{
	uint32_t caps = 77;

	CHECK_RC(cci_init(CCI_ABI_VERSION, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_finalize(), CCI_ERROR); /* the refused init does not count */
	CHECK_RC(cci_init(CCI_ABI_VERSION, 0, &caps), CCI_SUCCESS);
	CHECK(caps == 0);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
}

static void init_is_reference_counted(void)
{
	cci_device_t *const *devs = NULL;

	REQUIRE_RC(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), CCI_SUCCESS);
	REQUIRE_RC(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	/* one reference left: the library still works */
	CHECK_RC(cci_get_devices(&devs), CCI_SUCCESS);
	CHECK(devs != NULL);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_ERROR);
}

static void finalize_without_init_fails(void)
{
	CHECK_RC(cci_finalize(), CCI_ERROR);
}

static void init_after_last_finalize_restarts(void)
{
	cci_device_t *dev = h_setup();
	cci_endpoint_t *ep = h_endpoint(dev, NULL);

	CHECK_RC(cci_destroy_endpoint(ep), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	dev = h_setup();
	ep = h_endpoint(dev, NULL);
	free(h_uri(ep));
	h_teardown(ep);
}

static void last_finalize_destroys_open_endpoints(void)
{
	cci_device_t *dev = h_setup();
	cci_os_handle_t fd = -1;

	h_endpoint(dev, &fd);
	h_endpoint(dev, NULL);
	CHECK(fd >= 0);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	CHECKF(fcntl(fd, F_GETFD) == -1, "the OS handle %d is still open after "
	       "cci_finalize destroyed its endpoint", fd);
}

static int argv_has(const char *const *argv, const char *kv)
{
	for (int i = 0; argv && argv[i]; i++)
		if (strcmp(argv[i], kv) == 0)
			return 1;
	return 0;
}

static void device_list_is_null_terminated_and_complete(void)
{
	cci_device_t *const *devs = NULL;
	int n = 0;

	h_setup();
	REQUIRE_RC(cci_get_devices(&devs), CCI_SUCCESS);
	REQUIRE(devs != NULL);
	for (; devs[n] && n < 1000; n++) {
		cci_device_t *d = devs[n];

		CHECKF(d->name && d->name[0], "device %d has no name", n);
		CHECKF(d->transport && d->transport[0], "device %d has no transport", n);
		CHECKF(d->info != NULL, "device %d has no info", n);
		if (!CHECKF(d->conf_argv != NULL, "device %d has a NULL conf_argv", n))
			continue;
		for (int k = 0; d->conf_argv[k]; k++)
			CHECKF(strchr(d->conf_argv[k], '='), "conf_argv entry \"%s\" "
			       "is not key=value", d->conf_argv[k]);
		if (d->up)
			CHECKF(d->max_send_size > 0, "device %s is up with max_send_size 0",
			       d->name);
	}
	CHECK(n > 0 && n < 1000);
	h_teardown(NULL);
}

static void pci_fields_are_all_minus_one_off_pci(void)
{
	cci_device_t *const *devs = NULL;

	h_setup();
	REQUIRE_RC(cci_get_devices(&devs), CCI_SUCCESS);
	for (int i = 0; devs[i]; i++) {
		cci_device_t *d = devs[i];
		int nminus = (d->pci.domain == UINT32_MAX) + (d->pci.bus == UINT32_MAX) +
		             (d->pci.dev == UINT32_MAX) + (d->pci.func == UINT32_MAX);

		if (strcmp(d->transport, "sm") == 0)
			CHECKF(nminus == 4, "sm device %s has pci fields other than -1", d->name);
		else
			CHECKF(nminus == 0 || nminus == 4, "device %s has partly set pci "
			       "fields", d->name);
	}
	h_teardown(NULL);
}

/* Run cci_init with a config file holding text; stderr goes to cr->err. */
struct cfg_run {
	int rc;
	char path[64];
	char err[8192];
};

static void init_with_config(const char *text, struct cfg_run *cr)
{
	char errpath[] = "/tmp/cci-conformance-err-XXXXXX";
	int fd, efd, saved;
	ssize_t n;

	strcpy(cr->path, "/tmp/cci-conformance-ini-XXXXXX");
	fd = mkstemp(cr->path);
	efd = mkstemp(errpath);
	REQUIRE(fd >= 0 && efd >= 0);
	REQUIRE(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
	setenv("CCI_CONFIG", cr->path, 1);
	fflush(stderr);
	saved = dup(2);
	dup2(efd, 2);
	cr->rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(efd, cr->err, sizeof(cr->err) - 1, 0);
	cr->err[n > 0 ? n : 0] = '\0';
	close(efd);
	unlink(errpath);
	unlink(cr->path);
}

static void config_error(const char *fmt, int want)
{
	char text[1024];
	struct cfg_run cr;

	snprintf(text, sizeof(text), fmt, h_transport_name());
	init_with_config(text, &cr);
	CHECK_RC(cr.rc, want);
	CHECKF(strstr(cr.err, cr.path) != NULL, "the error message does not name the "
	       "file %s: \"%s\"", cr.path, cr.err);
	if (cr.rc == CCI_SUCCESS)
		cci_finalize();
}

static void config_without_transport_is_einval(void)
{
	config_error("[nodev]\npriority = 10\n", CCI_EINVAL);
}

static void config_unknown_transport_is_einval(void)
{
	config_error("[bad]\ntransport = no-such-transport\n", CCI_EINVAL);
}

static void config_priority_out_of_range_is_einval(void)
{
	config_error("[dev]\ntransport = %s\npriority = 101\n", CCI_EINVAL);
}

static void config_duplicate_section_is_einval(void)
{
	config_error("[dev]\ntransport = %s\n[dev]\ntransport = sm\n", CCI_EINVAL);
}

static void config_syntax_error_is_einval(void)
{
	config_error("[dev\ntransport = %s\n", CCI_EINVAL);
}

static void config_error_names_file_and_line(void)
{
	struct cfg_run cr;
	char l3[8] = ":3", l4[8] = ":4";

	init_with_config("# a comment\n\n[dev]\ntransport = no-such-transport\n", &cr);
	CHECK_RC(cr.rc, CCI_EINVAL);
	CHECKF(strstr(cr.err, cr.path) != NULL, "the message does not name the file: "
	       "\"%s\"", cr.err);
	CHECKF(strstr(cr.err, l3) || strstr(cr.err, l4) || strstr(cr.err, "line 3") ||
	       strstr(cr.err, "line 4"), "the message does not name line 3 or 4: \"%s\"",
	       cr.err);
	if (cr.rc == CCI_SUCCESS)
		cci_finalize();
}

static void unreadable_config_is_not_found(void)
{
	setenv("CCI_CONFIG", "/nonexistent-dir/cci-conformance.ini", 1);
	CHECK_RC(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), CCI_ERR_NOT_FOUND);
	CHECK_RC(cci_finalize(), CCI_ERROR);
}

static cci_device_t *by_name(cci_device_t *const *devs, const char *name)
{
	for (int i = 0; devs[i]; i++)
		if (strcmp(devs[i]->name, name) == 0)
			return devs[i];
	return NULL;
}

static void config_devices_sorted_default_then_priority(void)
{
	static const char fmt[] =
		"[cfg-low]\ntransport = %s\npriority = 10\n\n"
		"[cfg-default]\ntransport = %s\npriority = 5\ndefault = 1\n\n"
		"[cfg-high]\ntransport = %s\npriority = 90\n";
	cci_device_t *const *devs = NULL;
	cci_device_t *lo, *def, *hi;
	cci_endpoint_t *ep = NULL;
	struct cfg_run cr;
	char text[512];

	snprintf(text, sizeof(text), fmt, h_transport_name(), h_transport_name(),
	         h_transport_name());
	init_with_config(text, &cr);
	REQUIRE_RC(cr.rc, CCI_SUCCESS);
	REQUIRE_RC(cci_get_devices(&devs), CCI_SUCCESS);
	lo = by_name(devs, "cfg-low");
	def = by_name(devs, "cfg-default");
	hi = by_name(devs, "cfg-high");
	REQUIRE(lo && def && hi);
	if (lo->up && def->up && hi->up)
		CHECKF(devs[0] == def && devs[1] == hi && devs[2] == lo,
		       "order is %s, %s, %s", devs[0]->name, devs[1]->name,
		       devs[2] ? devs[2]->name : "(end)");
	for (int i = 1; devs[i]; i++)
		CHECKF(devs[i - 1]->up || !devs[i]->up, "device %s (down) is listed "
		       "before %s (up)", devs[i - 1]->name, devs[i]->name);
	CHECK(argv_has(lo->conf_argv, "priority=10"));
	CHECK(argv_has(def->conf_argv, "default=1"));
	CHECK_RC(cci_create_endpoint(NULL, 0, &ep, NULL), CCI_SUCCESS);
	CHECKF(ep && ep->device == def, "cci_create_endpoint(NULL) opened %s, not the "
	       "default device", ep ? ep->device->name : "nothing");
	h_teardown(ep);
}

static void config_keys_all_appear_in_conf_argv(void)
{
	char text[256], kv[64];
	cci_device_t *const *devs = NULL;
	cci_device_t *d;
	struct cfg_run cr;

	snprintf(text, sizeof(text), "# devices\n[mydev]\n  transport =  %s \n"
	         "priority=42\n", h_transport_name());
	init_with_config(text, &cr);
	REQUIRE_RC(cr.rc, CCI_SUCCESS);
	REQUIRE_RC(cci_get_devices(&devs), CCI_SUCCESS);
	d = by_name(devs, "mydev");
	REQUIRE(d != NULL);
	snprintf(kv, sizeof(kv), "transport=%s", h_transport_name());
	CHECKF(argv_has(d->conf_argv, kv), "conf_argv lacks \"%s\"", kv);
	CHECK(argv_has(d->conf_argv, "priority=42"));
	CHECK(strcmp(d->transport, h_transport_name()) == 0);
	h_teardown(NULL);
}

static void discovered_device_has_empty_conf_argv(void)
{
	cci_device_t *dev;

	unsetenv("CCI_CONFIG");
	dev = h_setup();
	CHECK(dev->conf_argv != NULL && dev->conf_argv[0] == NULL);
	h_teardown(NULL);
}

static void ctp_exclusion_removes_the_transport(void)
{
	char ctp[64];
	int rc;

	unsetenv("CCI_CONFIG");
	snprintf(ctp, sizeof(ctp), "^%s", h_transport_name());
	setenv("CCI_CTP", ctp, 1);
	rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });
	if (rc == CCI_SUCCESS) {
		CHECKF(h_find_device() == NULL, "a device of transport %s is listed "
		       "although CCI_CTP=%s", h_transport_name(), ctp);
		CHECK_RC(cci_finalize(), CCI_SUCCESS);
	} else {
		CHECK_RC2(rc, CCI_ENODEV, CCI_ERR_NOT_FOUND);
	}
}

const struct h_test t_init_tests[] = {
	{ "cci_init with a wrong ABI version fails with CCI_EINVAL and counts nothing",
	  wrong_abi_is_einval, 0, 0 },
	{ "cci_init ignores its flags, as CCI 2 did", init_flags_are_ignored, 0, 0 },
	{ "cci_init sets caps to 0 and fails with CCI_EINVAL for a NULL caps, as CCI 2 did",
	  init_sets_caps_and_refuses_null, 0, 0 },
	{ "init twice then finalize twice works, a third finalize fails",
	  init_is_reference_counted, 0, 0 },
	{ "cci_finalize without cci_init fails with CCI_ERROR", finalize_without_init_fails, 0, 0 },
	{ "cci_init after the last cci_finalize starts the library again",
	  init_after_last_finalize_restarts, H_NEEDS_DEVICE, 0 },
	{ "the last cci_finalize destroys open endpoints and closes their OS handles",
	  last_finalize_destroys_open_endpoints, H_NEEDS_DEVICE, 0 },
	{ "cci_get_devices returns a NULL-terminated list, conf_argv never NULL",
	  device_list_is_null_terminated_and_complete, H_NEEDS_DEVICE, 0 },
	{ "pci fields are all -1 on devices that are not PCI",
	  pci_fields_are_all_minus_one_off_pci, H_NEEDS_DEVICE, 0 },
	{ "a config section without transport= fails cci_init with CCI_EINVAL naming the file",
	  config_without_transport_is_einval, 0, 0 },
	{ "a config naming an unknown transport fails cci_init with CCI_EINVAL",
	  config_unknown_transport_is_einval, 0, 0 },
	{ "a config priority of 101 fails cci_init with CCI_EINVAL",
	  config_priority_out_of_range_is_einval, H_NEEDS_DEVICE, 0 },
	{ "a duplicate config section fails cci_init with CCI_EINVAL",
	  config_duplicate_section_is_einval, H_NEEDS_DEVICE, 0 },
	{ "a config syntax error fails cci_init with CCI_EINVAL",
	  config_syntax_error_is_einval, H_NEEDS_DEVICE, 0 },
	{ "a config error message names the file and the line",
	  config_error_names_file_and_line, 0, 0 },
	{ "an unreadable config file fails cci_init with CCI_ERR_NOT_FOUND",
	  unreadable_config_is_not_found, 0, 0 },
	{ "config devices are sorted default first, then by priority; NULL device is the default",
	  config_devices_sorted_default_then_priority, H_NEEDS_DEVICE, 0 },
	{ "every key of a config section appears in conf_argv as key=value",
	  config_keys_all_appear_in_conf_argv, H_NEEDS_DEVICE, 0 },
	{ "without CCI_CONFIG the transport offers a device with an empty conf_argv",
	  discovered_device_has_empty_conf_argv, H_NEEDS_DEVICE, 0 },
	{ "CCI_CTP=^transport leaves no device of that transport",
	  ctp_exclusion_removes_the_transport, H_NEEDS_DEVICE, 0 },
};
const size_t t_init_count = sizeof(t_init_tests) / sizeof(t_init_tests[0]);
