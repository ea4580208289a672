/*
 * sm_inbox_test.c - how sm's receiver finds the connections with
 * messages among many (plugins/sm/sm_poll.c, sm_inbox.h): messages on one
 * of thousands of idle connections all arrive; bursts on many connections
 * at once, more than a poll's batch on some, arrive once and in order; a
 * receiver asleep on its OS handle wakes for a message on any of many
 * connections; and a peer that clears the inbox (every peer maps it
 * writable) delays messages but never loses one.
 *
 * One process, two endpoints: the receiver (with an OS handle) and the
 * sender, connected N times.  Every wait is bounded in time.
 */
#include <CUnit/Basic.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cci.h"

#define WAIT_MS 20000u /* bound of every wait, far above what is needed */
#define MAX_CONNS 2000u

struct msg {
	uint32_t conn, seq;
};

static struct fix {
	cci_endpoint_t *rx, *tx;
	cci_os_handle_t rx_fd;
	uint32_t n, accepted, connected;
	cci_connection_t *rc[MAX_CONNS], *sc[MAX_CONNS];
	uint32_t sent[MAX_CONNS], next[MAX_CONNS];
	uint64_t received;
	uint32_t disorder, strays; /* out of order or duplicated; unknown */
} f;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void on_recv(cci_event_t *ev)
{
	struct msg m;
	uintptr_t i = (uintptr_t)ev->recv.connection->context;

	if (ev->recv.len != sizeof(m) || i == 0 || i > f.n) {
		f.strays++;
		return;
	}
	memcpy(&m, ev->recv.ptr, sizeof(m));
	if (m.conn != i - 1 || m.seq != f.next[i - 1])
		f.disorder++;
	else
		f.next[i - 1]++;
	f.received++;
}

/* Handle what the receiver has (at most a batch); 1 if it had anything. */
static int pump_rx(void)
{
	int any = 0;

	for (int k = 0; k < 64; k++) {
		cci_event_t *ev = NULL;
		uint32_t idx;

		if (cci_get_event(f.rx, &ev) != CCI_SUCCESS)
			break;
		any = 1;
		switch (ev->type) {
		case CCI_EVENT_CONNECT_REQUEST:
			memcpy(&idx, ev->request.data_ptr, sizeof(idx));
			cci_accept(ev, (void *)(uintptr_t)(idx + 1));
			break;
		case CCI_EVENT_ACCEPT:
			if (ev->accept.status == CCI_SUCCESS) {
				uintptr_t i = (uintptr_t)ev->accept.context;
				f.rc[i - 1] = ev->accept.connection;
				f.accepted++;
			}
			break;
		case CCI_EVENT_RECV:
			on_recv(ev);
			break;
		default:
			break;
		}
		cci_return_event(ev);
	}
	return any;
}

static void pump_tx(void)
{
	for (int k = 0; k < 64; k++) {
		cci_event_t *ev = NULL;

		if (cci_get_event(f.tx, &ev) != CCI_SUCCESS)
			break;
		if (ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_SUCCESS) {
			uintptr_t i = (uintptr_t)ev->connect.context;
			f.sc[i - 1] = ev->connect.connection;
			f.connected++;
		}
		cci_return_event(ev);
	}
}

/* Two endpoints and n connections from the sender to the receiver. */
static int fix_up(uint32_t n, uint32_t recv_buf_count)
{
	cci_device_t *const *devs = NULL;
	char *uri = NULL;
	uint32_t asked = 0;
	uint64_t stop = now_ms() + WAIT_MS;

	memset(&f, 0, sizeof(f));
	f.n = n;
	if (cci_get_devices(&devs) != CCI_SUCCESS || !devs[0] ||
	    cci_create_endpoint(devs[0], 0, &f.rx, &f.rx_fd) != CCI_SUCCESS ||
	    cci_create_endpoint(devs[0], 0, &f.tx, NULL) != CCI_SUCCESS)
		return -1;
	if (recv_buf_count &&
	    cci_set_opt(f.rx, CCI_OPT_ENDPT_RECV_BUF_COUNT, &recv_buf_count) != CCI_SUCCESS)
		return -1;
	if (cci_get_opt(f.rx, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS)
		return -1;
	while ((f.accepted < n || f.connected < n) && now_ms() < stop) {
		/* at most 128 connects outstanding */
		while (asked < n && asked - f.connected < 128) {
			if (cci_connect(f.tx, uri, &asked, sizeof(asked), CCI_CONN_ATTR_RO,
			                (void *)(uintptr_t)(asked + 1), 0, NULL) != CCI_SUCCESS)
				break;
			asked++;
		}
		pump_rx();
		pump_tx();
	}
	free(uri);
	/* Drain what opening left (the pending reads of new rings). */
	for (int i = 0; i < 100; i++)
		pump_rx();
	return f.accepted == n && f.connected == n ? 0 : -1;
}

static void fix_down(void)
{
	if (f.tx)
		cci_destroy_endpoint(f.tx);
	if (f.rx)
		cci_destroy_endpoint(f.rx);
	f.tx = f.rx = NULL;
}

/* Send the next message on connection i (silent: no event to reap),
 * polling the receiver while the sender has no buffer. */
static int send_next(uint32_t i)
{
	struct msg m = { i, f.sent[i] };
	uint64_t stop = now_ms() + WAIT_MS;
	int rc;

	while ((rc = cci_send(f.sc[i], &m, sizeof(m), NULL, CCI_FLAG_SILENT)) == CCI_ENOBUFS &&
	       now_ms() < stop)
		pump_rx();
	if (rc == CCI_SUCCESS)
		f.sent[i]++;
	return rc;
}

static int wait_received(uint64_t total)
{
	uint64_t stop = now_ms() + WAIT_MS;

	while (f.received < total && now_ms() < stop)
		pump_rx();
	return f.received == total;
}

static void test_one_of_many(void)
{
	static const uint32_t which[] = { 0, 1999, 777, 1234, 3, 0 };
	uint64_t total = 0;

	CU_ASSERT_FATAL(fix_up(MAX_CONNS, 0) == 0);
	for (unsigned k = 0; k < sizeof(which) / sizeof(which[0]); k++) {
		for (int j = 0; j < 100; j++)
			CU_ASSERT_EQUAL_FATAL(send_next(which[k]), CCI_SUCCESS);
		total += 100;
		CU_ASSERT_FATAL(wait_received(total));
	}
	CU_ASSERT_EQUAL(f.next[0], 200);
	CU_ASSERT_EQUAL(f.next[1999], 100);
	CU_ASSERT_EQUAL(f.next[777], 100);
	CU_ASSERT_EQUAL(f.next[1], 0);
	CU_ASSERT_EQUAL(f.disorder, 0);
	CU_ASSERT_EQUAL(f.strays, 0);
	fix_down();
}

/* Bursts on 300 connections at once, 200 messages on every tenth (more
 * than a poll takes from a ring), one to three on the others, sent before
 * the receiver looks: each arrives once, in order on its connection. */
static void test_many_at_once(void)
{
	enum { N = 300 };
	uint32_t want[N], most = 0;
	uint64_t total = 0;

	CU_ASSERT_FATAL(fix_up(N, 256) == 0);
	for (uint32_t i = 0; i < N; i++) {
		want[i] = i % 10 == 0 ? 200 : i % 3 + 1;
		total += want[i];
		most = want[i] > most ? want[i] : most;
	}
	for (uint32_t r = 0; r < most; r++)
		for (uint32_t i = 0; i < N; i++)
			if (r < want[i])
				CU_ASSERT_EQUAL_FATAL(send_next(i), CCI_SUCCESS);
	CU_ASSERT(wait_received(total));
	for (uint32_t i = 0; i < N; i++)
		if (f.next[i] != want[i]) {
			CU_FAIL("a connection lost or repeated messages");
			printf("\n    connection %u: %u of %u\n", i, f.next[i], want[i]);
			break;
		}
	CU_ASSERT_EQUAL(f.disorder, 0);
	CU_ASSERT_EQUAL(f.strays, 0);
	fix_down();
}

/* ------------------------------------------------------------------------ */

#define SLEEP_ROUNDS 24
static _Atomic int armed_round = -1, quit;

/* Waits until the receiver armed for round r, then sends round r's
 * message on a connection of its own, a while later. */
static void *sleeper_sender(void *arg)
{
	(void)arg;
	for (int r = 0; r < SLEEP_ROUNDS && !atomic_load(&quit); r++) {
		uint64_t stop = now_ms() + WAIT_MS;
		while (atomic_load(&armed_round) < r && !atomic_load(&quit) && now_ms() < stop)
			usleep(200);
		struct msg m;
		uint32_t i = (uint32_t)(r * 41) % f.n;
		usleep(2000);
		m.conn = i;
		m.seq = f.sent[i]++; /* this thread's alone meanwhile */
		cci_send(f.sc[i], &m, sizeof(m), NULL, CCI_FLAG_SILENT);
	}
	return NULL;
}

static void test_sleeper_wakes(void)
{
	pthread_t t;
	int r = 0;
	uint64_t stop;

	CU_ASSERT_FATAL(fix_up(1000, 0) == 0);
	CU_ASSERT_FATAL(pthread_create(&t, NULL, sleeper_sender, NULL) == 0);
	stop = now_ms() + WAIT_MS;
	while (r < SLEEP_ROUNDS && now_ms() < stop) {
		struct pollfd p = { .fd = f.rx_fd, .events = POLLIN };
		int rc;

		while (pump_rx())
			;
		if (f.received > (uint64_t)r) {
			r++;
			continue;
		}
		rc = cci_arm_os_handle(f.rx, 0);
		if (rc == CCI_EAGAIN)
			continue;
		CU_ASSERT_EQUAL_FATAL(rc, CCI_SUCCESS);
		atomic_store(&armed_round, r);
		if (poll(&p, 1, 5000) != 1) {
			CU_FAIL("armed, the OS handle stayed quiet for 5 s while a message came");
			break;
		}
	}
	atomic_store(&quit, 1);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(r, SLEEP_ROUNDS);
	CU_ASSERT_EQUAL(f.disorder, 0);
	fix_down();
}

/* ------------------------------------------------------------------------ */

/* Zero every mapping of an sm inbox in this process (the receiver's own,
 * the sender's of it, and the sender's own and its peer's mappings): what
 * a peer that clears bits does.  The number of mappings. */
static int inboxes_clear(void)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!m)
		return -1;
	while (fgets(line, sizeof(line), m)) {
		uintptr_t lo, hi;
		if (!strstr(line, "cci-sm-inbox") || sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) != 2)
			continue;
		memset((void *)lo, 0, hi - lo);
		n++;
	}
	fclose(m);
	return n;
}

static void test_cleared_inbox_delays_only(void)
{
	uint64_t stop;

	CU_ASSERT_FATAL(fix_up(1000, 0) == 0);
	for (uint32_t r = 0; r < 20; r++) {
		uint32_t i = (r * 53 + 11) % f.n; /* a connection not used before */
		CU_ASSERT_EQUAL_FATAL(send_next(i), CCI_SUCCESS);
		stop = now_ms() + WAIT_MS;
		while (f.received < r + 1 && now_ms() < stop) {
			CU_ASSERT_FATAL(inboxes_clear() >= 2);
			pump_rx();
		}
		CU_ASSERT_FATAL(f.received == r + 1);
		CU_ASSERT_EQUAL(f.next[i], 1);
	}
	/* And the inbox works again once left alone. */
	for (int j = 0; j < 50; j++)
		CU_ASSERT_EQUAL_FATAL(send_next(500), CCI_SUCCESS);
	CU_ASSERT(wait_received(20 + 50));
	CU_ASSERT_EQUAL(f.disorder, 0);
	CU_ASSERT_EQUAL(f.strays, 0);
	fix_down();
}

int main(void)
{
	CU_pSuite s;
	unsigned failed;

	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_set_fail_on_inactive(CU_FALSE);
	s = CU_add_suite("sm inbox", NULL, NULL);
	CU_add_test(s, "messages on one of 2,000 connections all arrive while the others are idle",
	            test_one_of_many);
	CU_add_test(s, "bursts on 300 connections at once, over a batch on some, arrive once and "
	            "in order", test_many_at_once);
	CU_add_test(s, "a receiver asleep on its OS handle wakes for a message on any of 1,000 "
	            "connections", test_sleeper_wakes);
	CU_add_test(s, "a peer clearing the inbox delays messages but loses none",
	            test_cleared_inbox_delays_only);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	cci_finalize();
	return failed ? 1 : 0;
}
