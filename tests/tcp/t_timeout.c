/*
 * t_timeout.c - the send timeout of tcp and sock against a peer that
 * stopped answering (an endpoint with progress = manual that nobody polls
 * any more: its kernel takes the bytes, nothing acknowledges them).  When
 * the timeout breaks the connection, every pending send or RMA that itself
 * waited past it completes with CCI_ETIMEDOUT, the younger ones with
 * CCI_ERR_DISCONNECTED, in the order they were made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "init_config.h"
#include "tcp_test.h"

#define TO_OLD 4u    /* sends and RMAs made first ... */
#define TO_YOUNG 2u  /* ... and 600 ms later */
#define TO_READ 2u   /* the old one that is an RMA read */

/* Connect cli to srv, polling both (srv has no progress thread). */
static cci_connection_t *connect_pair(cci_endpoint_t *cli, cci_endpoint_t *srv)
{
	cci_connection_t *c = NULL, *s = NULL;
	char *uri = st_uri(srv);

	CU_ASSERT_EQUAL_FATAL(cci_connect(cli, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                      CCI_SUCCESS);
	free(uri);
	for (uint64_t stop = st_now_ms() + 5000; (!c || !s) && st_now_ms() < stop;) {
		cci_event_t *ev;

		if (cci_get_event(srv, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT_REQUEST)
				CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
			if (ev->type == CCI_EVENT_ACCEPT)
				s = ev->accept.connection;
			cci_return_event(ev);
		}
		if (cci_get_event(cli, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_SUCCESS)
				c = ev->connect.connection;
			cci_return_event(ev);
		}
	}
	CU_ASSERT_PTR_NOT_NULL(s);
	return c;
}

/* Poll ep for ms; any event but a SEND completion is counted in *others. */
static void idle(cci_endpoint_t *ep, unsigned ms, int *others)
{
	for (uint64_t stop = st_now_ms() + ms; st_now_ms() < stop;) {
		cci_event_t *ev;

		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		(*others)++;
		cci_return_event(ev);
	}
}

static void queue_sends(cci_connection_t *c, uintptr_t from, uintptr_t to,
                        cci_rma_handle_t *lh, cci_rma_handle_t *rh)
{
	static char msg[100];

	for (uintptr_t i = from; i < to; i++) {
		int rc = i == TO_READ ? cci_rma(c, NULL, 0, lh, 0, rh, 0, 4096, (void *)i,
		                                CCI_FLAG_READ)
		                      : cci_send(c, msg, sizeof(msg), (void *)i, 0);
		CU_ASSERT_EQUAL(rc, CCI_SUCCESS);
	}
}

/*
 * Sends and a read at 0 ms, more sends at 600 ms, no send timeout until
 * 1000 ms, then one of 700 ms: the first ones waited 300 ms past it, the
 * later ones are 300 ms short of it, whatever a tick's rounding.
 */
static void send_timeout_statuses(const char *transport)
{
	static char lbuf[4096], rbuf[4096];
	const uint32_t none = 0, to_us = 700000;
	char conf[256];
	cci_endpoint_t *cli = NULL, *srv = NULL;
	cci_rma_handle_t *lh, *rh;
	cci_connection_t *c;
	uintptr_t next = 0;
	int others = 0;
	uint64_t t_set;

	snprintf(conf, sizeof(conf), "[cli]\ntransport = %s\nip = 127.0.0.1\n\n[srv]\ntransport = "
	         "%s\nip = 127.0.0.1\nprogress = manual\n", transport, transport);
	CU_ASSERT_PTR_NOT_NULL_FATAL(init_config_first_device(
	        conf, strcmp(transport, "tcp") == 0 ? "tcp" : "sock"));
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(init_device_named("cli"), 0, &cli, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(init_device_named("srv"), 0, &srv, NULL), CCI_SUCCESS);
	c = connect_pair(cli, srv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(cci_set_opt(c, CCI_OPT_CONN_SEND_TIMEOUT, &none), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_rma_register(cli, lbuf, sizeof(lbuf), 0, &lh), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_rma_register(srv, rbuf, sizeof(rbuf), CCI_FLAG_READ, &rh),
	                      CCI_SUCCESS);
	/* srv is never polled again: it answers nothing. */
	queue_sends(c, 0, TO_OLD, lh, rh);
	idle(cli, 600, &others);
	queue_sends(c, TO_OLD, TO_OLD + TO_YOUNG, lh, rh);
	idle(cli, 400, &others);
	CU_ASSERT_EQUAL(cci_set_opt(c, CCI_OPT_CONN_SEND_TIMEOUT, &to_us), CCI_SUCCESS);
	t_set = st_now_ms();
	while (next < TO_OLD + TO_YOUNG && st_now_ms() < t_set + 5000) {
		cci_event_t *ev;

		if (cci_get_event(cli, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type != CCI_EVENT_SEND) {
			others++;
		} else {
			uintptr_t i = (uintptr_t)ev->send.context;
			int want = i < TO_OLD ? CCI_ETIMEDOUT : CCI_ERR_DISCONNECTED;

			if (i != next || (int)ev->send.status != want)
				printf("[operation %u (expected %u) completed with %s (expected %s)] ",
				       (unsigned)i, (unsigned)next, cci_strerror(cli, ev->send.status),
				       cci_strerror(cli, want));
			CU_ASSERT_EQUAL(i, next);
			CU_ASSERT_EQUAL((int)ev->send.status, want);
			next++;
		}
		cci_return_event(ev);
	}
	printf("[%u completions, the timeout broke the connection %llu ms after it was set] ",
	       (unsigned)next, (unsigned long long)(st_now_ms() - t_set));
	CU_ASSERT_EQUAL(next, TO_OLD + TO_YOUNG);
	CU_ASSERT_EQUAL(others, 0);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(cli), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(srv), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_finalize(), CCI_SUCCESS);
}

static void tcp_send_timeout_statuses(void)
{
	send_timeout_statuses("tcp");
}

static void sock_send_timeout_statuses(void)
{
	send_timeout_statuses("sock");
}

int st_add_timeout_tests(void)
{
	CU_pSuite s = CU_add_suite_with_setup_and_teardown("send timeout", NULL, NULL, NULL,
	                                                   st_teardown);

	return !s ||
	       !CU_add_test(s, "tcp: after a send timeout, the sends and RMAs that waited past it "
	                       "fail with CCI_ETIMEDOUT, the younger ones with "
	                       "CCI_ERR_DISCONNECTED, in the order they were made",
	                    tcp_send_timeout_statuses) ||
	       !CU_add_test(s, "sock: after a send timeout, the sends and RMAs that waited past it "
	                       "fail with CCI_ETIMEDOUT, the younger ones with "
	                       "CCI_ERR_DISCONNECTED, in the order they were made",
	                    sock_send_timeout_statuses);
}
