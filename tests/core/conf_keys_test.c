/*
 * conf_keys_test.c - the ini keys of each transport, read by the core
 * against the plugin's table: every transport refuses a bad key or value
 * with the same words ("file:line: [section] key: problem"), applies its
 * defaults, and takes a good section.  The configuration is read once per
 * process, so each case runs cci_init() in a forked child, which lists
 * the devices (name, up, max_send_size, and the URI of an endpoint on
 * it) on a pipe; its stderr is kept for the messages.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cci.h"
#include "init_child.h"
#include "unit_run.h"

static char cfg_path[] = "/tmp/cci-conf-keys-test-XXXXXX";

/* In the child: init, list the devices on out_fd, exit with the code. */
static void child_main(int out_fd)
{
	cci_device_t *const *devs;
	int rc = cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 });

	if (rc == CCI_SUCCESS && cci_get_devices(&devs) == CCI_SUCCESS) {
		for (int i = 0; devs[i]; i++) {
			cci_endpoint_t *ep = NULL;
			cci_os_handle_t fd;
			char *uri = NULL;
			if (devs[i]->up && cci_create_endpoint(devs[i], 0, &ep, &fd) == CCI_SUCCESS)
				cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri);
			dprintf(out_fd, "%s %u %u %s\n", devs[i]->name, devs[i]->up,
			        devs[i]->max_send_size, uri ? uri : "-");
			free(uri);
			if (ep)
				cci_destroy_endpoint(ep);
		}
		cci_finalize();
	}
	_exit(rc);
}

/* cci_init in a child with CCI_CONFIG naming a file that holds text. */
static void run_init(const char *text, struct child_result *r)
{
	init_child_run(cfg_path, text, NULL, child_main, r);
}

/*
 * A section [dev] of transport with the given third line fails cci_init
 * with exactly "<file>:3: [dev] <message>" on stderr.
 */
static void expect_refused(const char *transport, const char *line3, const char *message)
{
	struct child_result r;
	char text[512], want[1024];

	snprintf(text, sizeof(text), "[dev]\ntransport = %s\n%s\n", transport, line3);
	snprintf(want, sizeof(want), ": err: %s:3: [dev] %s\n", cfg_path, message);
	run_init(text, &r);
	CU_ASSERT_EQUAL(r.rc, CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want));
	if (r.rc != CCI_EINVAL || !strstr(r.err, want))
		fprintf(stderr, "\n  %s: expected rc %d and \"%s\", got rc %d:\n%s", transport,
		        CCI_EINVAL, want, r.rc, r.err);
}

/* The device line of name in r, or NULL. */
static const char *device_line(const struct child_result *r, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = r->out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, name, n) == 0 && p[n] == ' ')
			return p;
	return NULL;
}

/* cci_init succeeds with text, and device name reads "name <rest>...". */
static void expect_device(const char *text, const char *name, const char *rest)
{
	struct child_result r;
	const char *line;
	char want[256];

	run_init(text, &r);
	snprintf(want, sizeof(want), "%s %s", name, rest);
	line = device_line(&r, name);
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT(line != NULL && strncmp(line, want, strlen(want)) == 0);
	if (r.rc != CCI_SUCCESS || !line || strncmp(line, want, strlen(want)) != 0)
		fprintf(stderr, "\n  expected a line \"%s...\", got rc %d, devices:\n%s%s", want, r.rc,
		        r.out, r.err);
}

/* ------------------------------------------------------------------ sm */

/* A key given twice never reaches a plugin: the ini reader refuses it. */
static void test_repeated_key_is_refused(void)
{
	struct child_result r;
	char want[256];

	run_init("[dev]\ntransport = sm\nmss = 4096\nmss = 8192\n", &r);
	snprintf(want, sizeof(want), "%s:4: duplicate key \"mss\" in [dev] (first at line 3)",
	         cfg_path);
	CU_ASSERT_EQUAL(r.rc, CCI_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(r.err, want));
}

static void test_sm_unknown_key(void)
{
	expect_refused("sm", "bogus = 1",
	               "bogus: unknown key for transport sm (known: path, mss, rma, progress)");
}

static void test_sm_mss_out_of_range(void)
{
	expect_refused("sm", "mss = 63", "mss: \"63\" is not an integer in 64..1048576");
	expect_refused("sm", "mss = 1048577", "mss: \"1048577\" is not an integer in 64..1048576");
	expect_refused("sm", "mss = 8k", "mss: \"8k\" is not an integer in 64..1048576");
}

static void test_sm_bad_choice(void)
{
	expect_refused("sm", "rma = dma", "rma: \"dma\" is not one of cma, copy");
}

static void test_sm_bad_path(void)
{
	char line[256], msg[320];

	expect_refused("sm", "path = relative/dir", "path: \"relative/dir\" is not an absolute path");
	expect_refused("sm", "path =", "path: needs a value");
	/* 90 bytes leave no room for "/<pid>/<id>" in a socket address. */
	snprintf(line, sizeof(line), "path = /%089d", 0);
	snprintf(msg, sizeof(msg), "path: \"%s\" is longer than 89 bytes", line + 7);
	expect_refused("sm", line, msg);
}

static void test_sm_defaults(void)
{
	char want[128];

	/* mss 8192; path /tmp/cci-sm-<uid>, seen in the endpoint's URI. */
	snprintf(want, sizeof(want), "1 8192 sm:///tmp/cci-sm-%u/", (unsigned)geteuid());
	expect_device("[plain]\ntransport = sm\n", "plain", want);
}

static void test_sm_good_section(void)
{
	char base[sizeof(cfg_path) + 2], text[256], want[128];

	snprintf(base, sizeof(base), "%s.d", cfg_path);
	snprintf(text, sizeof(text), "[shm]\ntransport = sm\npath = %s\nmss = 4096\nrma = copy\n",
	         base);
	snprintf(want, sizeof(want), "1 4096 sm://%s/", base);
	expect_device(text, "shm", want);
	rmdir(base); /* the endpoint removed its <pid> directory */
}

/* ----------------------------------------------------------------- tcp */

#ifdef HAVE_TCP_PLUGIN
static void test_tcp_unknown_key(void)
{
	expect_refused("tcp", "bogus = 1",
	               "bogus: unknown key for transport tcp (known: ip, interface, port, mss, "
	               "bufsize, progress)");
}

static void test_tcp_mss_out_of_range(void)
{
	expect_refused("tcp", "mss = 16777217", "mss: \"16777217\" is not an integer in 64..16777216");
	expect_refused("tcp", "port = 65536", "port: \"65536\" is not an integer in 0..65535");
	expect_refused("tcp", "bufsize = -1", "bufsize: \"-1\" is not an integer in 0..268435456");
}

static void test_tcp_bad_choice(void)
{
	expect_refused("tcp", "progress = sometimes",
	               "progress: \"sometimes\" is not one of auto, manual");
}

static void test_tcp_bad_address(void)
{
	expect_refused("tcp", "ip = fe80::1",
	               "ip: \"fe80::1\" is not a numeric IPv4 or IPv6 address (IPv6 link-local "
	               "addresses are not supported)");
	expect_refused("tcp", "ip = localhost",
	               "ip: \"localhost\" is not a numeric IPv4 or IPv6 address (IPv6 link-local "
	               "addresses are not supported)");
	expect_refused("tcp", "interface = a-name-of-16-byte",
	               "interface: \"a-name-of-16-byte\" is longer than 15 bytes");
}

static void test_tcp_defaults(void)
{
	/* mss 65536, bound to all addresses, a port picked by the kernel. */
	expect_device("[any]\ntransport = tcp\n", "any", "1 65536 tcp://");
}

static void test_tcp_good_section(void)
{
	expect_device("[lo]\ntransport = tcp\nip = 127.0.0.1\nport = 0\nmss = 1000\n"
	              "bufsize = 1048576\nprogress = manual\n",
	              "lo", "1 1000 tcp://127.0.0.1:");
}
#endif

/* ----------------------------------------------------------------- ofi */

#ifdef HAVE_OFI_PLUGIN
static void test_ofi_unknown_key(void)
{
	expect_refused("ofi", "port = 7",
	               "port: unknown key for transport ofi (known: provider, domain, iface, mss, progress)");
}

static void test_ofi_mss_out_of_range(void)
{
	expect_refused("ofi", "mss = 8191", "mss: \"8191\" is not an integer in 8192..1048576");
}

static void test_ofi_bad_strings(void)
{
	char line[128], msg[256];

	expect_refused("ofi", "iface =", "iface: needs a value");
	snprintf(line, sizeof(line), "provider = %064d", 0);
	snprintf(msg, sizeof(msg), "provider: \"%s\" is longer than 63 bytes", line + 11);
	expect_refused("ofi", line, msg);
}

/* The tcp provider on lo: up where libfabric offers it, else down with
 * the reason; either way cci_init succeeds. */
static void test_ofi_defaults_and_good_section(void)
{
	struct child_result r;
	const char *line;

	run_init("[fab]\ntransport = ofi\nprovider = tcp\niface = lo\n", &r);
	line = device_line(&r, "fab");
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(line);
	if (line && strncmp(line, "fab 1 ", 6) == 0)
		CU_ASSERT_EQUAL(strncmp(line, "fab 1 65536 ofi://tcp/", 22), 0); /* mss's default */
	run_init("[fab]\ntransport = ofi\nprovider = tcp\niface = lo\nmss = 16384\n", &r);
	line = device_line(&r, "fab");
	CU_ASSERT_EQUAL(r.rc, CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL(line);
	if (line && strncmp(line, "fab 1 ", 6) == 0)
		CU_ASSERT_EQUAL(strncmp(line, "fab 1 16384 ofi://tcp/", 22), 0);
	if (r.rc != CCI_SUCCESS || !line)
		fprintf(stderr, "\n  ofi: rc %d, devices:\n%s%s", r.rc, r.out, r.err);
}
#endif

int main(void)
{
	static const struct unit_test tests[] = {
		{ "a key given twice in a section is refused naming both lines",
		  test_repeated_key_is_refused },
		{ "sm: an unknown key names file, line, section, key and the known keys",
		  test_sm_unknown_key },
		{ "sm: an mss out of 64..1048576 is refused", test_sm_mss_out_of_range },
		{ "sm: rma = dma is not one of the choices", test_sm_bad_choice },
		{ "sm: path must be absolute, given, and leave room for /<pid>/<id>",
		  test_sm_bad_path },
		{ "sm: without keys, mss and path take their defaults", test_sm_defaults },
		{ "sm: a section with every key works", test_sm_good_section },
#ifdef HAVE_TCP_PLUGIN
		{ "tcp: an unknown key names file, line, section, key and the known keys",
		  test_tcp_unknown_key },
		{ "tcp: mss, port and bufsize out of range are refused", test_tcp_mss_out_of_range },
		{ "tcp: progress = sometimes is not one of the choices", test_tcp_bad_choice },
		{ "tcp: ip must be numeric and not link-local; interface fits IF_NAMESIZE",
		  test_tcp_bad_address },
		{ "tcp: without keys, mss takes its default and all addresses are bound",
		  test_tcp_defaults },
		{ "tcp: a section with every key but interface works", test_tcp_good_section },
#endif
#ifdef HAVE_OFI_PLUGIN
		{ "ofi: an unknown key names file, line, section, key and the known keys",
		  test_ofi_unknown_key },
		{ "ofi: an mss below 8192 is refused", test_ofi_mss_out_of_range },
		{ "ofi: empty and too long strings are refused", test_ofi_bad_strings },
		{ "ofi: mss takes its default, and a given one applies",
		  test_ofi_defaults_and_good_section },
#endif
	};
	int fd = mkstemp(cfg_path), rc;

	if (fd < 0)
		return 1;
	close(fd);
	rc = UNIT_RUN("conf-keys", tests);
	unlink(cfg_path);
	return rc;
}
