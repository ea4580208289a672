/*
 * t_refuse.c - what the transport refuses, and how clearly: a provider
 * without FI_RMA, an unknown ini key, URIs of another provider.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "ofi_test.h"

/* cci_init in a child with a config holding text; returns its status and
 * what it printed on stderr (in err). */
static int init_with(const char *text, char *err, size_t errlen, char *path, size_t pathlen)
{
	char epath[] = "/tmp/cci-ofitest-err-XXXXXX";
	int fd, efd, status = 0;
	pid_t pid;
	ssize_t n;

	snprintf(path, pathlen, "/tmp/cci-ofitest-ini-XXXXXX");
	fd = mkstemp(path);
	efd = mkstemp(epath);
	if (fd < 0 || efd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		return -1;
	close(fd);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(efd, 2);
		setenv("CCI_CONFIG", path, 1);
		setenv("CCI_CTP", "ofi", 1);
		_exit(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }));
	}
	waitpid(pid, &status, 0);
	n = pread(efd, err, errlen - 1, 0);
	err[n > 0 ? n : 0] = '\0';
	close(efd);
	unlink(epath);
	unlink(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int have_provider(const char *name)
{
	struct fi_info *hints = fi_allocinfo(), *list = NULL;
	int rc;

	if (!hints || !(hints->fabric_attr->prov_name = strdup(name)))
		return 0;
	rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &list);
	fi_freeinfo(hints);
	fi_freeinfo(list);
	return rc == 0;
}

static void udp_without_rma_is_refused_clearly(void)
{
	char err[4096], path[64];
	int rc;

	if (!have_provider("udp")) {
		ot_skip("libfabric has no udp provider here");
		return;
	}
	rc = init_with("[nofi]\ntransport = ofi\nprovider = udp\n", err, sizeof(err), path,
	               sizeof(path));
	CU_ASSERT_EQUAL(rc, CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, path));        /* the file */
	CU_ASSERT_PTR_NOT_NULL(strstr(err, ":3:"));       /* the line of provider= */
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "udp"));       /* the provider */
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "FI_RMA"));    /* and why */
}

static void unknown_key_is_refused(void)
{
	char err[4096], path[64], text[160];

	snprintf(text, sizeof(text), "[x]\ntransport = ofi\nprovider = %s\nport = 7\n", ot_provider);
	CU_ASSERT_EQUAL(init_with(text, err, sizeof(err), path, sizeof(path)), CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, ":4:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "unknown key"));
}

static void missing_provider_makes_a_down_device(void)
{
	char err[4096], path[64];

	/* cci_init succeeds: the device exists, down, with the reason. */
	CU_ASSERT_EQUAL(init_with("[gone]\ntransport = ofi\nprovider = no-such-provider\n", err,
	                          sizeof(err), path, sizeof(path)), CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no-such-provider"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "down"));
}

static void foreign_uris_are_refused(void)
{
	cci_device_t *dev = ot_init();
	cci_endpoint_t *ep = dev ? ot_endpoint(dev) : NULL;
	const char *other = strcmp(ot_provider, "shm") ? "ofi://shm/fi_shm://1:0:0"
	                                               : "ofi://tcp/127.0.0.1:9";

	if (!ep) {
		ot_fini(NULL);
		return;
	}
	CU_ASSERT_EQUAL(cci_connect(ep, other, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                CCI_EADDRNOTAVAIL);
	CU_ASSERT_EQUAL(cci_connect(ep, "ofi:///x", NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                CCI_EINVAL);
	CU_ASSERT_EQUAL(cci_connect(ep, "ofi://noslash", NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                CCI_EINVAL);
	ot_fini(ep);
}

int ot_add_refuse_suite(void)
{
	CU_pSuite s = CU_add_suite("refusals", NULL, NULL);

	return !s ||
	       !CU_add_test(s, "a provider without FI_RMA (udp) is refused at cci_init, naming "
	                       "file, line, provider and FI_RMA", udp_without_rma_is_refused_clearly) ||
	       !CU_add_test(s, "an unknown ini key is refused, naming its line",
	                    unknown_key_is_refused) ||
	       !CU_add_test(s, "a provider missing on this host gives a device that is down",
	                    missing_provider_makes_a_down_device) ||
	       !CU_add_test(s, "URIs of another provider or without an address are refused",
	                    foreign_uris_are_refused);
}
