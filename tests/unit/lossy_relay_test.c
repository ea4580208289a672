/*
 * lossy_relay_test.c - the UDP relay of the transport tests
 * (tests/common/lossy_relay.h) between two plain sockets on loopback: it
 * forwards both ways, drops at about its rate and the same datagrams for
 * the same seed, duplicates, reorders, delays, and its blackout blocks
 * everything until switched off.  Waits are bounded; the rates are
 * checked within wide margins, the reproducibility exactly.
 */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lossy_relay.h"
#include "unit_run.h"

#define N_MAX 4096

struct peer {
	int fd;
	uint16_t port;
};

static struct peer peer_open(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int big = 1 << 20;
	struct peer p = { .fd = socket(AF_INET, SOCK_DGRAM, 0) };

	CU_ASSERT_FATAL(p.fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(p.fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	CU_ASSERT_FATAL(bind(p.fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	CU_ASSERT_FATAL(getsockname(p.fd, (struct sockaddr *)&a, &al) == 0);
	p.port = ntohs(a.sin_port);
	return p;
}

static void send_num(const struct peer *p, uint16_t to, uint32_t v)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(to) };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_EQUAL(sendto(p->fd, &v, sizeof(v), 0, (struct sockaddr *)&a, sizeof(a)),
	                (ssize_t)sizeof(v));
}

/* Read numbers until quiet_ms pass without one (or max arrive); returns
 * how many, in got[], and the port of the last sender in *from_p. */
static int recv_nums(const struct peer *p, uint32_t *got, int max, int quiet_ms, uint16_t *from_p)
{
	int n = 0;
	struct pollfd pf = { .fd = p->fd, .events = POLLIN };

	while (n < max && poll(&pf, 1, quiet_ms) == 1) {
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		uint32_t v;

		if (recvfrom(p->fd, &v, sizeof(v), 0, (struct sockaddr *)&a, &al) != sizeof(v))
			continue;
		got[n++] = v;
		if (from_p)
			*from_p = ntohs(a.sin_port);
	}
	return n;
}

struct setup {
	struct peer a, b;
	struct lossy_relay *r;
};

static void setup_open(struct setup *s, struct lossy_relay_conf c)
{
	s->a = peer_open();
	s->b = peer_open();
	c.b_peer = s->b.port; /* A is learned from its first datagram */
	CU_ASSERT_EQUAL_FATAL(lossy_relay_start(&c, &s->r), 0);
}

static void setup_close(struct setup *s)
{
	lossy_relay_stop(s->r);
	close(s->a.fd);
	close(s->b.fd);
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The relay took n datagrams from A within 10 s. */
static int took_from_a(struct setup *s, uint64_t n)
{
	uint64_t deadline = mono_ms() + 10000;
	struct lossy_relay_stats st;

	do {
		lossy_relay_get_stats(s->r, &st);
		if (st.received[LOSSY_A] >= n)
			return 1;
		usleep(1000);
	} while (mono_ms() < deadline);
	return 0;
}

/* The relay took all n datagrams from A, holds none of them, and B got
 * every one it sent on (m of them): nothing more is coming. */
static int settled(struct setup *s, int n, int m)
{
	struct lossy_relay_stats st;
	uint64_t gone;

	lossy_relay_get_stats(s->r, &st);
	gone = st.dropped[LOSSY_A] + st.blackout[LOSSY_A];
	return st.received[LOSSY_A] == (uint64_t)n &&
	       st.forwarded[LOSSY_A] == st.received[LOSSY_A] - gone + st.duplicated[LOSSY_A] &&
	       st.forwarded[LOSSY_A] == (uint64_t)m;
}

/* A sends n numbers in batches, B collects what arrives: until the relay
 * has sent on everything it took (10 s at most, for a loaded machine where
 * the relay's thread waits for a core), not until a quiet moment. */
static int a_to_b(struct setup *s, int n, uint32_t *got, int max)
{
	uint64_t deadline = mono_ms() + 10000;
	int m = 0;

	for (int i = 0; i < n; i += 100) {
		for (int j = i; j < i + 100 && j < n; j++)
			send_num(&s->a, lossy_relay_port(s->r, LOSSY_A), (uint32_t)j);
		m += recv_nums(&s->b, got + m, max - m, 30, NULL);
	}
	while (m < max && !settled(s, n, m) && mono_ms() < deadline)
		m += recv_nums(&s->b, got + m, max - m, 20, NULL);
	return m;
}

static void forwards_both_ways_from_its_own_ports(void)
{
	struct setup s;
	struct lossy_relay_stats st;
	uint32_t got[200];
	uint16_t from = 0;
	int n;

	setup_open(&s, (struct lossy_relay_conf){ .seed = 1 });
	for (uint32_t i = 0; i < 100; i++)
		send_num(&s.a, lossy_relay_port(s.r, LOSSY_A), i);
	n = recv_nums(&s.b, got, 200, 200, &from);
	CU_ASSERT_EQUAL(n, 100);
	for (int i = 0; i < n; i++)
		CU_ASSERT_EQUAL(got[i], (uint32_t)i);
	CU_ASSERT_EQUAL(from, lossy_relay_port(s.r, LOSSY_B));
	for (uint32_t i = 0; i < 100; i++)
		send_num(&s.b, from, 1000 + i);
	n = recv_nums(&s.a, got, 200, 200, &from);
	CU_ASSERT_EQUAL(n, 100);
	CU_ASSERT_EQUAL(got[0], 1000);
	CU_ASSERT_EQUAL(from, lossy_relay_port(s.r, LOSSY_A));
	lossy_relay_get_stats(s.r, &st);
	CU_ASSERT_EQUAL(st.forwarded[LOSSY_A], 100);
	CU_ASSERT_EQUAL(st.forwarded[LOSSY_B], 100);
	CU_ASSERT_EQUAL(st.dropped[LOSSY_A] + st.dropped[LOSSY_B], 0);
	setup_close(&s);
}

/* Which of 2000 numbers arrive with 10% loss and this seed. */
static int lossy_run(uint64_t seed, uint8_t *arrived, uint64_t *dropped_p)
{
	static uint32_t got[N_MAX];
	struct setup s;
	struct lossy_relay_stats st;
	int n;

	setup_open(&s, (struct lossy_relay_conf){ .seed = seed, .loss_ppm = 100000 });
	n = a_to_b(&s, 2000, got, N_MAX);
	memset(arrived, 0, 2000);
	for (int i = 0; i < n; i++)
		if (got[i] < 2000)
			arrived[got[i]] = 1;
	lossy_relay_get_stats(s.r, &st);
	*dropped_p = st.dropped[LOSSY_A];
	CU_ASSERT_EQUAL(st.received[LOSSY_A], 2000);
	CU_ASSERT_EQUAL((uint64_t)n, st.forwarded[LOSSY_A]);
	setup_close(&s);
	return n;
}

static void drops_at_its_rate_and_the_same_datagrams_for_a_seed(void)
{
	static uint8_t one[2000], two[2000], other[2000];
	uint64_t d1, d2, d3;
	int n1 = lossy_run(7, one, &d1), n2 = lossy_run(7, two, &d2);

	lossy_run(8, other, &d3);
	CU_ASSERT_TRUE(d1 >= 140 && d1 <= 260); /* 10% of 2000, +-3 sigma */
	CU_ASSERT_EQUAL(n1 + (int)d1, 2000);
	CU_ASSERT_EQUAL(d1, d2);
	CU_ASSERT_EQUAL(n1, n2);
	CU_ASSERT_EQUAL(memcmp(one, two, sizeof(one)), 0);
	CU_ASSERT_NOT_EQUAL(memcmp(one, other, sizeof(one)), 0);
}

static void duplicates_at_its_rate(void)
{
	static uint32_t got[N_MAX];
	static uint8_t times[500];
	struct setup s;
	struct lossy_relay_stats st;
	int n, bad = 0;

	setup_open(&s, (struct lossy_relay_conf){ .seed = 3, .dup_ppm = 200000 });
	n = a_to_b(&s, 500, got, N_MAX);
	lossy_relay_get_stats(s.r, &st);
	CU_ASSERT_EQUAL((uint64_t)n, 500 + st.duplicated[LOSSY_A]);
	CU_ASSERT_TRUE(st.duplicated[LOSSY_A] >= 60 && st.duplicated[LOSSY_A] <= 140);
	for (int i = 0; i < n; i++)
		times[got[i] % 500]++;
	for (int i = 0; i < 500; i++)
		bad += times[i] < 1 || times[i] > 2;
	CU_ASSERT_EQUAL(bad, 0);
	setup_close(&s);
}

static void reorders_by_holding_some_back(void)
{
	static uint32_t got[N_MAX];
	struct setup s;
	struct lossy_relay_stats st;
	int n, inversions = 0;

	setup_open(&s, (struct lossy_relay_conf){ .seed = 4, .reorder_ppm = 200000,
		                                  .reorder_us = 20000 });
	n = a_to_b(&s, 200, got, N_MAX);
	CU_ASSERT_EQUAL(n, 200);
	for (int i = 1; i < n; i++)
		inversions += got[i] < got[i - 1];
	lossy_relay_get_stats(s.r, &st);
	CU_ASSERT_TRUE(st.reordered[LOSSY_A] > 10);
	CU_ASSERT_TRUE(inversions > 0);
	setup_close(&s);
}

static void delays_every_datagram(void)
{
	struct setup s;
	uint32_t got[4];
	uint64_t t0;

	setup_open(&s, (struct lossy_relay_conf){ .seed = 5, .delay_us = 30000 });
	t0 = mono_ms();
	send_num(&s.a, lossy_relay_port(s.r, LOSSY_A), 9);
	CU_ASSERT_EQUAL(recv_nums(&s.b, got, 1, 5000, NULL), 1);
	CU_ASSERT_TRUE(mono_ms() - t0 >= 29);
	setup_close(&s);
}

static void a_blackout_blocks_everything_until_it_ends(void)
{
	struct setup s;
	struct lossy_relay_stats st;
	uint32_t got[64];

	setup_open(&s, (struct lossy_relay_conf){ .seed = 6 });
	lossy_relay_blackout(s.r, 1);
	for (uint32_t i = 0; i < 50; i++)
		send_num(&s.a, lossy_relay_port(s.r, LOSSY_A), i);
	CU_ASSERT_TRUE(took_from_a(&s, 50));
	CU_ASSERT_EQUAL(recv_nums(&s.b, got, 64, 150, NULL), 0);
	lossy_relay_get_stats(s.r, &st);
	CU_ASSERT_EQUAL(st.blackout[LOSSY_A], 50);
	CU_ASSERT_EQUAL(st.forwarded[LOSSY_A], 0);
	lossy_relay_blackout(s.r, 0);
	for (uint32_t i = 0; i < 10; i++)
		send_num(&s.a, lossy_relay_port(s.r, LOSSY_A), 100 + i);
	CU_ASSERT_EQUAL(recv_nums(&s.b, got, 10, 5000, NULL), 10);
	CU_ASSERT_EQUAL(got[0], 100);
	setup_close(&s);
}

static void stops_promptly_with_datagrams_held(void)
{
	struct setup s;
	uint64_t t0;

	setup_open(&s, (struct lossy_relay_conf){ .seed = 7, .delay_us = 5000000 });
	for (uint32_t i = 0; i < 20; i++)
		send_num(&s.a, lossy_relay_port(s.r, LOSSY_A), i);
	usleep(20000);
	t0 = mono_ms();
	setup_close(&s);
	CU_ASSERT_TRUE(mono_ms() - t0 < 2500); /* half the hold: it did not wait */
}

static const struct unit_test tests[] = {
	{ "forwards both ways, from its own port on each side", forwards_both_ways_from_its_own_ports },
	{ "drops at about its rate, the same datagrams for the same seed",
	  drops_at_its_rate_and_the_same_datagrams_for_a_seed },
	{ "duplicates at about its rate, each datagram at most twice", duplicates_at_its_rate },
	{ "reorders by holding some datagrams back", reorders_by_holding_some_back },
	{ "delays every datagram", delays_every_datagram },
	{ "a blackout blocks everything until it ends", a_blackout_blocks_everything_until_it_ends },
	{ "stops promptly with datagrams still held", stops_promptly_with_datagrams_held },
};

int main(void)
{
	return UNIT_RUN("lossy relay", tests);
}
