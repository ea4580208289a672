/*
 * t_misuse_null.c - NULL for each pointer argument of every public call
 * gives CCI_EINVAL (cci_strerror: the core's text), writes no output and
 * leaves the objects involved working.
 */
#include "misuse.h"

#include "rmafix.h"
#include "server.h"

#include <stdlib.h>
#include <string.h>

static void library_calls_reject_null(void)
{
	cci_device_t *const *devs = NULL;
	cci_plugin_info_t *const *plugins = NULL;
	cci_conf_key_info_t *const *keys = NULL;
	const char *const *dirs = NULL;
	cci_device_t *dev;
	int prio = -1, def = -1;

	CHECK_RC(cci_init(CCI_ABI_VERSION, 0, NULL), CCI_EINVAL);
	dev = h_setup();
	CHECK_RC(cci_get_devices(NULL), CCI_EINVAL);
	CHECK_RC(cci_get_plugins(NULL), CCI_EINVAL);
	CHECK_RC(cci_get_plugin_dirs(NULL), CCI_EINVAL);
	CHECK_RC(cci_get_device_priority(NULL, &prio, &def), CCI_EINVAL);
	CHECK_RC(cci_get_device_priority(dev, NULL, &def), CCI_EINVAL);
	CHECK_RC(cci_get_device_priority(dev, &prio, NULL), CCI_EINVAL);
	CHECK(prio == -1 && def == -1);
	REQUIRE_RC(cci_get_plugins(&plugins), CCI_SUCCESS);
	CHECK_RC(cci_get_plugin_keys(NULL, &keys), CCI_EINVAL);
	if (plugins[0])
		CHECK_RC(cci_get_plugin_keys(plugins[0], NULL), CCI_EINVAL);
	CHECK(keys == NULL);
	CHECK_RC(cci_create_endpoint(dev, 0, NULL, NULL), CCI_EINVAL);
	CHECK_RC(cci_create_endpoint_at(dev, NULL, 0, NULL, NULL), CCI_EINVAL);
	CHECK_RC(cci_destroy_endpoint(NULL), CCI_EINVAL);
	CHECK(cci_strerror(NULL, CCI_EINVAL) && strcmp(cci_strerror(NULL, CCI_EINVAL), "") != 0);
	/* still working */
	CHECK_RC(cci_get_devices(&devs), CCI_SUCCESS);
	CHECK_RC(cci_get_plugin_dirs(&dirs), CCI_SUCCESS);
	h_teardown(NULL);
}

static void endpoint_calls_reject_null(void)
{
	cci_device_t *dev = h_setup();
	cci_os_handle_t fd;
	cci_endpoint_t *ep = h_endpoint(dev, &fd);
	char *uri = h_uri(ep);
	static uint8_t mem[4096];
	cci_rma_handle_t *h = NULL;
	cci_event_t *ev = NULL;
	uint32_t v = 1000;

	CHECK_RC(cci_connect(NULL, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_connect(ep, NULL, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_connect(ep, uri, NULL, 4, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_get_event(NULL, &ev), CCI_EINVAL);
	CHECK_RC(cci_get_event(ep, NULL), CCI_EINVAL);
	CHECK(ev == NULL);
	CHECK_RC(cci_return_event(NULL), CCI_EINVAL);
	CHECK_RC(cci_accept(NULL, NULL), CCI_EINVAL);
	CHECK_RC(cci_reject(NULL), CCI_EINVAL);
	CHECK_RC(cci_arm_os_handle(NULL, 0), CCI_EINVAL);
	for (int n = CCI_OPT_ENDPT_SEND_TIMEOUT; n <= CCI_OPT_CONN_KEEPALIVE_TIMEOUT; n++) {
		CHECK_RC(cci_set_opt(NULL, (cci_opt_name_t)n, &v), CCI_EINVAL);
		CHECK_RC(cci_get_opt(NULL, (cci_opt_name_t)n, &v), CCI_EINVAL);
		CHECK_RC(cci_set_opt(ep, (cci_opt_name_t)n, NULL), CCI_EINVAL);
		CHECK_RC(cci_get_opt(ep, (cci_opt_name_t)n, NULL), CCI_EINVAL);
	}
	CHECK_RC(cci_rma_register(NULL, mem, sizeof(mem), 0, &h), CCI_EINVAL);
	CHECK_RC(cci_rma_register(ep, NULL, sizeof(mem), 0, &h), CCI_EINVAL);
	CHECK_RC(cci_rma_register(ep, mem, sizeof(mem), 0, NULL), CCI_EINVAL);
	CHECK(h == NULL);
	CHECK_RC(cci_rma_deregister(ep, NULL), CCI_EINVAL);
	REQUIRE_RC(cci_rma_register(ep, mem, sizeof(mem), CCI_FLAG_READ, &h), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(NULL, h), CCI_EINVAL);
	/* the registration survived the NULL endpoint */
	CHECK_RC(cci_rma_deregister(ep, h), CCI_SUCCESS);
	EXPECT_QUIET(ep, 200);
	CHECK_RC(cci_get_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_SUCCESS);
	free(uri);
	h_teardown(ep);
}

static void connection_calls_reject_null(void)
{
	struct rfix r;
	struct srv_stats st;
	struct iovec iov[2] = { { NULL, 4 }, { NULL, 0 } };
	uint8_t buf[16];
	uint32_t v = 0;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	proto_build(buf, sizeof(buf), 0, 0, PROTO_DATA);
	CHECK_RC(cci_send(NULL, buf, sizeof(buf), NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_send(r.c, NULL, 8, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_sendv(NULL, iov, 1, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_sendv(r.c, NULL, 1, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_sendv(r.c, iov, 1, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_rma(NULL, NULL, 0, r.lh, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 8, r.lh, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 0, NULL, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(r.c, NULL, 0, r.lh, 0, NULL, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_EINVAL);
	CHECK_RC(cci_disconnect(NULL), CCI_EINVAL);
	CHECK_RC(cci_set_opt(r.c, CCI_OPT_CONN_SEND_TIMEOUT, NULL), CCI_EINVAL);
	CHECK_RC(cci_get_opt(r.c, CCI_OPT_CONN_SEND_TIMEOUT, NULL), CCI_EINVAL);
	EXPECT_QUIET(r.ep, 200);
	/* nothing reached the peer, and the connection still works */
	CHECK_RC(cci_get_opt(r.c, CCI_OPT_CONN_SEND_TIMEOUT, &v), CCI_SUCCESS);
	CHECK_RC(cci_send(r.c, buf, sizeof(buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	rfix_close(&r, &st);
	CHECK(st.recvs == 1 && st.rma_notes == 0 && st.rma_bad == 0 && st.canary_bad == 0);
}

const struct h_test t_misuse_null_tests[] = {
	{ "library calls (init, devices, plugins, endpoint creation) with a NULL pointer "
	  "fail with CCI_EINVAL and write nothing", library_calls_reject_null, H_NEEDS_DEVICE, 0 },
	{ "endpoint, event, option and registration calls with a NULL pointer fail with "
	  "CCI_EINVAL and leave the endpoint working", endpoint_calls_reject_null,
	  H_NEEDS_DEVICE, 0 },
	{ "send, sendv, rma, disconnect and connection options with a NULL pointer fail "
	  "with CCI_EINVAL, send nothing and leave the connection working",
	  connection_calls_reject_null, H_NEEDS_DEVICE, 0 },
};
const size_t t_misuse_null_count = sizeof(t_misuse_null_tests) / sizeof(t_misuse_null_tests[0]);
