/*
 * connstorm.c - connections per second, and what a message costs with
 * many connections open.  One client endpoint opens N reliable-ordered
 * connections to one server endpoint with at most W connects outstanding,
 * then runs an 8-byte ping-pong on the last one, for each N of a list.
 * Public API (cci.h) only.
 *
 *   connstorm [-n LIST] [-w W] [-i ITERS] [-b] [-k MS] [-I S] [-D DEV] [--json]
 *                                                                 (forks its server)
 *   connstorm -s [-o FILE] [-b] [-D DEV]                          (server)
 *   connstorm -h URI [-n LIST] [-w W] [-i ITERS] [-b] [--json]      (client)
 *
 * Each row gives the connects per second, the one-way latency with N
 * connections open, and the descriptors and KiB of resident memory that
 * each connection costs the client and the server.  With -b both sides
 * sleep on the OS handle (CCI 2's blocking loop: epoll, then
 * cci_get_event until CCI_EAGAIN) and the row counts the sleeps that
 * outlasted a second while an event was waiting (missed wake-ups; there
 * must be none): "connstorm -n 1 -i 1000000 -b" is a million blocking
 * round trips.  With -k every client connection gets that keepalive
 * period; with -I the client then leaves the library alone for that many
 * seconds and the row gives the share of a core the process used
 * meanwhile (its progress threads keeping the connections: "idle is
 * free" means well under 1%).  With -r the last connection then streams
 * that many 8-byte messages, which the server echoes, at most 64
 * unanswered: the echoes per second, the message rate to pair with the
 * one of a single connection.
 *
 * With -c CYCLES the client churns instead: CYCLES times it connects,
 * sends one 8-byte ping, takes its echo and disconnects (at most W at a
 * time), against a server that never calls cci_disconnect on them (CCI
 * has no disconnect event: a server often cannot know).  It prints the
 * server's descriptors and KiB of resident memory above its idle level
 * after each tenth of the cycles (they must stay flat: what a peer that
 * left costs is the connection object the application still holds).
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf_util.h"

#define CS_MAGIC 0x73746f726d636373ull /* no 8-byte ping holds it */
#define CS_MAX_CONNS 1000000u
#define CS_TIMEOUT_S 120   /* a connect's, and the longest wait for any event */

enum cs_ctl { CS_STATS = 1, CS_STATS_REP, CS_DONE, CS_PEEK };

/* A control message; pings are 8 bytes, so never mistaken for one. */
struct cs_msg {
	uint64_t magic;
	uint32_t type, pad;
	int64_t fds, rss_kib; /* CS_STATS_REP: the server's, above its idle level */
};

struct cs {
	bool json, blocking, used;
	const char *uri, *outfile, *device;
	uint32_t window, iters;
	uint32_t keepalive_ms, idle_s, cycles;
	uint32_t rate_msgs;         /* -r: 8-byte messages streamed on the last connection */
	double rate;                /* ... and the echoes per second they came back at */
	uint32_t counts[16], ncounts;
	cci_endpoint_t *ep;
	int epfd;
	uint64_t sleeps, missed;
	cci_connection_t **conns;
	uint32_t nconns, outstanding, failed;
	int first_fail;
};

/* Open descriptors of this process. */
static int64_t fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int64_t n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", ".." and the directory's own descriptor */
}

/* Resident memory, in KiB. */
static int64_t rss_kib(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A process that holds thousands of connections needs the descriptors:
 * raise the limit (root may raise the hard one too). */
static void raise_fd_limit(uint64_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	if (rl.rlim_max < want) {
		struct rlimit more = { want, want };
		if (setrlimit(RLIMIT_NOFILE, &more) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/* ------------------------------------------------------------- events */

/* One event, waiting at most CS_TIMEOUT_S.  Blocking: sleep in epoll for
 * at most a second at a time; a sleep that timed out while an event was
 * there is a missed wake-up. */
static cci_event_t *cs_wait(struct cs *c)
{
	uint64_t deadline = perf_now_ns() + (uint64_t)CS_TIMEOUT_S * 1000000000ull;
	cci_event_t *ev;
	int slept_out = 0;

	for (;;) {
		int rc = cci_get_event(c->ep, &ev);

		if (rc == CCI_SUCCESS) {
			c->missed += slept_out;
			return ev;
		}
		if (rc != CCI_EAGAIN && rc != CCI_ENOBUFS)
			perf_check(rc, "cci_get_event");
		if (perf_now_ns() > deadline)
			perf_die("no event for %d s: the peer is gone or stuck", CS_TIMEOUT_S);
		if (c->blocking) {
			struct epoll_event e;
			c->sleeps++;
			slept_out = epoll_wait(c->epfd, &e, 1, 1000) == 0;
		}
	}
}

static void cs_open(struct cs *c)
{
	cci_os_handle_t fd = -1;
	uint32_t caps;
	cci_device_t *dev = NULL;

	perf_check(cci_init(CCI_ABI_VERSION, 0, &caps), "cci_init");
	if (c->device)
		dev = perf_find_device(c->device);
	perf_check(cci_create_endpoint(dev, 0, &c->ep, c->blocking ? &fd : NULL),
	           "cci_create_endpoint");
	perf_set_ep(c->ep);
	if (c->blocking) {
		struct epoll_event e = { .events = EPOLLIN };
		c->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (c->epfd < 0 || epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &e) != 0)
			perf_die("epoll on the OS handle: %s", strerror(errno));
	}
}

static void cs_close(struct cs *c)
{
	if (c->blocking)
		close(c->epfd);
	perf_check(cci_destroy_endpoint(c->ep), "cci_destroy_endpoint");
	perf_check(cci_finalize(), "cci_finalize");
	free(c->conns);
}

static const struct cs_msg *cs_ctl_of(cci_event_t *ev)
{
	return perf_ctl_payload(ev, sizeof(struct cs_msg), CS_MAGIC);
}

static void cs_send(cci_connection_t *conn, const void *buf, uint32_t len, int flags)
{
	perf_check(cci_send(conn, buf, len, NULL, flags), "cci_send");
}

/* ------------------------------------------------------------- server */

/* Accept everything, echo pings; CS_STATS answers with what the
 * connections cost, then closes them all; CS_PEEK answers the same and
 * closes none; CS_DONE ends. */
static void cs_serve(struct cs *c)
{
	int64_t fds0 = fd_count(), rss0 = rss_kib();
	bool done = false;

	c->conns = calloc(CS_MAX_CONNS, sizeof(*c->conns));
	if (!c->conns)
		perf_die("out of memory");
	while (!done) {
		cci_event_t *ev = cs_wait(c);
		const struct cs_msg *m;

		switch (ev->type) {
		case CCI_EVENT_CONNECT_REQUEST:
			perf_check(cci_accept(ev, NULL), "cci_accept");
			break;
		case CCI_EVENT_ACCEPT:
			perf_check(ev->accept.status, "the ACCEPT event");
			if (c->nconns < CS_MAX_CONNS)
				c->conns[c->nconns++] = ev->accept.connection;
			break;
		case CCI_EVENT_RECV:
			m = cs_ctl_of(ev);
			if (!m) {
				cs_send(ev->recv.connection, ev->recv.ptr, ev->recv.len, CCI_FLAG_SILENT);
			} else if (m->type == CS_STATS || m->type == CS_PEEK) {
				struct cs_msg r = { CS_MAGIC, CS_STATS_REP, 0, fd_count() - fds0,
				                    rss_kib() - rss0 };
				cs_send(ev->recv.connection, &r, sizeof(r), CCI_FLAG_BLOCKING);
				for (uint32_t i = 0; m->type == CS_STATS && i < c->nconns; i++)
					perf_check(cci_disconnect(c->conns[i]), "cci_disconnect");
				if (m->type == CS_STATS)
					c->nconns = 0;
			} else {
				done = true;
			}
			break;
		default:
			break;
		}
		perf_check(cci_return_event(ev), "cci_return_event");
	}
}

/* ------------------------------------------------------------- client */

static void cs_take_connect(struct cs *c, cci_event_t *ev)
{
	if (ev->type != CCI_EVENT_CONNECT)
		perf_die("a %s event during the connects", cci_event_type_str(ev->type));
	c->outstanding--;
	if (ev->connect.status == CCI_SUCCESS) {
		c->conns[c->nconns++] = ev->connect.connection;
		if (c->keepalive_ms) {
			uint32_t us = c->keepalive_ms * 1000u;
			perf_check(cci_set_opt(ev->connect.connection, CCI_OPT_CONN_KEEPALIVE_TIMEOUT,
			                       &us), "cci_set_opt(CONN_KEEPALIVE_TIMEOUT)");
		}
	}
	else if (!c->failed++)
		c->first_fail = ev->connect.status;
	perf_check(cci_return_event(ev), "cci_return_event");
}

/* Open n connections, at most window outstanding; nanoseconds taken. */
static uint64_t cs_connect_n(struct cs *c, uint32_t n)
{
	struct timeval tv = { .tv_sec = CS_TIMEOUT_S };
	uint32_t issued = 0, window = c->window ? c->window : n;
	uint64_t t0 = perf_now_ns();

	c->nconns = c->failed = c->outstanding = 0;
	while (c->nconns + c->failed < n) {
		while (issued < n && c->outstanding < window) {
			perf_check(cci_connect(c->ep, c->uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &tv),
			           "cci_connect");
			issued++;
			c->outstanding++;
		}
		cs_take_connect(c, cs_wait(c));
	}
	if (c->failed)
		perf_die("%u of %u connects failed, the first with %s", c->failed, n,
		         cci_strerror(c->ep, c->first_fail));
	return perf_now_ns() - t0;
}

/* 8-byte ping-pong on conn: mean one-way microseconds over iters. */
static double cs_pingpong(struct cs *c, cci_connection_t *conn, uint32_t iters)
{
	uint64_t ping = 0, t0 = 0;

	for (uint32_t i = 0; i < iters + 100; i++) {
		cci_event_t *ev;

		if (i == 100)
			t0 = perf_now_ns();
		cs_send(conn, &ping, sizeof(ping), CCI_FLAG_SILENT);
		while ((ev = cs_wait(c))->type != CCI_EVENT_RECV)
			perf_check(cci_return_event(ev), "cci_return_event");
		perf_check(cci_return_event(ev), "cci_return_event");
	}
	return (double)(perf_now_ns() - t0) / 1e3 / 2 / iters;
}

/* CPU seconds this process used so far, every thread's. */
static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Leave the library alone for c->idle_s seconds: the percent of a core
 * the process used meanwhile. */
static double cs_idle(struct cs *c)
{
	struct timespec ts = { .tv_sec = c->idle_s };
	double cpu0 = cpu_s();
	uint64_t t0 = perf_now_ns();

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	return 100.0 * (cpu_s() - cpu0) / ((double)(perf_now_ns() - t0) / 1e9);
}

/* The server's cost of its connections, asked on conn; after CS_STATS
 * it closes them all, after CS_PEEK none. */
static struct cs_msg cs_server_stats(struct cs *c, cci_connection_t *conn, uint32_t type)
{
	struct cs_msg m = { CS_MAGIC, type, 0, 0, 0 };
	cci_event_t *ev;

	cs_send(conn, &m, sizeof(m), CCI_FLAG_SILENT);
	for (;;) {
		const struct cs_msg *r;

		ev = cs_wait(c);
		r = ev->type == CCI_EVENT_RECV ? cs_ctl_of(ev) : NULL;
		if (r && r->type == CS_STATS_REP) {
			m = *r;
			perf_check(cci_return_event(ev), "cci_return_event");
			return m;
		}
		perf_check(cci_return_event(ev), "cci_return_event");
	}
}

/* -r: msgs 8-byte messages on conn, at most 64 whose echo has not come
 * back; echoes per second.  Paired with the latency, it tells whether a
 * message costs more with many connections open. */
static double cs_stream(struct cs *c, cci_connection_t *conn, uint32_t msgs)
{
	uint64_t ping = 0, t0 = perf_now_ns();
	uint32_t sent = 0, echoed = 0;

	while (echoed < msgs) {
		cci_event_t *ev;

		while (sent < msgs && sent - echoed < 64) {
			int rc = cci_send(conn, &ping, sizeof(ping), NULL, CCI_FLAG_SILENT);

			if (rc == CCI_ENOBUFS)
				break;
			perf_check(rc, "cci_send");
			sent++;
		}
		ev = cs_wait(c);
		echoed += ev->type == CCI_EVENT_RECV;
		perf_check(cci_return_event(ev), "cci_return_event");
	}
	return msgs * 1e9 / (double)(perf_now_ns() - t0);
}

static void cs_row(struct cs *c, uint32_t n, uint64_t ns, double lat, int64_t fds,
                   int64_t rss, const struct cs_msg *srv, double idle_cpu)
{
	double per_s = n * 1e9 / (double)ns;

	if (c->json) {
		printf("{\"conns\":%u,\"window\":%u,\"seconds\":%.6f,\"conns_per_s\":%.0f,"
		       "\"latency_us\":%.3f,\"client_fds\":%" PRId64 ",\"client_kib\":%" PRId64 ","
		       "\"server_fds\":%" PRId64 ",\"server_kib\":%" PRId64 ",\"sleeps\":%" PRIu64
		       ",\"missed_wakeups\":%" PRIu64 ",\"idle_cpu_pct\":%.3f,\"echo_per_s\":%.0f}\n",
		       n, c->window ? c->window : n, ns / 1e9, per_s, lat, fds, rss, srv->fds,
		       srv->rss_kib, c->sleeps, c->missed, idle_cpu, c->rate);
	} else {
		printf("%8u %8u %9.3f %10.0f %9.2f %9.2f %9.2f %9.2f %9.2f", n,
		       c->window ? c->window : n, ns / 1e9, per_s, lat, (double)fds / n,
		       (double)rss / n, (double)srv->fds / n, (double)srv->rss_kib / n);
		if (c->blocking)
			printf(" %8" PRIu64 " %6" PRIu64, c->sleeps, c->missed);
		if (c->idle_s)
			printf(" %9.3f", idle_cpu);
		if (c->rate_msgs)
			printf(" %9.0f", c->rate);
		putchar('\n');
	}
	fflush(stdout);
}

/* One churn round: open n connections (at most the window outstanding),
 * ping each once, disconnect them all. */
static void cs_churn_round(struct cs *c, uint32_t n)
{
	uint64_t ping = 0;
	uint32_t echoed = 0;

	cs_connect_n(c, n);
	for (uint32_t k = 0; k < n; k++)
		cs_send(c->conns[k], &ping, sizeof(ping), CCI_FLAG_SILENT);
	while (echoed < n) {
		cci_event_t *ev = cs_wait(c);
		echoed += ev->type == CCI_EVENT_RECV;
		perf_check(cci_return_event(ev), "cci_return_event");
	}
	for (uint32_t k = 0; k < n; k++)
		perf_check(cci_disconnect(c->conns[k]), "cci_disconnect");
}

/* -c: c->cycles connect, ping, disconnect cycles against a server that
 * keeps every connection; its cost after each tenth, asked on a
 * connection of its own that stays open.  A second's pause before each
 * question lets the server hear the disconnects. */
static void cs_churn(struct cs *c)
{
	uint32_t window = c->window ? c->window : 256, done = 0, step = c->cycles / 10;
	cci_connection_t *probe;
	uint64_t t0 = perf_now_ns();

	c->conns = calloc(window, sizeof(*c->conns));
	if (!c->conns)
		perf_die("out of memory");
	c->window = window;
	cs_connect_n(c, 1);
	probe = c->conns[0];
	if (!c->json)
		printf("%9s %9s %10s %10s %12s %12s\n", "cycles", "seconds", "cycles/s", "srv_fds",
		       "srv_KiB", "srv_B/cycle");
	for (uint32_t mark = 1; mark <= 10; mark++) {
		uint32_t until = mark == 10 ? c->cycles : step * mark;
		struct timespec pause = { .tv_sec = 1 };
		struct cs_msg srv;
		double secs;

		while (done < until) {
			uint32_t n = until - done < window ? until - done : window;
			cs_churn_round(c, n);
			done += n;
		}
		secs = (double)(perf_now_ns() - t0) / 1e9;
		while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
			;
		t0 += 1000000000ull; /* the pause is not churn */
		srv = cs_server_stats(c, probe, CS_PEEK);
		if (c->json)
			printf("{\"cycles\":%u,\"seconds\":%.3f,\"server_fds\":%" PRId64
			       ",\"server_kib\":%" PRId64 "}\n", done, secs, srv.fds, srv.rss_kib);
		else
			printf("%9u %9.2f %10.0f %10" PRId64 " %12" PRId64 " %12.1f\n", done, secs,
			       done / secs, srv.fds, srv.rss_kib,
			       done ? (double)srv.rss_kib * 1024.0 / done : 0.0);
		fflush(stdout);
	}
	c->conns[0] = probe;
	cs_server_stats(c, probe, CS_STATS);
}

/* One 8-byte round trip on each of the first n connections, 128 at a
 * time: each has carried traffic before it idles (-u). */
static void cs_use_all(struct cs *c, uint32_t n)
{
	uint64_t ping = 0;

	for (uint32_t i = 0; i < n;) {
		uint32_t batch = n - i < 128 ? n - i : 128, got = 0;

		for (uint32_t k = 0; k < batch; k++)
			cs_send(c->conns[i + k], &ping, sizeof(ping), CCI_FLAG_SILENT);
		while (got < batch) {
			cci_event_t *ev = cs_wait(c);
			got += ev->type == CCI_EVENT_RECV;
			perf_check(cci_return_event(ev), "cci_return_event");
		}
		i += batch;
	}
}

static void cs_client(struct cs *c)
{
	uint32_t max = 0;

	for (uint32_t i = 0; i < c->ncounts; i++)
		max = c->counts[i] > max ? c->counts[i] : max;
	c->conns = calloc(max, sizeof(*c->conns));
	if (!c->conns)
		perf_die("out of memory");
	if (!c->json)
		printf("%8s %8s %9s %10s %9s %9s %9s %9s %9s%s%s%s\n", "conns", "window", "seconds",
		       "conns/s", "lat_us", "cli_fd/c", "cli_KiB/c", "srv_fd/c", "srv_KiB/c",
		       c->blocking ? "   sleeps missed" : "", c->idle_s ? " idle_cpu%" : "",
		       c->rate_msgs ? "    echo/s" : "");
	for (uint32_t i = 0; i < c->ncounts; i++) {
		uint32_t n = c->counts[i];
		int64_t fds0 = fd_count(), rss0 = rss_kib();
		uint64_t ns = cs_connect_n(c, n);
		int64_t fds, rss;
		double lat, idle_cpu = 0;
		struct cs_msg srv;

		if (c->used)
			cs_use_all(c, n);
		fds = fd_count() - fds0;
		rss = rss_kib() - rss0;

		c->sleeps = c->missed = 0;
		lat = cs_pingpong(c, c->conns[n - 1], c->iters);
		if (c->rate_msgs)
			c->rate = cs_stream(c, c->conns[n - 1], c->rate_msgs);
		if (c->idle_s)
			idle_cpu = cs_idle(c);
		srv = cs_server_stats(c, c->conns[0], CS_STATS);
		cs_row(c, n, ns, lat, fds, rss, &srv, idle_cpu);
		for (uint32_t k = 0; k < c->nconns; k++)
			perf_check(cci_disconnect(c->conns[k]), "cci_disconnect");
	}
}

/* One more connection carries the end: the others are closed. */
static void cs_end(struct cs *c)
{
	struct cs_msg done = { CS_MAGIC, CS_DONE, 0, 0, 0 };

	c->window = 1;
	cs_connect_n(c, 1);
	cs_send(c->conns[0], &done, sizeof(done), CCI_FLAG_BLOCKING);
}

/* -------------------------------------------------------------- main */

static void cs_parse_counts(struct cs *c, const char *list)
{
	char *copy = strdup(list), *save = NULL;

	c->ncounts = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (c->ncounts == sizeof(c->counts) / sizeof(c->counts[0]))
			perf_die("-n: at most 16 counts");
		c->counts[c->ncounts++] = perf_parse_count(t, 1, CS_MAX_CONNS);
	}
	free(copy);
	if (!c->ncounts)
		perf_die("-n: no count");
}

static void cs_usage(void)
{
	puts("usage: connstorm [-n LIST] [-w W] [-i ITERS] [-r MSGS] [-b] [-k MS] [-I S] [-u] [-D DEV] [--json]\n"
	     "       connstorm -c CYCLES [-w W] [-b] [-D DEV] [--json]\n"
	     "       connstorm -s [-o FILE] [-b] [-D DEV]\n"
	     "       connstorm -h URI [-n LIST] [-w W] [-i ITERS] [-r MSGS] [-b] [-k MS] [-I S] [-u] [--json]\n"
	     "  -n LIST   connection counts, comma-separated (default 1,100,1000,10000)\n"
	     "  -w W      connects outstanding at most (default 256; 0: all at once)\n"
	     "  -i ITERS  8-byte round trips on the last connection (default 10000)\n"
	     "  -r MSGS   then MSGS 8-byte messages streamed on it, 64 unanswered at\n"
	     "            most: the echoes per second\n"
	     "  -u        one round trip on every connection before memory is read\n"
	     "            (each has carried traffic before it idles)\n"
	     "  -b        both sides sleep on the OS handle\n"
	     "  -k MS     a keepalive of MS milliseconds on every client connection\n"
	     "  -I S      then S seconds without calls: the client's share of a core\n"
	     "  -c CYCLES connect, ping, disconnect CYCLES times against a server that\n"
	     "            keeps its connections: its descriptors and memory as they go\n"
	     "  -D DEV    the device (default: the default device)\n"
	     "  -s, -o    server, writing its URI to FILE; -h URI: client\n"
	     "  --json    one JSON object per row");
}

static void cs_options(struct cs *c, int argc, char **argv, bool *server)
{
	static const struct option longopts[] = { { "json", no_argument, NULL, 'j' },
	                                          { "help", no_argument, NULL, 'H' },
	                                          { NULL, 0, NULL, 0 } };
	int ch;

	while ((ch = getopt_long(argc, argv, "n:w:i:r:bk:I:uc:D:so:h:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'n': cs_parse_counts(c, optarg); break;
		case 'w': c->window = perf_parse_count(optarg, 0, CS_MAX_CONNS); break;
		case 'i': c->iters = perf_parse_count(optarg, 1, 1u << 30); break;
		case 'b': c->blocking = true; break;
		case 'k': c->keepalive_ms = perf_parse_count(optarg, 1, 3600000); break;
		case 'I': c->idle_s = perf_parse_count(optarg, 1, 3600); break;
		case 'u': c->used = true; break;
		case 'r': c->rate_msgs = perf_parse_count(optarg, 1, 1u << 30); break;
		case 'c': c->cycles = perf_parse_count(optarg, 10, 100000000); break;
		case 'D': c->device = optarg; break;
		case 's': *server = true; break;
		case 'o': c->outfile = optarg; break;
		case 'h': c->uri = optarg; break;
		case 'j': c->json = true; break;
		case 'H': cs_usage(); exit(EXIT_SUCCESS);
		default: cs_usage(); exit(2);
		}
	}
	if (optind != argc || (*server && c->uri))
		perf_die("give -s, -h URI or neither (--help for usage)");
}

/* The server in a child of ours, forked before either calls cci_init;
 * its URI comes back through a pipe. */
static pid_t cs_fork_server(struct cs *c, char *uri, size_t cap)
{
	int p[2];
	pid_t pid;
	ssize_t n, got = 0;

	if (pipe(p) != 0)
		perf_die("pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		perf_die("fork: %s", strerror(errno));
	if (pid == 0) {
		char *own;
		close(p[0]);
		cs_open(c);
		perf_check(cci_get_opt(c->ep, CCI_OPT_ENDPT_URI, &own), "cci_get_opt(URI)");
		if (write(p[1], own, strlen(own) + 1) < 0)
			_exit(1);
		close(p[1]);
		free(own);
		cs_serve(c);
		cs_close(c);
		exit(EXIT_SUCCESS);
	}
	close(p[1]);
	while ((size_t)got < cap && (n = read(p[0], uri + got, cap - (size_t)got)) > 0)
		got += n;
	close(p[0]);
	if (got == 0 || uri[got - 1] != '\0')
		perf_die("the server did not start");
	return pid;
}

int main(int argc, char **argv)
{
	struct cs c = { .window = 256, .iters = 10000, .counts = { 1, 100, 1000, 10000 },
	                .ncounts = 4, .epfd = -1 };
	bool server = false;
	char uri[1024];
	pid_t child = 0;
	int status = 0;

	perf_set_prog("connstorm");
	cs_options(&c, argc, argv, &server);
	/* Four descriptors a connection leave room for any transport here. */
	for (uint32_t i = 0; i < c.ncounts; i++)
		raise_fd_limit(4ull * c.counts[i] + 4096);
	if (server) {
		char *own;
		cs_open(&c);
		perf_check(cci_get_opt(c.ep, CCI_OPT_ENDPT_URI, &own), "cci_get_opt(URI)");
		fprintf(stderr, "Opened %s\n", own);
		if (c.outfile)
			perf_write_uri(c.outfile, own);
		free(own);
		cs_serve(&c);
		cs_close(&c);
		return EXIT_SUCCESS;
	}
	if (!c.uri) {
		child = cs_fork_server(&c, uri, sizeof(uri));
		c.uri = uri;
	}
	cs_open(&c);
	if (c.cycles)
		cs_churn(&c);
	else
		cs_client(&c);
	cs_end(&c);
	cs_close(&c);
	if (child && (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	              WEXITSTATUS(status) != 0))
		perf_die("the server failed (status 0x%x)", status);
	return EXIT_SUCCESS;
}
