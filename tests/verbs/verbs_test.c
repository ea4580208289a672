/*
 * verbs_test.c - the verbs plugin on this host, through the public API:
 * it loads; without an RDMA device it offers none, says why once under
 * CCI_DEBUG=ctp and in cci_get_plugins(), and a config section with
 * transport = verbs fails cci_init naming the file, line and section;
 * its ini keys are checked before any device is looked for.
 *
 * The no-device cases are not run, and are listed as skipped, on a host
 * that has an RDMA device (the conformance run covers that host).  Each case runs cci_init in a
 * forked child (the configuration is read once per process).
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "cci.h"
#include "init_child.h"
#include "unit_run.h"

#define NO_DEVICE "no RDMA device found (ibv_get_device_list returned none)"

static char cfg_path[] = "/tmp/cci-verbs-test-XXXXXX";

/* In the child: init, then print the verbs plugin's status and note and
 * every verbs device on out_fd; exit with cci_init's code. */
static void child_main(int out_fd)
{
	int rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });
	cci_plugin_info_t *const *plugins;
	cci_device_t *const *devs;

	if (rc == CCI_SUCCESS && cci_get_plugins(&plugins) == CCI_SUCCESS) {
		for (int i = 0; plugins[i]; i++)
			if (strcmp(plugins[i]->name, "verbs") == 0)
				dprintf(out_fd, "plugin %s %s [%s]\n",
				        plugins[i]->status == CCI_PLUGIN_LOADED ? "loaded" : "skipped",
				        plugins[i]->transports[0] ? plugins[i]->transports[0] : "-",
				        plugins[i]->note);
	}
	if (rc == CCI_SUCCESS && cci_get_devices(&devs) == CCI_SUCCESS)
		for (int i = 0; devs[i]; i++)
			if (strcmp(devs[i]->transport, "verbs") == 0)
				dprintf(out_fd, "device %s\n", devs[i]->name);
	if (rc == CCI_SUCCESS)
		cci_finalize();
	_exit(rc);
}

static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static void test_loads_offers_no_device_and_says_why_once(void)
{
	struct child_result r;

	setenv("CCI_DEBUG", "ctp", 1);
	init_child_run(NULL, NULL, "verbs,sm", child_main, &r);
	unsetenv("CCI_DEBUG");
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "plugin loaded verbs [" NO_DEVICE "]\n"));
	CU_ASSERT_PTR_NULL(strstr(r.out, "\ndevice ")); /* none of transport verbs */
	CU_ASSERT_EQUAL(count_of(r.err, NO_DEVICE), 1);
	if (count_of(r.err, NO_DEVICE) != 1)
		printf("\nstderr:\n%s\n", r.err);
}

static void test_quiet_without_ctp_debug(void)
{
	struct child_result r;

	unsetenv("CCI_DEBUG");
	init_child_run(NULL, NULL, "verbs,sm", child_main, &r);
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT_PTR_NULL(strstr(r.err, NO_DEVICE));
}

static void test_verbs_section_fails_init_with_file_line_section(void)
{
	struct child_result r;
	char want[256];

	init_child_run(cfg_path, "# an InfiniBand port\n\n[ib0]\ntransport = verbs\nport = 1\n",
	               NULL, child_main, &r);
	snprintf(want, sizeof(want), "%s:3: [ib0]: " NO_DEVICE "\n", cfg_path);
	CU_ASSERT_EQUAL(r.rc, CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want));
	if (!strstr(r.err, want))
		printf("\nwanted: %s\nstderr:\n%s\n", want, r.err);
}

/* A bad value of key fails cci_init naming file:line, key and value. */
static void expect_key_error(const char *section, int line, const char *key, const char *what)
{
	struct child_result r;
	char where[256];

	init_child_run(cfg_path, section, NULL, child_main, &r);
	snprintf(where, sizeof(where), "%s:%d: [v] %s: ", cfg_path, line, key);
	CU_ASSERT_EQUAL(r.rc, CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, where));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, what));
	if (r.rc != CCI_EINVAL || !strstr(r.err, where) || !strstr(r.err, what))
		printf("\nwanted: %s ... %s\nstderr:\n%s\n", where, what, r.err);
}

static void test_keys_checked_before_the_device(void)
{
	expect_key_error("[v]\ntransport = verbs\nmss = 100\n", 3, "mss", "100");
	expect_key_error("[v]\ntransport = verbs\nport = 0\n", 3, "port", "0");
	expect_key_error("[v]\ntransport = verbs\nip = ib0\n", 3, "ip",
	                 "is not a numeric IPv4 or IPv6 address");
	expect_key_error("[v]\ntransport = verbs\nsend_queue = 1\n", 3, "send_queue", "1");
	expect_key_error("[v]\ntransport = verbs\nrecv_buffers = 99999999\n", 3, "recv_buffers",
	                 "99999999");
	expect_key_error("[v]\ntransport = verbs\nqueue_depth = 4\n", 3, "queue_depth", "");
}

int main(void)
{
	static const struct unit_test no_device[] = {
		{ "plugin loads, offers no device here and says why once (CCI_DEBUG=ctp)",
		  test_loads_offers_no_device_and_says_why_once },
		{ "without CCI_DEBUG=ctp the missing device is not printed",
		  test_quiet_without_ctp_debug },
		{ "a transport = verbs section fails cci_init with file:line: [section]: reason",
		  test_verbs_section_fails_init_with_file_line_section },
		{ "ini keys are checked (file, line, key) before a device is looked for",
		  test_keys_checked_before_the_device },
	};
	struct ibv_device **list;
	int host_has_device;
	size_t first = 0, count = sizeof(no_device) / sizeof(no_device[0]);
	int n = 0, fd = mkstemp(cfg_path), rc;

	if (fd < 0)
		return 2;
	close(fd);
	list = ibv_get_device_list(&n);
	host_has_device = list && n > 0;
	if (list)
		ibv_free_device_list(list);
	if (host_has_device) {
		/* the conformance run covers a host with a device */
		for (first = 0; first + 1 < count; first++)
			printf("SKIP %s: this host has an RDMA device\n", no_device[first].name);
	}
	rc = unit_run("verbs", no_device + first, count - first);
	unlink(cfg_path);
	return rc;
}
