/*
 * tcp_test.c - transport tests of the tcp transport (and of sock beside it
 * where a test says so): the harness, the wire decoder unit tests, and
 * main().
 *
 * usage: tcp_test [substring]   (runs the tests whose name contains it)
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "tcp_wire.h"
#include "init_config.h"
#include "tcp_test.h"
#include "unit_run.h"

uint64_t st_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void st_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

cci_device_t *st_init(const char *ip)
{
	return st_init_as("tcp", ip);
}

cci_device_t *st_init_as(const char *transport, const char *ip)
{
	int tcp = strcmp(transport, "tcp") == 0;
	char text[128];

	snprintf(text, sizeof(text), "[t]\ntransport = %s\nip = %s\n", transport, ip);
	return init_config_first_device(text, tcp ? "tcp" : "sock");
}

cci_device_t *st_init_conf(const char *text)
{
	return init_config_first_device(text, "tcp");
}

void st_fini(cci_endpoint_t *ep)
{
	if (ep)
		CU_ASSERT_EQUAL(cci_destroy_endpoint(ep), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_finalize(), CCI_SUCCESS);
}

cci_endpoint_t *st_endpoint(cci_device_t *dev)
{
	cci_endpoint_t *ep = NULL;

	CU_ASSERT_EQUAL(cci_create_endpoint(dev, 0, &ep, NULL), CCI_SUCCESS);
	return ep;
}

char *st_uri(cci_endpoint_t *ep)
{
	char *uri = NULL;

	CU_ASSERT_EQUAL(cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri), CCI_SUCCESS);
	return uri;
}

uint16_t st_uri_port(const char *uri)
{
	const char *colon = strrchr(uri, ':');

	return colon ? (uint16_t)atoi(colon + 1) : 0;
}

cci_event_t *st_wait(cci_endpoint_t *ep, cci_event_type_t type, unsigned ms, int *others)
{
	uint64_t stop = st_now_ms() + ms;

	while (st_now_ms() < stop) {
		cci_event_t *ev;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == type)
			return ev;
		if (others)
			(*others)++;
		cci_return_event(ev);
	}
	return NULL;
}

cci_connection_t *st_accept(cci_endpoint_t *ep, unsigned ms)
{
	cci_event_t *ev = st_wait(ep, CCI_EVENT_CONNECT_REQUEST, ms, NULL);
	cci_connection_t *c = NULL;

	if (!ev)
		return NULL;
	cci_accept(ev, NULL);
	cci_return_event(ev);
	ev = st_wait(ep, CCI_EVENT_ACCEPT, ms, NULL);
	if (ev) {
		c = ev->accept.status == CCI_SUCCESS ? ev->accept.connection : NULL;
		cci_return_event(ev);
	}
	return c;
}

cci_connection_t *st_connect(cci_endpoint_t *ep, const char *uri, cci_conn_attribute_t attr,
                             unsigned ms, int *status)
{
	cci_connection_t *c = NULL;
	cci_event_t *ev;
	int rc = cci_connect(ep, uri, NULL, 0, attr, NULL, 0, NULL);

	*status = rc;
	if (rc != CCI_SUCCESS)
		return NULL;
	ev = st_wait(ep, CCI_EVENT_CONNECT, ms, NULL);
	*status = ev ? (int)ev->connect.status : CCI_ETIMEDOUT;
	if (ev) {
		c = ev->connect.connection;
		cci_return_event(ev);
	}
	return c;
}

void st_teardown(void)
{
	for (int i = 0; i < 8 && cci_finalize() == CCI_SUCCESS; i++)
		;
}

/* ---- peer processes ------------------------------------------------------ */

void st_spawn(struct st_child *c, int (*fn)(int rfd, int wfd, void *arg), void *arg)
{
	int up[2], down[2];

	c->pid = -1;
	if (pipe(up) != 0 || pipe(down) != 0)
		return;
	fflush(stdout);
	c->pid = fork();
	if (c->pid == 0) {
		close(up[0]);
		close(down[1]);
		alarm(60); /* a peer never outlives a hung test */
		_exit(fn(down[0], up[1], arg));
	}
	close(up[1]);
	close(down[0]);
	c->rfd = up[0];
	c->wfd = down[1];
}

int st_reap(struct st_child *c, unsigned ms)
{
	uint64_t stop = st_now_ms() + ms;
	int status;

	if (c->pid <= 0)
		return -1;
	while (st_now_ms() < stop) {
		pid_t r = waitpid(c->pid, &status, WNOHANG);
		if (r == c->pid) {
			close(c->rfd);
			close(c->wfd);
			c->pid = -1;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		st_sleep_ms(5);
	}
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &status, 0);
	close(c->rfd);
	close(c->wfd);
	c->pid = -1;
	return -1;
}

int st_write_line(int fd, const char *s)
{
	size_t n = strlen(s);

	return write(fd, s, n) == (ssize_t)n && write(fd, "\n", 1) == 1 ? 0 : -1;
}

int st_read_line(int fd, char *buf, size_t len, unsigned ms)
{
	uint64_t stop = st_now_ms() + ms;
	size_t got = 0;

	while (got + 1 < len && st_now_ms() < stop) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 50) <= 0)
			continue;
		if (read(fd, buf + got, 1) != 1)
			return -1;
		if (buf[got] == '\n') {
			buf[got] = '\0';
			return 0;
		}
		got++;
	}
	return -1;
}

/* ---- wire decoder -------------------------------------------------------- */

static const struct tcp_limits lim = { 65536, 1u << 20 };

static void wire_header_roundtrip(void)
{
	struct tcp_hdr h = { TCP_F_MSG, TCP_FL_ACK_NOW, 100, 7, 9 }, d;
	const char *why = NULL;
	uint8_t b[TCP_HDR_LEN];

	tcp_hdr_encode(b, &h);
	CU_ASSERT_EQUAL(tcp_hdr_decode(b, &lim, &d, &why), 0);
	CU_ASSERT(d.type == h.type && d.flags == h.flags && d.len == h.len && d.seq == h.seq &&
	          d.ack == h.ack);
}

static void wire_header_rejects_bad_fields(void)
{
	struct tcp_hdr h = { TCP_F_MSG, 0, 65537, 0, 0 }, d;
	const char *why = NULL;
	uint8_t b[TCP_HDR_LEN];

	tcp_hdr_encode(b, &h); /* longer than mss */
	CU_ASSERT_EQUAL(tcp_hdr_decode(b, &lim, &d, &why), -1);
	h = (struct tcp_hdr){ TCP_F_ACK, 0, 1, 0, 0 }; /* an ACK with payload */
	tcp_hdr_encode(b, &h);
	CU_ASSERT_EQUAL(tcp_hdr_decode(b, &lim, &d, &why), -1);
	h = (struct tcp_hdr){ TCP_F_PING, 0, 0, 5, 0 }; /* seq on unsequenced */
	tcp_hdr_encode(b, &h);
	CU_ASSERT_EQUAL(tcp_hdr_decode(b, &lim, &d, &why), -1);
	h = (struct tcp_hdr){ TCP_F_RMA, 0, 24, 0, 0 }; /* shorter than its record header */
	tcp_hdr_encode(b, &h);
	CU_ASSERT_EQUAL(tcp_hdr_decode(b, &lim, &d, &why), -1);
	h = (struct tcp_hdr){ TCP_F_MSG, 0x80, 1, 0, 0 }; /* unknown flag */
	tcp_hdr_encode(b, &h);
	CU_ASSERT_EQUAL(tcp_hdr_decode(b, &lim, &d, &why), -1);
	b[0] = 0; /* no mark */
	CU_ASSERT_EQUAL(tcp_hdr_decode(b, &lim, &d, &why), -1);
	CU_ASSERT_PTR_NOT_NULL(why);
}

static void wire_random_bytes_never_decode_out_of_limits(void)
{
	uint8_t b[TCP_HDR_LEN];
	struct tcp_hdr d;
	const char *why;
	unsigned seed = 12345;

	for (int i = 0; i < 200000; i++) {
		for (unsigned k = 0; k < sizeof(b); k++)
			b[k] = (uint8_t)rand_r(&seed);
		if (i & 1)
			b[0] = TCP_HDR_MARK, b[3] = 0;
		if (tcp_hdr_decode(b, &lim, &d, &why) == 0) {
			CU_ASSERT(d.type > 0 && d.type < TCP_F_TYPE_END);
			CU_ASSERT(d.len <= lim.frag_max + TCP_SUB_MAX);
		}
	}
}

/* A HELLO body at b: id 1, attribute RU, the smallest mss, nonce 2, and a
 * 10-byte payload; its length. */
static uint32_t hello_body(uint8_t *b)
{
	const struct tcp_hello h = { 1, { CCI_CONN_ATTR_RU, TCP_AM_MSS_MIN, 0, 10, 2 } };

	tcp_hello_encode(b, &h);
	return TCP_HELLO_LEN + 10;
}

static void wire_hello_roundtrip(void)
{
	uint8_t b[TCP_HELLO_LEN + 10] = { 0 };
	struct tcp_hello d;
	const char *why;

	CU_ASSERT_EQUAL_FATAL(tcp_hello_decode(b, hello_body(b), CCI__HELLO_REQUEST, &d, &why), 0);
	CU_ASSERT(d.id == 1 && d.core.attr == CCI_CONN_ATTR_RU && d.core.mss == TCP_AM_MSS_MIN &&
	          d.core.data_len == 10 && d.core.nonce == 2);
	CU_ASSERT(b[5] == TCP_WIRE_VERSION && b[16] == CCI_CONN_ATTR_RU && b[23] == TCP_AM_MSS_MIN);
	d.core = (struct cci__hello){ .mss = TCP_AM_MSS_MAX, .nonce = 3 }; /* an answer */
	tcp_hello_encode(b, &d);
	CU_ASSERT_EQUAL(tcp_hello_decode(b, TCP_HELLO_LEN, CCI__HELLO_ANSWER, &d, &why), 0);
	CU_ASSERT(d.id == 1 && d.core.mss == TCP_AM_MSS_MAX && d.core.nonce == 3);
}

/* hello_body with one byte changed, decoded as len bytes of a kind: refused,
 * and *why names what is wrong. */
static void wire_hello_refuses_bad_fields(void)
{
	static const struct {
		unsigned off, val, len;
		enum cci__hello_kind kind;
		const char *why;
	} bad[] = {
		{ 0, 'X', 50, CCI__HELLO_REQUEST, "magic" },
		{ 5, TCP_WIRE_VERSION - 1, 50, CCI__HELLO_REQUEST, "version" },
		{ 5, TCP_WIRE_VERSION - 1, 32, CCI__HELLO_ANSWER, "version" }, /* version 2's */
		{ 7, 1, 50, CCI__HELLO_REQUEST, "reserved" },   /* the tcp prefix's zero */
		{ 17, 1, 50, CCI__HELLO_REQUEST, "reserved" },  /* the core's */
		{ 16, 9, 50, CCI__HELLO_REQUEST, "attribute" },
		{ 23, 63, 50, CCI__HELLO_REQUEST, "message size" }, /* mss 63 */
		{ 20, 1, 50, CCI__HELLO_REQUEST, "message size" },  /* mss 16 MiB + 64 */
		{ 27, 1, 50, CCI__HELLO_REQUEST, "credits" },   /* tcp has no window */
		{ 31, 11, 50, CCI__HELLO_REQUEST, "payload" },  /* 11 announced, 10 follow */
		{ 31, 10, 49, CCI__HELLO_REQUEST, "payload" },  /* 10 announced, 9 follow */
		{ 31, 0, 39, CCI__HELLO_REQUEST, "short" },
		{ 16, 0, 50, CCI__HELLO_ANSWER, "payload" },    /* an answer with a payload */
	};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t b[TCP_HELLO_LEN + 10] = { 0 };
		struct tcp_hello d;
		const char *why = NULL;

		hello_body(b);
		b[bad[i].off] = (uint8_t)bad[i].val;
		CU_ASSERT_EQUAL(tcp_hello_decode(b, bad[i].len, bad[i].kind, &d, &why), -1);
		CU_ASSERT(why && strstr(why, bad[i].why));
	}
}

int st_add_wire_tests(void)
{
	CU_pSuite s = CU_add_suite("wire format", NULL, NULL);

	return !s || !CU_add_test(s, "a frame header survives encode and decode",
	                          wire_header_roundtrip) ||
	       !CU_add_test(s, "headers with bad lengths, flags, sequence or mark are refused",
	                    wire_header_rejects_bad_fields) ||
	       !CU_add_test(s, "random bytes never decode to a frame beyond the limits",
	                    wire_random_bytes_never_decode_out_of_limits) ||
	       !CU_add_test(s, "a HELLO and an ACCEPT survive encode and decode",
	                    wire_hello_roundtrip) ||
	       !CU_add_test(s, "a handshake with a bad magic, version, reserved byte, attribute, "
	                       "mss, credits or payload is refused and named",
	                    wire_hello_refuses_bad_fields);
}

int main(int argc, char **argv)
{
	int status;

	signal(SIGPIPE, SIG_IGN);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_set_fail_on_inactive(CU_FALSE);
	if (st_add_wire_tests() || st_add_raw_tests() || st_add_peer_tests() ||
	    st_add_watch_tests() || st_add_manual_tests() || st_add_burst_tests() ||
	    st_add_limits_tests() || st_add_timeout_tests()) {
		CU_cleanup_registry();
		return 1;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (argc > 1) {
		/* Only the tests whose name contains argv[1]. */
		for (CU_pSuite s = CU_get_registry()->pSuite; s; s = s->pNext)
			for (CU_pTest t = s->pTest; t; t = t->pNext)
				CU_set_test_active(t, strstr(t->pName, argv[1]) ? CU_TRUE : CU_FALSE);
	}
	CU_basic_run_tests();
	status = unit_exit_status();
	CU_cleanup_registry();
	return status;
}
