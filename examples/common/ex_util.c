/*
 * ex_util.c - the helpers of ex_util.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ex_util.h"

#define EX_URI_MAX 4096      /* longer than any transport's URI */
#define EX_URI_POLL_NS 2000000ull
/* The longest sleep before looking again: an sm endpoint asleep on its OS
 * handle occasionally misses the wake-up of a message already in its ring
 * (about once in 10,000 round trips here), so sleeps are sliced. */
#define EX_WAIT_SLICE_MS 2

uint64_t ex_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ex_deadline_ms(uint64_t ms)
{
	return ex_now_ns() + ms * 1000000ull;
}

/* Milliseconds to deadline for poll(), rounded up so that we never wake
 * just before it and spin, and at most one slice. */
static int ms_until(uint64_t deadline_ns)
{
	uint64_t now = ex_now_ns();
	uint64_t ms;

	if (now >= deadline_ns)
		return 0;
	ms = (deadline_ns - now + 999999) / 1000000;
	return ms > EX_WAIT_SLICE_MS ? EX_WAIT_SLICE_MS : (int)ms;
}

int ex_event_wait(cci_endpoint_t *ep, int fd, uint64_t deadline_ns,
		  cci_event_t **ev_p)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	for (;;) {
		int rc = cci_get_event(ep, ev_p);
		int ms;

		if (rc != CCI_EAGAIN)
			return rc;
		/* cci_get_event armed the handle when it found the queue
		 * empty, so an event that comes now wakes the poll. */
		ms = ms_until(deadline_ns);
		if (ms == 0)
			return CCI_ETIMEDOUT;
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return CCI_ERROR;
	}
}

cci_device_t *ex_find_device(const char *name)
{
	cci_device_t *const *devs;

	if (!name || cci_get_devices(&devs) != CCI_SUCCESS)
		return NULL;
	for (int i = 0; devs[i]; i++)
		if (!strcmp(devs[i]->name, name))
			return devs[i];
	return NULL;
}

int ex_uri_write(const char *path, const char *uri)
{
	size_t n = strlen(path) + 32;
	char *tmp = malloc(n);
	FILE *f;
	int rc = 0;

	if (!tmp)
		return ENOMEM;
	snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
	f = fopen(tmp, "w");
	if (!f) {
		rc = errno;
		goto out_free;
	}
	if (fprintf(f, "%s\n", uri) < 0)
		rc = EIO;
	if (fclose(f) != 0 && !rc)
		rc = errno;
	if (!rc && rename(tmp, path) != 0)
		rc = errno;
	if (rc)
		unlink(tmp);
out_free:
	free(tmp);
	return rc;
}

/* One attempt: 0 with *uri_p, ENOENT while the file is not there yet. */
static int uri_read_once(const char *path, char **uri_p)
{
	char buf[EX_URI_MAX];
	FILE *f = fopen(path, "r");
	size_t len;

	if (!f)
		return errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return EIO;
	}
	fclose(f);
	len = strcspn(buf, "\r\n");
	buf[len] = '\0';
	if (len == 0)
		return EIO;
	*uri_p = strdup(buf);
	return *uri_p ? 0 : ENOMEM;
}

int ex_uri_read(const char *path, uint64_t deadline_ns, char **uri_p)
{
	const struct timespec nap = { .tv_nsec = (long)EX_URI_POLL_NS };

	for (;;) {
		int rc = uri_read_once(path, uri_p);

		if (rc != ENOENT)
			return rc;
		if (ex_now_ns() >= deadline_ns)
			return ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
}
