/*
 * t_manual.c - progress=manual: an endpoint without a progress thread,
 * beside one with it in the same process.  An application asleep on its
 * OS handle is still woken for a connection request and a message, with
 * nothing but its own calls moving the endpoint.  (That no thread starts
 * is the conformance suite's test, t_progress.c, which runs whole over
 * such a device on every transport.)
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_test.h"
#include "init_config.h"

#define MANUAL_CONF                                                                \
	"[m]\ntransport = tcp\nip = 127.0.0.1\nprogress = manual\n\n"                  \
	"[a]\ntransport = tcp\nip = 127.0.0.1\n"

/* Sleep on fd until it is readable, then take the next event of type,
 * calling cci_get_event (which is all that moves a manual endpoint)
 * after every wake-up; within ms. */
static cci_event_t *sleep_for(cci_endpoint_t *ep, int fd, cci_event_type_t type, unsigned ms)
{
	for (uint64_t stop = st_now_ms() + ms; st_now_ms() < stop;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		cci_event_t *ev;
		int rc = cci_get_event(ep, &ev);

		if (rc == CCI_SUCCESS) {
			if (ev->type == type)
				return ev;
			cci_return_event(ev);
			continue;
		}
		if (poll(&pfd, 1, (int)(stop - st_now_ms())) < 0)
			return NULL;
	}
	return NULL;
}

static void manual_os_handle_wakes_for_request_and_message(void)
{
	cci_endpoint_t *srv = NULL, *cli = NULL;
	cci_connection_t *cs, *cc = NULL;
	cci_os_handle_t fd = -1;
	cci_event_t *ev;
	struct pollfd pfd;
	char *uri;
	int v = 42;

	CU_ASSERT_PTR_NOT_NULL_FATAL(st_init_conf(MANUAL_CONF));
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(init_device_named("m"), 0, &srv, &fd), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(init_device_named("a"), 0, &cli, NULL), CCI_SUCCESS);
	uri = st_uri(srv);
	CU_ASSERT_PTR_NOT_NULL_FATAL(uri);
	CU_ASSERT_EQUAL(cci_get_event(srv, &ev), CCI_EAGAIN); /* arms the handle */

	/* Asleep with no connection: the listening socket must wake it. */
	CU_ASSERT_EQUAL_FATAL(cci_connect(cli, uri, &v, sizeof(v), CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                      CCI_SUCCESS);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	CU_ASSERT_EQUAL(poll(&pfd, 1, 5000), 1);
	ev = sleep_for(srv, fd, CCI_EVENT_CONNECT_REQUEST, 5000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	CU_ASSERT_EQUAL(ev->request.data_len, sizeof(v));
	CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
	cci_return_event(ev);
	ev = sleep_for(srv, fd, CCI_EVENT_ACCEPT, 5000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	cs = ev->accept.connection;
	cci_return_event(ev);
	ev = st_wait(cli, CCI_EVENT_CONNECT, 5000, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	cc = ev->connect.connection;
	cci_return_event(ev);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cc);

	/* Asleep on an open connection: the message must wake it. */
	CU_ASSERT_EQUAL(cci_get_event(srv, &ev), CCI_EAGAIN);
	CU_ASSERT_EQUAL(cci_send(cc, &v, sizeof(v), NULL, CCI_FLAG_SILENT), CCI_SUCCESS);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	CU_ASSERT_EQUAL(poll(&pfd, 1, 5000), 1);
	ev = sleep_for(srv, fd, CCI_EVENT_RECV, 5000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	CU_ASSERT(ev->recv.connection == cs && ev->recv.len == sizeof(v) &&
	          !memcmp(ev->recv.ptr, &v, sizeof(v)));
	cci_return_event(ev);
	free(uri);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(cli), CCI_SUCCESS);
	st_fini(srv);
}

int st_add_manual_tests(void)
{
	CU_pSuite s = CU_add_suite_with_setup_and_teardown("progress=manual", NULL, NULL, NULL,
	                                                   st_teardown);

	return !s ||
	       !CU_add_test(s, "asleep on a manual endpoint's OS handle, the application wakes for a "
	                       "connection request and for a message",
	                    manual_os_handle_wakes_for_request_and_message);
}
