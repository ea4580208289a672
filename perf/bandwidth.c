/*
 * bandwidth - streaming throughput between two CCI endpoints.
 *
 * A server (-s) waits for one client (-h URI).  For each size the client
 * keeps up to a window (-w) of operations in flight, a new one leaving as
 * soon as a SEND event frees a slot, and stops the clock when the server
 * acknowledges that it has everything:
 *   messages   cci_send of the size (default; sizes up to max_send_size);
 *   -W / -R    cci_rma writes / reads of the size into / from a buffer
 *              the server registered (no completion message: the SEND
 *              event already means the data is in place).
 * It prints MB/s (10^6 bytes per second) and operations per second.
 * Unlike pingpong, many operations overlap: this is the rate a stream
 * reaches, not one transfer's latency.
 *
 * usage: bandwidth -s [-o uri_file] [-D device] [-b] [-t secs]
 *        bandwidth -h URI [-W|-R] [-w window] [-m max] [-S size] ...
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct bw_opts {
	uint32_t rma_op, window, iters, warmup;
	bool warmup_set;
	uint64_t max, only, budget;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bandwidth -s [-o uri_file] [-D device] [-b] [-t secs]\n"
		"       bandwidth -h URI [-W|-R] [-c ro|ru] [-w window] [-m max] [-S size]\n"
		"                 [-i count] [-B bytes] [--warmup n] [-b] [-n] [-D device]\n"
		"                 [-t secs] [--json]\n"
		"  -s          server: accept one client, count, exit when it is done\n"
		"  -o FILE     server: write the endpoint URI to FILE (atomically)\n"
		"  -h URI      client: connect to the server at URI\n"
		"  -W / -R     stream RMA writes / reads instead of messages\n"
		"  -c ATTR     connection: ro (default) or ru\n"
		"  -w WINDOW   operations in flight (default 64)\n"
		"  -m MAX      largest size, k/m/g suffixes (messages: max_send_size;\n"
		"              RMA: default 4m)\n"
		"  -S SIZE     measure this size only\n"
		"  -i COUNT    operations per size at most (default 100000)\n"
		"  -B BYTES    bytes per size at most (default 256m; at least 16 operations)\n"
		"  --warmup N  untimed operations before each size (default a tenth)\n"
		"  -b          block in poll() on the endpoint's OS handle\n"
		"  -n          send with CCI_FLAG_NO_COPY\n"
		"  -D NAME     use device NAME instead of the default\n"
		"  -t SECS     give up after SECS without any event (default 30, 0: never)\n"
		"  --json      one JSON object per row on stdout (Opened goes to stderr)\n");
}

static void parse_one(struct bench *b, struct bw_opts *o, int c, const char *arg)
{
	if (bench_parse_common(b, c, arg))
		return;
	switch (c) {
	case 'W': o->rma_op = CCI_FLAG_WRITE; break;
	case 'R': o->rma_op = CCI_FLAG_READ; break;
	case 'w': o->window = perf_parse_count(arg, 1, 1u << 20); break;
	case 'm': o->max = perf_parse_size(arg); break;
	case 'S': o->only = perf_parse_size(arg); break;
	case 'i': o->iters = perf_parse_count(arg, 1, UINT32_MAX); break;
	case 'B': o->budget = perf_parse_size(arg); break;
	case 'u': o->warmup = perf_parse_count(arg, 0, UINT32_MAX);
		  o->warmup_set = true; break;
	case 'n': b->nocopy = true; break;
	case 'H': usage(stdout); exit(EXIT_SUCCESS);
	default: usage(stderr); exit(EXIT_FAILURE);
	}
}

static void parse_opts(struct bench *b, struct bw_opts *o, int argc, char **argv)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "warmup", required_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct bw_opts){ .window = 64, .iters = 100000, .budget = 256u << 20 };
	while ((c = getopt_long(argc, argv, "sh:o:D:c:WRw:m:S:i:B:bnt:", longs, NULL)) != -1)
		parse_one(b, o, c, optarg);
	bench_check_common(b, optind, argc);
	if (o->rma_op && !o->max)
		o->max = o->only ? o->only : 4u << 20;
	if (o->max > BENCH_MAX_RMA || o->only > BENCH_MAX_RMA)
		perf_die("sizes are limited to %llu bytes", BENCH_MAX_RMA);
	if (o->only && o->max && o->only > o->max)
		perf_die("-S is larger than -m");
	if (o->rma_op && o->only == 0 && o->max == 0)
		perf_die("RMA sizes start at 1 byte");
}

/* Enough operations to average over, within the count and byte limits. */
static uint64_t count_for(const struct bw_opts *o, uint64_t size)
{
	uint64_t n = o->budget / (size ? size : 1);

	if (n > o->iters)
		n = o->iters;
	return n < 16 ? 16 : n;
}

static void print_header(struct bench *b, const struct bw_opts *o, uint64_t max)
{
	if (b->json)
		return;
	printf("# %s transport (device %s), %s connection, %s streaming, window %u, "
	       "sizes up to %" PRIu64 "\n",
	       b->ep->device->transport, b->ep->device->name, perf_attr_name(b->attr),
	       perf_mode_name(o->rma_op), o->window, max);
	printf("%9s %9s %12s %14s\n", "Bytes", "Count", "MB/s", "Msgs/s");
}

static void print_row(struct bench *b, const struct bw_opts *o, uint64_t size,
		      uint64_t n, uint64_t ns)
{
	double s = (double)ns / 1e9;
	double mbps = (double)size * (double)n / s / 1e6, rate = (double)n / s;

	if (!b->json)
		printf("%9" PRIu64 " %9" PRIu64 " %12.2f %14.0f\n", size, n, mbps, rate);
	else
		printf("{\"benchmark\":\"bandwidth\",\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
		       ",\"window\":%u,\"seconds\":%.6f,\"throughput_MBps\":%.3f,"
		       "\"msg_rate\":%.1f,\"transport\":\"%s\",\"device\":\"%s\","
		       "\"attribute\":\"%s\",\"mode\":\"%s\",\"blocking\":%s,\"nocopy\":%s}\n",
		       size, n, o->window, s, mbps, rate, b->ep->device->transport,
		       b->ep->device->name, perf_attr_name(b->attr),
		       perf_mode_name(o->rma_op), b->blocking ? "true" : "false",
		       b->nocopy ? "true" : "false");
	fflush(stdout);
}

static void measure(struct bench *b, const struct bw_opts *o, uint64_t size)
{
	uint64_t n = count_for(o, size);
	uint64_t warm = o->warmup_set ? o->warmup : n / 10 + 1;

	if (warm)
		bench_stream(b, 1, o->window, o->rma_op, size, warm);
	print_row(b, o, size, n, bench_stream(b, 1, o->window, o->rma_op, size, n));
}

/* 1, 2, 4, ... then max itself when it is not a power of two. */
static void run_client(struct bench *b, const struct bw_opts *o)
{
	b->nconns = 1;
	uint64_t max = o->rma_op ? o->max : o->only ? o->only : o->max;

	/* RMA registers the buffer while connecting; messages learn their
	 * largest size from the connection */
	if (o->rma_op)
		bench_alloc(b, max);
	bench_connect(b, o->rma_op, o->rma_op ? max : 0);
	if (!o->rma_op) {
		uint32_t mss = b->conns[0]->max_send_size;

		if (o->only > mss)
			perf_die("-S %" PRIu64 " exceeds max_send_size %u", o->only, mss);
		if (!max || max > mss)
			max = mss;
		bench_alloc(b, max);
	}
	print_header(b, o, max);
	if (o->only) {
		measure(b, o, o->only);
	} else {
		for (uint64_t size = 1;; size = size * 2 > max ? max : size * 2) {
			measure(b, o, size);
			if (size == max)
				break;
		}
	}
	bench_done(b);
}

int main(int argc, char **argv)
{
	static struct bench b = { .prog = "bandwidth", .timeout_s = 30 };
	struct bw_opts o;

	perf_set_prog(b.prog);
	parse_opts(&b, &o, argc, argv);
	bench_open(&b);
	if (b.server)
		bench_serve(&b);
	else
		run_client(&b, &o);
	bench_close(&b);
	return EXIT_SUCCESS;
}
