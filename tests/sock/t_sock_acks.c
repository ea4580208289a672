/*
 * t_sock_acks.c - the ack that rides on a message: the receiver gets the
 * message first, and what the ack completes on its side follows without
 * another datagram, whether the application polls or sleeps on the
 * endpoint's OS handle.
 *
 * Two endpoints of one process, one thread: the client sends a request,
 * the server answers it (the answer carries the ack of the request), and
 * nothing else is on the wire.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "sock_test.h"

#define ROUNDS 50
#define NEXT_CALLS 4       /* calls within which the completion must come */

static cci_event_t *poll_event(cci_endpoint_t *ep, unsigned ms)
{
	uint64_t stop = sk_now_ms() + ms;
	cci_event_t *ev = NULL;

	while (cci_get_event(ep, &ev) != CCI_SUCCESS)
		if (sk_now_ms() >= stop)
			return NULL;
	return ev;
}

/*
 * The server's answers complete when the client acks them: on the client's
 * next request, or earlier by a delayed ack when the client's progress
 * thread holds the socket (a slow round hands it the socket).  Either
 * order is right on the server's side; what the test proves is the
 * client's.  srv_done counts the answers whose SEND came back.
 */
static unsigned srv_done;

static void server_send_done(cci_event_t *ev)
{
	CU_ASSERT_EQUAL(ev->send.status, CCI_SUCCESS);
	srv_done++;
	cci_return_event(ev);
}

/* The server takes the request and answers it at once. */
static void serve_one(struct sk_pair *p, uint32_t seq)
{
	cci_event_t *ev;

	while ((ev = poll_event(p->srv, 5000)) != NULL && ev->type == CCI_EVENT_SEND)
		server_send_done(ev);
	CU_ASSERT_FATAL(ev != NULL);
	if (ev->type != CCI_EVENT_RECV)
		fprintf(stderr, "server: %s where the request was due\n",
		        cci_event_type_str(ev->type));
	CU_ASSERT_EQUAL_FATAL(ev->type, CCI_EVENT_RECV);
	CU_ASSERT(ev->recv.len == sizeof(seq) && memcmp(ev->recv.ptr, &seq, sizeof(seq)) == 0);
	CU_ASSERT_EQUAL(cci_send(p->sc, &seq, sizeof(seq), NULL, 0), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_return_event(ev), CCI_SUCCESS);
}

/* The server's answers before round seq are complete by now: the client's
 * request of round seq acked the last of them at the latest. */
static void drain_server_send(struct sk_pair *p, uint32_t seq)
{
	while (srv_done < seq) {
		cci_event_t *ev = poll_event(p->srv, 5000);

		CU_ASSERT_FATAL(ev != NULL);
		CU_ASSERT_EQUAL_FATAL(ev->type, CCI_EVENT_SEND);
		server_send_done(ev);
	}
}

/* The client's request seq: answered, received, then its completion. */
static void round_polled(struct sk_pair *p, uint32_t seq)
{
	cci_event_t *ev;
	int calls = 0;

	CU_ASSERT_EQUAL_FATAL(cci_send(p->cc, &seq, sizeof(seq), (void *)(uintptr_t)(seq + 1),
	                               0), CCI_SUCCESS);
	serve_one(p, seq);
	ev = poll_event(p->cli, 5000);
	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_EQUAL(ev->type, CCI_EVENT_RECV); /* the answer before its ack's work */
	CU_ASSERT_EQUAL(cci_return_event(ev), CCI_SUCCESS);
	ev = NULL;
	while (calls++ < NEXT_CALLS && cci_get_event(p->cli, &ev) != CCI_SUCCESS)
		;
	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_EQUAL(ev->type, CCI_EVENT_SEND);
	CU_ASSERT_EQUAL(ev->send.status, CCI_SUCCESS);
	CU_ASSERT_PTR_EQUAL(ev->send.context, (void *)(uintptr_t)(seq + 1));
	cci_return_event(ev);
	drain_server_send(p, seq);
}

static void ack_after_answer(cci_conn_attribute_t attr)
{
	struct sk_pair p;

	srv_done = 0;
	/* No progress thread: one could take a slow round's socket and ack
	 * the request by itself before the answer is sent. */
	if (sk_pair_open(&p, attr, NULL, "progress = manual") == 0)
		for (uint32_t i = 0; i < ROUNDS; i++)
			round_polled(&p, i);
	sk_pair_close(&p);
}

void t_ack_after_answer(void)
{
	ack_after_answer(CCI_CONN_ATTR_RO);
	ack_after_answer(CCI_CONN_ATTR_RU);
}

/* Sleep on fd up to ms; 1 when it became readable. */
static int wait_fd(cci_os_handle_t fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, ms) == 1;
}

void t_ack_wakes_os_handle(void)
{
	struct sk_pair p;
	cci_os_handle_t fd = -1;

	srv_done = 0;
	if (sk_pair_open_fd(&p, CCI_CONN_ATTR_RO, NULL, NULL, &fd) != 0) {
		sk_pair_close(&p);
		return;
	}
	for (uint32_t seq = 0; seq < ROUNDS; seq++) {
		cci_event_t *ev = NULL;
		int found = 0;

		CU_ASSERT_EQUAL_FATAL(cci_send(p.cc, &seq, sizeof(seq), NULL, 0), CCI_SUCCESS);
		serve_one(&p, seq);
		/* Take the answer, then whatever else is ready; when nothing is,
		 * sleep on the handle: the completion must wake it. */
		for (int i = 0; i < 8 && found < 2; i++) {
			if (cci_get_event(p.cli, &ev) != CCI_SUCCESS) {
				CU_ASSERT_FATAL(wait_fd(fd, 2000));
				continue;
			}
			found += ev->type == CCI_EVENT_RECV || ev->type == CCI_EVENT_SEND;
			CU_ASSERT(ev->type != CCI_EVENT_SEND || ev->send.status == CCI_SUCCESS);
			cci_return_event(ev);
		}
		CU_ASSERT_EQUAL_FATAL(found, 2);
		drain_server_send(&p, seq);
	}
	sk_pair_close(&p);
}
