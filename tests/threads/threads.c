/*
 * threads.c - the thread suite, run once per transport:
 *
 *   threads [--transport NAME] [--run SUBSTRING] [--list]
 */
#include "threads.h"

#include <stdlib.h>
#include <string.h>

cci_connection_t *th_connect_local(cci_endpoint_t *ep, cci_endpoint_t *rep,
                                   const char *uri, uint32_t data,
                                   cci_conn_attribute_t attr, const void *actx)
{
	cci_connection_t *c = NULL;
	int accepted = 0;
	uint64_t end = h_now_ms() + 10000;

	REQUIRE_RC(cci_connect(ep, uri, &data, sizeof(data), attr, NULL, 0, NULL),
		   CCI_SUCCESS);
	while ((!c || !accepted) && h_now_ms() < end) {
		cci_event_t *ev = NULL;

		if (cci_get_event(rep, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT_REQUEST)
				CHECK_RC(cci_accept(ev, actx), CCI_SUCCESS);
			else if (ev->type == CCI_EVENT_ACCEPT)
				accepted = CHECK_RC(ev->accept.status, CCI_SUCCESS);
			else
				CHECKF(0, "unexpected %s on the accepting endpoint",
				       cci_event_type_str(ev->type));
			cci_return_event(ev);
		}
		if (cci_get_event(ep, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT &&
			    CHECK_RC(ev->connect.status, CCI_SUCCESS))
				c = ev->connect.connection;
			else if (ev->type != CCI_EVENT_CONNECT)
				CHECKF(0, "unexpected %s on the connecting endpoint",
				       cci_event_type_str(ev->type));
			cci_return_event(ev);
		}
	}
	REQUIRE(c != NULL && accepted);
	return c;
}

int main(int argc, char **argv)
{
	const struct h_suite suites[] = {
		H_SUITE("senders, a poller and connection churn", t_senders),
		H_SUITE("endpoint destroyed while another is polled", t_epdestroy),
	};

	return h_main("threads", argc, argv, suites, sizeof(suites) / sizeof(suites[0]));
}
