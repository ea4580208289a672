/*
 * t_sock_icmp.c - ICMP "port unreachable" errors against a sock endpoint,
 * forged from a raw socket (root only; skipped, saying so, without it):
 * one quoting our HELLO refuses that connect at once, one quoting another
 * token or address does nothing; errors quoting a datagram of an open
 * connection whose peer answers do not break it (they make it probe the
 * peer, whose answer clears them), and break it once three came and the
 * peer stayed silent for 200 ms.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "init_config.h"
#include "sock_dgram.h"
#include "sock_test.h"
#include "unit_run.h"

#define QUOTE_LEN 64u /* bytes of our datagram an ICMP error quotes here */

static uint16_t inet_csum(const void *buf, size_t len)
{
	const uint8_t *b = buf;
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (len & 1)
		sum += (uint32_t)b[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* An ICMP port unreachable to 127.0.0.1 saying that the datagram from
 * port sport to port dport (both on 127.0.0.1), starting with the len
 * bytes q, found nobody. */
static void icmp_forge(int icmp_fd, uint16_t sport, uint16_t dport, const uint8_t *q, size_t len)
{
	uint8_t b[8 + sizeof(struct iphdr) + sizeof(struct udphdr) + QUOTE_LEN] = { 0 };
	struct iphdr *ip = (struct iphdr *)(b + 8);
	struct udphdr *udp = (struct udphdr *)(ip + 1);
	struct sockaddr_in to = { .sin_family = AF_INET };
	size_t total = 8 + sizeof(*ip) + sizeof(*udp) + len;

	b[0] = 3; /* destination unreachable */
	b[1] = 3; /* port unreachable */
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons((uint16_t)(sizeof(*ip) + sizeof(*udp) + len));
	ip->saddr = ip->daddr = htonl(INADDR_LOOPBACK);
	ip->check = inet_csum(ip, sizeof(*ip));
	udp->source = htons(sport);
	udp->dest = htons(dport);
	udp->len = htons((uint16_t)(sizeof(*udp) + len));
	memcpy(udp + 1, q, len);
	b[2] = b[3] = 0;
	memcpy(b + 2, &(uint16_t){ inet_csum(b, total) }, 2);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT(sendto(icmp_fd, b, total, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)total);
}

/* A raw ICMP socket, or -1 with the test skipped (it needs root). */
static int icmp_open(void)
{
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);

	if (fd < 0)
		unit_skip("no raw socket to forge ICMP errors with: %s", strerror(errno));
	return fd;
}

/* A raw ICMP socket to forge errors with and a raw UDP one to capture
 * the datagrams they quote; 0, or -1 with the test skipped (no raw
 * socket) or failed (the second would not open). */
static int raw_pair_open(int *icmp_fd, int *cap_fd)
{
	if ((*icmp_fd = icmp_open()) < 0)
		return -1;
	*cap_fd = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
	if (*cap_fd >= 0)
		return 0;
	CU_FAIL("no raw UDP socket to capture with");
	close(*icmp_fd);
	return -1;
}

static uint16_t ep_port(cci_endpoint_t *ep)
{
	char *uri = NULL;
	uint16_t port;

	CU_ASSERT_EQUAL(cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri), CCI_SUCCESS);
	port = uri ? sk_uri_port(uri) : 0;
	free(uri);
	return port;
}

/* The CONNECT event within ms: its status, or -1. */
static int connect_status(cci_endpoint_t *ep, unsigned ms)
{
	uint64_t stop = sk_now_ms() + ms;
	cci_event_t *ev;
	int st = -1;

	while (st < 0 && sk_now_ms() < stop) {
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT)
			st = ev->connect.status;
		cci_return_event(ev);
	}
	return st;
}

void t_icmp_refuses_its_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET }, from;
	socklen_t sl = sizeof(sa), fl = sizeof(from);
	struct timeval tv = { 3, 0 }, rto = { 1, 0 };
	int icmp_fd = icmp_open(), udp_fd;
	uint8_t hello[2048], wrong[QUOTE_LEN];
	cci_endpoint_t *ep = NULL;
	uint64_t token = 0, t0;
	uint8_t type = 0;
	char uri[64];
	ssize_t n;

	if (icmp_fd < 0)
		return;
	udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
	/* A server that never answers, then the connect to it. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_FATAL(udp_fd >= 0 && bind(udp_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	                getsockname(udp_fd, (struct sockaddr *)&sa, &sl) == 0);
	setsockopt(udp_fd, SOL_SOCKET, SO_RCVTIMEO, &rto, sizeof(rto));
	CU_ASSERT_PTR_NOT_NULL_FATAL(sk_init(NULL));
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(NULL, 0, &ep, NULL), CCI_SUCCESS);
	snprintf(uri, sizeof(uri), "sock://127.0.0.1:%u", ntohs(sa.sin_port));
	CU_ASSERT_EQUAL_FATAL(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &tv),
	                      CCI_SUCCESS);
	n = recvfrom(udp_fd, hello, sizeof(hello), 0, (struct sockaddr *)&from, &fl);
	CU_ASSERT_FATAL(n >= (ssize_t)QUOTE_LEN);
	CU_ASSERT_EQUAL(sock_dg_quoted(hello, (size_t)n, &type, &token), 0);
	CU_ASSERT_EQUAL(type, SOCK_DG_HELLO);
	CU_ASSERT_EQUAL(sock_dg_quoted(hello, SOCK_DG_HDR_LEN + SOCK_DG_HELLO_TOKEN_END - 1, &type,
	                               &token), -1);
	/* Another token, then the right one for another address: nothing. */
	memcpy(wrong, hello, sizeof(wrong));
	wrong[SOCK_DG_HDR_LEN + SOCK_DG_HELLO_TOKEN_END - 8] ^= 1;
	icmp_forge(icmp_fd, ntohs(from.sin_port), ntohs(sa.sin_port), wrong, sizeof(wrong));
	icmp_forge(icmp_fd, ntohs(from.sin_port), ntohs(sa.sin_port) + 1, hello, QUOTE_LEN);
	CU_ASSERT_EQUAL(connect_status(ep, 300), -1);
	/* The right one: refused at once. */
	t0 = sk_now_ms();
	icmp_forge(icmp_fd, ntohs(from.sin_port), ntohs(sa.sin_port), hello, QUOTE_LEN);
	CU_ASSERT_EQUAL(connect_status(ep, 1000), CCI_ECONNREFUSED);
	CU_ASSERT(sk_now_ms() - t0 < 500);
	close(udp_fd);
	close(icmp_fd);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(ep), CCI_SUCCESS);
	sk_fini();
}

/* The next datagram of ours of type from sport to dport that the raw UDP
 * socket sees, its first QUOTE_LEN bytes in q (zeros past its end); 0 or
 * -1.  The endpoints e1 and e2 (NULL: none) are polled meanwhile. */
static int capture(int cap_fd, uint16_t sport, uint16_t dport, uint8_t type, uint8_t *q,
                   cci_endpoint_t *e1, cci_endpoint_t *e2)
{
	uint8_t b[70000];

	for (uint64_t stop = sk_now_ms() + 2000; sk_now_ms() < stop;) {
		cci_event_t *ev;
		ssize_t n = recv(cap_fd, b, sizeof(b), MSG_DONTWAIT);
		const struct udphdr *udp;
		const uint8_t *d;
		size_t ihl;

		if (e1 && cci_get_event(e1, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		if (e2 && cci_get_event(e2, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		if (n < (ssize_t)sizeof(struct iphdr))
			continue;
		ihl = ((const struct iphdr *)b)->ihl * 4u;
		udp = (const struct udphdr *)(b + ihl);
		d = (const uint8_t *)(udp + 1);
		if (n < (ssize_t)(ihl + sizeof(*udp) + SOCK_DG_HDR_LEN) || ntohs(udp->source) != sport ||
		    ntohs(udp->dest) != dport || d[0] != SOCK_DG_MARK || d[1] != type)
			continue;
		n -= (ssize_t)(ihl + sizeof(*udp));
		memset(q, 0, QUOTE_LEN);
		memcpy(q, d, n < (ssize_t)QUOTE_LEN ? (size_t)n : QUOTE_LEN);
		return 0;
	}
	return -1;
}

void t_icmp_does_not_break_open_connection(void)
{
	struct sk_pair p;
	int icmp_fd, cap_fd;
	uint8_t msg[100] = { 1 }, q[QUOTE_LEN], ping[QUOTE_LEN];
	uint16_t cport;
	cci_event_t *ev;
	int got = 0;

	if (raw_pair_open(&icmp_fd, &cap_fd) != 0)
		return;
	if (sk_pair_open(&p, CCI_CONN_ATTR_RO, NULL, NULL) != 0)
		goto out;
	cport = ep_port(p.cli);
	/* A real datagram of the connection, client to server, quoted with
	 * its token by five errors, as if the server's port were closed. */
	CU_ASSERT_EQUAL(cci_send(p.cc, msg, sizeof(msg), NULL, CCI_FLAG_SILENT), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(capture(cap_fd, cport, p.srv_port, SOCK_DG_MSG, q, p.srv, p.cli), 0);
	for (int i = 0; i < 5; i++)
		icmp_forge(icmp_fd, cport, p.srv_port, q, sizeof(q));
	/* The client probes the server, which answers: the suspicion ends. */
	CU_ASSERT_EQUAL(capture(cap_fd, cport, p.srv_port, SOCK_DG_PING, ping, p.srv, p.cli), 0);
	for (uint64_t stop = sk_now_ms() + 600; sk_now_ms() < stop;) {
		if (cci_get_event(p.srv, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
		if (cci_get_event(p.cli, &ev) == CCI_SUCCESS)
			cci_return_event(ev);
	}
	CU_ASSERT_EQUAL(cci_send(p.cc, msg, sizeof(msg), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_send(p.sc, msg, sizeof(msg), NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	for (uint64_t stop = sk_now_ms() + 2000; !(got & 2) && sk_now_ms() < stop;) {
		if (cci_get_event(p.srv, &ev) == CCI_SUCCESS) {
			got |= ev->type == CCI_EVENT_RECV;
			cci_return_event(ev);
		}
		if (cci_get_event(p.cli, &ev) == CCI_SUCCESS) {
			got |= (ev->type == CCI_EVENT_RECV) << 1;
			cci_return_event(ev);
		}
	}
	CU_ASSERT_EQUAL(got, 3); /* a message came each way */
out:
	close(cap_fd);
	close(icmp_fd);
	sk_pair_close(&p);
}

/* ---- a peer that is gone ------------------------------------------------ */

/* A client endpoint (with its progress thread) connected to a server
 * endpoint without one (progress = manual): once nobody polls it, the
 * server answers nothing, as a killed peer would, but its port stays
 * open (no ICMP error but ours). */
struct silent {
	cci_endpoint_t *cli, *srv;
	cci_connection_t *c;
	uint16_t cport, sport;
};

static uint16_t device_ep(const char *name, cci_endpoint_t **ep)
{
	cci_device_t *const *devs = NULL;

	CU_ASSERT_EQUAL_FATAL(cci_get_devices(&devs), CCI_SUCCESS);
	for (int i = 0; devs[i]; i++)
		if (strcmp(devs[i]->name, name) == 0)
			CU_ASSERT_EQUAL(cci_create_endpoint(devs[i], 0, ep, NULL), CCI_SUCCESS);
	CU_ASSERT_PTR_NOT_NULL_FATAL(*ep);
	return ep_port(*ep);
}

static void silent_open(struct silent *s)
{
	char uri[64];

	memset(s, 0, sizeof(*s));
	CU_ASSERT_PTR_NOT_NULL_FATAL(init_config_first_device(
	        "[cli]\ntransport = sock\nip = 127.0.0.1\n\n"
	        "[srv]\ntransport = sock\nip = 127.0.0.1\nprogress = manual\n", "sock"));
	s->cport = device_ep("cli", &s->cli);
	s->sport = device_ep("srv", &s->srv);
	snprintf(uri, sizeof(uri), "sock://127.0.0.1:%u", s->sport);
	CU_ASSERT_EQUAL_FATAL(cci_connect(s->cli, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL),
	                      CCI_SUCCESS);
	for (uint64_t stop = sk_now_ms() + 5000; !s->c && sk_now_ms() < stop;) {
		cci_event_t *ev;

		if (cci_get_event(s->srv, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT_REQUEST)
				CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
			cci_return_event(ev);
		}
		if (cci_get_event(s->cli, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_SUCCESS)
				s->c = ev->connect.connection;
			cci_return_event(ev);
		}
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->c);
}

/* The status of the client's SEND completion within ms, or -1. */
static int send_status(cci_endpoint_t *ep, unsigned ms)
{
	for (uint64_t stop = sk_now_ms() + ms; sk_now_ms() < stop;) {
		cci_event_t *ev;
		int st = -1;

		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_SEND)
			st = ev->send.status;
		cci_return_event(ev);
		if (st >= 0)
			return st;
	}
	return -1;
}

/*
 * A send to the silent server waits for its ack; first errors quoting
 * one of its datagrams come: the connection is probed, and broken
 * (the send fails with CCI_ERR_DISCONNECTED) only once three errors came
 * and the peer said nothing for 200 ms since the first.
 */
static void icmp_breaks_silent_peer(unsigned first)
{
	int icmp_fd, cap_fd;
	uint8_t msg[100] = { 2 }, q[QUOTE_LEN];
	struct silent s;
	uint64_t t0, t;
	int st;

	if (raw_pair_open(&icmp_fd, &cap_fd) != 0)
		return;
	silent_open(&s);
	CU_ASSERT_EQUAL(cci_send(s.c, msg, sizeof(msg), NULL, 0), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(capture(cap_fd, s.cport, s.sport, SOCK_DG_MSG, q, NULL, NULL), 0);
	t0 = sk_now_ms();
	for (unsigned i = 0; i < first; i++)
		icmp_forge(icmp_fd, s.cport, s.sport, q, sizeof(q));
	st = send_status(s.cli, 400);
	t = sk_now_ms() - t0;
	if (first < 3) {
		CU_ASSERT_EQUAL(st, -1); /* too few errors: still waiting */
		for (unsigned i = first; i < 3; i++)
			icmp_forge(icmp_fd, s.cport, s.sport, q, sizeof(q));
		st = send_status(s.cli, 1000);
		t = sk_now_ms() - t0;
		CU_ASSERT(t >= 400 && t < 1000);
	} else if (st < 0) {
		st = send_status(s.cli, 1000);
		t = sk_now_ms() - t0;
	}
	printf("[%u errors at once: broken %llu ms after the first] ", first,
	       (unsigned long long)t);
	CU_ASSERT_EQUAL(st, CCI_ERR_DISCONNECTED);
	CU_ASSERT(t >= 200 && t < 1400); /* 200 ms of silence, then a tick */
	close(cap_fd);
	close(icmp_fd);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(s.cli), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_destroy_endpoint(s.srv), CCI_SUCCESS);
	sk_fini();
}

void t_icmp_breaks_silent_peer(void)
{
	icmp_breaks_silent_peer(3);
}

void t_icmp_needs_three_errors(void)
{
	icmp_breaks_silent_peer(2);
}
