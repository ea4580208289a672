/*
 * t_sock_flow.c - flow control: a receiver that holds every RECV event
 * it is given closes the window, the sender's messages (several datagrams
 * each) wait instead of being dropped, and once the events come back every
 * message arrives, intact and in order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sock_test.h"

#define FLOW_MSGS 200u
#define FLOW_LEN (256u << 10)   /* 4 datagrams of loopback's 65507 bytes, and more */
#define FLOW_HELD 64u           /* the default ENDPT_RECV_BUF_COUNT */

struct flow {
	struct sk_pair p;
	uint8_t *out, *want;
	cci_event_t *held[FLOW_HELD];
	uint32_t nheld, sent, ok, err, recvd, bad, enobufs;
};

static void fill(uint32_t seq, uint8_t *b)
{
	for (uint32_t i = 0; i < FLOW_LEN; i += 4) {
		uint32_t v = seq * 2654435761u + i;
		memcpy(b + i, &v, 4);
	}
}

/* The client sends what it may and counts completions. */
static void client_pass(struct flow *f)
{
	cci_event_t *ev;

	while (f->sent < FLOW_MSGS) {
		fill(f->sent, f->out);
		if (cci_send(f->p.cc, f->out, FLOW_LEN, NULL, 0) != CCI_SUCCESS)
			break;
		f->sent++;
	}
	while (cci_get_event(f->p.cli, &ev) == CCI_SUCCESS) {
		if (ev->type == CCI_EVENT_SEND) {
			f->ok += ev->send.status == CCI_SUCCESS;
			f->err += ev->send.status != CCI_SUCCESS;
		}
		cci_return_event(ev);
	}
}

/* The server checks a message, and holds it (hold) or returns it. */
static void server_pass(struct flow *f, int hold)
{
	cci_event_t *ev;
	int rc;

	while ((rc = cci_get_event(f->p.srv, &ev)) == CCI_SUCCESS) {
		if (ev->type != CCI_EVENT_RECV) {
			cci_return_event(ev);
			continue;
		}
		fill(f->recvd, f->want);
		f->bad += ev->recv.len != FLOW_LEN || memcmp(ev->recv.ptr, f->want, FLOW_LEN) != 0;
		f->recvd++;
		if (hold && f->nheld < FLOW_HELD)
			f->held[f->nheld++] = ev;
		else
			cci_return_event(ev);
	}
	f->enobufs += rc == CCI_ENOBUFS;
}

void t_slow_receiver_not_overrun(void)
{
	struct flow f;
	uint32_t to = 60000000, stalled_ok;
	uint64_t stop, quiet;

	memset(&f, 0, sizeof(f));
	f.out = malloc(FLOW_LEN);
	f.want = malloc(FLOW_LEN);
	if (!f.out || !f.want || sk_pair_open(&f.p, CCI_CONN_ATTR_RO, NULL, "mss = 262144") != 0)
		goto out;
	cci_set_opt(f.p.cc, CCI_OPT_CONN_SEND_TIMEOUT, &to);
	/* Hold everything until a second passes with nothing new. */
	for (quiet = sk_now_ms() + 1000, stop = sk_now_ms() + 20000; sk_now_ms() < quiet &&
	     sk_now_ms() < stop;) {
		uint32_t before = f.recvd + f.ok;
		client_pass(&f);
		server_pass(&f, 1);
		if (f.recvd + f.ok != before)
			quiet = sk_now_ms() + 1000;
	}
	stalled_ok = f.ok;
	printf("\n    held %u, %u of %u sends complete, the sender stalled ", f.nheld, f.ok,
	       FLOW_MSGS);
	CU_ASSERT_EQUAL(f.nheld, FLOW_HELD);
	CU_ASSERT_EQUAL(f.recvd, FLOW_HELD);
	CU_ASSERT(f.enobufs > 0);
	CU_ASSERT(stalled_ok < FLOW_MSGS);
	for (uint32_t i = 0; i < f.nheld; i++)
		cci_return_event(f.held[i]);
	for (stop = sk_now_ms() + 60000; (f.recvd < FLOW_MSGS || f.ok + f.err < FLOW_MSGS) &&
	     sk_now_ms() < stop;) {
		client_pass(&f);
		server_pass(&f, 0);
	}
	CU_ASSERT_EQUAL(f.recvd, FLOW_MSGS);
	CU_ASSERT_EQUAL(f.bad, 0);
	CU_ASSERT_EQUAL(f.ok, FLOW_MSGS);
	CU_ASSERT_EQUAL(f.err, 0);
out:
	sk_pair_close(&f.p);
	free(f.out);
	free(f.want);
}
