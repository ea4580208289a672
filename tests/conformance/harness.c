/*
 * harness.c - checks, time, library set-up and event waiting for the
 * conformance tests (peer processes and pipes are in peer.c).
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *h_transport;
int h_result_fd = -1;
const char *h_role_prefix = "";

static atomic_ulong n_pass;
static atomic_ulong n_fail;

const char *h_transport_name(void)
{
	return h_transport ? h_transport : "sm";
}

int h_handle_polls(void)
{
	return h_env_count("CCI_TEST_HANDLE_POLLS", 0) == 1;
}

unsigned long h_env_count(const char *name, unsigned long def)
{
	const char *v = getenv(name);
	char *end = NULL;
	unsigned long n;

	if (!v || !*v)
		return def;
	n = strtoul(v, &end, 10);
	return *end || n == 0 ? def : n;
}

/* One line to the runner; a single write() below PIPE_BUF is atomic, so
 * lines from several threads and processes never interleave. */
static void result_line(const char *line)
{
	size_t len = strlen(line);

	if (h_result_fd < 0) {
		fputs(line, stderr);
		return;
	}
	while (write(h_result_fd, line, len) < 0 && errno == EINTR)
		;
}

int h_check(int ok, const char *file, int line, const char *fmt, ...)
{
	char msg[900], out[1024];
	va_list ap;

	if (ok) {
		atomic_fetch_add(&n_pass, 1);
		return 1;
	}
	atomic_fetch_add(&n_fail, 1);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	snprintf(out, sizeof(out), "F %s:%d: %s%s\n", file, line, h_role_prefix, msg);
	result_line(out);
	return 0;
}

int h_check_rc(int rc, int want, const char *file, int line, const char *expr)
{
	return h_check(rc == want, file, line, "%s returned %s (%d), expected %s",
	               expr, h_status_name(rc), rc, h_status_name(want));
}

int h_check_rc2(int rc, int want1, int want2, const char *file, int line,
                const char *expr)
{
	return h_check(rc == want1 || rc == want2, file, line,
	               "%s returned %s (%d), expected %s or %s", expr,
	               h_status_name(rc), rc, h_status_name(want1),
	               h_status_name(want2));
}

/* Report the passed checks; the exit status this process ends with. */
static int exit_report(void)
{
	char line[64];

	snprintf(line, sizeof(line), "P %lu\n", (unsigned long)atomic_load(&n_pass));
	result_line(line);
	fflush(stdout);
	fflush(stderr);
	return atomic_load(&n_fail) ? 1 : 0;
}

_Noreturn void h_exit(void)
{
	exit(exit_report());
}

_Noreturn void h_exit_now(void)
{
	_exit(exit_report());
}

_Noreturn void h_bail(void)
{
	atomic_fetch_add(&n_fail, 1);
	h_exit();
}

_Noreturn void h_skip(const char *fmt, ...)
{
	char msg[900], out[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(out, sizeof(out), "S %s\n", msg);
	result_line(out);
	h_exit();
}

const char *h_status_name(int status)
{
	static const struct { int v; const char *name; } names[] = {
		{ CCI_SUCCESS, "CCI_SUCCESS" }, { CCI_ERROR, "CCI_ERROR" },
		{ CCI_ERR_DISCONNECTED, "CCI_ERR_DISCONNECTED" },
		{ CCI_ERR_RNR, "CCI_ERR_RNR" },
		{ CCI_ERR_DEVICE_DEAD, "CCI_ERR_DEVICE_DEAD" },
		{ CCI_ERR_RMA_HANDLE, "CCI_ERR_RMA_HANDLE" },
		{ CCI_ERR_RMA_OP, "CCI_ERR_RMA_OP" },
		{ CCI_ERR_NOT_IMPLEMENTED, "CCI_ERR_NOT_IMPLEMENTED" },
		{ CCI_ERR_NOT_FOUND, "CCI_ERR_NOT_FOUND" },
		{ CCI_EINVAL, "CCI_EINVAL" }, { CCI_ETIMEDOUT, "CCI_ETIMEDOUT" },
		{ CCI_ENOMEM, "CCI_ENOMEM" }, { CCI_ENODEV, "CCI_ENODEV" },
		{ CCI_ENETDOWN, "CCI_ENETDOWN" }, { CCI_EBUSY, "CCI_EBUSY" },
		{ CCI_ERANGE, "CCI_ERANGE" }, { CCI_EAGAIN, "CCI_EAGAIN" },
		{ CCI_ENOBUFS, "CCI_ENOBUFS" }, { CCI_EMSGSIZE, "CCI_EMSGSIZE" },
		{ CCI_ENOMSG, "CCI_ENOMSG" },
		{ CCI_EADDRNOTAVAIL, "CCI_EADDRNOTAVAIL" },
		{ CCI_ECONNREFUSED, "CCI_ECONNREFUSED" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].v == status)
			return names[i].name;
	return "an unknown status";
}

uint64_t h_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void h_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int h_count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int h_device_manual(const cci_device_t *dev)
{
	for (const char *const *kv = dev ? dev->conf_argv : NULL; kv && *kv; kv++)
		if (strcmp(*kv, "progress=manual") == 0)
			return 1;
	return 0;
}

int h_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own descriptor */
}

/* Field 2 (resident) or 3 (resident and shared: files, shared memory
 * such as a peer's mapped region) of /proc/self/statm, in KiB. */
static long statm_kb(int field)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long v[3] = { -1, -1, -1 };

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld %ld", &v[0], &v[1], &v[2]) != 3)
		v[field - 1] = -1;
	fclose(f);
	return v[field - 1] < 0 ? -1 : v[field - 1] * (sysconf(_SC_PAGESIZE) / 1024);
}

long h_rss_kb(void)
{
	return statm_kb(2);
}

long h_rss_shared_kb(void)
{
	return statm_kb(3);
}

void h_note(const char *fmt, ...)
{
	char msg[900], out[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	snprintf(out, sizeof(out), "    %s%s\n", h_role_prefix, msg);
	result_line(out);
}

/* The first device of the transport under test, up or (up_only == 0) not. */
static cci_device_t *find_device(int up_only)
{
	cci_device_t *const *devs = NULL;

	if (cci_get_devices(&devs) != CCI_SUCCESS || !devs)
		return NULL;
	for (int i = 0; devs[i]; i++)
		if ((!h_transport ||
		     (devs[i]->transport && strcmp(devs[i]->transport, h_transport) == 0)) &&
		    (devs[i]->up || !up_only))
			return devs[i];
	return NULL;
}

cci_device_t *h_find_device(void)
{
	return find_device(1);
}

cci_device_t *h_find_down_device(void)
{
	return find_device(0);
}

cci_device_t *h_setup(void)
{
	cci_device_t *dev;

	REQUIRE_RC(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), CCI_SUCCESS);
	dev = h_find_device();
	if (!dev)
		h_skip("no device of transport %s", h_transport_name());
	return dev;
}

cci_endpoint_t *h_endpoint(cci_device_t *dev, cci_os_handle_t *fd)
{
	cci_endpoint_t *ep = NULL;

	REQUIRE_RC(cci_create_endpoint(dev, 0, &ep, fd), CCI_SUCCESS);
	REQUIRE(ep != NULL);
	return ep;
}

char *h_uri(cci_endpoint_t *ep)
{
	char *uri = NULL;

	REQUIRE_RC(cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri), CCI_SUCCESS);
	REQUIRE(uri != NULL);
	return uri;
}

void h_teardown(cci_endpoint_t *ep)
{
	if (ep)
		CHECK_RC(cci_destroy_endpoint(ep), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
}
