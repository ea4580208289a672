/*
 * recorder_core.h - the core services a unit test of the connection base
 * hands to it (struct cci_core): the base only logs and posts
 * KEEPALIVE_TIMEDOUT, and the recorder counts both.  Included by one
 * test program each (its definitions are static).
 */
#ifndef CCI_TEST_RECORDER_CORE_H
#define CCI_TEST_RECORDER_CORE_H

#include "cci_plugin.h"

static unsigned log_mask = ~0u;
static int logged, ka_posted;

static void rec_log(unsigned cat, const char *fmt, ...)
{
	(void)cat;
	(void)fmt;
	logged++;
}

static int rec_post_ka(cci__conn_t *conn)
{
	(void)conn;
	ka_posted++;
	return CCI_SUCCESS;
}

static const struct cci_core core = {
	.size = sizeof(core),
	.log_mask = &log_mask,
	.log = rec_log,
	.post_keepalive_timedout = rec_post_ka,
};

#endif /* CCI_TEST_RECORDER_CORE_H */
