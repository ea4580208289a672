/*
 * t_os_handle.c - the OS handle is level-triggered: whenever cci_get_event
 * would return an event, the handle is readable, whatever produced the
 * event (the wire, or a local call such as cci_accept, cci_reject, an
 * unreliable send, cci_disconnect or an RMA).
 *
 * The test drives a server and a client endpoint of one process exactly
 * as CCI 2's blocking programs and FFI bindings do: select() on both
 * handles, then one cci_get_event() for each readable one, then select()
 * again.  It never polls otherwise, so an event that waits in the queue
 * behind an unreadable handle shows up as a select() that times out.
 */
#include "tests.h"

#include "proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>

#define SELECT_MS 3000      /* a waiting event must wake select by then */
#define SPURIOUS_MAX 200    /* readable with nothing to hand out, in a row */
#define MSGS 20
#define UU_MSGS 5
#define RMA_LEN 65536u
#define REJECT_ME "reject me"

/* One endpoint and what its events did. */
struct side {
	const char *name;
	cci_endpoint_t *ep;
	cci_os_handle_t fd;
	int spurious;                 /* readable, but CCI_EAGAIN, in a row */
	/* client */
	int refused;                  /* CONNECT with CCI_ECONNREFUSED */
	cci_connection_t *ro, *uu;    /* from CONNECT (client) or ACCEPT (server) */
	int sends_ok, sends_failed, recvs, uu_recvs;
	int want_sends;               /* for sends_completed() */
	/* server */
	int requests, rejected;
	int echo;                     /* echo every RECV back */
};

static void on_event(struct side *s, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		s->requests++;
		if (ev->request.data_len == sizeof(REJECT_ME) &&
		    memcmp(ev->request.data_ptr, REJECT_ME, sizeof(REJECT_ME)) == 0) {
			CHECK_RC(cci_reject(ev), CCI_SUCCESS);
			s->rejected++;
		} else {
			CHECK_RC(cci_accept(ev, NULL), CCI_SUCCESS);
		}
		break;
	case CCI_EVENT_ACCEPT:
	case CCI_EVENT_CONNECT: {
		int status = ev->type == CCI_EVENT_ACCEPT ? ev->accept.status : ev->connect.status;
		cci_connection_t *c = ev->type == CCI_EVENT_ACCEPT ? ev->accept.connection
		                                                   : ev->connect.connection;

		if (status == CCI_ECONNREFUSED && ev->type == CCI_EVENT_CONNECT) {
			s->refused++;
			break;
		}
		REQUIRE_RC(status, CCI_SUCCESS);
		if (c->attribute == CCI_CONN_ATTR_UU)
			s->uu = c;
		else
			s->ro = c;
		break;
	}
	case CCI_EVENT_SEND:
		if (ev->send.status == CCI_SUCCESS)
			s->sends_ok++;
		else
			s->sends_failed++;
		break;
	case CCI_EVENT_RECV:
		if (ev->recv.connection->attribute == CCI_CONN_ATTR_UU) {
			s->uu_recvs++; /* may be lost: not counted on */
			break;
		}
		s->recvs++;
		if (s->echo)
			CHECK_RC(cci_send(ev->recv.connection, ev->recv.ptr, ev->recv.len, NULL, 0),
			         CCI_SUCCESS);
		break;
	default:
		CHECKF(0, "%s: unexpected %s", s->name, cci_event_type_str(ev->type));
	}
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

/* After a select() that timed out: is an event waiting behind a quiet
 * handle?  That is the failure this file exists for. */
static void diagnose_quiet(struct side *s, const char *waiting_for)
{
	cci_event_t *ev = NULL;

	if (cci_get_event(s->ep, &ev) == CCI_SUCCESS) {
		CHECKF(0, "%s: select() saw no readable OS handle for %d ms while waiting for %s, "
		       "yet cci_get_event then returned %s", s->name, SELECT_MS, waiting_for,
		       cci_event_type_str(ev->type));
		on_event(s, ev);
	}
}

typedef int (*done_fn)(const struct side *srv, const struct side *cli);

/*
 * select() on both handles and make one cci_get_event() per readable one,
 * until done() holds (returns 1), or for settle_ms when that is not 0
 * (returns 1 then too).  Fails on a select() that times out while done()
 * is still wanted.
 */
static int select_loop(struct side *a, struct side *b, done_fn done, const char *what,
                       unsigned settle_ms)
{
	struct side *sides[2] = { a, b };
	uint64_t start = h_now_ms(), stop = start + (settle_ms ? settle_ms : 20000);

	while (settle_ms || !done(a, b)) {
		unsigned ms = SELECT_MS;
		struct timeval tv;
		fd_set rd;
		int n;

		if (settle_ms) {
			uint64_t now = h_now_ms();
			if (now >= stop)
				return 1;
			ms = (unsigned)(stop - now);
		}
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;

		FD_ZERO(&rd);
		FD_SET(a->fd, &rd);
		FD_SET(b->fd, &rd);
		n = select((a->fd > b->fd ? a->fd : b->fd) + 1, &rd, NULL, NULL, &tv);
		if (n == 0 && settle_ms)
			return 1;
		if (n == 0) {
			diagnose_quiet(a, what);
			diagnose_quiet(b, what);
			return CHECKF(0, "waiting for %s: no OS handle turned readable in %d ms",
			              what, SELECT_MS);
		}
		if (!CHECKF(n > 0, "select: %s", strerror(errno)) ||
		    !CHECKF(h_now_ms() < stop, "waiting for %s: not done in 20 s", what))
			return 0;
		for (int i = 0; i < 2; i++) {
			cci_event_t *ev = NULL;
			int rc;

			if (!FD_ISSET(sides[i]->fd, &rd))
				continue;
			rc = cci_get_event(sides[i]->ep, &ev);
			if (rc == CCI_SUCCESS) {
				sides[i]->spurious = 0;
				on_event(sides[i], ev);
				continue;
			}
			CHECK_RC2(rc, CCI_EAGAIN, CCI_ENOBUFS);
			if (!h_handle_polls() &&
			    !CHECKF(++sides[i]->spurious < SPURIOUS_MAX, "%s: the OS handle stays "
			            "readable with nothing to hand out (%d times in a row, waiting "
			            "for %s; server sends %d/%d recvs %d, client sends %d/%d recvs "
			            "%d)", sides[i]->name, SPURIOUS_MAX, what, a->sends_ok,
			            a->sends_failed, a->recvs, b->sends_ok, b->sends_failed, b->recvs))
				return 0;
		}
	}
	return 1;
}

static int run_until(struct side *a, struct side *b, done_fn done, const char *what)
{
	return select_loop(a, b, done, what, 0);
}

static int refused(const struct side *srv, const struct side *cli)
{
	return srv->rejected == 1 && cli->refused == 1;
}

static int ro_connected(const struct side *srv, const struct side *cli)
{
	return srv->ro && cli->ro;
}

static int uu_connected(const struct side *srv, const struct side *cli)
{
	return srv->uu && cli->uu;
}

static int echoed(const struct side *srv, const struct side *cli)
{
	return cli->sends_ok == MSGS && cli->recvs == MSGS && srv->sends_ok == MSGS &&
	       srv->recvs == MSGS;
}

static int uu_sent(const struct side *srv, const struct side *cli)
{
	(void)srv;
	return cli->sends_ok == MSGS + UU_MSGS;
}

static int rma_write_seen(const struct side *srv, const struct side *cli)
{
	return cli->sends_ok == MSGS + UU_MSGS + 1 && srv->recvs == MSGS + 1;
}

static int rma_read_done(const struct side *srv, const struct side *cli)
{
	(void)srv;
	return cli->sends_ok == MSGS + UU_MSGS + 2;
}

static int sends_completed(const struct side *srv, const struct side *cli)
{
	(void)cli;
	return srv->sends_ok + srv->sends_failed >= srv->want_sends;
}

static void open_side(struct side *s, cci_device_t *dev, const char *name)
{
	memset(s, 0, sizeof(*s));
	s->name = name;
	s->fd = -1;
	s->ep = h_endpoint(dev, &s->fd);
	REQUIRE(s->fd >= 0);
}

/* Two RMAs from the client into the server's registration, through select. */
static void rma_through_select(struct side *srv, struct side *cli)
{
	static uint8_t target[RMA_LEN], local[RMA_LEN];
	cci_rma_handle_t *th = NULL, *lh = NULL;
	uint64_t diff;

	memset(target, 0, sizeof(target));
	proto_fill(local, RMA_LEN, 0x51, 0);
	REQUIRE_RC(cci_rma_register(srv->ep, target, RMA_LEN, CCI_FLAG_READ | CCI_FLAG_WRITE,
	                            &th), CCI_SUCCESS);
	REQUIRE_RC(cci_rma_register(cli->ep, local, RMA_LEN, 0, &lh), CCI_SUCCESS);
	srv->echo = 0;
	REQUIRE_RC(cci_rma(cli->ro, "written", 7, lh, 0, th, 0, RMA_LEN, NULL, CCI_FLAG_WRITE),
	           CCI_SUCCESS);
	if (run_until(srv, cli, rma_write_seen, "an RMA write's SEND event and completion "
	              "message")) {
		diff = proto_diff(target, RMA_LEN, 0x51, 0);
		CHECKF(diff == RMA_LEN, "the RMA write's byte %llu is wrong",
		       (unsigned long long)diff);
	}
	memset(local, 0, sizeof(local));
	REQUIRE_RC(cci_rma(cli->ro, NULL, 0, lh, 0, th, 0, RMA_LEN, NULL, CCI_FLAG_READ),
	           CCI_SUCCESS);
	if (run_until(srv, cli, rma_read_done, "an RMA read's SEND event")) {
		diff = proto_diff(local, RMA_LEN, 0x51, 0);
		CHECKF(diff == RMA_LEN, "the RMA read's byte %llu is wrong",
		       (unsigned long long)diff);
	}
	CHECK_RC(cci_rma_deregister(cli->ep, lh), CCI_SUCCESS);
	CHECK_RC(cci_rma_deregister(srv->ep, th), CCI_SUCCESS);
}

/* The client disconnects; the server's sends then fail, through select. */
static void disconnect_through_select(struct side *srv, struct side *cli)
{
	int failed = 0;

	CHECK_RC(cci_disconnect(cli->uu), CCI_SUCCESS);
	CHECK_RC(cci_disconnect(cli->ro), CCI_SUCCESS);
	for (int i = 0; i < 50 && !failed; i++) {
		int rc;

		srv->want_sends = srv->sends_ok + srv->sends_failed + 1;
		rc = cci_send(srv->ro, "late", 4, NULL, 0);
		if (rc != CCI_SUCCESS) {
			CHECK_RC(rc, CCI_ERR_DISCONNECTED);
			failed = 1;
		} else if (!run_until(srv, cli, sends_completed, "a send to a peer that "
		                      "disconnected")) {
			return;
		} else if (srv->sends_failed > 0) {
			failed = 1;
		} else {
			/* Not learnt yet: let the handles tell of the peer's close. */
			select_loop(srv, cli, sends_completed, "the peer's close", 100);
		}
	}
	CHECKF(failed, "the server's sends to a disconnected client kept succeeding");
}

static void select_then_one_get_event_sees_every_event(void)
{
	cci_device_t *dev = h_setup();
	struct side srv, cli;
	char *uri;

	open_side(&srv, dev, "server");
	open_side(&cli, dev, "client");
	srv.echo = 1;
	uri = h_uri(srv.ep);

	/* cci_reject: the request comes off the wire, the refusal back. */
	REQUIRE_RC(cci_connect(cli.ep, uri, REJECT_ME, sizeof(REJECT_ME), CCI_CONN_ATTR_RO,
	                       NULL, 0, NULL), CCI_SUCCESS);
	REQUIRE(run_until(&srv, &cli, refused, "a rejected CONNECT"));
	/* cci_accept posts ACCEPT from the call itself. */
	REQUIRE_RC(cci_connect(cli.ep, uri, "ro", 2, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	           CCI_SUCCESS);
	REQUIRE(run_until(&srv, &cli, ro_connected, "ACCEPT and CONNECT of an RO connection"));
	REQUIRE_RC(cci_connect(cli.ep, uri, "uu", 2, CCI_CONN_ATTR_UU, NULL, 0, NULL),
	           CCI_SUCCESS);
	REQUIRE(run_until(&srv, &cli, uu_connected, "ACCEPT and CONNECT of a UU connection"));

	/* Reliable sends complete from the wire; the server echoes from its
	 * event handler, so its completions come from the wire too. */
	for (int i = 0; i < MSGS; i++)
		REQUIRE_RC(cci_send(cli.ro, &i, sizeof(i), NULL, 0), CCI_SUCCESS);
	REQUIRE(run_until(&srv, &cli, echoed, "20 SEND events and 20 echoes"));
	/* Unreliable sends may complete inside cci_send. */
	for (int i = 0; i < UU_MSGS; i++)
		REQUIRE_RC(cci_send(cli.uu, &i, sizeof(i), NULL, 0), CCI_SUCCESS);
	REQUIRE(run_until(&srv, &cli, uu_sent, "the SEND events of 5 UU sends"));

	rma_through_select(&srv, &cli);
	disconnect_through_select(&srv, &cli);
	free(uri);
	CHECK_RC(cci_destroy_endpoint(cli.ep), CCI_SUCCESS);
	h_teardown(srv.ep);
}

const struct h_test t_os_handle_tests[] = {
	{ "select() then one cci_get_event() sees every event: accept, reject, sends, RMA, "
	  "disconnect", select_then_one_get_event_sees_every_event, H_NEEDS_DEVICE, 60 },
};
const size_t t_os_handle_count = sizeof(t_os_handle_tests) / sizeof(t_os_handle_tests[0]);
