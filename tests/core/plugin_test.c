/*
 * plugin_test.c - broken plugins in CCI_PLUGIN_PATH are logged and skipped;
 * the library still starts with the good ones.  The plugin-info extension
 * (cci_get_plugins, cci_get_plugin_keys, cci_get_plugin_dirs,
 * cci_get_device_priority) reports every attempt with the reason that was
 * logged, and the ini keys of each plugin.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cci.h"

static char err_text[16384];
static int init_rc = -1;

/* "keys sm: path mss rma progress", or "keys sm: (failed)". */
static void print_keys(cci_plugin_info_t *p)
{
	cci_conf_key_info_t *const *keys;

	fprintf(stderr, "keys %s:", p->name);
	if (cci_get_plugin_keys(p, &keys) != CCI_SUCCESS) {
		fprintf(stderr, " (failed)\n");
		return;
	}
	for (int k = 0; keys[k]; k++)
		fprintf(stderr, " %s", keys[k]->name);
	fprintf(stderr, "\n");
}

/* In the child: what the extension reports, one line each, on stderr. */
static void print_records(void)
{
	cci_plugin_info_t *const *plugins;
	const char *const *dirs;

	if (cci_get_plugins(&plugins) == CCI_SUCCESS) {
		for (int i = 0; plugins[i]; i++)
			fprintf(stderr, "record %s %s %s\n", plugins[i]->name,
			        plugins[i]->status == CCI_PLUGIN_LOADED ? "loaded" : "skipped",
			        plugins[i]->reason);
		for (int i = 0; plugins[i]; i++)
			print_keys(plugins[i]);
	}
	if (cci_get_plugin_dirs(&dirs) == CCI_SUCCESS)
		for (int i = 0; dirs[i]; i++)
			fprintf(stderr, "dir %s\n", dirs[i]);
}

/* Start the library in a child with CCI_DEBUG=init; keep its stderr. */
static void run_child(void)
{
	int p[2], status;
	size_t off = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(p) != 0)
		return;
	pid = fork();
	if (pid == 0) {
		cci_device_t *const *devs;
		int rc;
		dup2(p[1], 2);
		setenv("CCI_DEBUG", "init", 1);
		rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });
		if (rc == CCI_SUCCESS && cci_get_devices(&devs) == CCI_SUCCESS)
			for (int i = 0; devs[i]; i++)
				fprintf(stderr, "device %s transport %s\n", devs[i]->name, devs[i]->transport);
		if (rc == CCI_SUCCESS) {
			print_records();
			cci_finalize();
		}
		_exit(rc);
	}
	close(p[1]);
	while (off + 1 < sizeof(err_text) &&
	       (n = read(p[0], err_text + off, sizeof(err_text) - 1 - off)) > 0)
		off += (size_t)n;
	err_text[off] = '\0';
	close(p[0]);
	waitpid(pid, &status, 0);
	init_rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_library_starts_despite_broken_plugins(void)
{
	CU_ASSERT_EQUAL(init_rc, CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "transport sm"));
	CU_ASSERT_PTR_NULL(strstr(err_text, "transport bogus"));
}

static void test_wrong_abi_version_is_skipped(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "cci_ctp_badabi.so: ABI version"));
}

static void test_missing_mandatory_op_is_skipped(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "cci_ctp_badops.so: mandatory op missing"));
}

static void test_failing_init_is_skipped(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "plugin badinit: init failed"));
}

static void test_undefined_symbol_is_skipped(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "cci_ctp_badundef.so: cannot load: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "undefined symbol: bad_plugin_missing_symbol"));
}

static void test_bad_key_table_is_skipped_naming_the_key(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "cci_ctp_badkeys.so: conf_keys: key \"mss\": "
	                                        "default \"8192\" is not an integer in 64..1024: skipped"));
}

static void test_table_without_conf_keys_loads(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nrecord oldsize loaded \n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nkeys oldsize:\n"));
}

static void test_plugin_keys_are_listed(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nkeys sm: path mss rma progress\n"));
	/* A skipped plugin has a list too, empty when its table was not read. */
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nkeys badkeys:\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nkeys badabi:\n"));
}

static void test_every_attempt_is_recorded_with_its_reason(void)
{
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nrecord sm loaded \n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nrecord badabi skipped ABI version "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nrecord badops skipped mandatory op missing ("));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nrecord badinit skipped init failed ("));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nrecord badundef skipped cannot load: "));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, "\nrecord badkeys skipped conf_keys: key "));
}

static void test_search_dirs_are_recorded(void)
{
	char line[4096];

	snprintf(line, sizeof(line), "\ndir %s\n", getenv("CCI_PLUGIN_PATH"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err_text, line));
}

/* A device and a plugin the library never handed out. */
static const struct cci_device foreign = { .name = "foreign" };
static const struct cci_plugin_info foreign_plugin = { .name = "foreign" };

/* Before cci_init and after the last cci_finalize the lists do not exist. */
static void test_extension_needs_the_library_started(void)
{
	cci_plugin_info_t *const *plugins = NULL;
	cci_conf_key_info_t *const *keys = NULL;
	const char *const *dirs = NULL;
	int prio = -1, def = -1;

	CU_ASSERT_EQUAL(cci_get_plugins(&plugins), CCI_ERROR);
	CU_ASSERT_EQUAL(cci_get_plugin_dirs(&dirs), CCI_ERROR);
	CU_ASSERT_PTR_NULL(plugins);
	CU_ASSERT_PTR_NULL(dirs);
	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS) {
		CU_FAIL("cci_init");
		return;
	}
	CU_ASSERT_EQUAL(cci_get_plugins(&plugins), CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(plugins);
	CU_ASSERT_PTR_NOT_NULL(plugins ? plugins[0] : NULL);
	CU_ASSERT_EQUAL(cci_get_plugin_dirs(&dirs), CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(dirs ? dirs[0] : NULL);
	cci_finalize();
	CU_ASSERT_EQUAL(cci_get_plugins(&plugins), CCI_ERROR);
	CU_ASSERT_EQUAL(cci_get_device_priority(&foreign, &prio, &def), CCI_ERROR);
	CU_ASSERT_EQUAL(cci_get_plugin_keys(&foreign_plugin, &keys), CCI_ERROR);
	CU_ASSERT_PTR_NULL(keys);
}

static void test_extension_checks_its_arguments(void)
{
	cci_conf_key_info_t *const *keys = NULL;
	cci_plugin_info_t *const *plugins;
	cci_device_t *const *devs;
	int prio = -1, def = -1;

	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS) {
		CU_FAIL("cci_init");
		return;
	}
	CU_ASSERT_EQUAL(cci_get_plugins(NULL), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_get_plugin_dirs(NULL), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_get_device_priority(&foreign, &prio, &def), CCI_EINVAL);
	CU_ASSERT_EQUAL(prio, -1); /* outputs are written only on success */
	CU_ASSERT_EQUAL(cci_get_devices(&devs), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_get_device_priority(devs[0], NULL, &def), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_get_device_priority(devs[0], &prio, &def), CCI_SUCCESS);
	CU_ASSERT(prio >= 0 && prio <= 100);
	CU_ASSERT(def == 0 || def == 1);
	CU_ASSERT_EQUAL(cci_get_plugins(&plugins), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_get_plugin_keys(NULL, &keys), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_get_plugin_keys(plugins[0], NULL), CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_get_plugin_keys(&foreign_plugin, &keys), CCI_EINVAL);
	CU_ASSERT_PTR_NULL(keys);
	CU_ASSERT_EQUAL(cci_get_plugin_keys(plugins[0], &keys), CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(keys);
	cci_finalize();
}

int main(void)
{
	CU_pSuite s;
	int failed;

	run_child();
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_set_fail_on_inactive(CU_FALSE);
	s = CU_add_suite("plugins", NULL, NULL);
	CU_add_test(s, "the library starts despite broken plugins",
	            test_library_starts_despite_broken_plugins);
	CU_add_test(s, "a plugin of another ABI version is skipped", test_wrong_abi_version_is_skipped);
	CU_add_test(s, "a plugin missing a mandatory op is skipped",
	            test_missing_mandatory_op_is_skipped);
	CU_add_test(s, "a plugin whose init fails is skipped", test_failing_init_is_skipped);
	CU_add_test(s, "a plugin with an undefined symbol is skipped",
	            test_undefined_symbol_is_skipped);
	CU_add_test(s, "a plugin whose key table is wrong is skipped, naming the key",
	            test_bad_key_table_is_skipped_naming_the_key);
	CU_add_test(s, "a plugin table from before conf_keys still loads",
	            test_table_without_conf_keys_loads);
	CU_add_test(s, "cci_get_plugin_keys lists each plugin's keys", test_plugin_keys_are_listed);
	CU_add_test(s, "cci_get_plugins lists every attempt with its reason",
	            test_every_attempt_is_recorded_with_its_reason);
	CU_add_test(s, "cci_get_plugin_dirs lists CCI_PLUGIN_PATH", test_search_dirs_are_recorded);
	CU_add_test(s, "the plugin lists exist only while the library is started",
	            test_extension_needs_the_library_started);
	CU_add_test(s, "the extension's calls check their arguments",
	            test_extension_checks_its_arguments);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = (int)(CU_get_number_of_failures() + CU_get_number_of_tests_failed());
	if (failed)
		fprintf(stderr, "library log was:\n%s", err_text);
	CU_cleanup_registry();
	return failed ? 1 : 0;
}
