/*
 * rpc_demo - the RPC runtime from the command line.
 *
 *   rpc_demo -s [-o uri_file] [-D device] [-S service] [-x clients] [-t secs]
 *       serve the procedures of rpc_procs.h (upper, checksum, transform,
 *       fill, fail, slow); print the URI (and write it to uri_file); stop
 *       after `clients` clients have come and gone, after secs seconds, or
 *       on SIGINT/SIGTERM.
 *   rpc_demo (-h URI | -f uri_file) [-D device] PROC [TEXT]
 *       call PROC with TEXT as the argument and print the result (as text
 *       if printable, else in hex).
 *   rpc_demo (-h URI | -f uri_file) [-D device] -b CALLS [-z BYTES] [-w W]
 *       CALLS transform calls of BYTES each (default 64; over 1024 they go
 *       by RMA), W in flight (default 32); every result is checked and
 *       the rate printed.
 *   LAUNCHER rpc_demo -W [-D device] [-t secs] (PROC [TEXT] | -b CALLS ...)
 *       started N times by a launcher (mpirun, mpiexec.hydra,
 *       cci_wire_launch): rank 0 serves N - 1 clients, publishing its URI
 *       through libcci_wire; every other rank makes the call or the
 *       benchmark above against it.
 */
#include <ctype.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cci_wire.h>

#include "ex_util.h"
#include "rpc.h"
#include "rpc_procs.h"

#define DEMO_RESULT_MAX (1u << 20)
#define DEMO_URI_WAIT_MS 10000

struct demo_opts {
	bool server, wired;
	const char *uri, *uri_file, *out_file, *device, *service;
	unsigned clients, secs, bench_calls, window;
	size_t bench_size;
};

static volatile sig_atomic_t demo_stop;

static void on_signal(int sig)
{
	(void)sig;
	demo_stop = 1;
}

/* -W: rank 0's URI, for every rank once the fence is passed. */
static int wire_publish(cci_wire_t *wire, const char *uri)
{
	int rc = uri ? cci_wire_put(wire, "rpc_uri", uri) : CCI_WIRE_SUCCESS;

	if (rc == CCI_WIRE_SUCCESS)
		rc = cci_wire_fence(wire);
	if (rc != CCI_WIRE_SUCCESS)
		fprintf(stderr, "rpc_demo[%d]: publishing the server's URI: %s\n",
			cci_wire_rank(wire), cci_wire_error(wire));
	return rc;
}

static int serve(const struct demo_opts *o, cci_wire_t *wire)
{
	struct rpc_server_opts so = { .device = o->device, .service = o->service };
	uint64_t deadline = o->secs ? ex_deadline_ms(o->secs * 1000ull) : UINT64_MAX;
	struct rpc_server_stats st = { 0 };
	struct rpc_server *s;
	int rc = rpc_server_create(&so, &s);

	if (rc != RPC_OK) {
		fprintf(stderr, "rpc_demo: %s\n", rpc_strerror(rc));
		return EXIT_FAILURE;
	}
	rc = rpc_procs_register(s);
	printf("serving at %s\n", rpc_server_uri(s));
	fflush(stdout);
	if (o->out_file && ex_uri_write(o->out_file, rpc_server_uri(s)) != 0)
		perror(o->out_file);
	if (wire && wire_publish(wire, rpc_server_uri(s)) != CCI_WIRE_SUCCESS) {
		rpc_server_destroy(s);
		return EXIT_FAILURE;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	while (rc == RPC_OK && !demo_stop && ex_now_ns() < deadline &&
	       !(o->clients && st.clients >= o->clients && st.open == 0)) {
		rc = rpc_server_progress(s, 100);
		rpc_server_stats(s, &st);
	}
	printf("served %llu calls from %u clients\n",
	       (unsigned long long)st.calls, st.clients);
	rpc_server_destroy(s);
	return rc == RPC_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}

static void print_result(const unsigned char *p, size_t len)
{
	bool text = true;

	for (size_t i = 0; i < len; i++)
		text = text && (isprint(p[i]) || isspace(p[i]));
	if (text) {
		printf("%.*s\n", (int)len, (const char *)p);
		return;
	}
	for (size_t i = 0; i < len; i++)
		printf("%02x", p[i]);
	printf("\n");
}

static int call_once(struct rpc_client *c, const char *proc, const char *text)
{
	unsigned char *res = malloc(DEMO_RESULT_MAX);
	struct rpc_reply reply = { 0 };
	int rc;

	if (!res)
		return RPC_ENOMEM;
	rc = rpc_call(c, proc, text, text ? strlen(text) : 0, res, DEMO_RESULT_MAX,
		      &reply);
	if (rc == RPC_OK)
		print_result(res, reply.result_len);
	else if (rc == RPC_EPROC)
		fprintf(stderr, "%s failed with %d\n", proc, reply.proc_rc);
	free(res);
	return rc;
}

/* Wait for call id and check its transform against want. */
static int bench_collect(struct rpc_client *c, rpc_call_id_t id,
			 const unsigned char *want, const unsigned char *res,
			 size_t size)
{
	struct rpc_reply reply = { 0 };
	int rc = rpc_wait(c, id, &reply);

	if (rc == RPC_OK && (reply.result_len != size || memcmp(res, want, size)))
		rc = RPC_EPROTO;
	return rc;
}

static int bench(struct rpc_client *c, const struct demo_opts *o)
{
	size_t size = o->bench_size, w = o->window;
	unsigned char *arg = malloc(size + 1), *want = malloc(size + 1);
	unsigned char *res = malloc((size + 1) * w);
	rpc_call_id_t *ids = calloc(w, sizeof(*ids));
	uint64_t t0 = ex_now_ns();
	int rc = arg && want && res && ids ? RPC_OK : RPC_ENOMEM;

	if (rc == RPC_OK) {
		rpc_procs_fill(arg, size, 1);
		rpc_procs_transform(arg, size, want);
	}
	for (unsigned i = 0; rc == RPC_OK && i < o->bench_calls + w; i++) {
		size_t slot = i % w;

		if (i >= w)
			rc = bench_collect(c, ids[slot], want, res + slot * (size + 1), size);
		if (rc == RPC_OK && i < o->bench_calls)
			rc = rpc_call_async(c, "transform", arg, size,
					    res + slot * (size + 1), size, &ids[slot]);
	}
	if (rc == RPC_OK)
		printf("%u transform calls of %zu bytes, %zu in flight: %.0f calls/s\n",
		       o->bench_calls, size, w,
		       o->bench_calls / ((double)(ex_now_ns() - t0) / 1e9));
	free(arg), free(want), free(res), free(ids);
	return rc;
}

/* The server's URI: -h, -f, or rank 0's through the launcher; malloc'd. */
static int server_uri(const struct demo_opts *o, cci_wire_t *wire, char **uri_p)
{
	if (wire) {
		if (wire_publish(wire, NULL) == CCI_WIRE_SUCCESS &&
		    cci_wire_get(wire, 0, "rpc_uri", uri_p) == CCI_WIRE_SUCCESS)
			return 0;
		fprintf(stderr, "rpc_demo[%d]: no server URI: %s\n", cci_wire_rank(wire),
			cci_wire_error(wire));
		return -1;
	}
	if (o->uri) {
		*uri_p = strdup(o->uri);
		return *uri_p ? 0 : -1;
	}
	if (ex_uri_read(o->uri_file, ex_deadline_ms(DEMO_URI_WAIT_MS), uri_p)) {
		fprintf(stderr, "rpc_demo: no URI in %s\n", o->uri_file);
		return -1;
	}
	return 0;
}

static int call(const struct demo_opts *o, cci_wire_t *wire, int argc, char **argv)
{
	struct rpc_client_opts co = { .device = o->device, .max_inflight = o->window };
	char *uri = NULL;
	struct rpc_client *c;
	int rc;

	if (server_uri(o, wire, &uri) != 0)
		return EXIT_FAILURE;
	rc = rpc_client_open(uri, &co, &c);
	free(uri);
	if (rc == RPC_OK) {
		rc = o->bench_calls ? bench(c, o)
				    : call_once(c, argv[0], argc > 1 ? argv[1] : NULL);
		rpc_client_close(c);
	}
	if (rc != RPC_OK)
		fprintf(stderr, "rpc_demo: %s\n", rpc_strerror(rc));
	return rc == RPC_OK ? EXIT_SUCCESS : EXIT_FAILURE;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rpc_demo -s [-o uri_file] [-D device] [-S service] [-x clients] [-t secs]\n"
		"       rpc_demo (-h URI | -f uri_file) [-D device] PROC [TEXT]\n"
		"       rpc_demo (-h URI | -f uri_file) [-D device] -b CALLS [-z BYTES] [-w W]\n"
		"       LAUNCHER rpc_demo -W [-D device] [-t secs] (PROC [TEXT] | -b CALLS ...)\n");
	exit(EXIT_FAILURE);
}

static void parse_opts(struct demo_opts *o, int argc, char **argv)
{
	int c;

	*o = (struct demo_opts){ .window = 32, .bench_size = 64 };
	while ((c = getopt(argc, argv, "so:D:S:x:t:h:f:b:z:w:W")) != -1) {
		switch (c) {
		case 's': o->server = true; break;
		case 'o': o->out_file = optarg; break;
		case 'D': o->device = optarg; break;
		case 'S': o->service = optarg; break;
		case 'x': o->clients = (unsigned)atoi(optarg); break;
		case 't': o->secs = (unsigned)atoi(optarg); break;
		case 'h': o->uri = optarg; break;
		case 'f': o->uri_file = optarg; break;
		case 'b': o->bench_calls = (unsigned)atoi(optarg); break;
		case 'z': o->bench_size = (size_t)atol(optarg); break;
		case 'w': o->window = (unsigned)atoi(optarg); break;
		case 'W': o->wired = true; break;
		default: usage();
		}
	}
	if (!o->window)
		usage();
	if (o->wired && (o->server || o->uri || o->uri_file || o->out_file || o->clients ||
			 (!o->bench_calls && optind >= argc)))
		usage();
	if (!o->wired && !o->server && (!(o->uri || o->uri_file) ||
					(!o->bench_calls && optind >= argc)))
		usage();
}

/* -W: rank 0 serves the others, who call it. */
static int run_wired(struct demo_opts *o, int argc, char **argv)
{
	char why[512];
	cci_wire_t *wire;
	int rc = cci_wire_init(&wire, why, sizeof(why));

	if (rc != CCI_WIRE_SUCCESS) {
		fprintf(stderr, "rpc_demo: wire-up: %s\n", why);
		return EXIT_FAILURE;
	}
	if (cci_wire_size(wire) < 2) {
		fprintf(stderr, "rpc_demo: -W needs 2 ranks or more, got %d\n",
			cci_wire_size(wire));
		rc = EXIT_FAILURE;
	} else if (cci_wire_rank(wire) == 0) {
		o->clients = (unsigned)cci_wire_size(wire) - 1;
		rc = serve(o, wire);
	} else {
		rc = call(o, wire, argc, argv);
	}
	cci_wire_finalize(wire);
	return rc;
}

int main(int argc, char **argv)
{
	struct demo_opts o;

	parse_opts(&o, argc, argv);
	if (o.wired)
		return run_wired(&o, argc - optind, argv + optind);
	if (o.server)
		return serve(&o, NULL);
	return call(&o, NULL, argc - optind, argv + optind);
}
