/*
 * server.c - the server process of the conformance tests (see server.h).
 */
#include "server.h"

#include "proto.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define SRV_CONNS 16
#define SRV_HELD 4096
#define SRV_DEFER 4096
#define SEEN_BITS 16384u
#define SRV_CTX_BASE 0x5e000u
#define CANARY_LEN 4096u

struct sconn {
	cci_connection_t *c;
	cci_conn_attribute_t attr;
	uint32_t next[PROTO_STREAMS];
	uint8_t seen[PROTO_STREAMS][SEEN_BITS / 8];
};

struct sstate {
	const struct srv_opts *o;
	int rfd, wfd, quit, holding;
	cci_endpoint_t *ep;
	struct sconn conns[SRV_CONNS];
	int nconns;
	cci_event_t *held[SRV_HELD];
	uint32_t nheld;
	cci_event_t *reqs[SRV_CONNS];   /* ignored requests */
	int nreqs;
	cci_event_t *defer[SRV_DEFER];  /* events pulled while a send waited */
	uint32_t ndefer;
	uint8_t *mem, *region, *shadow;
	cci_rma_handle_t *handle;
	uint8_t *extra_mem;             /* o->extra_regs bytes, one region each */
	cci_rma_handle_t **extra;
	uint32_t out_seq;
	struct srv_stats st;
};

struct srv_msg {
	uint32_t arg;
	char cmd;
	char pad[3];        /* written as zeros: every byte crosses the pipe */
};

static void srv_event(struct sstate *s, cci_event_t *ev);

/* ---- RMA target memory ---------------------------------------------------- */

static void srv_rma_setup(struct sstate *s)
{
	uint64_t len = s->o->rma_len;
	void *mem = NULL;

	REQUIRE(posix_memalign(&mem, 4096, len + 2 * CANARY_LEN) == 0);
	s->mem = mem;
	memset(s->mem, PROTO_CANARY, len + 2 * CANARY_LEN);
	s->region = s->mem + CANARY_LEN;
	proto_fill(s->region, len, PROTO_INIT_SEED, 0);
	s->shadow = malloc(len);
	REQUIRE(s->shadow != NULL);
	memcpy(s->shadow, s->region, len);
	if (s->o->extra_regs) {
		s->extra_mem = malloc(s->o->extra_regs);
		s->extra = calloc(s->o->extra_regs, sizeof(*s->extra));
		REQUIRE(s->extra_mem && s->extra);
		for (uint32_t i = 0; i < s->o->extra_regs; i++)
			REQUIRE_RC(cci_rma_register(s->ep, s->extra_mem + i, 1, CCI_FLAG_READ,
			                            &s->extra[i]), CCI_SUCCESS);
	}
	REQUIRE_RC(cci_rma_register(s->ep, s->region, len, s->o->rma_flags, &s->handle),
	           CCI_SUCCESS);
	REQUIRE(s->handle != NULL);
}

static void srv_check_canaries(struct sstate *s)
{
	const uint8_t *after = s->region + s->o->rma_len;

	for (uint32_t i = 0; i < CANARY_LEN; i++)
		if (s->mem[i] != PROTO_CANARY || after[i] != PROTO_CANARY) {
			s->st.canary_bad++;
			CHECKF(0, "canary byte %s the RMA region changed (offset %u)",
			       s->mem[i] != PROTO_CANARY ? "before" : "after", i);
			return;
		}
}

/* Compare region and shadow over [off, off + len). */
static int srv_compare(struct sstate *s, uint64_t off, uint64_t len, const char *when)
{
	if (memcmp(s->region + off, s->shadow + off, len) == 0)
		return 1;
	for (uint64_t j = off; j < off + len; j++)
		if (s->region[j] != s->shadow[j]) {
			CHECKF(0, "%s: target byte at offset %llu is 0x%02x, expected 0x%02x",
			       when, (unsigned long long)j, s->region[j], s->shadow[j]);
			break;
		}
	s->st.rma_bad++;
	return 0;
}

static void srv_note(struct sstate *s, const void *ptr, uint32_t len)
{
	struct proto_note note;

	memset(&note, 0, sizeof(note));
	memcpy(&note, ptr, len < sizeof(note) ? len : sizeof(note));
	if (note.n > PROTO_NOTE_MAX || PROTO_NOTE_LEN(note.n) > len || !s->region) {
		s->st.corrupt++;
		return;
	}
	s->st.rma_notes++;
	for (uint32_t i = 0; i < note.n; i++) {
		const struct proto_write *w = &note.w[i];

		if (w->roff > s->o->rma_len || w->len > s->o->rma_len - w->roff) {
			s->st.corrupt++;
			continue;
		}
		proto_fill(s->shadow + w->roff, w->len, w->seed, w->srcoff);
		srv_compare(s, w->roff, w->len, "at its completion message, rma data");
	}
	srv_check_canaries(s);
}

static void srv_verify_all(struct sstate *s)
{
	if (!s->region)
		return;
	srv_compare(s, 0, s->o->rma_len, "target memory");
	srv_check_canaries(s);
}

/* ---- sending from the server --------------------------------------------- */

/* Pull events while a send waits for buffers: SEND events are counted,
 * the others kept for the main loop. */
static void srv_pull(struct sstate *s)
{
	cci_event_t *ev = NULL;

	if (s->ndefer >= SRV_DEFER || cci_get_event(s->ep, &ev) != CCI_SUCCESS) {
		sched_yield();
		return;
	}
	if (ev->type == CCI_EVENT_SEND) {
		srv_event(s, ev);
		return;
	}
	s->defer[s->ndefer++] = ev;
}

static int srv_send(struct sstate *s, cci_connection_t *c, const void *buf, uint32_t len)
{
	uint64_t deadline = h_now_ms() + 10000;

	for (;;) {
		int rc = cci_send(c, buf, len, NULL, 0);

		if (rc != CCI_ENOBUFS || h_now_ms() > deadline)
			return rc;
		srv_pull(s);
	}
}

static void srv_send_n(struct sstate *s, uint32_t n)
{
	uint8_t buf[64];

	if (!CHECKF(s->nconns > 0 && s->conns[0].c, "server has no connection to send on"))
		return;
	for (uint32_t i = 0; i < n; i++) {
		proto_build(buf, sizeof(buf), PROTO_SERVER_STREAM, s->out_seq++, PROTO_DATA);
		if (!CHECK_RC(srv_send(s, s->conns[0].c, buf, sizeof(buf)), CCI_SUCCESS))
			return;
	}
}

static void srv_greet(struct sstate *s, cci_connection_t *c)
{
	uint8_t buf[64];

	proto_build(buf, sizeof(buf), PROTO_SERVER_STREAM, s->out_seq++, PROTO_DATA);
	CHECK_RC(srv_send(s, c, buf, sizeof(buf)), CCI_SUCCESS);
}

/* ---- events ---------------------------------------------------------------- */

static struct sconn *srv_conn(struct sstate *s, cci_connection_t *c)
{
	for (int i = 0; i < s->nconns; i++)
		if (s->conns[i].c == c)
			return &s->conns[i];
	return NULL;
}

static void srv_request(struct sstate *s, cci_event_t *ev)
{
	const void *ctx = (void *)(uintptr_t)(SRV_CTX_BASE + s->st.requests + 1);
	uint32_t len = ev->request.data_len;

	s->st.requests++;
	s->st.last_req_len = len;
	s->st.last_req_attr = ev->request.attribute;
	if (s->o->check_payload && len &&
	    (!ev->request.data_ptr || proto_diff(ev->request.data_ptr, len,
	                                         PROTO_PAYLOAD_SEED, 0) != len))
		s->st.payload_bad++;
	if (s->o->accept_delay_ms)
		h_sleep_ms(s->o->accept_delay_ms);
	if (s->o->action == SRV_IGNORE && s->nreqs < SRV_CONNS) {
		s->reqs[s->nreqs++] = ev;
		return;
	}
	if (s->o->action == SRV_REJECT)
		CHECK_RC(cci_reject(ev), CCI_SUCCESS);
	else if (s->o->action == SRV_RETURN)
		; /* the core must reject it for us */
	else
		CHECK_RC(cci_accept(ev, ctx), CCI_SUCCESS);
	if (s->o->decide_twice) {
		CHECK_RC(cci_accept(ev, ctx), CCI_EINVAL);
		CHECK_RC(cci_reject(ev), CCI_EINVAL);
	}
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

static void srv_accepted(struct sstate *s, cci_event_t *ev)
{
	cci_connection_t *c = ev->accept.connection;
	uintptr_t ctx = (uintptr_t)ev->accept.context;

	s->st.accepts++;
	CHECK_RC(ev->accept.status, CCI_SUCCESS);
	CHECKF(ctx > SRV_CTX_BASE && ctx <= SRV_CTX_BASE + s->st.requests,
	       "ACCEPT event context %p was not given to cci_accept", (void *)ctx);
	if (ev->accept.status == CCI_SUCCESS && CHECK(c != NULL)) {
		CHECK(c->context == ev->accept.context);
		CHECK(c->endpoint == s->ep);
		s->st.conn_mss = c->max_send_size;
		s->st.dev_mss = s->ep->device->max_send_size;
		s->st.conn_attr = c->attribute;
		/* when full, reuse the oldest slot: tests that open many
		 * connections close the old ones */
		int i = s->nconns < SRV_CONNS ? s->nconns++
		                              : (int)(s->st.accepts % SRV_CONNS);

		memset(&s->conns[i], 0, sizeof(s->conns[0]));
		s->conns[i].c = c;
		s->conns[i].attr = c->attribute;
		if (s->o->greet)
			srv_greet(s, c);
	}
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

static void srv_track(struct sstate *s, struct sconn *sc, const struct proto_hdr *h)
{
	uint8_t *seen = sc->seen[h->stream];

	if (h->seq < SEEN_BITS) {
		if (seen[h->seq / 8] & (1u << (h->seq % 8)))
			s->st.dups++;
		seen[h->seq / 8] |= (uint8_t)(1u << (h->seq % 8));
	}
	if (sc->attr == CCI_CONN_ATTR_RO && h->seq != sc->next[h->stream])
		s->st.order_errors++;
	sc->next[h->stream] = h->seq + 1;
}

static void srv_recv(struct sstate *s, cci_event_t *ev)
{
	struct sconn *sc = srv_conn(s, ev->recv.connection);
	uint32_t len = ev->recv.len;
	struct proto_hdr h;
	int r;

	s->st.recvs++;
	s->st.bytes += len;
	if (len && ((uintptr_t)ev->recv.ptr & 7u))
		s->st.misaligned++;
	if (!sc)
		s->st.bad_conn++;
	r = len && !ev->recv.ptr ? -1 : proto_parse(ev->recv.ptr, len, &h);
	if (r < 0)
		s->st.corrupt++;
	else if (r == 0)
		s->st.tiny++;
	else if (sc)
		srv_track(s, sc, &h);
	if (r > 0 && h.kind == PROTO_RMA_NOTE)
		srv_note(s, ev->recv.ptr, len);
	else if (r > 0 && h.kind == PROTO_VERIFY)
		srv_verify_all(s);
	if (s->o->echo && sc)
		CHECK_RC(srv_send(s, sc->c, ev->recv.ptr, len), CCI_SUCCESS);
	if (s->holding && s->nheld < s->o->hold && s->nheld < SRV_HELD) {
		s->held[s->nheld++] = ev;
		if (s->nheld > s->st.max_held)
			s->st.max_held = s->nheld;
		return;
	}
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

static void srv_event(struct sstate *s, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		srv_request(s, ev);
		return;
	case CCI_EVENT_ACCEPT:
		srv_accepted(s, ev);
		return;
	case CCI_EVENT_RECV:
		srv_recv(s, ev);
		return;
	case CCI_EVENT_SEND:
		if (ev->send.status == CCI_SUCCESS)
			s->st.sends_ok++;
		else
			s->st.sends_err++;
		break;
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		s->st.keepalives++;
		break;
	default:
		CHECKF(0, "server got an unexpected %s event", cci_event_type_str(ev->type));
		break;
	}
	CHECK_RC(cci_return_event(ev), CCI_SUCCESS);
}

/* ---- commands and main loop ----------------------------------------------- */

static void srv_release(struct sstate *s)
{
	for (uint32_t i = 0; i < s->nheld; i++)
		CHECK_RC(cci_return_event(s->held[i]), CCI_SUCCESS);
	s->nheld = 0;
	s->holding = 0;
}

static void srv_forget_endpoint(struct sstate *s)
{
	s->ep = NULL;
	s->nheld = 0;
	s->nreqs = 0;
	s->ndefer = 0;
	s->nconns = 0;
	s->handle = NULL;
}

static void srv_command(struct sstate *s)
{
	struct srv_msg m;

	if (h_msg_recv(s->rfd, &m, sizeof(m), 1000) != (int)sizeof(m)) {
		s->quit = 1; /* the test went away */
		return;
	}
	if (m.cmd == 'q') {
		s->quit = 1;
		return;
	}
	if (m.cmd == 'k') {
		s->st.fds = h_count_fds();
		s->st.rss_kb = h_rss_kb();
		h_msg_send(s->wfd, &s->st, sizeof(s->st));
		return;
	}
	if (m.cmd == SRV_CMD_FREEZE) {
		h_msg_send(s->wfd, "k", 1);
		raise(SIGSTOP);
		return;
	}
	if (m.cmd != SRV_CMD_DESTROY && !s->ep) {
		CHECKF(0, "server command '%c' after its endpoint was destroyed", m.cmd);
	} else if (m.cmd == SRV_CMD_SEND) {
		srv_send_n(s, m.arg);
	} else if (m.cmd == SRV_CMD_DISCONNECT) {
		for (int i = 0; i < s->nconns; i++)
			CHECK_RC(cci_disconnect(s->conns[i].c), CCI_SUCCESS);
		s->nconns = 0;
	} else if (m.cmd == SRV_CMD_DESTROY) {
		CHECK_RC(cci_destroy_endpoint(s->ep), CCI_SUCCESS);
		srv_forget_endpoint(s);
	} else if (m.cmd == SRV_CMD_DEREGISTER) {
		CHECK_RC(cci_rma_deregister(s->ep, s->handle), CCI_SUCCESS);
		s->handle = NULL;
	} else if (m.cmd == SRV_CMD_REREGISTER) {
		struct cci_rma_handle none = { { 0 } };
		CHECK_RC(cci_rma_deregister(s->ep, s->handle), CCI_SUCCESS);
		s->handle = NULL;
		CHECK_RC(cci_rma_register(s->ep, s->region, s->o->rma_len, s->o->rma_flags,
		                          &s->handle), CCI_SUCCESS);
		h_msg_send(s->wfd, s->handle ? s->handle : &none, sizeof(none));
	} else if (m.cmd == SRV_CMD_RELEASE) {
		srv_release(s);
	}
	h_msg_send(s->wfd, "k", 1);
}

/* One step: a deferred event, or one from the library.  Returns 1 when an
 * event was handled. */
static int srv_step(struct sstate *s)
{
	cci_event_t *ev = NULL;
	int rc;

	if (s->ndefer) {
		ev = s->defer[0];
		memmove(s->defer, s->defer + 1, --s->ndefer * sizeof(s->defer[0]));
		srv_event(s, ev);
		return 1;
	}
	if (!s->ep)
		return 0;
	rc = cci_get_event(s->ep, &ev);
	if (rc == CCI_SUCCESS) {
		srv_event(s, ev);
		return 1;
	}
	if (rc == CCI_ENOBUFS)
		s->st.enobufs++;
	else if (rc != CCI_EAGAIN)
		CHECKF(0, "server: cci_get_event returned %s", h_status_name(rc));
	return 0;
}

static void srv_loop(struct sstate *s)
{
	uint64_t deadline = h_now_ms() + 60000;
	unsigned n = 0, idle = 0;

	while (!s->quit) {
		if (srv_step(s)) {
			idle = 0;
			if (++n % 64)
				continue;
		} else if (++idle > 2000) {
			h_sleep_ms(1); /* long idle: stop burning a core */
		} else {
			sched_yield();
		}
		if (h_msg_ready(s->rfd))
			srv_command(s);
		if (h_now_ms() > deadline) {
			CHECKF(0, "server got no quit command within 60 s");
			return;
		}
	}
}

/* Handle what is still arriving until 100 ms pass without an event. */
static void srv_drain(struct sstate *s)
{
	uint64_t stop = h_now_ms() + 3000, quiet = h_now_ms() + 100;

	while (h_now_ms() < quiet && h_now_ms() < stop) {
		if (srv_step(s))
			quiet = h_now_ms() + 100;
		else
			sched_yield();
	}
}

static void srv_cleanup(struct sstate *s)
{
	if (s->ep) {
		srv_release(s);
		srv_drain(s);
		for (int i = 0; i < s->nreqs; i++)
			CHECK_RC(cci_return_event(s->reqs[i]), CCI_SUCCESS);
	}
	srv_verify_all(s);
	if (s->ep && s->handle)
		CHECK_RC(cci_rma_deregister(s->ep, s->handle), CCI_SUCCESS);
	for (uint32_t i = 0; s->ep && s->extra && i < s->o->extra_regs; i++)
		CHECK_RC(cci_rma_deregister(s->ep, s->extra[i]), CCI_SUCCESS);
	if (s->ep)
		CHECK_RC(cci_destroy_endpoint(s->ep), CCI_SUCCESS);
	CHECK_RC(cci_finalize(), CCI_SUCCESS);
	if (s->region)
		srv_check_canaries(s);
	free(s->mem);
	free(s->shadow);
	free(s->extra_mem);
	free(s->extra);
}

static void srv_role(int rfd, int wfd, const void *arg)
{
	struct sstate *s = calloc(1, sizeof(*s));
	cci_device_t *dev;
	char *uri;

	REQUIRE(s != NULL);
	s->o = arg;
	s->rfd = rfd;
	s->wfd = wfd;
	s->holding = s->o->hold > 0;
	REQUIRE_RC(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }), CCI_SUCCESS);
	dev = h_find_device();
	REQUIRE(dev != NULL);
	s->ep = h_endpoint(dev, NULL);
	if (s->o->recv_buf_count)
		CHECK_RC(cci_set_opt(s->ep, CCI_OPT_ENDPT_RECV_BUF_COUNT,
		                     &s->o->recv_buf_count), CCI_SUCCESS);
	uri = h_uri(s->ep);
	h_msg_send(wfd, uri, (uint32_t)strlen(uri) + 1);
	free(uri);
	if (s->o->rma_len) {
		srv_rma_setup(s);
		h_msg_send(wfd, s->handle, sizeof(*s->handle));
	}
	srv_loop(s);
	srv_cleanup(s);
	h_msg_send(wfd, &s->st, sizeof(s->st));
	free(s);
}

/* ---- the test's side ------------------------------------------------------ */

void srv_start(struct srv *s, const struct srv_opts *o)
{
	int n;

	memset(s, 0, sizeof(*s));
	h_spawn(&s->peer, srv_role, o);
	n = h_msg_recv(s->peer.rfd, s->uri, sizeof(s->uri) - 1, 10000);
	if (!CHECKF(n > 0, "the server did not publish its URI"))
		h_bail();
	s->uri[n] = '\0';
	if (o->rma_len &&
	    !CHECKF(h_msg_recv(s->peer.rfd, &s->handle, sizeof(s->handle), 10000) ==
	            (int)sizeof(s->handle), "the server did not publish its RMA handle"))
		h_bail();
}

static void srv_send_cmd(struct srv *s, char cmd, uint32_t arg)
{
	struct srv_msg m;

	memset(&m, 0, sizeof(m));
	m.cmd = cmd;
	m.arg = arg;
	h_msg_send(s->peer.wfd, &m, sizeof(m));
}

void srv_cmd(struct srv *s, char cmd, uint32_t arg)
{
	char ack = 0;

	srv_send_cmd(s, cmd, arg);
	CHECKF(h_msg_recv(s->peer.rfd, &ack, 1, 10000) == 1 && ack == 'k',
	       "the server did not acknowledge command '%c'", cmd);
}

void srv_reregister(struct srv *s, struct cci_rma_handle *old)
{
	char ack = 0;

	*old = s->handle;
	srv_send_cmd(s, SRV_CMD_REREGISTER, 0);
	CHECKF(h_msg_recv(s->peer.rfd, &s->handle, sizeof(s->handle), 10000) ==
	       (int)sizeof(s->handle), "the server did not send its new RMA handle");
	CHECKF(h_msg_recv(s->peer.rfd, &ack, 1, 10000) == 1 && ack == 'k',
	       "the server did not acknowledge command '%c'", SRV_CMD_REREGISTER);
}

void srv_freeze(struct srv *s)
{
	srv_cmd(s, SRV_CMD_FREEZE, 0);
	h_wait_stopped(s->peer.pid);
}

void srv_snapshot(struct srv *s, struct srv_stats *st)
{
	memset(st, 0, sizeof(*st));
	srv_send_cmd(s, 'k', 0);
	CHECKF(h_msg_recv(s->peer.rfd, st, sizeof(*st), 10000) == (int)sizeof(*st),
	       "the server did not report its counters");
}

void srv_stop(struct srv *s, struct srv_stats *st)
{
	struct srv_stats tmp;

	if (!st)
		st = &tmp;
	memset(st, 0, sizeof(*st));
	srv_send_cmd(s, 'q', 0);
	CHECKF(h_msg_recv(s->peer.rfd, st, sizeof(*st), 15000) == (int)sizeof(*st),
	       "the server did not report its final counters");
	h_peer_finish(&s->peer, 10000);
}

void srv_stop_and_teardown(struct srv *s, struct srv_stats *st, cci_endpoint_t *ep)
{
	if (ep && h_device_manual(ep->device)) {
		h_teardown(ep);
		srv_stop(s, st);
	} else {
		srv_stop(s, st);
		h_teardown(ep);
	}
}
