/*
 * mesh.c - N processes wiring up all-to-all, as a runtime's start does:
 * each pair of ranks one reliable-ordered connection, one message each way
 * on every connection.  Started by a launcher (cci_wire_launch -n N,
 * mpirun -np N, mpiexec.hydra -n N); the URIs go through libcci_wire.
 * Public API (cci.h) only.
 *
 *   LAUNCHER mesh [-t SECS] [-D DEV] [--json]
 *
 * Every rank opens one endpoint (the default device, or -D), publishes its
 * URI, and after a barrier connects to every higher rank and accepts every
 * lower one; as each connection opens it sends its rank on it.  A rank is
 * done when it has N - 1 connections, N - 1 messages (each from the peer
 * of its connection) and N - 1 send completions.  Ranks sleep on their
 * endpoint's OS handle while nothing happens: 64 processes on 2 cores
 * must not spin.
 *
 * Rank 0 prints one row: N, the transport, the wire-up time (the slowest
 * rank, from the barrier to done), and the resident memory the mesh cost
 * (the sum over ranks of what each grew by from its endpoint's opening to
 * done), in all and per connection end.  A rank that is not done by -t
 * names what it lacks (the peers it has no connection or message from)
 * and the run fails.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cci_wire.h"
#include "perf_util.h"

#define MESH_MAGIC 0x6873656d63636963ull /* the connect request's payload */

struct mesh_hello {
	uint64_t magic;
	uint32_t rank, size;
};

struct mesh_peer {
	cci_connection_t *conn;
	int got;                    /* its message came */
};

struct mesh {
	cci_wire_t *wire;
	int rank, size;
	const char *device;
	uint32_t timeout_s;
	bool json;
	cci_endpoint_t *ep;
	int fd;
	struct mesh_peer *peers;
	int connected, received, sent, failed;
};

static int64_t rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, rss = 0;

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void wire_check(struct mesh *m, int rc, const char *what)
{
	if (rc != CCI_WIRE_SUCCESS)
		perf_die("rank %d: %s: %s", m->rank, what, cci_wire_error(m->wire));
}

/* The connection to peer i is open: say who we are on it. */
static void mesh_opened(struct mesh *m, int i, cci_connection_t *conn)
{
	uint32_t me = (uint32_t)m->rank;

	m->peers[i].conn = conn;
	m->connected++;
	perf_check(cci_send(conn, &me, sizeof(me), &m->peers[i], 0), "cci_send");
}

/* A request from a lower rank that has not connected yet, or a reject. */
static void mesh_request(struct mesh *m, cci_event_t *ev)
{
	struct mesh_hello h;
	bool ok = ev->request.data_len == sizeof(h);

	if (ok)
		memcpy(&h, ev->request.data_ptr, sizeof(h));
	ok = ok && h.magic == MESH_MAGIC && h.size == (uint32_t)m->size &&
	     h.rank < (uint32_t)m->rank && !m->peers[h.rank].conn;
	if (!ok) {
		fprintf(stderr, "mesh: rank %d: rejected an unexpected connection request\n", m->rank);
		perf_check(cci_reject(ev), "cci_reject");
		return;
	}
	perf_check(cci_accept(ev, &m->peers[h.rank]), "cci_accept");
}

static void mesh_event(struct mesh *m, cci_event_t *ev)
{
	struct mesh_peer *p;
	uint32_t from;

	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		mesh_request(m, ev);
		break;
	case CCI_EVENT_CONNECT:
	case CCI_EVENT_ACCEPT:
		p = ev->type == CCI_EVENT_CONNECT ? ev->connect.context : ev->accept.context;
		if ((ev->type == CCI_EVENT_CONNECT ? ev->connect.status : ev->accept.status) !=
		    CCI_SUCCESS) {
			m->failed++;
			fprintf(stderr, "mesh: rank %d: the connection with rank %d failed: %s\n",
			        m->rank, (int)(p - m->peers),
			        cci_strerror(m->ep, ev->type == CCI_EVENT_CONNECT ? ev->connect.status
			                                                          : ev->accept.status));
			break;
		}
		mesh_opened(m, (int)(p - m->peers),
		            ev->type == CCI_EVENT_CONNECT ? ev->connect.connection
		                                          : ev->accept.connection);
		break;
	case CCI_EVENT_RECV:
		p = ev->recv.connection->context;
		if (ev->recv.len != sizeof(from))
			perf_die("rank %d: a message of %u bytes", m->rank, ev->recv.len);
		memcpy(&from, ev->recv.ptr, sizeof(from));
		if (&m->peers[from] != p || p->got)
			perf_die("rank %d: rank %u's message on the connection with rank %d", m->rank,
			         from, (int)(p - m->peers));
		p->got = 1;
		m->received++;
		break;
	case CCI_EVENT_SEND:
		perf_check(ev->send.status, "the SEND event");
		m->sent++;
		break;
	default:
		perf_die("rank %d: a %s event", m->rank, cci_event_type_str(ev->type));
	}
	perf_check(cci_return_event(ev), "cci_return_event");
}

static bool mesh_done(const struct mesh *m)
{
	int want = m->size - 1;

	return m->connected == want && m->received == want && m->sent == want;
}

/* What a rank still lacks, on stderr. */
static void mesh_report_missing(const struct mesh *m)
{
	fprintf(stderr,
	        "mesh: rank %d: after %u s, %d of %d connections, %d of %d messages, %d of %d "
	        "send completions, %d failed; missing:",
	        m->rank, m->timeout_s, m->connected, m->size - 1, m->received, m->size - 1, m->sent,
	        m->size - 1, m->failed);
	for (int i = 0; i < m->size; i++) {
		if (i == m->rank)
			continue;
		if (!m->peers[i].conn)
			fprintf(stderr, " %d (no connection)", i);
		else if (!m->peers[i].got)
			fprintf(stderr, " %d (no message)", i);
	}
	fputc('\n', stderr);
}

/* Connect to every higher rank, then take events until done or the
 * deadline; the time taken in ns, or 0 when the deadline passed. */
static uint64_t mesh_run(struct mesh *m)
{
	uint64_t t0 = perf_now_ns(), deadline = t0 + (uint64_t)m->timeout_s * 1000000000ull;
	struct mesh_hello h = { MESH_MAGIC, (uint32_t)m->rank, (uint32_t)m->size };

	for (int i = m->rank + 1; i < m->size; i++) {
		char *uri = NULL;

		wire_check(m, cci_wire_get(m->wire, i, "mesh_uri", &uri), "the URI of a peer");
		perf_check(cci_connect(m->ep, uri, &h, sizeof(h), CCI_CONN_ATTR_RO, &m->peers[i], 0,
		                       NULL),
		           "cci_connect");
		free(uri);
	}
	while (!mesh_done(m)) {
		cci_event_t *ev;
		int rc = cci_get_event(m->ep, &ev);

		if (rc == CCI_SUCCESS) {
			mesh_event(m, ev);
			continue;
		}
		if (rc != CCI_EAGAIN)
			perf_check(rc, "cci_get_event");
		if (!perf_block_on_fd(m->ep, m->fd, deadline)) {
			mesh_report_missing(m);
			return 0;
		}
	}
	return perf_now_ns() - t0;
}

static void mesh_options(struct mesh *m, int argc, char **argv)
{
	static const struct option longopts[] = { { "json", no_argument, NULL, 'j' },
		                                  { NULL, 0, NULL, 0 } };
	int ch;

	m->timeout_s = 120;
	while ((ch = getopt_long(argc, argv, "t:D:", longopts, NULL)) != -1) {
		switch (ch) {
		case 't': m->timeout_s = perf_parse_count(optarg, 1, 3600); break;
		case 'D': m->device = optarg; break;
		case 'j': m->json = true; break;
		default:
			fprintf(stderr, "usage: LAUNCHER -n N mesh [-t SECS] [-D DEV] [--json]\n");
			exit(2);
		}
	}
	if (optind != argc)
		perf_die("unexpected argument %s", argv[optind]);
}

/* Rank 0: the slowest rank's time and the sum of the memory, one row;
 * none when a rank did not complete (it said what it lacks). */
static void mesh_print(struct mesh *m)
{
	uint64_t worst_ns = 0;
	int64_t kib = 0;
	int incomplete = 0;
	double ends = (double)m->size * (m->size - 1);

	for (int i = 0; i < m->size; i++) {
		char *v = NULL;
		unsigned long long ns;
		long long k;

		wire_check(m, cci_wire_get(m->wire, i, "mesh_result", &v), "a rank's result");
		if (sscanf(v, "%llu,%lld", &ns, &k) != 2)
			perf_die("rank %d's result is not understood: %s", i, v);
		free(v);
		incomplete += ns == 0;
		worst_ns = ns > worst_ns ? ns : worst_ns;
		kib += k;
	}
	if (incomplete)
		fprintf(stderr, "mesh: %d of %d ranks did not complete\n", incomplete, m->size);
	else if (m->json)
		printf("{\"ranks\":%d,\"device\":\"%s\",\"seconds\":%.3f,\"kib\":%" PRId64
		       ",\"kib_per_end\":%.2f}\n",
		       m->size, m->ep->device->name, worst_ns / 1e9, kib, kib / ends);
	else
		printf("%6d %-12s %9.3f %12" PRId64 " %12.2f\n", m->size, m->ep->device->transport,
		       worst_ns / 1e9, kib, kib / ends);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct mesh m = { 0 };
	char why[256], *uri = NULL, result[64];
	cci_device_t *dev = NULL;
	uint32_t caps;
	int64_t rss0;
	uint64_t ns;

	perf_set_prog("mesh");
	mesh_options(&m, argc, argv);
	if (cci_wire_init(&m.wire, why, sizeof(why)) != CCI_WIRE_SUCCESS)
		perf_die("wire-up: %s", why);
	m.rank = cci_wire_rank(m.wire);
	m.size = cci_wire_size(m.wire);
	m.peers = calloc((size_t)m.size, sizeof(*m.peers));
	if (!m.peers)
		perf_die("out of memory");
	perf_check(cci_init(CCI_ABI_VERSION, 0, &caps), "cci_init");
	if (m.device)
		dev = perf_find_device(m.device);
	perf_check(cci_create_endpoint(dev, 0, &m.ep, &m.fd), "cci_create_endpoint");
	perf_set_ep(m.ep);
	rss0 = rss_kib();
	perf_check(cci_get_opt(m.ep, CCI_OPT_ENDPT_URI, &uri), "cci_get_opt(URI)");
	wire_check(&m, cci_wire_put(m.wire, "mesh_uri", uri), "publishing the URI");
	free(uri);
	wire_check(&m, cci_wire_fence(m.wire), "fence");
	wire_check(&m, cci_wire_barrier(m.wire), "barrier");

	ns = mesh_run(&m);
	snprintf(result, sizeof(result), "%llu,%lld", (unsigned long long)ns,
	         (long long)(rss_kib() - rss0));
	wire_check(&m, cci_wire_put(m.wire, "mesh_result", result), "publishing the result");
	wire_check(&m, cci_wire_fence(m.wire), "fence");
	if (m.rank == 0)
		mesh_print(&m);
	/* Nobody tears down while a peer still waits for its message. */
	wire_check(&m, cci_wire_barrier(m.wire), "barrier");
	perf_check(cci_destroy_endpoint(m.ep), "cci_destroy_endpoint");
	perf_check(cci_finalize(), "cci_finalize");
	cci_wire_finalize(m.wire);
	free(m.peers);
	return ns ? EXIT_SUCCESS : EXIT_FAILURE;
}
