/*
 * msgrate - small-message rate over several connections.
 *
 * The client opens -n connections from one endpoint to one server
 * endpoint and streams messages of one size (-S, default 8 bytes)
 * round-robin over the first k of them, for k = 1, 2, 4, ... n, each with
 * up to -w sends in flight.  The clock stops when the server acknowledges
 * that every message arrived.  Rows give messages per second (and MB/s,
 * 10^6 bytes per second): the per-message cost of the whole path, where
 * bandwidth's large sizes measure the copy.  --threads T sends from T
 * threads, thread t owning connections t, t + T, ... (rows from k = T):
 * the rate of several application threads sharing one endpoint.
 *
 * With -L the two sides are the ranks of a job started by a launcher
 * (mpirun -np 2, mpiexec.hydra -n 2, cci_wire_launch -n 2): rank 0 serves,
 * rank 1 is the client of the URI rank 0 published through libcci_wire.
 *
 * usage: msgrate -s [-o uri_file] [-D device] [-b] [-t secs]
 *        msgrate -h URI [-n conns] [--threads T] [-S size] [-w window] ...
 *        LAUNCHER -n 2 msgrate -L [client options...]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cci_wire.h"

#define MR_MAX_THREADS 16

struct mr_opts {
	uint32_t conns, threads, window, iters, warmup, size;
	bool warmup_set, fixed, launched;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: msgrate -s [-o uri_file] [-D device] [-b] [-t secs]\n"
		"       msgrate -h URI [-n conns] [--threads T] [-S size] [-w window] [-i count]\n"
		"               [-c ro|ru] [--warmup n] [--fixed] [--nocopy] [-b] [-D device]\n"
		"               [-t secs] [--json]\n"
		"       LAUNCHER -n 2 msgrate -L [client options...]\n"
		"  -s          server: accept the client's connections, count, exit when done\n"
		"  -o FILE     server: write the endpoint URI to FILE (atomically)\n"
		"  -h URI      client: connect to the server at URI\n"
		"  -L          started by a launcher: rank 0 serves, rank 1 connects\n"
		"  -n CONNS    connections (default 4); rows for 1, 2, 4, ... CONNS\n"
		"  --fixed     one row, with all CONNS connections\n"
		"  --threads T sender threads (1..16, default 1), thread t owning connections\n"
		"              t, t+T, ...; rows from T connections on (CONNS >= T)\n"
		"  -S SIZE     message size (default 8)\n"
		"  -w WINDOW   sends in flight per connection (default 64)\n"
		"  -i COUNT    messages per row (default 1000000)\n"
		"  -c ATTR     connection: ro (default) or ru\n"
		"  --warmup N  untimed messages before each row (default a tenth)\n"
		"  --nocopy    send with CCI_FLAG_NO_COPY\n"
		"  -b          block in poll() on the endpoint's OS handle\n"
		"  -D NAME     use device NAME instead of the default\n"
		"  -t SECS     give up after SECS without any event (default 30, 0: never)\n"
		"  --json      one JSON object per row on stdout (Opened goes to stderr)\n");
}

static void parse_one(struct bench *b, struct mr_opts *o, int c, const char *arg)
{
	if (bench_parse_common(b, c, arg))
		return;
	switch (c) {
	case 'n': o->conns = perf_parse_count(arg, 1, BENCH_MAX_CONNS); break;
	case 'S': o->size = perf_parse_count(arg, 0, UINT32_MAX); break;
	case 'w': o->window = perf_parse_count(arg, 1, 1u << 20); break;
	case 'i': o->iters = perf_parse_count(arg, 1, UINT32_MAX); break;
	case 'u': o->warmup = perf_parse_count(arg, 0, UINT32_MAX);
		  o->warmup_set = true; break;
	case 'f': o->fixed = true; break;
	case 'T': o->threads = perf_parse_count(arg, 1, MR_MAX_THREADS); break;
	case 'N': b->nocopy = true; break;
	case 'L': o->launched = true; break;
	case 'H': usage(stdout); exit(EXIT_SUCCESS);
	default: usage(stderr); exit(EXIT_FAILURE);
	}
}

static void parse_opts(struct bench *b, struct mr_opts *o, int argc, char **argv)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "warmup", required_argument, NULL, 'u' },
		{ "fixed", no_argument, NULL, 'f' },
		{ "threads", required_argument, NULL, 'T' },
		{ "nocopy", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct mr_opts){ .conns = 4, .threads = 1, .window = 64, .iters = 1000000,
			       .size = 8 };
	while ((c = getopt_long(argc, argv, "sh:o:D:c:n:S:w:i:bt:L", longs, NULL)) != -1)
		parse_one(b, o, c, optarg);
	if (o->launched && (b->server || b->uri || optind != argc))
		perf_die("give either -s, -h URI or -L (--help for usage)");
	if (!o->launched)
		bench_check_common(b, optind, argc);
	if (!b->server && o->conns < o->threads)
		perf_die("--threads %u needs at least %u connections (-n %u): each thread "
			 "sends on connections of its own", o->threads, o->threads, o->conns);
}

static void print_row(struct bench *b, const struct mr_opts *o, uint32_t k, uint64_t ns)
{
	double s = (double)ns / 1e9, rate = (double)o->iters / s;
	double mbps = rate * o->size / 1e6;

	if (!b->json)
		printf("%6u %7u %10u %14.0f %10.2f\n", k, o->threads, o->iters, rate, mbps);
	else
		printf("{\"benchmark\":\"msgrate\",\"conns\":%u,\"threads\":%u,\"bytes\":%u,"
		       "\"count\":%u,\"window\":%u,\"seconds\":%.6f,\"msg_rate\":%.1f,"
		       "\"throughput_MBps\":%.3f,\"transport\":\"%s\",\"device\":\"%s\","
		       "\"attribute\":\"%s\",\"blocking\":%s,\"nocopy\":%s}\n",
		       k, o->threads, o->size, o->iters, o->window, s, rate, mbps,
		       b->ep->device->transport, b->ep->device->name,
		       perf_attr_name(b->attr), b->blocking ? "true" : "false",
		       b->nocopy ? "true" : "false");
	fflush(stdout);
}

/* One thread keeps the single-threaded loop (its figures stay comparable
 * with earlier runs); more go through bench_threads.c. */
static uint64_t stream(struct bench *b, const struct mr_opts *o, uint32_t k, uint64_t n)
{
	if (o->threads == 1)
		return bench_stream(b, k, o->window, 0, o->size, n);
	return bench_stream_threads(b, o->threads, k, o->window, o->size, n);
}

static void measure(struct bench *b, const struct mr_opts *o, uint32_t k)
{
	uint64_t warm = o->warmup_set ? o->warmup : o->iters / 10 + 1;

	if (warm)
		stream(b, o, k, warm);
	print_row(b, o, k, stream(b, o, k, o->iters));
}

static void run_client(struct bench *b, const struct mr_opts *o)
{
	b->nconns = o->conns;
	bench_connect(b, 0, 0);
	for (uint32_t i = 0; i < b->nconns; i++)
		if (o->size > b->conns[i]->max_send_size)
			perf_die("-S %u exceeds max_send_size %u", o->size,
				 b->conns[i]->max_send_size);
	bench_alloc(b, o->size);
	if (!b->json) {
		printf("# %s transport (device %s), %s connections, %u-byte messages, "
		       "window %u per connection, %u sender thread%s\n",
		       b->ep->device->transport, b->ep->device->name,
		       perf_attr_name(b->attr), o->size, o->window, o->threads,
		       o->threads == 1 ? "" : "s");
		printf("%6s %7s %10s %14s %10s\n", "Conns", "Threads", "Count", "Msgs/s", "MB/s");
	}
	/* every thread needs a connection of its own: rows from k = threads */
	for (uint32_t k = o->fixed ? o->conns : o->threads;;
	     k = k * 2 > o->conns ? o->conns : k * 2) {
		measure(b, o, k);
		if (k == o->conns)
			break;
	}
	bench_done(b);
}

/* -L: rank 0 is the server, rank 1 the client of the URI rank 0 put. */
static cci_wire_t *launched_roles(struct bench *b)
{
	cci_wire_t *wire;
	char why[512];

	if (cci_wire_init(&wire, why, sizeof(why)))
		perf_die("wire-up: %s", why);
	if (cci_wire_size(wire) != 2)
		perf_die("-L runs 2 ranks, not %d", cci_wire_size(wire));
	b->server = cci_wire_rank(wire) == 0;
	return wire;
}

/* After bench_open: the server puts its URI, both fence, the client reads
 * it into *uri_p (freed by the caller). */
static void launched_meet(struct bench *b, cci_wire_t *wire, char **uri_p)
{
	char *uri = NULL;

	if (b->server) {
		perf_check(cci_get_opt(b->ep, CCI_OPT_ENDPT_URI, &uri), "cci_get_opt(URI)");
		if (cci_wire_put(wire, "msgrate_uri", uri))
			perf_die("publishing the URI: %s", cci_wire_error(wire));
		free(uri);
	}
	if (cci_wire_fence(wire))
		perf_die("fence: %s", cci_wire_error(wire));
	if (!b->server && cci_wire_get(wire, 0, "msgrate_uri", uri_p))
		perf_die("the server's URI: %s", cci_wire_error(wire));
	b->uri = *uri_p;
}

int main(int argc, char **argv)
{
	static struct bench b = { .prog = "msgrate", .timeout_s = 30 };
	cci_wire_t *wire = NULL;
	char *peer_uri = NULL;
	struct mr_opts o;

	perf_set_prog(b.prog);
	parse_opts(&b, &o, argc, argv);
	if (o.launched)
		wire = launched_roles(&b);
	bench_open(&b);
	if (wire)
		launched_meet(&b, wire, &peer_uri);
	if (b.server)
		bench_serve(&b);
	else
		run_client(&b, &o);
	bench_close(&b);
	cci_wire_finalize(wire);
	free(peer_uri);
	return EXIT_SUCCESS;
}
