/*
 * perf_util.c - the helpers of perf_util.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "perf_util.h"

static const char *perf_prog = "perf";
static cci_endpoint_t *perf_ep;

void perf_set_prog(const char *prog)
{
	perf_prog = prog;
}

void perf_set_ep(cci_endpoint_t *ep)
{
	perf_ep = ep;
}

void perf_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", perf_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_FAILURE);
}

void perf_check(int rc, const char *what)
{
	if (rc != CCI_SUCCESS)
		perf_die("%s failed: %s (%d)", what, cci_strerror(perf_ep, (enum cci_status)rc), rc);
}

uint64_t perf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t perf_parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);
	int shift = 0;

	if (end == s || *s == '-')
		perf_die("bad size \"%s\"", s);
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end || v > (UINT64_MAX >> shift))
		perf_die("bad size \"%s\"", s);
	return (uint64_t)v << shift;
}

uint32_t perf_parse_count(const char *s, uint32_t min, uint32_t max)
{
	uint64_t v = perf_parse_size(s);

	if (v < min || v > max)
		perf_die("bad count \"%s\" (%u .. %u)", s, min, max);
	return (uint32_t)v;
}

cci_conn_attribute_t perf_parse_attr(const char *s, bool allow_uu)
{
	if (!strcasecmp(s, "ro"))
		return CCI_CONN_ATTR_RO;
	if (!strcasecmp(s, "ru"))
		return CCI_CONN_ATTR_RU;
	if (allow_uu && !strcasecmp(s, "uu"))
		return CCI_CONN_ATTR_UU;
	perf_die("bad connection attribute \"%s\" (%s)", s, allow_uu ? "ro, ru or uu" : "ro or ru");
}

const char *perf_attr_name(cci_conn_attribute_t a)
{
	return a == CCI_CONN_ATTR_RO ? "ro" : a == CCI_CONN_ATTR_RU ? "ru" : "uu";
}

const char *perf_mode_name(uint32_t rma_op)
{
	return rma_op == CCI_FLAG_WRITE ? "rma_write"
	       : rma_op == CCI_FLAG_READ ? "rma_read" : "msg";
}

const void *perf_ctl_payload(const cci_event_t *ev, uint32_t size, uint64_t magic)
{
	uint64_t head;

	if (ev->recv.len != size)
		return NULL;
	memcpy(&head, ev->recv.ptr, sizeof(head));
	return head == magic ? ev->recv.ptr : NULL;
}

bool perf_block_on_fd(cci_endpoint_t *ep, int fd, uint64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int rc = cci_arm_os_handle(ep, 0);
	int ms = -1;

	if (rc == CCI_EAGAIN)
		return true;
	perf_check(rc, "cci_arm_os_handle");
	if (deadline) {
		uint64_t now = perf_now_ns();

		if (now >= deadline)
			return false;
		ms = (int)((deadline - now + 999999) / 1000000);
	}
	rc = poll(&pfd, 1, ms);
	if (rc < 0 && errno != EINTR)
		perf_die("poll on the OS handle: %s", strerror(errno));
	return rc != 0 || !deadline || perf_now_ns() < deadline;
}

cci_device_t *perf_find_device(const char *name)
{
	cci_device_t *const *devs;

	perf_check(cci_get_devices(&devs), "cci_get_devices");
	for (int i = 0; devs[i]; i++)
		if (!strcmp(devs[i]->name, name))
			return devs[i];
	fprintf(stderr, "%s: no device \"%s\"; devices:", perf_prog, name);
	for (int i = 0; devs[i]; i++)
		fprintf(stderr, " %s (%s)", devs[i]->name, devs[i]->transport);
	fputc('\n', stderr);
	exit(EXIT_FAILURE);
}

void perf_write_uri(const char *path, const char *uri)
{
	size_t n = strlen(path) + 32;
	char *tmp = malloc(n);
	FILE *f;

	if (!tmp)
		perf_die("out of memory");
	snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\n", uri) < 0 || fclose(f) != 0)
		perf_die("cannot write %s: %s", tmp, strerror(errno));
	if (rename(tmp, path) != 0)
		perf_die("cannot rename %s to %s: %s", tmp, path, strerror(errno));
	free(tmp);
}
