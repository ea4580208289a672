/*
 * t_raw.c - a raw TCP client on 127.0.0.1 against a tcp endpoint: garbage,
 * oversized and truncated frames, forged and out-of-bounds RMA, frames cut
 * anywhere, the stream of small messages sent into a full socket, a flood
 * of half-open connections, and a connect to a port that never answers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tcp_wire.h"
#include "tcp_test.h"

int raw_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct timeval tv = { 3, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int raw_send(int fd, const void *buf, size_t len)
{
	return send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

void raw_hdr(uint8_t *b, uint8_t type, uint32_t len, uint64_t seq, uint64_t ack)
{
	struct tcp_hdr h = { .type = type, .len = len, .seq = seq, .ack = ack };

	tcp_hdr_encode(b, &h);
}

/* A HELLO frame without payload at b (TCP_HDR_LEN + TCP_HELLO_LEN bytes). */
static void hello_frame(uint8_t *b, uint8_t attr, uint32_t mss)
{
	struct tcp_hello h = { .id = 1, .core = { .attr = attr, .mss = mss, .nonce = 42 } };

	raw_hdr(b, TCP_F_HELLO, TCP_HELLO_LEN, 0, 0);
	tcp_hello_encode(b + TCP_HDR_LEN, &h);
}

static int read_full(int fd, uint8_t *buf, size_t len, uint64_t stop)
{
	size_t got = 0;

	while (got < len && st_now_ms() < stop) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;
		if (poll(&p, 1, 50) <= 0)
			continue;
		n = recv(fd, buf + got, len - got, 0);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return got == len ? 0 : -1;
}

int raw_frame(int fd, uint8_t *buf, size_t cap, unsigned ms)
{
	uint64_t stop = st_now_ms() + ms;
	uint32_t len;

	if (read_full(fd, buf, TCP_HDR_LEN, stop) != 0)
		return -1;
	len = cci__get32(buf + 4);
	if (len > cap - TCP_HDR_LEN || read_full(fd, buf + TCP_HDR_LEN, len, stop) != 0)
		return -1;
	return (int)len;
}

int raw_closed(int fd, unsigned ms)
{
	uint64_t stop = st_now_ms() + ms;
	char b[4096];

	while (st_now_ms() < stop) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;
		if (poll(&p, 1, 50) <= 0)
			continue;
		n = recv(fd, b, sizeof(b), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
	}
	return 0;
}

/* A raw client through the handshake, accepted by ep. */
static int raw_open(cci_endpoint_t *ep, uint16_t port, cci_connection_t **c)
{
	uint8_t b[128];
	int fd = raw_connect(port);

	hello_frame(b, CCI_CONN_ATTR_RO, 65536);
	if (fd < 0 || raw_send(fd, b, TCP_HDR_LEN + TCP_HELLO_LEN) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*c = st_accept(ep, 3000);
	if (!*c || raw_frame(fd, b, sizeof(b), 3000) != TCP_HELLO_LEN || b[1] != TCP_F_ACCEPT) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The endpoint still takes a legitimate client and its message. */
static void still_serves(cci_endpoint_t *ep, const char *uri)
{
	cci_connection_t *c, *s;
	cci_event_t *ev;
	int st;

	CU_ASSERT_EQUAL(cci_connect(ep, uri, "hi", 2, CCI_CONN_ATTR_RO, NULL, 0, NULL), CCI_SUCCESS);
	s = st_accept(ep, 3000);
	ev = st_wait(ep, CCI_EVENT_CONNECT, 3000, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	st = ev->connect.status;
	c = ev->connect.connection;
	cci_return_event(ev);
	CU_ASSERT_EQUAL(st, CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(cci_send(c, "ping", 4, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	ev = st_wait(ep, CCI_EVENT_RECV, 3000, NULL);
	CU_ASSERT_PTR_NOT_NULL(ev);
	if (ev) {
		CU_ASSERT(ev->recv.len == 4 && memcmp(ev->recv.ptr, "ping", 4) == 0);
		cci_return_event(ev);
	}
	cci_disconnect(c);
	cci_disconnect(s);
}

/* A client that opens with these bytes is closed without an answer, no
 * request is posted, and the endpoint goes on serving. */
static void refused_before_request(const uint8_t *b, size_t len)
{
	cci_device_t *dev = st_init("127.0.0.1");
	cci_endpoint_t *ep = st_endpoint(dev);
	char *uri = st_uri(ep);
	uint8_t reply[TCP_HDR_LEN + TCP_HELLO_LEN];
	int fd, others = 0;

	fd = raw_connect(st_uri_port(uri));
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(raw_send(fd, b, len), 0);
	CU_ASSERT_EQUAL(raw_frame(fd, reply, sizeof(reply), 3000), -1);
	CU_ASSERT(raw_closed(fd, 3000));
	CU_ASSERT_PTR_NULL(st_wait(ep, CCI_EVENT_CONNECT_REQUEST, 200, &others));
	close(fd);
	still_serves(ep, uri);
	free(uri);
	st_fini(ep);
}

static void garbage_before_handshake_is_dropped(void)
{
	uint8_t junk[256];

	for (unsigned i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	refused_before_request(junk, sizeof(junk));
}

/* The decoder's reason for each is in the wire tests (tcp_test.c). */
static void bad_hellos_are_refused(void)
{
	uint8_t b[TCP_HDR_LEN + TCP_HELLO_LEN];

	hello_frame(b, CCI_CONN_ATTR_RO, 65536);
	b[TCP_HDR_LEN + 5] = TCP_WIRE_VERSION - 1; /* another wire version */
	refused_before_request(b, sizeof(b));
	hello_frame(b, 9, 65536); /* an unknown attribute */
	refused_before_request(b, sizeof(b));
	hello_frame(b, CCI_CONN_ATTR_RO, TCP_AM_MSS_MIN - 1); /* mss out of range */
	refused_before_request(b, sizeof(b));
}

/* Send one mangled frame on an accepted raw connection: closed, and the
 * endpoint goes on serving. */
static void mangled_frame(const uint8_t *frame, size_t len, int close_after)
{
	cci_device_t *dev = st_init("127.0.0.1");
	cci_endpoint_t *ep = st_endpoint(dev);
	char *uri = st_uri(ep);
	cci_connection_t *c = NULL;
	int fd = raw_open(ep, st_uri_port(uri), &c);

	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(raw_send(fd, frame, len), 0);
	if (close_after)
		shutdown(fd, SHUT_WR);
	else
		CU_ASSERT(raw_closed(fd, 3000));
	/* Sends on the server's side of it fail once it is closed. */
	for (uint64_t stop = st_now_ms() + 3000; st_now_ms() < stop;) {
		cci_event_t *ev;
		if (cci_send(c, "x", 1, NULL, 0) == CCI_ERR_DISCONNECTED)
			break;
		while (cci_get_event(ep, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		st_sleep_ms(10);
	}
	CU_ASSERT_EQUAL(cci_send(c, "x", 1, NULL, 0), CCI_ERR_DISCONNECTED);
	close(fd);
	cci_disconnect(c);
	still_serves(ep, uri);
	free(uri);
	st_fini(ep);
}

static void oversized_length_closes_the_connection(void)
{
	uint8_t b[TCP_HDR_LEN];

	raw_hdr(b, TCP_F_MSG, 0x7fffffffu, 0, 0);
	mangled_frame(b, sizeof(b), 0);
}

static void garbage_after_handshake_closes_the_connection(void)
{
	uint8_t b[64];

	memset(b, 0x5a, sizeof(b));
	mangled_frame(b, sizeof(b), 0);
}

static void out_of_sequence_frame_closes_the_connection(void)
{
	uint8_t b[TCP_HDR_LEN + 4];

	raw_hdr(b, TCP_F_MSG, 4, 5, 0); /* the first frame must be seq 0 */
	memcpy(b + TCP_HDR_LEN, "abcd", 4);
	mangled_frame(b, sizeof(b), 0);
}

static void truncated_frame_breaks_only_that_connection(void)
{
	uint8_t b[TCP_HDR_LEN + 100];

	memset(b, 0x33, sizeof(b));
	raw_hdr(b, TCP_F_MSG, 1000, 0, 0); /* promises 1000 bytes, sends 100 */
	mangled_frame(b, sizeof(b), 1);
}

/* The frame of RMA record r with dlen bytes of data after it, at b;
 * returns its length. */
static size_t rma_frame(uint8_t *b, const struct cci__emu_rma_rec *r, const void *data,
                        uint32_t dlen)
{
	raw_hdr(b, TCP_F_RMA, TCP_SUB_MAX + dlen, 0, 0);
	cci__emu_rma_encode(b + TCP_HDR_LEN, r);
	if (dlen)
		memcpy(b + TCP_HDR_LEN + TCP_SUB_MAX, data, dlen);
	return TCP_HDR_LEN + TCP_SUB_MAX + dlen;
}

/* Send RMA record r (with dlen bytes of data) and, after a write's
 * fragment, its WR_END with the completion message msg; return the status
 * of the DONE that answers, or -1 if none came. */
static int rma_verdict(int fd, struct cci__emu_rma_rec r, const void *data, uint32_t dlen,
                       const char *msg)
{
	const struct cci__emu_rma_limits lim = { 64, 64, 1 };
	uint8_t b[TCP_HDR_LEN + TCP_SUB_MAX + 64];
	uint32_t mlen = msg ? (uint32_t)strlen(msg) : 0;

	if (raw_send(fd, b, rma_frame(b, &r, data, dlen)) != 0)
		return -1;
	if (r.kind == CCI__EMU_RMA_WR_DATA) {
		struct cci__emu_rma_rec end = { .kind = CCI__EMU_RMA_WR_END, .op = r.op, .len = mlen };
		if (raw_send(fd, b, rma_frame(b, &end, msg, mlen)) != 0)
			return -1;
	}
	for (int i = 0; i < 8; i++) {
		struct cci__emu_rma_rec done;
		const char *why;
		int n = raw_frame(fd, b, sizeof(b), 1000);
		if (n < 0)
			return -1;
		if (b[1] == TCP_F_RMA && n == TCP_SUB_MAX &&
		    cci__emu_rma_decode(b + TCP_HDR_LEN, 0, &lim, &done, &why) == 0 &&
		    done.kind == CCI__EMU_RMA_DONE && done.op == r.op)
			return done.status;
	}
	return -1;
}

static void forged_rma_never_touches_memory(void)
{
	cci_device_t *dev = st_init("127.0.0.1");
	cci_endpoint_t *ep = st_endpoint(dev);
	char *uri = st_uri(ep);
	static uint8_t mem[4096];
	const uint8_t data[16] = "0123456789abcdef";
	cci_rma_handle_t *h;
	cci_connection_t *c = NULL;
	struct cci__emu_rma_rec s = { .kind = CCI__EMU_RMA_WR_DATA, .op = 1 };
	cci_event_t *ev;
	int fd;

	memset(mem, 0xab, sizeof(mem));
	CU_ASSERT_EQUAL_FATAL(cci_rma_register(ep, mem, sizeof(mem), CCI_FLAG_WRITE, &h),
	                      CCI_SUCCESS);
	fd = raw_open(ep, st_uri_port(uri), &c);
	CU_ASSERT_FATAL(fd >= 0);
	s.key = h->stuff[0] ^ 0x5555; /* forged key */
	/* A refused write's completion message ("no") is never delivered. */
	CU_ASSERT_EQUAL(rma_verdict(fd, s, data, 16, "no"), CCI_ERR_RMA_HANDLE);
	s.op = 2;
	s.key = h->stuff[0];
	s.off = sizeof(mem) - 8; /* runs past the end */
	CU_ASSERT_EQUAL(rma_verdict(fd, s, data, 16, "no"), CCI_EINVAL);
	s = (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_RD_REQ, .op = 4, .key = h->stuff[0],
		                       .len = 16 }; /* no READ access */
	CU_ASSERT_EQUAL(rma_verdict(fd, s, NULL, 0, NULL), CCI_ERR_RMA_HANDLE);
	s = (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_WR_DATA, .op = 5, .key = h->stuff[0],
		                       .off = 100 };
	/* Its completion message says the data is in place. */
	CU_ASSERT_EQUAL(rma_verdict(fd, s, data, 16, "ok"), CCI_SUCCESS);
	ev = st_wait(ep, CCI_EVENT_RECV, 3000, NULL);
	CU_ASSERT_PTR_NOT_NULL(ev);
	if (ev) {
		CU_ASSERT(ev->recv.len == 2 && memcmp(ev->recv.ptr, "ok", 2) == 0);
		cci_return_event(ev);
	}
	/* Only the accepted write landed; every refused one left its canary. */
	CU_ASSERT(memcmp(mem + 100, data, 16) == 0);
	for (unsigned i = 0; i < sizeof(mem); i++)
		if ((i < 100 || i >= 116) && mem[i] != 0xab) {
			CU_FAIL("a refused RMA wrote into the registration");
			break;
		}
	close(fd);
	cci_disconnect(c);
	cci_rma_deregister(ep, h);
	free(uri);
	st_fini(ep);
}

/* Take the RECV events that arrived; each must be the next expected
 * message of the repeating group (its length and first byte), in order.
 * Returns how many came in all. */
static int take_recvs(cci_endpoint_t *ep, int next)
{
	static const uint32_t lens[] = { 8, 2, 0, 100 };
	static const uint8_t firsts[] = { 'm', 'o', 0, 'z' };
	cci_event_t *ev;

	while (cci_get_event(ep, &ev) == CCI_SUCCESS) {
		if (ev->type == CCI_EVENT_RECV) {
			CU_ASSERT_EQUAL(ev->recv.len, lens[next % 4]);
			if (ev->recv.len > 0 && ev->recv.len == lens[next % 4])
				CU_ASSERT_EQUAL(((const uint8_t *)ev->recv.ptr)[0], firsts[next % 4]);
			next++;
		}
		cci_return_event(ev);
	}
	return next;
}

/* One group of frames: a message of 8 bytes, an RMA write of 16 bytes
 * (32 bytes of record header) and its WR_END carrying "ok", an empty
 * message, a message of 100 bytes.  Returns the bytes written at b. */
static size_t frame_group(uint8_t *b, uint32_t g, uint64_t key)
{
	struct cci__emu_rma_rec r = { .kind = CCI__EMU_RMA_WR_DATA, .op = g + 1, .key = key,
		                      .off = 40 };
	size_t len = 0;

	raw_hdr(b, TCP_F_MSG, 8, 3 * g, 0);
	memcpy(b + TCP_HDR_LEN, "m1234567", 8);
	len += TCP_HDR_LEN + 8;
	len += rma_frame(b + len, &r, "0123456789abcdef", 16);
	r = (struct cci__emu_rma_rec){ .kind = CCI__EMU_RMA_WR_END, .op = g + 1, .len = 2 };
	len += rma_frame(b + len, &r, "ok", 2);
	raw_hdr(b + len, TCP_F_MSG, 0, 3 * g + 1, 0);
	len += TCP_HDR_LEN;
	raw_hdr(b + len, TCP_F_MSG, 100, 3 * g + 2, 0);
	memset(b + len + TCP_HDR_LEN, 'z', 100);
	return len + TCP_HDR_LEN + 100;
}

/* Frames cut anywhere, inside a header or an RMA sub-header too, are put
 * back together: the stream goes out in pieces of 1 to 47 bytes, one
 * segment each, and the endpoint reads between pieces, so reads end at
 * every kind of place. */
static void frames_cut_anywhere_arrive_intact(void)
{
	enum { GROUPS = 24 };
	cci_device_t *dev = st_init("127.0.0.1");
	cci_endpoint_t *ep = st_endpoint(dev);
	char *uri = st_uri(ep);
	static uint8_t mem[256], stream[GROUPS * 320];
	size_t len = 0;
	cci_rma_handle_t *h;
	cci_connection_t *c = NULL;
	int fd, got = 0, one = 1;

	memset(mem, 0xab, sizeof(mem));
	CU_ASSERT_EQUAL_FATAL(cci_rma_register(ep, mem, sizeof(mem), CCI_FLAG_WRITE, &h),
	                      CCI_SUCCESS);
	fd = raw_open(ep, st_uri_port(uri), &c);
	CU_ASSERT_FATAL(fd >= 0);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (uint32_t g = 0; g < GROUPS; g++)
		len += frame_group(stream + len, g, h->stuff[0]);
	for (size_t off = 0, k = 1; off < len; off += k, k = k % 47 + 1) {
		if (k > len - off)
			k = len - off;
		CU_ASSERT_EQUAL_FATAL(raw_send(fd, stream + off, k), 0);
		st_sleep_ms(1);
		got = take_recvs(ep, got);
	}
	for (uint64_t stop = st_now_ms() + 3000; got < 4 * GROUPS && st_now_ms() < stop;
	     st_sleep_ms(1))
		got = take_recvs(ep, got);
	CU_ASSERT_EQUAL(got, 4 * GROUPS);
	CU_ASSERT(memcmp(mem + 40, "0123456789abcdef", 16) == 0);
	for (unsigned i = 0; i < sizeof(mem); i++)
		if ((i < 40 || i >= 56) && mem[i] != 0xab) {
			CU_FAIL("a write landed outside its 16 bytes");
			break;
		}
	/* The connection is still open both ways: a message comes back
	 * (after the acks the endpoint sends meanwhile). */
	CU_ASSERT_EQUAL(cci_send(c, "back", 4, NULL, 0), CCI_SUCCESS);
	{
		uint8_t b[TCP_HDR_LEN + 64];
		int n = -1;

		for (int i = 0; i < 64 && !(n == 4 && b[1] == TCP_F_MSG); i++)
			if ((n = raw_frame(fd, b, sizeof(b), 2000)) < 0)
				break;
		CU_ASSERT(n == 4 && b[1] == TCP_F_MSG && memcmp(b + TCP_HDR_LEN, "back", 4) == 0);
	}
	close(fd);
	cci_disconnect(c);
	cci_rma_deregister(ep, h);
	free(uri);
	st_fini(ep);
}

/* The length and bytes of the seq-th message of the next test. */
static uint32_t fill_len(uint64_t seq)
{
	return 1 + (uint32_t)(seq * 37 % 480);
}

static uint8_t fill_byte(uint64_t seq, uint32_t i)
{
	return (uint8_t)(seq * 7 + i);
}

/* One frame of the stream is the seq-th message, whole. */
static int fill_frame_ok(const uint8_t *b, int n, uint64_t seq)
{
	if (n < 0 || (uint32_t)n != fill_len(seq) || b[1] != TCP_F_MSG ||
	    cci__get64(b + 8) != seq)
		return 0;
	for (uint32_t i = 0; i < (uint32_t)n; i++)
		if (b[TCP_HDR_LEN + i] != fill_byte(seq, i))
			return 0;
	return 1;
}

/* cci_send, again while every send buffer waits for an ack the endpoint
 * has yet to read (each try makes a progress pass); for up to 3 s. */
static int send_retrying(cci_connection_t *c, const void *p, uint32_t len)
{
	uint64_t stop = st_now_ms() + 3000;
	int rc;

	while ((rc = cci_send(c, p, len, NULL, CCI_FLAG_SILENT)) == CCI_ENOBUFS &&
	       st_now_ms() < stop)
		st_sleep_ms(1);
	return rc;
}

/* Small messages sent while nobody reads, into sockets of 8 KiB: they go
 * out whole while the socket takes them, the one that fills it goes out
 * in part (or not at all) and the rest wait in the queue.  A raw peer then
 * reads the stream and checks every frame (sequence, length, bytes);
 * several rounds of fill, drain and acknowledge, with lengths that rarely
 * fit the socket's room exactly. */
static void small_sends_into_a_full_socket_arrive_whole(void)
{
	enum { ROUNDS = 8, PER_ROUND = 600 };
	cci_device_t *dev = st_init_conf("[t]\ntransport = tcp\nip = 127.0.0.1\nbufsize = 8192\n");
	cci_endpoint_t *ep = st_endpoint(dev);
	char *uri = st_uri(ep);
	static uint8_t msg[480], b[TCP_HDR_LEN + 480];
	cci_connection_t *c = NULL;
	uint64_t seq = 0;
	int fd, ok = 1;

	fd = raw_open(ep, st_uri_port(uri), &c);
	CU_ASSERT_FATAL(fd >= 0);
	for (int r = 0; r < ROUNDS && ok; r++) {
		uint8_t ack[TCP_HDR_LEN];
		for (uint64_t s = seq; s < seq + PER_ROUND; s++) {
			for (uint32_t i = 0; i < fill_len(s); i++)
				msg[i] = fill_byte(s, i);
			CU_ASSERT_EQUAL_FATAL(send_retrying(c, msg, fill_len(s)), CCI_SUCCESS);
		}
		/* The endpoint's thread writes the queued rest as we read. */
		for (uint32_t i = 0; i < PER_ROUND && ok; i++, seq++)
			ok = fill_frame_ok(b, raw_frame(fd, b, sizeof(b), 3000), seq);
		raw_hdr(ack, TCP_F_ACK, 0, 0, seq);
		CU_ASSERT_EQUAL_FATAL(raw_send(fd, ack, sizeof(ack)), 0);
	}
	CU_ASSERT(ok);
	CU_ASSERT_EQUAL(seq, (uint64_t)ROUNDS * PER_ROUND);
	close(fd);
	cci_disconnect(c);
	free(uri);
	st_fini(ep);
}

static void half_open_flood_does_not_stall_clients(void)
{
	cci_device_t *dev = st_init("127.0.0.1");
	cci_endpoint_t *ep = st_endpoint(dev);
	char *uri = st_uri(ep);
	int fds[300], n = 0;
	uint64_t t0;

	/* Silent sockets, and sockets stuck half-way through a HELLO. */
	for (int i = 0; i < 300; i++) {
		fds[n] = raw_connect(st_uri_port(uri));
		if (fds[n] < 0)
			break;
		if (i % 2)
			raw_send(fds[n], "\xc5\x01\x00\x00", 4);
		n++;
	}
	CU_ASSERT(n >= 200);
	t0 = st_now_ms();
	still_serves(ep, uri);
	CU_ASSERT(st_now_ms() - t0 < 2000);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	free(uri);
	st_fini(ep);
}

static void connect_to_silent_listener_times_out(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct timeval tv = { 0, 300000 };
	cci_device_t *dev;
	cci_endpoint_t *ep;
	cci_event_t *ev;
	char uri[64];
	uint64_t t0;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	/* A listener that never accepts nor answers: the kernel completes the
	 * TCP handshake, nobody ever replies to HELLO. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_FATAL(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sl) == 0 &&
	                listen(lfd, 4) == 0 && getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", ntohs(sa.sin_port));
	dev = st_init("127.0.0.1");
	ep = st_endpoint(dev);
	t0 = st_now_ms();
	CU_ASSERT_EQUAL(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, (void *)7, 0, &tv),
	                CCI_SUCCESS);
	ev = st_wait(ep, CCI_EVENT_CONNECT, 5000, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
	CU_ASSERT_EQUAL(ev->connect.status, CCI_ETIMEDOUT);
	CU_ASSERT(ev->connect.context == (void *)7 && ev->connect.connection == NULL);
	CU_ASSERT(st_now_ms() - t0 >= 280 && st_now_ms() - t0 < 2000);
	cci_return_event(ev);
	close(lfd);
	st_fini(ep);
}

int st_add_raw_tests(void)
{
	CU_pSuite s = CU_add_suite_with_setup_and_teardown("bad peers on the wire", NULL, NULL,
	                                                   NULL, st_teardown);

	return !s ||
	       !CU_add_test(s, "garbage before the handshake is dropped, no request is posted",
	                    garbage_before_handshake_is_dropped) ||
	       !CU_add_test(s, "a HELLO of another version, attribute or mss is refused",
	                    bad_hellos_are_refused) ||
	       !CU_add_test(s, "an oversized length closes that connection only",
	                    oversized_length_closes_the_connection) ||
	       !CU_add_test(s, "garbage after the handshake closes that connection only",
	                    garbage_after_handshake_closes_the_connection) ||
	       !CU_add_test(s, "a frame out of sequence closes that connection only",
	                    out_of_sequence_frame_closes_the_connection) ||
	       !CU_add_test(s, "a truncated frame breaks that connection only",
	                    truncated_frame_breaks_only_that_connection) ||
	       !CU_add_test(s, "forged, out-of-bounds and unauthorised RMA never touch memory",
	                    forged_rma_never_touches_memory) ||
	       !CU_add_test(s, "frames cut anywhere, inside headers and sub-headers too, arrive intact",
	                    frames_cut_anywhere_arrive_intact) ||
	       !CU_add_test(s, "small messages sent into a full socket arrive whole and in order",
	                    small_sends_into_a_full_socket_arrive_whole) ||
	       !CU_add_test(s, "300 half-open connections do not stall a legitimate client",
	                    half_open_flood_does_not_stall_clients) ||
	       !CU_add_test(s, "a connect to a listener that never answers ends in CCI_ETIMEDOUT",
	                    connect_to_silent_listener_times_out);
}
