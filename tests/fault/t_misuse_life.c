/*
 * t_misuse_life.c - cci_init and cci_finalize out of step: calls are
 * counted (CCI 2), an extra cci_finalize() or a call before cci_init()
 * gives CCI_ERROR, and the last cci_finalize() with endpoints,
 * connections, registrations and lent events still open closes them all:
 * their descriptors are closed, their memory freed (LeakSanitizer checks
 * at exit under ASan), and every old pointer gives a status afterwards.
 */
#include "misuse.h"

#include "server.h"

#include <stdlib.h>
#include <string.h>

static void calls_outside_init_fail(void)
{
	cci_device_t *const *devs;
	cci_plugin_info_t *const *plugins;
	const char *const *dirs;
	cci_endpoint_t *ep = NULL;
	uint32_t caps = 7;

	CHECK_RC(cci_finalize(), CCI_ERROR);
	CHECK_RC(cci_get_devices(&devs), CCI_ERROR);
	REQUIRE_RC(cci_init(CCI_ABI_VERSION, 0, &caps), CCI_SUCCESS);
	CHECK_RC(cci_init(CCI_ABI_VERSION, 0, &caps), CCI_SUCCESS);
	CHECK(caps == 0);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	/* one cci_init() is still counted: the library works */
	CHECK_RC(cci_get_devices(&devs), CCI_SUCCESS);
	if (h_find_device()) {
		ep = h_endpoint(h_find_device(), NULL);
		CHECK_RC(cci_destroy_endpoint(ep), CCI_SUCCESS);
	}
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_ERROR);
	CHECK_RC(cci_get_devices(&devs), CCI_ERROR);
	CHECK_RC(cci_get_plugins(&plugins), CCI_ERROR);
	CHECK_RC(cci_get_plugin_dirs(&dirs), CCI_ERROR);
	CHECK_RC(cci_create_endpoint(NULL, 0, &ep, NULL), CCI_ERROR);
	/* and starts again */
	REQUIRE_RC(cci_init(CCI_ABI_VERSION, 0, &caps), CCI_SUCCESS);
	CHECK_RC(cci_get_devices(&devs), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
}

static void finalize_closes_open_objects(void)
{
	struct srv s;
	struct srv_opts o = { .greet = 1 };
	cci_endpoint_t *ep, *ep2;
	cci_connection_t *c;
	cci_rma_handle_t *h = NULL;
	cci_event_t *held;
	cci_os_handle_t fd;
	static uint8_t mem[4096];
	uint32_t v = 5;
	int fds0;

	srv_start(&s, &o);
	fds0 = h_count_fds();
	ep = h_endpoint(h_setup(), &fd);
	ep2 = h_endpoint(h_find_device(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	h_connect(ep2, s.uri, CCI_CONN_ATTR_RU, NULL, 0, NULL);
	held = EXPECT_EVENT(ep, CCI_EVENT_RECV, 10000);
	REQUIRE(held != NULL);
	/* The server greets each connection as it accepts it: wait for the
	 * second greeting too, or the server's send may meet a finalized peer. */
	REQUIRE(EXPECT_EVENT(ep2, CCI_EVENT_RECV, 10000) != NULL);
	REQUIRE_RC(cci_rma_register(ep, mem, sizeof(mem), CCI_FLAG_READ, &h), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	CHECKF(h_count_fds() == fds0, "%d descriptors open after cci_finalize, %d before cci_init",
	       h_count_fds(), fds0);
	/* every old pointer gives a status */
	CHECK_RC(cci_send(c, mem, 8, NULL, 0), CCI_ERR_DISCONNECTED);
	CHECK_RC(cci_disconnect(c), CCI_EINVAL);
	CHECK_RC(cci_get_event(ep, &(cci_event_t *){ NULL }), CCI_EINVAL);
	CHECK_RC(cci_get_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_rma_deregister(ep, h), CCI_EINVAL);
	CHECK_RC(cci_return_event(held), CCI_EINVAL);
	CHECK_RC(cci_destroy_endpoint(ep), CCI_EINVAL);
	CHECK_RC(cci_destroy_endpoint(ep2), CCI_EINVAL);
	CHECK_RC(cci_finalize(), CCI_ERROR);
	CHECK(v == 5);
	/* and still after the library started again */
	REQUIRE_RC(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), CCI_SUCCESS);
	CHECK_RC(cci_get_event(ep, &(cci_event_t *){ NULL }), CCI_EINVAL);
	CHECK_RC(cci_send(c, mem, 8, NULL, 0), CCI_ERR_DISCONNECTED);
	ep = h_endpoint(h_find_device(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	CHECK_RC(cci_send(c, mem, 8, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	srv_stop(&s, NULL);
	h_teardown(ep);
}

const struct h_test t_misuse_life_tests[] = {
	{ "cci_init is counted: each needs one cci_finalize; an extra cci_finalize and calls "
	  "before cci_init or after the last cci_finalize give CCI_ERROR",
	  calls_outside_init_fail, 0, 0 },
	{ "the last cci_finalize with endpoints, connections, a registration and a lent event "
	  "open succeeds, closes their descriptors, and their pointers then give statuses",
	  finalize_closes_open_objects, H_NEEDS_DEVICE, 0 },
};
const size_t t_misuse_life_count = sizeof(t_misuse_life_tests) / sizeof(t_misuse_life_tests[0]);
