/*
 * sm_files_test.c - the files the sm transport leaves on disk: private
 * modes, refusal of unsafe base directories, clean-up on destroy and of
 * dead processes' leftovers.  Runs in one process with a CCI_CONFIG of
 * several sm devices, each on its own base directory under a temp dir.
 */
#include <CUnit/Basic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cci.h"
#include "init_config.h"

static char top[] = "/tmp/cci-sm-files-XXXXXX";
static char cfg[PATH_MAX];

/* The socket path inside an endpoint's URI "sm://<path>"; malloc'd. */
static char *endpoint_path(cci_endpoint_t *ep)
{
	char *uri = NULL, *path;

	if (cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS || !uri)
		return NULL;
	path = strncmp(uri, "sm://", 5) == 0 ? strdup(uri + 5) : NULL;
	free(uri);
	return path;
}

static mode_t mode_of(const char *path, int *is_dir, int *is_sock)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return (mode_t)-1;
	*is_dir = S_ISDIR(st.st_mode);
	*is_sock = S_ISSOCK(st.st_mode);
	return st.st_mode & 07777;
}

static void test_private_modes(void)
{
	cci_endpoint_t *ep = NULL;
	char *sock, *slash;
	int d, s;

	CU_ASSERT_FATAL(cci_create_endpoint(init_device_named("good"), 0, &ep, NULL) == CCI_SUCCESS);
	sock = endpoint_path(ep);
	CU_ASSERT_FATAL(sock != NULL);
	CU_ASSERT_EQUAL(mode_of(sock, &d, &s), 0600);
	CU_ASSERT(s);
	slash = strrchr(sock, '/');
	*slash = '\0'; /* <base>/<pid> */
	CU_ASSERT_EQUAL(mode_of(sock, &d, &s), 0700);
	CU_ASSERT(d);
	slash = strrchr(sock, '/');
	*slash = '\0'; /* <base> */
	CU_ASSERT_EQUAL(mode_of(sock, &d, &s), 0700);
	CU_ASSERT(d);
	free(sock);
	cci_destroy_endpoint(ep);
}

static void test_removed_on_destroy(void)
{
	cci_endpoint_t *ep = NULL;
	char *sock, *slash;

	CU_ASSERT_FATAL(cci_create_endpoint(init_device_named("good"), 0, &ep, NULL) == CCI_SUCCESS);
	sock = endpoint_path(ep);
	CU_ASSERT_FATAL(sock != NULL);
	CU_ASSERT_EQUAL(access(sock, F_OK), 0);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(ep), CCI_SUCCESS);
	CU_ASSERT_NOT_EQUAL(access(sock, F_OK), 0);
	slash = strrchr(sock, '/');
	*slash = '\0';
	CU_ASSERT_NOT_EQUAL(access(sock, F_OK), 0); /* the empty pid directory too */
	free(sock);
}

static void expect_refused(const char *dev)
{
	cci_endpoint_t *ep = NULL;
	int rc = cci_create_endpoint(init_device_named(dev), 0, &ep, NULL);

	CU_ASSERT_NOT_EQUAL(rc, CCI_SUCCESS);
	if (rc == CCI_SUCCESS)
		cci_destroy_endpoint(ep);
}

static void test_open_base_refused(void)
{
	expect_refused("open");
}

static void test_symlink_base_refused(void)
{
	expect_refused("link");
}

static void test_dead_process_leftovers_removed(void)
{
	char dead[PATH_MAX];
	cci_endpoint_t *ep = NULL;
	pid_t pid = fork();

	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0); /* pid now names no process */
	snprintf(dead, sizeof(dead), "%s/good/%d", top, (int)pid);
	CU_ASSERT_FATAL(mkdir(dead, 0700) == 0);
	CU_ASSERT_FATAL(cci_create_endpoint(init_device_named("good"), 0, &ep, NULL) == CCI_SUCCESS);
	CU_ASSERT_NOT_EQUAL(access(dead, F_OK), 0);
	cci_destroy_endpoint(ep);
}

static int write_config(void)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/open", top);
	if (mkdir(path, 0700) != 0 || chmod(path, 0777) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/link", top);
	if (symlink("/tmp", path) != 0)
		return -1;
	snprintf(cfg, sizeof(cfg), "%s/cci.ini", top);
	f = fopen(cfg, "w");
	if (!f)
		return -1;
	fprintf(f, "[good]\ntransport = sm\npath = %s/good\n[open]\ntransport = sm\npath = %s/open\n"
	        "[link]\ntransport = sm\npath = %s/link\n", top, top, top);
	fclose(f);
	return setenv("CCI_CONFIG", cfg, 1);
}

int main(void)
{
	CU_pSuite s;
	int failed;

	if (!mkdtemp(top) || write_config() != 0 || cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_set_fail_on_inactive(CU_FALSE);
	s = CU_add_suite("sm files", NULL, NULL);
	CU_add_test(s, "directories are 0700 and the socket 0600", test_private_modes);
	CU_add_test(s, "destroy removes the socket and the empty pid directory", test_removed_on_destroy);
	CU_add_test(s, "a base directory open to others is refused", test_open_base_refused);
	CU_add_test(s, "a base directory that is a symlink is refused", test_symlink_base_refused);
	CU_add_test(s, "leftovers of dead processes are removed", test_dead_process_leftovers_removed);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = (int)(CU_get_number_of_failures() + CU_get_number_of_tests_failed());
	CU_cleanup_registry();
	cci_finalize();
	{
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", top);
	}
	return failed ? 1 : 0;
}
