/*
 * t_burst.c - tcp bursts: a polling application's burst of small sends is
 * held and written at once (plugins/tcp/tcp_tx.c).  Whatever the
 * sender does after the burst (nothing at all, or only sleeping), every
 * message reaches the peer, in order and intact, without another library
 * call; with progress=manual nothing is held back in the first place.
 * Held frames are copied even with CCI_FLAG_NO_COPY, so a sender that
 * reuses its buffer at once does not change a message it sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_test.h"

#define BURST_N 300u       /* messages of one burst */
#define BURST_BIG_EVERY 50 /* every 50th, from the 26th, is big: queued behind held ones */
#define BURST_BIG 6000u

/* The message of sequence number i: its length and a byte pattern the
 * receiver checks. */
static uint32_t burst_len(uint32_t i)
{
	return i % BURST_BIG_EVERY == BURST_BIG_EVERY / 2 ? BURST_BIG : 8 + i % 40;
}

static void burst_fill(uint8_t *buf, uint32_t i)
{
	uint32_t len = burst_len(i);

	memcpy(buf, &i, sizeof(i));
	for (uint32_t k = sizeof(i); k < len; k++)
		buf[k] = (uint8_t)(i * 7 + k);
}

static int burst_check(const uint8_t *buf, uint32_t len, uint32_t want)
{
	uint32_t i;

	if (len != burst_len(want) || len < sizeof(i))
		return 0;
	memcpy(&i, buf, sizeof(i));
	if (i != want)
		return 0;
	for (uint32_t k = sizeof(i); k < len; k++)
		if (buf[k] != (uint8_t)(i * 7 + k))
			return 0;
	return 1;
}

/* The peer: accept one client, then count messages in order for at most
 * 10 s and report "got N" (N: messages before the first one out of place
 * or corrupt, or before the time ran out). */
static int burst_srv(int rfd, int wfd, void *arg)
{
	cci_device_t *dev = st_init("127.0.0.1");
	cci_endpoint_t *ep;
	cci_connection_t *c;
	char *uri, line[32];
	uint32_t got = 0;
	int bad = 0;

	(void)rfd;
	(void)arg;
	if (!dev || !(ep = st_endpoint(dev)) || !(uri = st_uri(ep)))
		return 11;
	st_write_line(wfd, uri);
	free(uri);
	if (!(c = st_accept(ep, 5000)))
		return 12;
	for (uint64_t stop = st_now_ms() + 10000; got < BURST_N && !bad && st_now_ms() < stop;) {
		cci_event_t *ev = st_wait(ep, CCI_EVENT_RECV, 100, NULL);
		if (!ev)
			continue;
		if (burst_check(ev->recv.ptr, ev->recv.len, got))
			got++;
		else
			bad = 1;
		cci_return_event(ev);
	}
	snprintf(line, sizeof(line), "got %u", got);
	st_write_line(wfd, line);
	return 0;
}

/*
 * Connect to the peer ch over dev, poll once (so that the endpoint is in
 * the application's hands, not the progress thread's), send the burst
 * without polling (the small messages with small_flags besides SILENT),
 * then call nothing: the peer must report every message.
 */
static void burst_reaches_peer(struct st_child *ch, cci_device_t *dev, int small_flags)
{
	static uint8_t buf[BURST_BIG];
	cci_endpoint_t *ep;
	cci_connection_t *c;
	cci_event_t *ev;
	char uri[128], line[32], want[32];
	int st;

	CU_ASSERT_PTR_NOT_NULL_FATAL(dev);
	ep = st_endpoint(dev);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ep);
	CU_ASSERT_EQUAL_FATAL(st_read_line(ch->rfd, uri, sizeof(uri), 10000), 0);
	c = st_connect(ep, uri, CCI_CONN_ATTR_RO, 10000, &st);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	if (cci_get_event(ep, &ev) == CCI_SUCCESS)
		cci_return_event(ev);
	for (uint32_t i = 0; i < BURST_N; i++) {
		int rc;
		burst_fill(buf, i);
		/* SILENT: no completion to reap, so no reason to poll; a
		 * sender short of send buffers makes progress in cci_send. */
		int flags = CCI_FLAG_SILENT | (burst_len(i) < BURST_BIG ? small_flags : 0);
		for (int k = 0; (rc = cci_send(c, buf, burst_len(i), NULL, flags)) == CCI_ENOBUFS &&
		                k < 1000000; k++)
			;
		CU_ASSERT_EQUAL_FATAL(rc, CCI_SUCCESS);
	}
	/* No library call from here until the peer has answered. */
	CU_ASSERT_EQUAL(st_read_line(ch->rfd, line, sizeof(line), 15000), 0);
	snprintf(want, sizeof(want), "got %u", BURST_N);
	printf("[peer: %s of %u] ", line, BURST_N);
	CU_ASSERT_STRING_EQUAL(line, want);
	CU_ASSERT_EQUAL(st_reap(ch, 10000), 0);
	st_fini(ep);
}

static void burst_without_a_later_call(void)
{
	struct st_child ch;

	st_spawn(&ch, burst_srv, NULL);
	burst_reaches_peer(&ch, st_init("127.0.0.1"), 0);
}

/* The buffer is rewritten for the next message as soon as cci_send
 * returns: a held frame that still pointed at it would arrive changed. */
static void no_copy_burst_from_one_buffer(void)
{
	struct st_child ch;

	st_spawn(&ch, burst_srv, NULL);
	burst_reaches_peer(&ch, st_init("127.0.0.1"), CCI_FLAG_NO_COPY);
}

static void manual_burst_without_a_later_call(void)
{
	struct st_child ch;

	st_spawn(&ch, burst_srv, NULL);
	burst_reaches_peer(&ch,
	                   st_init_conf("[m]\ntransport = tcp\nip = 127.0.0.1\nprogress = manual\n"),
	                   0);
}

int st_add_burst_tests(void)
{
	CU_pSuite s = CU_add_suite_with_setup_and_teardown("bursts", NULL, NULL, NULL,
	                                                   st_teardown);

	return !s ||
	       !CU_add_test(s, "a burst with no library call after it reaches the peer whole and "
	                       "in order",
	                    burst_without_a_later_call) ||
	       !CU_add_test(s, "progress=manual: a burst with no library call after it reaches "
	                       "the peer whole and in order",
	                    manual_burst_without_a_later_call) ||
	       !CU_add_test(s, "a burst of small NO_COPY sends from one reused buffer arrives as "
	                       "sent (held frames are copied)",
	                    no_copy_burst_from_one_buffer);
}
