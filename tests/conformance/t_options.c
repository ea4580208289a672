/*
 * t_options.c - cci_get_opt/cci_set_opt for all eight options, and the
 * buffer counts doing what they say.
 */
#include "tests.h"

#include "proto.h"
#include "server.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void uri_is_a_fresh_malloc_copy(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	char *a = h_uri(ep), *b = h_uri(ep);

	CHECK(a != b);
	CHECK(strcmp(a, b) == 0);
	a[0] = 'X'; /* ours to modify */
	free(a);
	free(b);
	h_teardown(ep);
}

static int pow2_or_zero(uint32_t v)
{
	return (v & (v - 1)) == 0;
}

static void rma_align_reads_powers_of_two(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	cci_alignment_t a;

	memset(&a, 0xff, sizeof(a));
	REQUIRE_RC(cci_get_opt(ep, CCI_OPT_ENDPT_RMA_ALIGN, &a), CCI_SUCCESS);
	CHECK(pow2_or_zero(a.rma_write_local_addr) && pow2_or_zero(a.rma_write_remote_addr));
	CHECK(pow2_or_zero(a.rma_write_length) && pow2_or_zero(a.rma_read_local_addr));
	CHECK(pow2_or_zero(a.rma_read_remote_addr) && pow2_or_zero(a.rma_read_length));
	h_teardown(ep);
}

static void get_only_options_refuse_set(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	cci_alignment_t a = { 0 };
	const char *uri = "sm:///tmp/x/1/1";

	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_URI, &uri), CCI_EINVAL);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_RMA_ALIGN, &a), CCI_EINVAL);
	h_teardown(ep);
}

static void set_get_u32(cci_opt_handle_t *h, cci_opt_name_t name, uint32_t v)
{
	uint32_t got = v + 1;

	CHECKF(cci_set_opt(h, name, &v) == CCI_SUCCESS, "set option %d to %u", name, v);
	CHECKF(cci_get_opt(h, name, &got) == CCI_SUCCESS && got == v,
	       "option %d reads %u after setting %u", name, got, v);
}

static void endpoint_timeouts_read_back(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);

	set_get_u32(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, 1234567);
	set_get_u32(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, 0);
	set_get_u32(ep, CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT, 7654321);
	set_get_u32(ep, CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT, 0);
	h_teardown(ep);
}

static void buffer_count(cci_endpoint_t *ep, cci_opt_name_t name)
{
	uint32_t cur = 0, zero = 0, huge = UINT32_MAX, got = 0;

	CHECK_RC(cci_get_opt(ep, name, &cur), CCI_SUCCESS);
	CHECKF(cur > 0, "option %d is 0 on a new endpoint", name);
	set_get_u32(ep, name, 16);
	CHECK_RC2(cci_set_opt(ep, name, &zero), CCI_ERANGE, CCI_EINVAL);
	CHECK_RC(cci_set_opt(ep, name, &huge), CCI_ERANGE);
	CHECK_RC(cci_get_opt(ep, name, &got), CCI_SUCCESS);
	CHECKF(got == 16, "a refused set changed option %d to %u", name, got);
}

static void buffer_counts_set_and_read_back(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);

	buffer_count(ep, CCI_OPT_ENDPT_RECV_BUF_COUNT);
	buffer_count(ep, CCI_OPT_ENDPT_SEND_BUF_COUNT);
	h_teardown(ep);
}

static void connections_inherit_and_set_timeouts(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint32_t send_to = 7000000, ka = 60000000, got = 0;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &send_to), CCI_SUCCESS);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT, &ka), CCI_SUCCESS);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	CHECK_RC(cci_get_opt(c, CCI_OPT_CONN_SEND_TIMEOUT, &got), CCI_SUCCESS);
	CHECKF(got == send_to, "CONN_SEND_TIMEOUT is %u, the endpoint's is %u", got, send_to);
	CHECK_RC(cci_get_opt(c, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, &got), CCI_SUCCESS);
	CHECKF(got == ka, "CONN_KEEPALIVE_TIMEOUT is %u, the endpoint's is %u", got, ka);
	set_get_u32(c, CCI_OPT_CONN_SEND_TIMEOUT, 2500000);
	set_get_u32(c, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, 30000000);
	set_get_u32(c, CCI_OPT_CONN_KEEPALIVE_TIMEOUT, 0);
	srv_stop_and_teardown(&s, NULL, ep);
}

static void unknown_option_is_einval(void)
{
	cci_endpoint_t *ep = h_endpoint(h_setup(), NULL);
	uint64_t v[8] = { 0 };

	CHECK_RC(cci_get_opt(ep, (cci_opt_name_t)99, v), CCI_EINVAL);
	CHECK_RC(cci_set_opt(ep, (cci_opt_name_t)99, v), CCI_EINVAL);
	CHECK_RC(cci_get_opt(ep, (cci_opt_name_t)-1, v), CCI_EINVAL);
	CHECK_RC(cci_set_opt(ep, (cci_opt_name_t)-1, v), CCI_EINVAL);
	h_teardown(ep);
}

/* Send n RO messages of len bytes (at most SEND_FOR_MAX) for up to ms,
 * without waiting on ENOBUFS. */
#define SEND_FOR_MAX 65536u
static uint32_t send_len_for(cci_endpoint_t *ep, cci_connection_t *c, uint32_t len,
                             uint32_t from, uint32_t n, unsigned ms, struct h_sendctr *ctr)
{
	uint64_t stop = h_now_ms() + ms;
	static uint8_t buf[SEND_FOR_MAX];
	uint32_t seq = from;

	while (seq < n && h_now_ms() < stop) {
		int rc;

		proto_build(buf, len, 0, seq, PROTO_DATA);
		rc = cci_send(c, buf, len, h_ctx(seq), 0);
		if (rc == CCI_SUCCESS)
			seq++;
		else if (!CHECK_RC2(rc, CCI_SUCCESS, CCI_ENOBUFS))
			break;
		h_pump(ep, ctr);
	}
	return seq;
}

/*
 * A server with ENDPT_RECV_BUF_COUNT count holds every RECV event; the
 * client sends total messages of len bytes (0: max_send_size, at most
 * SEND_FOR_MAX).  The server must come to hold exactly count (and, with
 * want_enobufs, be told CCI_ENOBUFS), then get them all in order once it
 * lets go.
 */
static void hold_events(uint32_t count, uint32_t len, uint32_t total, int want_enobufs)
{
	struct srv s;
	struct srv_opts o = { .recv_buf_count = count, .hold = 1000 };
	struct srv_stats st;
	struct h_sendctr ctr;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint32_t sent, to = 30000000;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &to), CCI_SUCCESS);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	if (len == 0)
		len = c->max_send_size < SEND_FOR_MAX ? c->max_send_size : SEND_FOR_MAX;
	h_sendctr_init(&ctr, total);
	sent = send_len_for(ep, c, len, 0, total, 1500, &ctr);
	/* Until the server holds all it may and was refused more (bounded):
	 * a server that a busy machine runs late must not look like a wrong
	 * count.  The client pumps and sends meanwhile, so queued sends
	 * reach it. */
	for (uint64_t stop = h_now_ms() + 10000;;) {
		for (int i = 0; i < 20; i++)
			if (!h_pump(ep, &ctr))
				h_sleep_ms(1);
		sent = send_len_for(ep, c, len, sent, total, 10, &ctr);
		srv_snapshot(&s, &st);
		if ((st.max_held >= count && (st.enobufs > 0 || !want_enobufs)) ||
		    h_now_ms() > stop)
			break;
	}
	CHECKF(st.max_held == count, "the server held %llu receive events of %u bytes at most "
	       "with ENDPT_RECV_BUF_COUNT %u", (unsigned long long)st.max_held, len, count);
	if (want_enobufs)
		CHECKF(st.enobufs > 0, "holding every receive buffer, cci_get_event never "
		       "returned CCI_ENOBUFS");
	srv_cmd(&s, SRV_CMD_RELEASE, 0);
	sent = send_len_for(ep, c, len, sent, total, 10000, &ctr);
	CHECK(sent == total);
	h_drain(ep, &ctr, sent, 10000);
	CHECK(ctr.ok == total && ctr.err == 0);
	srv_stop_and_teardown(&s, &st, ep);
	CHECK(st.recvs == total && st.order_errors == 0 && st.corrupt == 0);
	h_sendctr_free(&ctr);
}

static void recv_buf_count_bounds_held_events(void)
{
	hold_events(8, 64, 64, 1);
}

/* The count is what the application may hold, whatever the size: 64
 * events of max_send_size from one connection (sm's sender keeps to a
 * window of its ring, smaller than that, until the receiver says its
 * application holds records back). */
static void recv_buf_count_holds_full_size_events(void)
{
	hold_events(64, 0, 96, 0);
}

static void send_buf_count_bounds_sends_in_flight(void)
{
	struct srv s;
	struct srv_opts o = { 0 };
	struct h_sendctr ctr;
	cci_endpoint_t *ep;
	cci_connection_t *c;
	uint32_t four = 4, to = 30000000, seq = 0;
	uint8_t buf[64] = { 0 };
	int rc = CCI_SUCCESS;

	srv_start(&s, &o);
	ep = h_endpoint(h_setup(), NULL);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_BUF_COUNT, &four), CCI_SUCCESS);
	CHECK_RC(cci_set_opt(ep, CCI_OPT_ENDPT_SEND_TIMEOUT, &to), CCI_SUCCESS);
	c = h_connect(ep, s.uri, CCI_CONN_ATTR_RO, NULL, 0, NULL);
	kill(s.peer.pid, SIGSTOP);
	h_sendctr_init(&ctr, 1u << 20);
	for (uint64_t stop = h_now_ms() + 8000; h_now_ms() < stop && seq < (1u << 20);) {
		h_pump(ep, &ctr);
		rc = cci_send(c, buf, sizeof(buf), h_ctx(seq), 0);
		if (rc != CCI_SUCCESS)
			break;
		seq++;
	}
	CHECK_RC(rc, CCI_ENOBUFS);
	CHECKF(seq - ctr.ok - ctr.err <= 4, "%llu sends in flight with "
	       "ENDPT_SEND_BUF_COUNT 4", (unsigned long long)(seq - ctr.ok - ctr.err));
	h_peer_kill(&s.peer);
	h_sendctr_free(&ctr);
	h_teardown(ep);
}

const struct h_test t_options_tests[] = {
	{ "ENDPT_URI returns a fresh malloc'd copy the caller frees",
	  uri_is_a_fresh_malloc_copy, H_NEEDS_DEVICE, 0 },
	{ "ENDPT_RMA_ALIGN reads alignments that are 0 or powers of two",
	  rma_align_reads_powers_of_two, H_NEEDS_DEVICE, 0 },
	{ "setting the get-only ENDPT_URI or ENDPT_RMA_ALIGN fails with CCI_EINVAL",
	  get_only_options_refuse_set, H_NEEDS_DEVICE, 0 },
	{ "endpoint send and keepalive timeouts read back what was set",
	  endpoint_timeouts_read_back, H_NEEDS_DEVICE, 0 },
	{ "recv and send buffer counts are set and read back; 0 and 2^32-1 are refused",
	  buffer_counts_set_and_read_back, H_NEEDS_DEVICE, 0 },
	{ "connections inherit the endpoint timeouts and set their own",
	  connections_inherit_and_set_timeouts, H_NEEDS_DEVICE, 0 },
	{ "an unknown option name fails get and set with CCI_EINVAL",
	  unknown_option_is_einval, H_NEEDS_DEVICE, 0 },
	{ "with ENDPT_RECV_BUF_COUNT 8 the application holds at most 8 receive events",
	  recv_buf_count_bounds_held_events, H_NEEDS_DEVICE, 0 },
	{ "with ENDPT_RECV_BUF_COUNT 64 the application holds 64 events of max_send_size",
	  recv_buf_count_holds_full_size_events, H_NEEDS_DEVICE, 0 },
	{ "with ENDPT_SEND_BUF_COUNT 4 at most 4 sends are in flight before CCI_ENOBUFS",
	  send_buf_count_bounds_sends_in_flight, H_NEEDS_DEVICE, 0 },
};
const size_t t_options_count = sizeof(t_options_tests) / sizeof(t_options_tests[0]);
