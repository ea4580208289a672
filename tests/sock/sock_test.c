/*
 * sock_test.c - transport tests of the sock transport (UDP): the
 * harness and main().
 *
 * usage: sock_test [substring]   (runs the tests whose name contains it)
 * SOCK_TEST_MSGS sets the message count of the RO and RU relay streams
 * (default 1000000; plugins/sock/README.md, Tests).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "init_config.h"
#include "sock_test.h"
#include "unit_run.h"

uint64_t sk_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

cci_device_t *sk_init(const char *extra)
{
	char text[512];

	snprintf(text, sizeof(text), "[udp]\ntransport = sock\nip = 127.0.0.1\n%s\n",
	         extra ? extra : "");
	return init_config_first_device(text, "sock");
}

void sk_fini(void)
{
	CU_ASSERT_EQUAL(cci_finalize(), CCI_SUCCESS);
}

uint16_t sk_uri_port(const char *uri)
{
	size_t i = strlen(uri);

	while (i > 0 && uri[i - 1] != ':')
		i--;
	return (uint16_t)strtoul(uri + i, NULL, 10);
}

static char *ep_uri(cci_endpoint_t *ep)
{
	char *uri = NULL;

	CU_ASSERT_EQUAL(cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri), CCI_SUCCESS);
	return uri;
}

/* Poll both endpoints until the server accepted and the client connected. */
static int pair_handshake(struct sk_pair *p)
{
	uint64_t stop = sk_now_ms() + 20000;
	cci_event_t *ev;

	while ((!p->sc || !p->cc) && sk_now_ms() < stop) {
		if (cci_get_event(p->srv, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT_REQUEST)
				CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
			if (ev->type == CCI_EVENT_ACCEPT && ev->accept.status == CCI_SUCCESS)
				p->sc = ev->accept.connection;
			cci_return_event(ev);
		}
		if (cci_get_event(p->cli, &ev) == CCI_SUCCESS) {
			if (ev->type == CCI_EVENT_CONNECT) {
				CU_ASSERT_EQUAL(ev->connect.status, CCI_SUCCESS);
				p->cc = ev->connect.connection;
			}
			cci_return_event(ev);
		}
	}
	CU_ASSERT(p->sc && p->cc);
	return p->sc && p->cc ? 0 : -1;
}

int sk_pair_open(struct sk_pair *p, cci_conn_attribute_t attr,
                 const struct lossy_relay_conf *relay, const char *extra)
{
	return sk_pair_open_fd(p, attr, relay, extra, NULL);
}

int sk_pair_open_fd(struct sk_pair *p, cci_conn_attribute_t attr,
                    const struct lossy_relay_conf *relay, const char *extra,
                    cci_os_handle_t *cli_fd)
{
	cci_device_t *dev = sk_init(extra);
	struct timeval tv = { 20, 0 };
	char *uri, target[64];
	int rc;

	memset(p, 0, sizeof(*p));
	if (!dev)
		return -1;
	CU_ASSERT_EQUAL(cci_create_endpoint(dev, 0, &p->srv, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_create_endpoint(dev, 0, &p->cli, cli_fd), CCI_SUCCESS);
	if (!p->srv || !p->cli || !(uri = ep_uri(p->srv)))
		return -1;
	p->srv_port = sk_uri_port(uri);
	free(uri);
	snprintf(target, sizeof(target), "sock://127.0.0.1:%u", p->srv_port);
	if (relay) {
		struct lossy_relay_conf c = *relay;
		c.b_peer = p->srv_port;
		if (lossy_relay_start(&c, &p->relay) != 0) {
			CU_FAIL("cannot start the relay");
			return -1;
		}
		snprintf(target, sizeof(target), "sock://127.0.0.1:%u",
		         lossy_relay_port(p->relay, LOSSY_A));
	}
	rc = cci_connect(p->cli, target, NULL, 0, attr, NULL, 0, &tv);
	CU_ASSERT_EQUAL(rc, CCI_SUCCESS);
	return rc == CCI_SUCCESS ? pair_handshake(p) : -1;
}

void sk_pair_close(struct sk_pair *p)
{
	if (p->cli)
		CU_ASSERT_EQUAL(cci_destroy_endpoint(p->cli), CCI_SUCCESS);
	if (p->srv)
		CU_ASSERT_EQUAL(cci_destroy_endpoint(p->srv), CCI_SUCCESS);
	if (p->relay)
		lossy_relay_stop(p->relay);
	sk_fini();
}

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	return x ^ (x >> 16);
}

uint32_t sk_msg_len(uint32_t seq, uint32_t min, uint32_t max)
{
	return min + mix(seq) % (max - min + 1);
}

void sk_msg_fill(uint32_t seq, uint8_t *buf, uint32_t len)
{
	uint32_t m = mix(seq ^ 0x5a5a5a5au);

	for (uint32_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(m + i * 131u + (i >> 8));
	if (len >= 4)
		memcpy(buf, &seq, 4);
}

int sk_msg_check(uint32_t seq, const uint8_t *buf, uint32_t len, uint32_t min, uint32_t max)
{
	static uint8_t want[1u << 16];

	if (len != sk_msg_len(seq, min, max) || len > sizeof(want))
		return 0;
	sk_msg_fill(seq, want, len);
	return memcmp(want, buf, len) == 0;
}

uint64_t sk_fnv(const void *buf, uint64_t len)
{
	const uint8_t *p = buf;
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint64_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static const struct { const char *name; void (*fn)(void); } tests[] = {
	{ "RO through 5% loss, 1% duplication, 5% reordering: every message once, in order",
	  t_relay_ro_stream },
	{ "RU through the same relay: every message exactly once, as it comes",
	  t_relay_ru_stream },
	{ "UU through the same relay: no message twice, none corrupted", t_relay_uu_no_dups },
	{ "RMA writes of 4 MiB through the relay land intact before their completion",
	  t_relay_rma_write_4m },
	{ "a 2 s blackout in the middle of an RO stream is recovered from",
	  t_relay_blackout_recovers },
	{ "a blackout longer than the keepalive and send timeouts: one KEEPALIVE_TIMEDOUT, "
	  "every pending send fails once", t_relay_blackout_keepalive },
	{ "a receiver that holds its events stops a sender of multi-datagram messages; "
	  "nothing is lost", t_slow_receiver_not_overrun },
	{ "garbage, truncated, replayed and forged datagrams are dropped while a good peer "
	  "works", t_hostile_datagrams },
	{ "a peer restarted on the same port is not mistaken for the old one",
	  t_restarted_peer_not_mistaken },
	{ "a HELLO that comes after its server connection closed posts no second "
	  "CONNECT_REQUEST; one with another token does", t_hello_after_close_posts_no_request },
	{ "a connected client answers an ACCEPT from a second server connection with BYE, "
	  "keeps its own", t_second_accept_answered_with_bye },
	{ "an answer's RECV comes before the SEND completion its ack brings, and that "
	  "completion at the next call, RO and RU", t_ack_after_answer },
	{ "the SEND completion an answer's ack brings wakes a thread asleep on the OS handle",
	  t_ack_wakes_os_handle },
	{ "an ICMP port unreachable quoting our HELLO refuses that connect at once; one "
	  "quoting another token or address does nothing", t_icmp_refuses_its_connect },
	{ "ICMP port unreachable errors for an open connection whose peer answers do not "
	  "break it", t_icmp_does_not_break_open_connection },
	{ "three ICMP port unreachable errors for an open connection whose peer is silent "
	  "break it 200 ms after the first, not before", t_icmp_breaks_silent_peer },
	{ "two ICMP port unreachable errors do not break a connection whose peer is silent; "
	  "a third does", t_icmp_needs_three_errors },
	{ "among 1,000 idle connections, a keepalive set on a silent one fires once and on "
	  "time, a send timeout set on another fails its send on time, a live one's keepalive "
	  "stays quiet", t_due_timers_among_idle },
};

/* After every test, even one a fatal assertion ended: finalize what it
 * left initialised, so that the next one starts from nothing (and finds
 * the devices of its own configuration). */
static void sk_teardown(void)
{
	for (int i = 0; i < 8 && cci_finalize() == CCI_SUCCESS; i++)
		;
}

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	CU_pSuite suite;
	int status;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	suite = CU_add_suite_with_setup_and_teardown("sock transport", NULL, NULL, NULL,
	                                             sk_teardown);
	for (size_t i = 0; suite && i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!only || strstr(tests[i].name, only))
			CU_add_test(suite, tests[i].name, tests[i].fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_set_fail_on_inactive(CU_FALSE);
	CU_basic_run_tests();
	status = unit_exit_status();
	CU_cleanup_registry();
	return status;
}
