/*
 * coll_common.c - options, data, checks and rows of coll and coll_mpi.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_common.h"

static void coll_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void coll_die(const char *fmt, ...)
{
	va_list ap;

	fputs("coll: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_FAILURE);
}

static void usage(FILE *f, bool cci_side)
{
	fprintf(f,
		"usage: LAUNCHER -n N %s -o allreduce|bcast [-S sizes] [-i iters] [-B bytes]\n"
		"                [-t secs]%s\n"
		"  -o OP       allreduce (sum of doubles) or bcast (from rank 0)\n"
		"  -S SIZES    comma-separated byte counts, multiples of 8 (k, m suffixes;\n"
		"              default 8,64,512,4k,32k,256k,1m)\n"
		"  -i ITERS    timed calls per size (default: -B / size, 20..10000)\n"
		"  -B BYTES    bytes per size when -i is not given (default 64m)\n"
		"  -t SECS     give up after SECS without progress (default 60)\n",
		cci_side ? "coll" : "coll_mpi",
		cci_side ? " [-m am|rma] [-p spin|yield|block] [-R bytes] [-C bytes]" : "");
	if (cci_side)
		fprintf(f,
			"  -m HOW      values in active messages (am, default) or by RMA writes\n"
			"  -p HOW      when no event is there: spin (default), sched_yield, or\n"
			"              block on the endpoint's OS handle\n"
			"  -R BYTES    allreduce by reduce-scatter and allgather from BYTES on,\n"
			"              recursive doubling below (default 16k)\n"
			"  -C BYTES    rma: bytes per RMA write (default 128k)\n");
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s)
		coll_die("not a size: %s", s);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (*end || v == 0 || v > (1ull << 30))
		coll_die("not a size (1 .. 1g): %s", s);
	return v;
}

static void parse_sizes(struct coll_opts *o, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;

	o->nsizes = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v = parse_size(t);

		if (o->nsizes == COLL_MAX_SIZES)
			coll_die("at most %d sizes", COLL_MAX_SIZES);
		if (v % 8)
			coll_die("%" PRIu64 " bytes: sizes are multiples of 8 (doubles)", v);
		o->sizes[o->nsizes++] = v;
	}
	free(copy);
	if (!o->nsizes)
		coll_die("no sizes in -S %s", arg);
}

void coll_parse(struct coll_opts *o, int argc, char **argv, bool cci_side)
{
	static const struct option longs[] = { { "help", no_argument, NULL, 'H' },
					       { NULL, 0, NULL, 0 } };
	bool have_op = false;
	int c;

	*o = (struct coll_opts){ .budget = 64u << 20, .rab_from = 16u << 10,
				 .chunk = 128u << 10, .timeout_s = 60 };
	parse_sizes(o, "8,64,512,4k,32k,256k,1m");
	while ((c = getopt_long(argc, argv, "o:S:i:B:t:m:p:R:C:", longs, NULL)) != -1) {
		if (!cci_side && strchr("mpRC", c))
			c = '?';
		switch (c) {
		case 'o':
			if (!strcmp(optarg, "allreduce"))
				o->op = COLL_ALLREDUCE;
			else if (!strcmp(optarg, "bcast"))
				o->op = COLL_BCAST;
			else
				coll_die("-o allreduce or bcast, not %s", optarg);
			have_op = true;
			break;
		case 'S': parse_sizes(o, optarg); break;
		case 'i': o->iters = (uint32_t)parse_size(optarg); break;
		case 'B': o->budget = parse_size(optarg); break;
		case 't': o->timeout_s = (unsigned)parse_size(optarg); break;
		case 'm':
			if (strcmp(optarg, "am") && strcmp(optarg, "rma"))
				coll_die("-m am or rma, not %s", optarg);
			o->rma = !strcmp(optarg, "rma");
			break;
		case 'p':
			if (!strcmp(optarg, "spin"))
				o->poll = COLL_POLL_SPIN;
			else if (!strcmp(optarg, "yield"))
				o->poll = COLL_POLL_YIELD;
			else if (!strcmp(optarg, "block"))
				o->poll = COLL_POLL_BLOCK;
			else
				coll_die("-p spin, yield or block, not %s", optarg);
			break;
		case 'R': o->rab_from = parse_size(optarg); break;
		case 'C': o->chunk = parse_size(optarg); break;
		case 'H': usage(stdout, cci_side); exit(EXIT_SUCCESS);
		default: usage(stderr, cci_side); exit(EXIT_FAILURE);
		}
	}
	if (optind != argc || !have_op) {
		usage(stderr, cci_side);
		exit(EXIT_FAILURE);
	}
	for (unsigned i = 0; i < o->nsizes; i++)
		if (o->sizes[i] > o->max_size)
			o->max_size = o->sizes[i];
}

const char *coll_op_name(enum coll_op op)
{
	return op == COLL_BCAST ? "bcast" : "allreduce";
}

uint32_t coll_iters(const struct coll_opts *o, uint64_t size)
{
	uint64_t n = o->budget / size;

	if (o->iters)
		return o->iters;
	return (uint32_t)(n < 20 ? 20 : n > 10000 ? 10000 : n);
}

static unsigned char bc_byte(uint64_t i, uint32_t round)
{
	return (unsigned char)(i * 7 + round * 13 + (i >> 12));
}

void coll_fill(enum coll_op op, int rank, uint32_t round, unsigned char *in,
	       unsigned char *out, uint64_t size)
{
	if (op == COLL_BCAST) {
		for (uint64_t i = 0; i < size; i++)
			out[i] = (unsigned char)(rank ? ~bc_byte(i, round) : bc_byte(i, round));
		return;
	}
	for (uint64_t j = 0; j < size / 8; j++) {
		double v = rank + 1 + (double)((j + round) % 7), nan = -1e300;

		memcpy(in + 8 * j, &v, 8);
		memcpy(out + 8 * j, &nan, 8);
	}
}

uint64_t coll_verify(enum coll_op op, int n, uint32_t round, const unsigned char *out,
		     uint64_t size)
{
	uint64_t bad = 0;

	if (op == COLL_BCAST) {
		for (uint64_t i = 0; i < size; i++)
			bad += out[i] != bc_byte(i, round);
		return bad;
	}
	for (uint64_t j = 0; j < size / 8; j++) {
		double want = n * (n + 1) / 2.0 + n * (double)((j + round) % 7), got;

		memcpy(&got, out + 8 * j, 8);
		bad += got != want;
	}
	return bad;
}

void coll_print_header(const struct coll_opts *o, const char *impl, int n,
		       const char *transport)
{
	printf("# %s, %s over %s, %d ranks\n", coll_op_name(o->op), impl, transport, n);
	printf("%-9s %-4s %5s %10s %7s %12s %10s %6s\n", "op", "impl", "ranks", "bytes",
	       "iters", "usec", "MB/s", "wrong");
	fflush(stdout);
}

void coll_print_row(const struct coll_opts *o, const char *impl, int n, uint64_t size,
		    uint32_t iters, double us, uint64_t bad)
{
	printf("%-9s %-4s %5d %10" PRIu64 " %7u %12.3f %10.1f %6" PRIu64 "\n",
	       coll_op_name(o->op), impl, n, size, iters, us, (double)size / us, bad);
	fflush(stdout);
}

uint64_t rs_region_start(int rank, int n, uint64_t size, int k)
{
	uint64_t start = 0;

	for (int j = 0; j <= k; j++)
		if (rank & (n >> (j + 1)))
			start += size >> (j + 1);
	return start;
}

bool is_partner(int a, int b)
{
	int x = a ^ b;

	return x && !(x & (x - 1));
}
