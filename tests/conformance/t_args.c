/*
 * t_args.c - bad arguments to every call give the documented status
 * (CCI_EINVAL unless stated otherwise) and never crash.
 */
#include "tests.h"

#include "proto.h"
#include "server.h"

#include <stdlib.h>

static void get_devices_null_is_einval(void)
{
	REQUIRE_RC(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), CCI_SUCCESS);
	CHECK_RC(cci_get_devices(NULL), CCI_EINVAL);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
}

static void endpoint_calls_reject_bad_arguments(void)
{
	cci_device_t *dev = h_setup();
	cci_endpoint_t *ep = NULL;
	cci_os_handle_t fd;

	CHECK_RC(cci_create_endpoint(dev, 0, NULL, NULL), CCI_EINVAL);
	CHECK_RC(cci_create_endpoint_at(dev, NULL, 0, NULL, NULL), CCI_EINVAL);
	CHECK(ep == NULL);
	CHECK_RC(cci_destroy_endpoint(NULL), CCI_EINVAL);
	ep = h_endpoint(dev, &fd);
	CHECK_RC(cci_arm_os_handle(NULL, 0), CCI_EINVAL);
	h_teardown(ep);
}

static void event_calls_reject_bad_arguments(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	cci_event_t *ev = NULL;

	CHECK_RC(cci_get_event(NULL, &ev), CCI_EINVAL);
	CHECK_RC(cci_get_event(ep, NULL), CCI_EINVAL);
	CHECK_RC(cci_return_event(NULL), CCI_EINVAL);
	CHECK_RC(cci_accept(NULL, NULL), CCI_EINVAL);
	CHECK_RC(cci_reject(NULL), CCI_EINVAL);
	CHECK_RC(cci_disconnect(NULL), CCI_EINVAL);
	h_teardown(ep);
}

static void connect_rejects_bad_arguments(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	char *uri = h_uri(ep);

	CHECK_RC(cci_connect(NULL, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_connect(ep, NULL, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_connect(ep, uri, NULL, 5, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_connect(ep, uri, NULL, 0, (cci_conn_attribute_t)99, NULL, 0, NULL),
	         CCI_EINVAL);
	EXPECT_QUIET(ep, 200);
	free(uri);
	h_teardown(ep);
}

static void options_reject_bad_arguments(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	uint32_t v = 1000;

	CHECK_RC(cci_set_opt(NULL, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_get_opt(NULL, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, NULL), CCI_EINVAL);
	CHECK_RC(cci_get_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, NULL), CCI_EINVAL);
	CHECK_RC(cci_get_opt(ep, CCI_OPT_ENDPT_URI, NULL), CCI_EINVAL);
	CHECK_RC(cci_get_opt(ep, CCI_OPT_ENDPT_RMA_ALIGN, NULL), CCI_EINVAL);
	h_teardown(ep);
}

static void rma_registration_rejects_bad_arguments(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	static uint8_t mem[8192];
	cci_rma_handle_t *h = NULL;

	CHECK_RC(cci_rma_register(NULL, mem, sizeof(mem), 0, &h), CCI_EINVAL);
	CHECK_RC(cci_rma_register(ep, NULL, sizeof(mem), 0, &h), CCI_EINVAL);
	CHECK_RC(cci_rma_register(ep, mem, 0, 0, &h), CCI_EINVAL);
	CHECK_RC(cci_rma_register(ep, mem, sizeof(mem), 0, NULL), CCI_EINVAL);
	CHECK(h == NULL);
	CHECK_RC(cci_rma_deregister(ep, NULL), CCI_EINVAL);
	REQUIRE_RC(cci_rma_register(ep, mem, sizeof(mem), CCI_FLAG_READ | CCI_FLAG_WRITE, &h),
	           CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(NULL, h), CCI_EINVAL);
	CHECK_RC(cci_rma_deregister(ep, h), CCI_SUCCESS);
	h_teardown(ep);
}

static void sends_reject_bad_arguments(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	struct srv_stats st;
	struct iovec iov[2] = { { NULL, 4 }, { NULL, 0 } };
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint8_t buf[16] = { 0 };

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	CHECK_RC(cci_send(NULL, buf, 8, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_send(c, NULL, 8, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_sendv(NULL, iov, 1, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_sendv(c, NULL, 2, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_sendv(c, iov, 1, NULL, 0), CCI_EINVAL);
	EXPECT_QUIET(ep, 200);
	srv_stop_and_teardown(&s, &st, ep);
	CHECK(st.recvs == 0);
}

static void accept_on_other_events_is_einval(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_event_t *ev;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	CHECK_RC(cci_send(c, "x", 1, NULL, 0), CCI_SUCCESS);
	ev = EXPECT_EVENT(ep, CCI_EVENT_SEND, 5000);
	if (ev) {
		CHECK_RC(cci_accept(ev, NULL), CCI_EINVAL);
		CHECK_RC(cci_reject(ev), CCI_EINVAL);
		CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	}
	srv_stop_and_teardown(&s, NULL, ep);
}

const struct h_test t_args_tests[] = {
	{ "cci_get_devices(NULL) fails with CCI_EINVAL", get_devices_null_is_einval, 0, 0 },
	{ "endpoint calls with NULL outputs or a NULL endpoint fail with CCI_EINVAL",
	  endpoint_calls_reject_bad_arguments, H_NEEDS_DEVICE, 0 },
	{ "event calls with a NULL endpoint, event or output fail with CCI_EINVAL",
	  event_calls_reject_bad_arguments, H_NEEDS_DEVICE, 0 },
	{ "cci_connect with NULL endpoint or URI, data without pointer or a bad "
	  "attribute fails with CCI_EINVAL", connect_rejects_bad_arguments, H_NEEDS_DEVICE, 0 },
	{ "cci_set_opt and cci_get_opt with a NULL handle or value fail with CCI_EINVAL",
	  options_reject_bad_arguments, H_NEEDS_DEVICE, 0 },
	{ "cci_rma_register and cci_rma_deregister reject NULL and zero length",
	  rma_registration_rejects_bad_arguments, H_NEEDS_DEVICE, 0 },
	{ "cci_send and cci_sendv with NULL buffers or a NULL connection "
	  "fail with CCI_EINVAL", sends_reject_bad_arguments, H_NEEDS_DEVICE, 0 },
	{ "cci_accept and cci_reject on an event that is not a request fail with CCI_EINVAL",
	  accept_on_other_events_is_einval, H_NEEDS_DEVICE, 0 },
};
const size_t t_args_count = sizeof(t_args_tests) / sizeof(t_args_tests[0]);
