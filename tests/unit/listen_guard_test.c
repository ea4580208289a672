/*
 * listen_guard_test.c - unit tests of the listen guard
 * (plugins/common/listen_guard.h): the socket is watched exactly while no
 * pause reason is set; a shortage of descriptors pauses it until its retry
 * time (or the next tick once a descriptor freed), warns once per
 * shortage within the warning interval, and its end is logged with the
 * attempts that failed.  The watch callback and the core's log are
 * recorders.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cci.h"
#include "listen_guard.h"
#include "unit_run.h"

#define MS 1000000ull /* ns */
#define OWN CCI__LISTEN_OWN

static unsigned log_mask = ~0u;
static int warnings;
static char last_line[256];

static void rec_log(unsigned cat, const char *fmt, ...)
{
	va_list ap;

	warnings += cat == CCI_LOG_WARN;
	va_start(ap, fmt);
	vsnprintf(last_line, sizeof(last_line), fmt, ap);
	va_end(ap);
}

static const struct cci_core core = {
	.size = sizeof(core),
	.log_mask = &log_mask,
	.log = rec_log,
};

/* The plugin's watcher: on or off, and how often it was switched. */
struct watcher {
	int on, switches;
};

static void watch(void *arg, int on)
{
	struct watcher *w = arg;

	CU_ASSERT_NOT_EQUAL(w->on, on); /* only real changes are passed on */
	w->on = on;
	w->switches++;
}

static void setup(struct cci__listen_guard *g, struct watcher *w)
{
	*w = (struct watcher){ .on = 1 };
	warnings = 0;
	last_line[0] = '\0';
	/* Retry after 100 ms, warn at most every 10 s. */
	cci__listen_guard_init(g, &core, "tcp", "tcp://10.0.0.1:5000", 100 * MS, 10000 * MS, watch,
	                       w);
}

static void reasons_are_bits(void)
{
	struct cci__listen_guard g;
	struct watcher w;

	setup(&g, &w);
	cci__listen_pause(&g, OWN);
	CU_ASSERT_EQUAL(w.on, 0);
	cci__listen_pause(&g, OWN); /* again: nothing */
	CU_ASSERT(cci__listen_accept_failed(&g, EMFILE, 1000 * MS));
	CU_ASSERT_EQUAL(cci__listen_paused(&g), OWN | CCI__LISTEN_NOFD);
	cci__listen_resume(&g, OWN);
	CU_ASSERT_EQUAL(w.on, 0); /* the shortage still holds it */
	cci__listen_tick(&g, 1099 * MS);
	CU_ASSERT_EQUAL(w.on, 0);
	cci__listen_tick(&g, 1100 * MS);
	CU_ASSERT_EQUAL(w.on, 1);
	CU_ASSERT_EQUAL(cci__listen_paused(&g), 0);
	cci__listen_resume(&g, OWN); /* not set: nothing */
	CU_ASSERT_EQUAL(w.switches, 2);
}

static void other_errors_do_not_pause(void)
{
	struct cci__listen_guard g;
	struct watcher w;
	const int errs[] = { EAGAIN, EINTR, ECONNABORTED, EPROTO, EPERM };
	const int shortages[] = { EMFILE, ENFILE, ENOBUFS, ENOMEM };

	setup(&g, &w);
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		CU_ASSERT_FALSE(cci__listen_accept_failed(&g, errs[i], 1000 * MS));
	CU_ASSERT_EQUAL(cci__listen_paused(&g), 0);
	CU_ASSERT_EQUAL(w.switches, 0);
	CU_ASSERT_EQUAL(warnings, 0);
	for (size_t i = 0; i < sizeof(shortages) / sizeof(shortages[0]); i++) {
		CU_ASSERT(cci__listen_accept_failed(&g, shortages[i], 1000 * MS));
		cci__listen_tick(&g, 2000 * MS);
	}
}

static void a_shortage_warns_once_and_its_end_is_logged(void)
{
	struct cci__listen_guard g;
	struct watcher w;
	uint64_t t = 1000 * MS;

	setup(&g, &w);
	for (int i = 0; i < 50; i++, t += 100 * MS) { /* 5 s of failures */
		CU_ASSERT(cci__listen_accept_failed(&g, EMFILE, t));
		cci__listen_tick(&g, t + 100 * MS);
	}
	CU_ASSERT_EQUAL(warnings, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(last_line, "tcp: tcp://10.0.0.1:5000: cannot accept "
	                                         "connections: Too many open files"));
	cci__listen_accepted(&g, t);
	CU_ASSERT_EQUAL(warnings, 2);
	CU_ASSERT_PTR_NOT_NULL(strstr(last_line, "accepting connections again, after 50 attempts "
	                                         "failed in 5.0 s"));
	cci__listen_accepted(&g, t + MS); /* no shortage: nothing */
	CU_ASSERT_EQUAL(warnings, 2);
	/* A second shortage within 10 s of the first warning: not reported,
	 * and neither is its end. */
	CU_ASSERT(cci__listen_accept_failed(&g, ENFILE, t + 1000 * MS));
	cci__listen_accepted(&g, t + 1200 * MS);
	CU_ASSERT_EQUAL(warnings, 2);
	/* One after the interval is. */
	CU_ASSERT(cci__listen_accept_failed(&g, ENFILE, t + 11000 * MS));
	CU_ASSERT_EQUAL(warnings, 3);
}

static void a_freed_descriptor_retries_at_the_next_tick(void)
{
	struct cci__listen_guard g;
	struct watcher w;

	setup(&g, &w);
	CU_ASSERT(cci__listen_accept_failed(&g, EMFILE, 1000 * MS));
	cci__listen_tick(&g, 1010 * MS);
	CU_ASSERT_EQUAL(w.on, 0);
	cci__listen_fd_freed(&g);
	cci__listen_tick(&g, 1020 * MS);
	CU_ASSERT_EQUAL(w.on, 1);
}

static const struct unit_test tests[] = {
	{ "pause reasons are bits: the socket is watched again only when the last one goes",
	  reasons_are_bits },
	{ "only a shortage of descriptors or memory pauses accepting", other_errors_do_not_pause },
	{ "a shortage warns once, naming the endpoint; its end says how many attempts failed "
	  "and for how long; a shortage within the interval is not reported",
	  a_shortage_warns_once_and_its_end_is_logged },
	{ "a descriptor freed by the endpoint brings the retry to the next tick",
	  a_freed_descriptor_retries_at_the_next_tick },
};

int main(void)
{
	return UNIT_RUN("listen guard", tests);
}
