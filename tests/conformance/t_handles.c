/*
 * t_handles.c - RMA handles are values, as in CCI 2: runtimes memcpy the
 * handle cci_rma_register() gave them into their own structures, send it
 * to peers that echo it back, and pass those copies to cci_rma() and
 * cci_rma_deregister().  Any byte copy works where the original does, and
 * after deregistration every copy fails.
 */
#include "tests.h"

#include "rmafix.h"

#include <stdlib.h>
#include <string.h>

#define PEER_REGION 4096u
#define CMD_DEREGISTER 'u' /* the peer deregisters its region through a copy */
#define CMD_QUIT 'q'

/* A copy of *h in memory of the test's own (heap), as runtimes keep it. */
static struct cci_rma_handle *handle_dup(cci_rma_handle_t *h)
{
	struct cci_rma_handle *copy = malloc(sizeof(*copy));

	REQUIRE(copy != NULL);
	memcpy(copy, h, sizeof(*copy));
	return copy;
}

static void copy_is_local_handle_for_write_and_read(void)
{
	struct rfix r;
	struct srv_stats st;
	struct proto_note note;
	struct proto_write w;
	cci_rma_handle_t *orig;
	struct cci_rma_handle *copy;
	uint8_t msg[32];
	uint32_t nl;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	orig = r.lh;
	copy = handle_dup(orig);
	r.lh = copy; /* rma_run's local handle */
	w = prepare_write(&r, 0, 64, 8192, 0x4A11);
	nl = note_build(&r, &note, &w, 1);
	CHECK_RC(rma_run(&r, &note, nl, &r.s.handle, 0, 64, 8192, CCI_FLAG_WRITE), CCI_SUCCESS);
	memset(r.local, 0, 8192);
	proto_build(msg, sizeof(msg), 0, r.seq++, PROTO_VERIFY);
	CHECK_RC(rma_run(&r, msg, sizeof(msg), &r.s.handle, 0, 64, 8192, CCI_FLAG_READ),
	         CCI_SUCCESS);
	CHECKF(proto_diff(r.local, 8192, 0x4A11, 0) == 8192,
	       "an rma read into a copied local handle did not bring back the bytes written");
	/* The copy deregisters the registration the original names. */
	CHECK_RC(cci_rma_deregister(r.ep, copy), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(r.ep, orig), CCI_EINVAL);
	r.lh = NULL;
	free(copy);
	rfix_close(&r, &st);
	CHECKF(st.rma_notes == 1 && st.rma_bad == 0 && st.canary_bad == 0,
	       "the target checked %llu write(s), %llu bad, %llu canary byte(s) hit",
	       (unsigned long long)st.rma_notes, (unsigned long long)st.rma_bad,
	       (unsigned long long)st.canary_bad);
}

/* Every way of naming a dead registration fails, and the live one works. */
static void expect_dead(struct rfix *r, cci_rma_handle_t *orig, cci_rma_handle_t *copy)
{
	CHECK_RC(cci_rma(r->c, NULL, 0, copy, 0, &r->s.handle, 0, 8, NULL,
	                 CCI_FLAG_WRITE | CCI_FLAG_BLOCKING), CCI_ERR_RMA_HANDLE);
	CHECK_RC(cci_rma(r->c, NULL, 0, orig, 0, &r->s.handle, 0, 8, NULL,
	                 CCI_FLAG_READ | CCI_FLAG_BLOCKING), CCI_ERR_RMA_HANDLE);
	CHECK_RC(cci_rma_deregister(r->ep, copy), CCI_EINVAL);
	CHECK_RC(cci_rma_deregister(r->ep, orig), CCI_EINVAL);
	CHECK_RC(cci_rma(r->c, NULL, 0, r->lh, 0, &r->s.handle, 0, 8, NULL,
	                 CCI_FLAG_READ | CCI_FLAG_BLOCKING), CCI_SUCCESS);
}

static void deregistered_through_a_copy_every_copy_fails(void)
{
	static uint8_t buf[4096];
	struct rfix r;
	cci_rma_handle_t *orig = NULL;
	struct cci_rma_handle *copy1, *copy2, forged;

	rfix_open(&r, CCI_FLAG_READ | CCI_FLAG_WRITE, CCI_CONN_ATTR_RO);
	REQUIRE_RC(cci_rma_register(r.ep, buf, sizeof(buf), CCI_FLAG_READ, &orig), CCI_SUCCESS);
	copy1 = handle_dup(orig);
	copy2 = handle_dup(orig);
	/* An altered copy names nothing, and leaves the registration alone. */
	forged = *copy1;
	forged.stuff[2] ^= 1;
	CHECK_RC(cci_rma(r.c, NULL, 0, &forged, 0, &r.s.handle, 0, 8, NULL,
	                 CCI_FLAG_WRITE | CCI_FLAG_BLOCKING), CCI_ERR_RMA_HANDLE);
	CHECK_RC(cci_rma_deregister(r.ep, &forged), CCI_EINVAL);
	forged = *copy1;
	forged.stuff[0] ^= 1ull << 40;
	CHECK_RC(cci_rma_deregister(r.ep, &forged), CCI_EINVAL);
	CHECK_RC(cci_rma_deregister(r.ep, copy1), CCI_SUCCESS);
	expect_dead(&r, orig, copy2);
	expect_dead(&r, copy2, copy1);
	free(copy1);
	free(copy2);
	rfix_close(&r, NULL);
}

/* ---- a peer that echoes messages and deregisters through a copy ---------- */

/* The peer's loop: accept, echo every message back, deregister its
 * region through a copy on CMD_DEREGISTER (then answer on the pipe). */
static void peer_serve(cci_endpoint_t *ep, int rfd, int wfd, cci_rma_handle_t *h)
{
	uint64_t deadline = h_now_ms() + 30000;
	cci_event_t *ev;
	char cmd = 0;

	while (cmd != CMD_QUIT && h_now_ms() < deadline) {
		if (h_msg_ready(rfd)) {
			if (h_msg_recv(rfd, &cmd, 1, 1000) != 1)
				cmd = CMD_QUIT;
			if (cmd == CMD_DEREGISTER) {
				struct cci_rma_handle *copy = handle_dup(h);

				CHECK_RC(cci_rma_deregister(ep, copy), CCI_SUCCESS);
				CHECK_RC(cci_rma_deregister(ep, h), CCI_EINVAL);
				CHECK_RC(cci_rma_deregister(ep, copy), CCI_EINVAL);
				free(copy);
				h_msg_send(wfd, &cmd, 1);
			}
			continue;
		}
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
		else if (ev->type == CCI_EVENT_RECV)
			CHECK_RC(cci_send(ev->recv.connection, ev->recv.ptr, ev->recv.len, NULL,
			                  CCI_FLAG_BLOCKING), CCI_SUCCESS);
		cci_return_event(ev);
	}
}

static void peer_role(int rfd, int wfd, const void *arg)
{
	static uint8_t region[PEER_REGION];
	cci_endpoint_t *ep;
	cci_rma_handle_t *h = NULL;
	char *uri;

	(void)arg;
	ep = h_endpoint(h_setup(), NULL);
	uri = h_uri(ep);
	REQUIRE_RC(cci_rma_register(ep, region, sizeof(region), CCI_FLAG_READ | CCI_FLAG_WRITE,
	                            &h), CCI_SUCCESS);
	h_msg_send(wfd, uri, (uint32_t)strlen(uri) + 1);
	h_msg_send(wfd, h, sizeof(*h));
	free(uri);
	peer_serve(ep, rfd, wfd, h);
	h_teardown(ep);
}

struct peer_link {
	struct h_peer peer;
	char uri[512];
	struct cci_rma_handle region; /* the peer's, received over the pipe */
	cci_endpoint_t *ep;
	cci_connection_t *c;
};

static void peer_link_open(struct peer_link *l)
{
	h_spawn(&l->peer, peer_role, NULL);
	REQUIRE(h_msg_recv(l->peer.rfd, l->uri, sizeof(l->uri), 10000) > 0);
	REQUIRE(h_msg_recv(l->peer.rfd, &l->region, sizeof(l->region), 10000) ==
	        (int)sizeof(l->region));
	l->ep = h_endpoint(h_setup(), NULL);
	l->c = h_connect(l->ep, l->uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
}

static void peer_link_close(struct peer_link *l)
{
	char quit = CMD_QUIT;

	h_msg_send(l->peer.wfd, &quit, 1);
	h_peer_finish(&l->peer, 10000);
	h_teardown(l->ep);
}

static void copy_echoed_by_the_peer_deregisters(void)
{
	static uint8_t buf[4096];
	struct peer_link l;
	cci_rma_handle_t *orig = NULL;
	cci_event_t *ev;

	peer_link_open(&l);
	REQUIRE_RC(cci_rma_register(l.ep, buf, sizeof(buf), CCI_FLAG_READ | CCI_FLAG_WRITE, &orig),
	           CCI_SUCCESS);
	/* Send the handle's bytes; the peer sends them back. */
	CHECK_RC(cci_send(l.c, orig, sizeof(*orig), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	ev = EXPECT_EVENT(l.ep, CCI_EVENT_RECV, 10000);
	REQUIRE(ev != NULL);
	REQUIRE(ev->recv.len == sizeof(*orig));
	CHECK_RC(cci_rma(l.c, NULL, 0, ev->recv.ptr, 0, &l.region, 0, 64, NULL,
	                 CCI_FLAG_WRITE | CCI_FLAG_BLOCKING), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(l.ep, ev->recv.ptr), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(l.ep, ev->recv.ptr), CCI_EINVAL);
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(l.ep, orig), CCI_EINVAL);
	CHECK_RC(cci_rma(l.c, NULL, 0, orig, 0, &l.region, 0, 64, NULL,
	                 CCI_FLAG_WRITE | CCI_FLAG_BLOCKING), CCI_ERR_RMA_HANDLE);
	peer_link_close(&l);
}

/* Wait (at most timeout_ms) for the peer's word on rfd while calling
 * cci_get_event on ep: the peer's deregistration waits for this side to
 * confirm, which only its calls do when it has no progress thread. */
static int recv_while_polling(cci_endpoint_t *ep, int rfd, char *cmd, unsigned timeout_ms)
{
	for (uint64_t stop = h_now_ms() + timeout_ms; h_now_ms() < stop;) {
		cci_event_t *ev;

		if (h_msg_ready(rfd))
			return h_msg_recv(rfd, cmd, 1, timeout_ms);
		if (cci_get_event(ep, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		else
			h_sleep_ms(1);
	}
	return -1;
}

static void target_deregistered_through_a_copy_refuses(void)
{
	static uint8_t buf[4096];
	struct peer_link l;
	cci_rma_handle_t *lh = NULL;
	char cmd = CMD_DEREGISTER;
	int rc;

	peer_link_open(&l);
	REQUIRE_RC(cci_rma_register(l.ep, buf, sizeof(buf), 0, &lh), CCI_SUCCESS);
	CHECK_RC(cci_rma(l.c, NULL, 0, lh, 0, &l.region, 0, sizeof(buf), NULL,
	                 CCI_FLAG_WRITE | CCI_FLAG_BLOCKING), CCI_SUCCESS);
	h_msg_send(l.peer.wfd, &cmd, 1);
	REQUIRE(recv_while_polling(l.ep, l.peer.rfd, &cmd, 10000) == 1);
	/* The target no longer knows the key: refused there, never applied. */
	rc = cci_rma(l.c, NULL, 0, lh, 0, &l.region, 0, sizeof(buf), NULL,
	             CCI_FLAG_WRITE | CCI_FLAG_BLOCKING);
	CHECKF(rc == CCI_ERR_RMA_HANDLE || rc == CCI_ERR_RMA_OP,
	       "an rma write to a region the target deregistered through a copy gave %s",
	       h_status_name(rc));
	rc = cci_rma(l.c, NULL, 0, lh, 0, &l.region, 0, sizeof(buf), NULL,
	             CCI_FLAG_READ | CCI_FLAG_BLOCKING);
	CHECKF(rc == CCI_ERR_RMA_HANDLE || rc == CCI_ERR_RMA_OP,
	       "an rma read from a region the target deregistered through a copy gave %s",
	       h_status_name(rc));
	CHECK_RC(cci_rma_deregister(l.ep, lh), CCI_SUCCESS);
	peer_link_close(&l);
}

const struct h_test t_handles_tests[] = {
	{ "a byte copy of the local handle serves rma write and read, and deregisters it",
	  copy_is_local_handle_for_write_and_read, H_NEEDS_DEVICE, 0 },
	{ "after deregistering through a copy, the original and every copy are refused by "
	  "cci_rma and cci_rma_deregister; an altered copy names nothing",
	  deregistered_through_a_copy_every_copy_fails, H_NEEDS_DEVICE, 0 },
	{ "a handle echoed back by the peer in a message serves rma and deregisters the "
	  "registration", copy_echoed_by_the_peer_deregisters, H_NEEDS_DEVICE, 0 },
	{ "a region the target deregistered through a copy refuses rma write and read",
	  target_deregistered_through_a_copy_refuses, H_NEEDS_DEVICE, 0 },
};
const size_t t_handles_count = sizeof(t_handles_tests) / sizeof(t_handles_tests[0]);
