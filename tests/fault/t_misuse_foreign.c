/*
 * t_misuse_foreign.c - objects given to the wrong call: an endpoint where
 * a connection is wanted and the reverse, memory that is no object of the
 * library's, a registration of another endpoint.  Each gives the
 * documented status, nothing reaches the peer and the real objects keep
 * working.
 */
#include "misuse.h"

#include "rmafix.h"
#include "server.h"

#include <stdlib.h>
#include <string.h>

static void wrong_kind_objects_are_refused(void)
{
	struct rfix r;
	struct srv_stats st;
	uint8_t buf[16];
	struct iovec iov = { buf, sizeof(buf) };
	uint32_t v = 1000;
	char *uri;
	/* zeroed memory no call handed out, big enough for any object */
	void *junk = calloc(1, 4096);
	cci_connection_t *ep_as_c;
	cci_endpoint_t *c_as_ep;

	REQUIRE(junk != NULL);
	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	ep_as_c = (cci_connection_t *)(const void *)r.ep;
	c_as_ep = (cci_endpoint_t *)(const void *)r.c;
	uri = h_uri(r.ep);
	proto_build(buf, sizeof(buf), 0, 0, PROTO_DATA);
	/* connection calls */
	CHECK_RC(cci_send(ep_as_c, buf, sizeof(buf), NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_send(junk, buf, sizeof(buf), NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_sendv(ep_as_c, &iov, 1, NULL, 0), CCI_EINVAL);
	CHECK_RC(cci_rma(ep_as_c, NULL, 0, r.lh, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_EINVAL);
	CHECK_RC(cci_rma(junk, NULL, 0, r.lh, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_EINVAL);
	CHECK_RC(cci_disconnect(ep_as_c), CCI_EINVAL);
	CHECK_RC(cci_disconnect(junk), CCI_EINVAL);
	/* endpoint calls */
	CHECK_RC(cci_get_event(c_as_ep, &(cci_event_t *){ NULL }), CCI_EINVAL);
	CHECK_RC(cci_get_event(junk, &(cci_event_t *){ NULL }), CCI_EINVAL);
	CHECK_RC(cci_connect(c_as_ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_EINVAL);
	CHECK_RC(cci_arm_os_handle(c_as_ep, 0), CCI_EINVAL);
	CHECK_RC(cci_rma_register(c_as_ep, r.local, 4096, 0, &(cci_rma_handle_t *){ NULL }),
	         CCI_EINVAL);
	CHECK_RC(cci_rma_deregister(c_as_ep, r.lh), CCI_EINVAL);
	CHECK_RC(cci_destroy_endpoint(c_as_ep), CCI_EINVAL);
	CHECK_RC(cci_destroy_endpoint(junk), CCI_EINVAL);
	CHECK(strcmp(cci_strerror(c_as_ep, CCI_EINVAL), cci_strerror(NULL, CCI_EINVAL)) == 0);
	/* event calls: a pointer that is not an event */
	CHECK_RC(cci_return_event((cci_event_t *)(const void *)r.c), CCI_EINVAL);
	CHECK_RC(cci_return_event((cci_event_t *)(const void *)r.ep), CCI_EINVAL);
	CHECK_RC(cci_return_event(junk), CCI_EINVAL);
	CHECK_RC(cci_accept((cci_event_t *)(const void *)r.c, NULL), CCI_EINVAL);
	CHECK_RC(cci_accept(junk, NULL), CCI_EINVAL);
	CHECK_RC(cci_reject((cci_event_t *)(const void *)r.ep), CCI_EINVAL);
	CHECK_RC(cci_reject(junk), CCI_EINVAL);
	/* options of the other kind of handle */
	CHECK_RC(cci_set_opt(r.ep, CCI_OPT_CONN_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_get_opt(r.ep, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_set_opt(r.c, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_get_opt(r.c, CCI_OPT_ENDPT_URI, &(char *){ NULL }), CCI_EINVAL);
	CHECK_RC(cci_set_opt(junk, CCI_OPT_ENDPT_SEND_TIMEOUT, &v), CCI_EINVAL);
	CHECK_RC(cci_get_opt(junk, CCI_OPT_CONN_SEND_TIMEOUT, &v), CCI_EINVAL);
	for (size_t i = 0; i < 4096; i++)
		if (!CHECKF(((uint8_t *)junk)[i] == 0, "the calls wrote byte %zu of foreign memory", i))
			break;
	EXPECT_QUIET(r.ep, 200);
	/* the real objects still work; the peer saw one message only */
	CHECK_RC(cci_send(r.c, buf, sizeof(buf), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	CHECK_RC(rma_run(&r, NULL, 0, &r.s.handle, 0, 0, 4096, CCI_FLAG_READ), CCI_SUCCESS);
	free(uri);
	free(junk);
	rfix_close(&r, &st);
	CHECK(st.recvs == 1 && st.rma_bad == 0 && st.canary_bad == 0);
}

static void handles_of_another_endpoint_are_refused(void)
{
	struct rfix r;
	struct srv_stats st;
	cci_endpoint_t *ep_b;
	cci_rma_handle_t *hb = NULL;
	void *mem_b = NULL;
	uint8_t before[4096];

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	ep_b = h_endpoint(h_find_device(), NULL);
	REQUIRE(posix_memalign(&mem_b, 4096, 8192) == 0);
	memset(mem_b, 0x5a, 8192);
	REQUIRE_RC(cci_rma_register(ep_b, mem_b, 8192, CCI_FLAG_READ | CCI_FLAG_WRITE, &hb),
	           CCI_SUCCESS);
	memcpy(before, r.local, sizeof(before));
	/* B's registration as the local handle of A's connection */
	CHECK_RC(cci_rma(r.c, NULL, 0, hb, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_READ),
	         CCI_ERR_RMA_HANDLE);
	CHECK_RC(cci_rma(r.c, NULL, 0, hb, 0, &r.s.handle, 0, 4096, NULL, CCI_FLAG_WRITE),
	         CCI_ERR_RMA_HANDLE);
	/* deregistering through the wrong endpoint */
	CHECK_RC(cci_rma_deregister(r.ep, hb), CCI_EINVAL);
	CHECK_RC(cci_rma_deregister(ep_b, r.lh), CCI_EINVAL);
	/* B's handle as the remote one: the peer does not know its key */
	m_rma_refused(&r, r.lh, hb, CCI_FLAG_WRITE, "another endpoint's handle as the remote one");
	m_rma_refused(&r, r.lh, hb, CCI_FLAG_READ, "another endpoint's handle as the remote one");
	CHECK(memcmp(before, r.local, sizeof(before)) == 0);
	for (size_t i = 0; i < 8192; i++)
		if (!CHECKF(((uint8_t *)mem_b)[i] == 0x5a, "byte %zu of B's region changed", i))
			break;
	EXPECT_QUIET(ep_b, 100);
	/* both registrations survived the misuse */
	CHECK_RC(rma_run(&r, NULL, 0, &r.s.handle, 0, 0, 4096, CCI_FLAG_READ), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(ep_b, hb), CCI_SUCCESS);
	CHECK_RC(cci_destroy_endpoint(ep_b), CCI_SUCCESS);
	free(mem_b);
	rfix_close(&r, &st);
	CHECK(st.rma_bad == 0 && st.canary_bad == 0);
}

const struct h_test t_misuse_foreign_tests[] = {
	{ "an endpoint given as a connection, a connection as an endpoint or an event, zeroed "
	  "memory as any object, and options of the other kind fail with CCI_EINVAL; "
	  "nothing is sent or written", wrong_kind_objects_are_refused, H_NEEDS_DEVICE, 0 },
	{ "another endpoint's registration as the local handle gives CCI_ERR_RMA_HANDLE, "
	  "deregistering through the wrong endpoint CCI_EINVAL, as the remote handle it is "
	  "refused; no memory changes", handles_of_another_endpoint_are_refused,
	  H_NEEDS_DEVICE, 0 },
};
const size_t t_misuse_foreign_count =
	sizeof(t_misuse_foreign_tests) / sizeof(t_misuse_foreign_tests[0]);
