/*
 * config_test.c - CCI_CONFIG files, the device list built from them, and
 * the CCI_CTP filter.  The configuration is read once per process, so each
 * case runs cci_init() in a forked child and checks its return code, the
 * devices it lists and what it printed on stderr.
 */
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cci.h"
#include "init_child.h"
#include "unit_run.h"

static char cfg_path[] = "/tmp/cci-config-test-XXXXXX";

static void run_init_at(const char *path, const char *text, const char *ctp,
                        struct child_result *r);

/* Config text in the test's file (NULL: no CCI_CONFIG at all). */
static void run_init(const char *text, const char *ctp, struct child_result *r)
{
	run_init_at(text ? cfg_path : NULL, text, ctp, r);
}

/* In the child: init, list the devices on out_fd, exit with the code. */
static void child_main(int out_fd)
{
	cci_device_t *const *devs;
	int rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });

	if (rc == CCI_SUCCESS && cci_get_devices(&devs) == CCI_SUCCESS) {
		for (int i = 0; devs[i]; i++) {
			int argc = 0;
			while (devs[i]->conf_argv[argc])
				argc++;
			dprintf(out_fd, "%s %s %d\n", devs[i]->name, devs[i]->transport, argc);
		}
		cci_finalize();
	}
	_exit(rc);
}

/* Run cci_init in a child with CCI_CONFIG=path (NULL: unset) holding text
 * (NULL: leave the file as it is), and CCI_CTP=ctp (NULL: unset). */
static void run_init_at(const char *path, const char *text, const char *ctp,
                        struct child_result *r)
{
	init_child_run(path, text, ctp, child_main, r);
}

/* The child's stderr names the file, "path:line", and the problem. */
static void expect_error(const char *text, int line, const char *problem)
{
	struct child_result r;
	char where[256];

	run_init(text, NULL, &r);
	snprintf(where, sizeof(where), "%s:%d", cfg_path, line);
	CU_ASSERT_EQUAL(r.rc, CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, where));
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, problem));
	if (r.rc != CCI_EINVAL || !strstr(r.err, where) || !strstr(r.err, problem))
		fprintf(stderr, "\n  expected \"%s\" and \"%s\", got rc %d:\n%s", where, problem,
		        r.rc, r.err);
}

static void test_no_config_offers_sm(void)
{
	struct child_result r;

	run_init(NULL, NULL, &r);
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " sm 0\n"));
}

static void test_unreadable_file_names_the_path(void)
{
	struct child_result r;

	run_init_at("/nonexistent/cci.ini", NULL, NULL, &r);
	CU_ASSERT_EQUAL(r.rc, CCI_ERR_NOT_FOUND);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "/nonexistent/cci.ini"));
}

static void test_syntax_error_names_line(void)
{
	expect_error("[a]\ntransport = sm\nthis line is wrong\n", 3, "expected");
}

static void test_missing_transport(void)
{
	expect_error("# devices\n[a]\nmss = 4096\n", 2, "missing \"transport");
}

static void test_unknown_transport(void)
{
	expect_error("[a]\ntransport = carrier-pigeon\n", 1, "unknown transport \"carrier-pigeon\"");
}

static void test_duplicate_section(void)
{
	expect_error("[a]\ntransport = sm\n[a]\ntransport = sm\n", 3, "duplicate section");
}

static void test_priority_out_of_range(void)
{
	expect_error("[a]\ntransport = sm\npriority = 101\n", 3, "priority");
}

static void test_unknown_key_for_transport(void)
{
	expect_error("[a]\ntransport = sm\nbogus = 1\n", 3, "bogus");
}

static void test_two_defaults(void)
{
	expect_error("[a]\ntransport = sm\ndefault = 1\n[b]\ntransport = sm\ndefault = 1\n", 6,
	             "second default");
}

static void test_devices_sorted_default_then_priority(void)
{
	struct child_result r;

	run_init("[low]\ntransport = sm\npriority = 10\n"
	         "[high]\ntransport = sm\npriority = 90\n"
	         "[chosen]\ntransport = sm\npriority = 5\ndefault = 1\n",
	         NULL, &r);
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT_STRING_EQUAL(r.out, "chosen sm 3\nhigh sm 2\nlow sm 2\n");
}

static void test_ctp_matching_nothing_leaves_no_plugin(void)
{
	struct child_result r;

	run_init(NULL, "no-such-transport", &r);
	CU_ASSERT_EQUAL(r.rc, CCI_ENODEV);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, "CCI_CTP"));
}

static void test_ctp_exclude_drops_sm(void)
{
	struct child_result r;

	run_init(NULL, "^sm", &r);
	CU_ASSERT(r.rc == CCI_SUCCESS || r.rc == CCI_ENODEV); /* other plugins may be built */
	CU_ASSERT_PTR_NULL(strstr(r.out, " sm "));
}

static void test_ctp_keep_list(void)
{
	struct child_result r;

	run_init(NULL, "tcp,sm", &r);
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, " sm 0\n"));
}

/* The example shipped in config/ loads as it is: every uncommented
 * section is valid, and its devices are those the file promises. */
static void test_shipped_example_loads(void)
{
	struct child_result r;

	run_init_at(CCI_EXAMPLE_INI, NULL, NULL, &r);
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT_EQUAL(strncmp(r.out, "sm0 sm ", 7), 0); /* default = 1: first */
#ifdef HAVE_TCP_PLUGIN
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\ntcp-lo tcp "));
#endif
#ifdef HAVE_OFI_PLUGIN
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nofi-tcp-lo ofi "));
#endif
#ifdef HAVE_SOCK_PLUGIN
	CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "\nsock-lo sock "));
#endif
	if (r.rc != CCI_SUCCESS || strncmp(r.out, "sm0 sm ", 7) != 0)
		fprintf(stderr, "\n  %s: rc %d, devices:\n%s%s", CCI_EXAMPLE_INI, r.rc, r.out, r.err);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "without CCI_CONFIG the sm device is offered", test_no_config_offers_sm },
		{ "an unreadable file fails init naming the path", test_unreadable_file_names_the_path },
		{ "a syntax error names file and line", test_syntax_error_names_line },
		{ "a section without transport= is an error", test_missing_transport },
		{ "an unknown transport is an error", test_unknown_transport },
		{ "a duplicate section is an error", test_duplicate_section },
		{ "a priority above 100 is an error", test_priority_out_of_range },
		{ "a key the transport does not know is an error", test_unknown_key_for_transport },
		{ "two default devices are an error", test_two_defaults },
		{ "devices sort default first, then by priority", test_devices_sorted_default_then_priority },
		{ "CCI_CTP matching no plugin fails init and says so",
		  test_ctp_matching_nothing_leaves_no_plugin },
		{ "CCI_CTP=^sm drops the sm device", test_ctp_exclude_drops_sm },
		{ "CCI_CTP keep list keeps sm", test_ctp_keep_list },
		{ "config/cci.ini.example loads with its devices", test_shipped_example_loads },
	};
	int fd = mkstemp(cfg_path), rc;

	if (fd < 0)
		return 1;
	close(fd);
	rc = UNIT_RUN("config", tests);
	unlink(cfg_path);
	return rc;
}
