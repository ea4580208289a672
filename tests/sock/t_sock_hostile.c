/*
 * t_sock_hostile.c - a raw UDP socket against a sock endpoint: garbage,
 * truncated datagrams, a handshake by hand, then replayed, out-of-window,
 * wrong-token and wrong-address datagrams and forged RMA, while a real
 * client keeps exchanging messages; a restarted peer on the same port;
 * HELLOs that come after their connection closed, and an ACCEPT from a
 * second server connection for a client connected already.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "sock_dgram.h"
#include "sock_test.h"

#define RAW_TOKEN 0x1111222233334444ull
#define RAW_ISN 1000u
#define BUF_LEN 4096u

static int raw_open(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct timeval tv = { 0, 200000 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static void raw_send(int fd, uint16_t port, const void *b, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT(sendto(fd, b, len, 0, (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)len);
}

/* One datagram: header (and sub-header) of d, then len bytes. */
static void raw_dg(int fd, uint16_t port, struct sock_dg *d, const void *data, uint32_t len)
{
	uint8_t b[2048];
	uint32_t hl = sock_dg_encode(b, d);

	if (len)
		memcpy(b + hl, data, len);
	raw_send(fd, port, b, hl + len);
}

static void raw_msg(int fd, uint16_t port, uint64_t token, uint32_t seq, const char *text)
{
	struct sock_dg d = { .type = SOCK_DG_MSG, .seq = seq, .token = token };

	d.sub.op = (uint32_t)strlen(text);
	raw_dg(fd, port, &d, text, d.sub.op);
}

struct hostile {
	struct sk_pair p;
	cci_connection_t *raw_conn;
	int fd, fd2;
	uint64_t srv_token;
	uint32_t srv_next;          /* the server's next sequence */
	uint32_t good_sent, good_recvd, good_bad, raw_recvd, other;
	char raw_text[8][16];
	uint8_t *buf;
	cci_rma_handle_t *h;
	int rma_status;             /* of the last DONE raw_wait took */
};

/* Is RMA datagram d the DONE of op?  Then *status is its status. */
static int rma_done(const struct sock_dg *d, uint32_t op, int *status)
{
	const struct cci__emu_rma_limits lim = { 1u << 16, 1u << 16, 0 };
	struct cci__emu_rma_rec r;
	const char *why;

	if (cci__emu_rma_decode(d->sub.rma, d->body_len, &lim, &r, &why) != 0 ||
	    r.kind != CCI__EMU_RMA_DONE || r.op != op)
		return 0;
	*status = r.status;
	return 1;
}

/* The next datagram of type (others skipped) within ms: 0 with *d.  The
 * server's sequenced datagrams are acknowledged as a real peer would. */
static int raw_wait(struct hostile *t, uint8_t type, uint32_t op, struct sock_dg *d,
                    unsigned ms)
{
	static uint8_t b[65536];
	uint64_t stop = sk_now_ms() + ms;
	const char *why;

	while (sk_now_ms() < stop) {
		ssize_t n = recv(t->fd, b, sizeof(b), 0);

		if (n <= 0 || sock_dg_decode(b, (size_t)n, 1u << 20, d, &why) != 0)
			continue;
		if (sock_dg_sequenced(d->type) && d->seq == t->srv_next) {
			struct sock_dg a = { .type = SOCK_DG_ACK, .flags = SOCK_DG_F_ACK,
			                     .token = t->srv_token, .cum = ++t->srv_next, .wnd = 64 };
			raw_dg(t->fd, t->p.srv_port, &a, NULL, 0);
		}
		if (d->type == type && (type != SOCK_DG_RMA || rma_done(d, op, &t->rma_status)))
			return 0;
	}
	return -1;
}

/* Poll the server and the good client; the good client keeps sending. */
static void pump(struct hostile *t, unsigned ms)
{
	uint64_t stop = sk_now_ms() + ms;
	cci_event_t *ev;
	uint32_t v;

	while (sk_now_ms() < stop) {
		if (t->good_sent < 2000 && cci_send(t->p.cc, &t->good_sent, 4, NULL, 0) == CCI_SUCCESS)
			t->good_sent++;
		if (cci_get_event(t->p.cli, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		if (cci_get_event(t->p.srv, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST) {
			CU_ASSERT(ev->request.data_len == 3 && memcmp(ev->request.data_ptr, "raw", 3) == 0);
			CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
		} else if (ev->type == CCI_EVENT_ACCEPT) {
			t->raw_conn = ev->accept.connection;
		} else if (ev->type == CCI_EVENT_RECV && ev->recv.connection == t->p.sc) {
			memcpy(&v, ev->recv.ptr, 4);
			t->good_bad += ev->recv.len != 4 || v != t->good_recvd;
			t->good_recvd++;
		} else if (ev->type == CCI_EVENT_RECV && ev->recv.connection == t->raw_conn &&
		           t->raw_recvd < 8 && ev->recv.len < 16) {
			memcpy(t->raw_text[t->raw_recvd], ev->recv.ptr, ev->recv.len);
			t->raw_recvd++;
		} else {
			t->other++;
		}
		cci_return_event(ev);
	}
}

static void garbage(struct hostile *t)
{
	uint8_t b[1500];
	uint64_t x = 42;

	for (int i = 0; i < 300; i++) {
		size_t len = (size_t)(x % sizeof(b));
		for (size_t j = 0; j < len; j++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			b[j] = (uint8_t)(x >> 56);
		}
		if (i % 3 == 0 && len >= 4) {
			b[0] = SOCK_DG_MARK; /* looks like ours at first sight */
			b[3] = SOCK_DG_VERSION;
			b[1] = (uint8_t)(1 + i % (SOCK_DG_TYPE_END - 1));
		}
		raw_send(t->fd, t->p.srv_port, b, len);
	}
	for (uint32_t cut = 0; cut < SOCK_DG_HDR_LEN + 8; cut++) { /* truncated MSG */
		struct sock_dg d = { .type = SOCK_DG_MSG, .seq = RAW_ISN, .token = 7 };
		uint8_t h[64];
		sock_dg_encode(h, &d);
		raw_send(t->fd, t->p.srv_port, h, cut);
	}
}

static int handshake(struct hostile *t)
{
	struct sock_dg_hello h = { .core = { .attr = CCI_CONN_ATTR_RO, .mss = 65536, .credits = 64,
	                                     .data_len = 3, .nonce = RAW_TOKEN },
	                           .dgram = 65507, .isn = RAW_ISN };
	struct sock_dg d = { .type = SOCK_DG_HELLO }, r;
	struct sock_dg_accept a;
	uint8_t body[SOCK_DG_HELLO_LEN + 3];
	const char *why;

	sock_dg_hello_encode(body, &h);
	memcpy(body + SOCK_DG_HELLO_LEN, "raw", 3);
	raw_dg(t->fd, t->p.srv_port, &d, body, sizeof(body));
	pump(t, 300);
	CU_ASSERT_PTR_NOT_NULL(t->raw_conn);
	if (raw_wait(t, SOCK_DG_ACCEPT, 0, &r, 3000) != 0 ||
	    sock_dg_accept_decode(r.body, r.body_len, &a, &why) != 0) {
		CU_FAIL("no ACCEPT for the raw client");
		return -1;
	}
	CU_ASSERT_EQUAL(a.core.nonce, RAW_TOKEN);
	t->srv_token = a.token;
	t->srv_next = (uint32_t)a.isn;
	return t->raw_conn ? 0 : -1;
}

/* An RMA datagram of the raw client, sequenced as seq, carrying record r
 * and len bytes of data. */
static void raw_rma(struct hostile *t, uint32_t seq, struct cci__emu_rma_rec r, const void *data,
                    uint32_t len)
{
	struct sock_dg d = { .type = SOCK_DG_RMA, .seq = seq, .token = t->srv_token };

	cci__emu_rma_encode(d.sub.rma, &r);
	raw_dg(t->fd, t->p.srv_port, &d, data, len);
}

/* Forged RMA: the target refuses and answers with an error, memory intact. */
static void forged_rma(struct hostile *t)
{
	uint64_t key = t->h->stuff[0];
	uint8_t junk[64];
	struct sock_dg r;

	memset(junk, 0xab, sizeof(junk));
	raw_rma(t, RAW_ISN + 1, (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_WR_DATA, .op = 7,
	                                                   .key = key ^ 0xdead }, junk, sizeof(junk));
	raw_rma(t, RAW_ISN + 2, (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_WR_END, .op = 7 },
	        NULL, 0);
	pump(t, 100);
	CU_ASSERT(raw_wait(t, SOCK_DG_RMA, 7, &r, 3000) == 0 && t->rma_status == CCI_ERR_RMA_HANDLE);
	raw_rma(t, RAW_ISN + 3, (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_WR_DATA, .op = 8,
	                                                   .key = key, .off = BUF_LEN - 8 },
	        junk, sizeof(junk)); /* past the end */
	raw_rma(t, RAW_ISN + 4, (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_WR_END, .op = 8 },
	        NULL, 0);
	pump(t, 100);
	CU_ASSERT(raw_wait(t, SOCK_DG_RMA, 8, &r, 3000) == 0 && t->rma_status == CCI_EINVAL);
	raw_rma(t, RAW_ISN + 5, (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_RD_REQ, .op = 9,
	                                                   .key = key + 1, .len = 16 }, NULL, 0);
	pump(t, 100);
	CU_ASSERT(raw_wait(t, SOCK_DG_RMA, 9, &r, 3000) == 0 && t->rma_status == CCI_ERR_RMA_HANDLE);
}

static void bad_sequences(struct hostile *t)
{
	raw_msg(t->fd, t->p.srv_port, t->srv_token, RAW_ISN, "hello");
	pump(t, 100);
	for (int i = 0; i < 3; i++) /* replays */
		raw_msg(t->fd, t->p.srv_port, t->srv_token, RAW_ISN, "hello");
	raw_msg(t->fd, t->p.srv_port, t->srv_token, RAW_ISN + 5000000u, "far");
	raw_msg(t->fd, t->p.srv_port, t->srv_token, RAW_ISN - 100u, "old");
	raw_msg(t->fd, t->p.srv_port, t->srv_token ^ (1ull << 40), RAW_ISN + 1, "token");
	raw_msg(t->fd2, t->p.srv_port, t->srv_token, RAW_ISN + 1, "addr");
	pump(t, 200);
}

void t_hostile_datagrams(void)
{
	struct hostile t;

	memset(&t, 0, sizeof(t));
	t.buf = malloc(BUF_LEN);
	memset(t.buf, 0x5c, BUF_LEN);
	t.fd = raw_open();
	t.fd2 = raw_open();
	if (t.fd < 0 || t.fd2 < 0 || sk_pair_open(&t.p, CCI_CONN_ATTR_RO, NULL, NULL) != 0)
		goto out;
	CU_ASSERT_EQUAL(cci_rma_register(t.p.srv, t.buf, BUF_LEN, CCI_FLAG_WRITE | CCI_FLAG_READ,
	                                 &t.h), CCI_SUCCESS);
	garbage(&t);
	pump(&t, 200);
	if (!t.h || handshake(&t) != 0)
		goto out;
	bad_sequences(&t);
	forged_rma(&t);
	raw_msg(t.fd, t.p.srv_port, t.srv_token, RAW_ISN + 6, "after");
	for (uint64_t stop = sk_now_ms() + 20000; sk_now_ms() < stop &&
	     (t.good_recvd < 2000 || t.raw_recvd < 2);)
		pump(&t, 50);
	CU_ASSERT_EQUAL(t.good_recvd, 2000);
	CU_ASSERT_EQUAL(t.good_bad, 0);
	CU_ASSERT_EQUAL(t.raw_recvd, 2);
	CU_ASSERT_STRING_EQUAL(t.raw_text[0], "hello");
	CU_ASSERT_STRING_EQUAL(t.raw_text[1], "after");
	CU_ASSERT_EQUAL(t.other, 0);
	for (uint32_t i = 0; i < BUF_LEN; i++)
		if (t.buf[i] != 0x5c) {
			CU_FAIL("a refused RMA wrote into the registration");
			break;
		}
out:
	sk_pair_close(&t.p);
	if (t.fd >= 0)
		close(t.fd);
	if (t.fd2 >= 0)
		close(t.fd2);
	free(t.buf);
}

/* Count events of each endpoint for ms; a RECV or CONNECT_REQUEST at the
 * new server, or any SEND failure at the client, are noted. */
struct restart {
	uint32_t srv_recv, srv_req, cli_ok, cli_err;
	int first_err;
};

static void restart_pump(cci_endpoint_t *srv, cci_endpoint_t *cli, struct restart *r,
                         unsigned ms)
{
	uint64_t stop = sk_now_ms() + ms;
	cci_event_t *ev;

	while (sk_now_ms() < stop) {
		if (cci_get_event(srv, &ev) == CCI_SUCCESS) {
			r->srv_recv += ev->type == CCI_EVENT_RECV;
			r->srv_req += ev->type == CCI_EVENT_CONNECT_REQUEST;
			cci_return_event(ev);
		}
		if (cci_get_event(cli, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_SEND && ev->send.status == CCI_SUCCESS)
				r->cli_ok++;
			else if (ev->type == CCI_EVENT_SEND && !r->cli_err++)
				r->first_err = ev->send.status;
			cci_return_event(ev);
		}
	}
}

/* The server dies without a word (its goodbye lost in a blackout) and a
 * new endpoint takes its port: the old connection's datagrams carry a
 * token the new one never gave, so nothing reaches it; the client's
 * sends time out. */
void t_restarted_peer_not_mistaken(void)
{
	struct lossy_relay_conf c = { .seed = 1 };
	struct sk_pair p;
	struct restart r = { 0 };
	cci_endpoint_t *fresh = NULL;
	cci_device_t *const *devs;
	uint32_t to = 1000000;
	char port[16];

	if (sk_pair_open(&p, CCI_CONN_ATTR_RO, &c, NULL) != 0)
		goto out;
	CU_ASSERT_EQUAL(cci_set_opt(p.cc, CCI_OPT_CONN_SEND_TIMEOUT, &to), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_send(p.cc, "one", 3, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	lossy_relay_blackout(p.relay, 1);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(p.srv), CCI_SUCCESS);
	p.srv = NULL;
	snprintf(port, sizeof(port), "%u", p.srv_port);
	CU_ASSERT_EQUAL(cci_get_devices(&devs), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_create_endpoint_at(devs[0], port, 0, &fresh, NULL), CCI_SUCCESS);
	lossy_relay_blackout(p.relay, 0);
	if (!fresh)
		goto out;
	for (int i = 0; i < 20; i++)
		CU_ASSERT_EQUAL(cci_send(p.cc, "stale", 5, NULL, 0), CCI_SUCCESS);
	restart_pump(fresh, p.cli, &r, 3000);
	CU_ASSERT_EQUAL(r.srv_recv, 0);
	CU_ASSERT_EQUAL(r.srv_req, 0);
	CU_ASSERT_EQUAL(r.cli_ok, 0);
	CU_ASSERT_EQUAL(r.cli_err, 20);
	CU_ASSERT(r.first_err == CCI_ETIMEDOUT || r.first_err == CCI_ERR_DISCONNECTED);
	p.srv = fresh;
out:
	sk_pair_close(&p);
}

/* ---- one CONNECT_REQUEST per connect, one connection per client ---------- */

/* The next datagram of type that fd receives within ms: 0 with *d (its
 * bytes in b) and the sender's port in *port, else -1. */
static int raw_next(int fd, uint8_t type, uint8_t *b, size_t cap, struct sock_dg *d,
                    uint16_t *port, unsigned ms)
{
	for (uint64_t stop = sk_now_ms() + ms; sk_now_ms() < stop;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, b, cap, 0, (struct sockaddr *)&from, &fl);
		const char *why;

		if (n > 0 && sock_dg_decode(b, (size_t)n, 1u << 20, d, &why) == 0 &&
		    d->type == type) {
			*port = ntohs(from.sin_port);
			return 0;
		}
	}
	return -1;
}

static void raw_hello(int fd, uint16_t port, uint64_t token)
{
	struct sock_dg_hello h = { .core = { .attr = CCI_CONN_ATTR_RO, .mss = 65536, .credits = 64,
	                                     .nonce = token },
	                           .dgram = 65507, .isn = RAW_ISN };
	struct sock_dg d = { .type = SOCK_DG_HELLO };
	uint8_t body[SOCK_DG_HELLO_LEN];

	sock_dg_hello_encode(body, &h);
	raw_dg(fd, port, &d, body, sizeof(body));
}

/* Poll srv for ms, accepting (or rejecting) every request: how many came;
 * *conn gets the connection of an ACCEPT event. */
static int serve(cci_endpoint_t *srv, int accept, cci_connection_t **conn, unsigned ms)
{
	int requests = 0;

	for (uint64_t stop = sk_now_ms() + ms; sk_now_ms() < stop;) {
		cci_event_t *ev;

		if (cci_get_event(srv, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST) {
			requests++;
			CU_ASSERT_EQUAL(accept ? cci_accept(ev, NULL) : cci_reject(ev), CCI_SUCCESS);
		} else if (ev->type == CCI_EVENT_ACCEPT && ev->accept.status == CCI_SUCCESS) {
			*conn = ev->accept.connection;
		}
		cci_return_event(ev);
	}
	return requests;
}

/*
 * A HELLO that comes again after its server connection closed (a late
 * duplicate, or a client that kept asking because every ACCEPT was lost)
 * posts no second CONNECT_REQUEST: the application would accept a
 * connection nobody uses.  A HELLO with another token does.
 */
void t_hello_after_close_posts_no_request(void)
{
	static uint8_t b[65536];
	cci_endpoint_t *srv = NULL;
	cci_connection_t *s = NULL;
	struct sock_dg d;
	uint16_t port, from;
	int fd = raw_open();
	char *uri = NULL;

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sk_init(NULL));
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(NULL, 0, &srv, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_get_opt(srv, CCI_OPT_ENDPT_URI, &uri), CCI_SUCCESS);
	port = sk_uri_port(uri);
	free(uri);
	raw_hello(fd, port, RAW_TOKEN);
	CU_ASSERT_EQUAL(serve(srv, 1, &s, 300), 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(raw_next(fd, SOCK_DG_ACCEPT, b, sizeof(b), &d, &from, 2000), 0);
	raw_hello(fd, port, RAW_TOKEN); /* the ACCEPT was lost: the connection answers */
	CU_ASSERT_EQUAL(serve(srv, 1, &s, 200), 0);
	CU_ASSERT_EQUAL(raw_next(fd, SOCK_DG_ACCEPT, b, sizeof(b), &d, &from, 2000), 0);
	CU_ASSERT_EQUAL(cci_disconnect(s), CCI_SUCCESS);
	CU_ASSERT_EQUAL(raw_next(fd, SOCK_DG_BYE, b, sizeof(b), &d, &from, 2000), 0);
	raw_hello(fd, port, RAW_TOKEN); /* late: for the connection that closed */
	CU_ASSERT_EQUAL(serve(srv, 1, &s, 500), 0);
	CU_ASSERT_EQUAL(raw_next(fd, SOCK_DG_ACCEPT, b, sizeof(b), &d, &from, 300), -1);
	raw_hello(fd, port, RAW_TOKEN + 1); /* a new connect from the same address */
	CU_ASSERT_EQUAL(serve(srv, 0, &s, 300), 1);
	CU_ASSERT_EQUAL(raw_next(fd, SOCK_DG_REJECT, b, sizeof(b), &d, &from, 2000), 0);
	CU_ASSERT_EQUAL(d.token, RAW_TOKEN + 1);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(srv), CCI_SUCCESS);
	sk_fini();
	close(fd);
}

/* The connection of ep's CONNECT event within ms, or NULL. */
static cci_connection_t *connected(cci_endpoint_t *ep, unsigned ms)
{
	cci_connection_t *c = NULL;
	int status = -1;

	for (uint64_t stop = sk_now_ms() + ms; status < 0 && sk_now_ms() < stop;) {
		cci_event_t *ev;

		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT) {
			status = ev->connect.status;
			c = ev->connect.connection;
		}
		cci_return_event(ev);
	}
	CU_ASSERT_EQUAL(status, CCI_SUCCESS);
	return status == CCI_SUCCESS ? c : NULL;
}

static void raw_accept(int fd, uint16_t port, uint64_t client_token, uint64_t token)
{
	struct sock_dg_accept a = { .core = { .mss = 65536, .credits = 64, .nonce = client_token },
	                            .dgram = 65507, .token = token, .isn = RAW_ISN };
	struct sock_dg d = { .type = SOCK_DG_ACCEPT, .token = client_token };
	uint8_t body[SOCK_DG_ACCEPT_LEN];

	sock_dg_accept_encode(body, &a);
	raw_dg(fd, port, &d, body, sizeof(body));
}

/*
 * A client already connected gets an ACCEPT from a second server
 * connection (the server took a repeated HELLO for a new request): it
 * answers BYE, naming that connection, so the server does not keep it for
 * nobody; a repeat of its own connection's ACCEPT changes nothing, and
 * the connection it has keeps working.
 */
void t_second_accept_answered_with_bye(void)
{
	static uint8_t b[65536];
	const uint64_t first = 0x5151515151515151ull, second = 0x6262626262626262ull;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct timeval tmo = { 5, 0 };
	struct sock_dg_hello h;
	struct sock_dg d;
	cci_endpoint_t *cli = NULL;
	cci_connection_t *c;
	uint16_t cport = 0, from;
	int fd = raw_open();
	const char *why;
	char uri[64];

	CU_ASSERT_FATAL(fd >= 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(sk_init(NULL));
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(NULL, 0, &cli, NULL), CCI_SUCCESS);
	snprintf(uri, sizeof(uri), "sock://127.0.0.1:%u", ntohs(sa.sin_port));
	CU_ASSERT_EQUAL(cci_connect(cli, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &tmo),
	                CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(raw_next(fd, SOCK_DG_HELLO, b, sizeof(b), &d, &cport, 2000), 0);
	CU_ASSERT_EQUAL_FATAL(sock_dg_hello_decode(d.body, d.body_len, &h, &why), 0);
	raw_accept(fd, cport, h.core.nonce, first);
	c = connected(cli, 2000);
	raw_accept(fd, cport, h.core.nonce, first); /* a repeat: nothing to say */
	CU_ASSERT_EQUAL(raw_next(fd, SOCK_DG_BYE, b, sizeof(b), &d, &from, 500), -1);
	raw_accept(fd, cport, h.core.nonce, second);
	CU_ASSERT_EQUAL(raw_next(fd, SOCK_DG_BYE, b, sizeof(b), &d, &from, 2000), 0);
	CU_ASSERT_EQUAL(d.token, second);
	if (c) { /* the connection is the first server connection's */
		CU_ASSERT_EQUAL(cci_send(c, "x", 1, NULL, CCI_FLAG_SILENT), CCI_SUCCESS);
		CU_ASSERT_EQUAL(raw_next(fd, SOCK_DG_MSG, b, sizeof(b), &d, &from, 2000), 0);
		CU_ASSERT_EQUAL(d.token, first);
	}
	CU_ASSERT_EQUAL(cci_destroy_endpoint(cli), CCI_SUCCESS);
	sk_fini();
	close(fd);
}
