/*
 * wire_rank_test - one rank of a libcci_wire check, started N times by a
 * launcher (mpirun, mpiexec.hydra, cci_wire_launch).
 *
 *   wire_rank_test -n N [-b BACKEND]          the whole contract
 *   wire_rank_test -n N -k K [-e] [-o DIR]    rank K dies while the others fence
 *   wire_rank_test -n N -s K                  rank K stalls while the others fence
 *
 * Without -k every rank checks: the backend (when -b), rank and size, the
 * hosts and local ranks (every rank runs on this host), two rounds of put,
 * fence and get of every rank's value (each key put twice, the second
 * value kept; the second round's values hold ';', '=' and '%'), a key nobody put (CCI_WIRE_ENOTFOUND naming its rank), a bad key,
 * a barrier; then prints "rank R of N: ok".  With -k K, rank K kills itself
 * by SIGKILL (with -e: exits 3) after init, while the others wait in a fence that must fail
 * with CCI_WIRE_EPEERDEAD naming rank K; they print "rank R of N: rank K
 * reported dead", also into DIR/rank.R when -o DIR is given: a launcher
 * that gives up on the job when a rank dies (mpiexec.hydra) takes the
 * survivors' standard output with it.  With -s K, rank K sleeps past the
 * others' fence timeout (CCI_WIRE_TIMEOUT, which must be short) before its
 * own fence: theirs must fail with CCI_WIRE_ETIMEDOUT naming rank K (a
 * backend that knows who is missing: local).  Exit 0 only if every check
 * passed.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cci_wire.h>

static int rank = -1;

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "rank %d: check failed at line %d: ", rank, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

static void check_hosts(cci_wire_t *w, int n)
{
	char host[HOST_NAME_MAX + 1] = "";

	gethostname(host, sizeof(host));
	for (int r = 0; r < n; r++)
		CHECK(cci_wire_host(w, r) && strcmp(cci_wire_host(w, r), host) == 0,
		      "host of rank %d is '%s', not '%s'", r, cci_wire_host(w, r), host);
	CHECK(cci_wire_host(w, n) == NULL && cci_wire_host(w, -1) == NULL,
	      "a host for a rank out of range");
	CHECK(cci_wire_local_size(w) == n && cci_wire_local_rank(w) == rank,
	      "local rank %d of %d, expected %d of %d (one host)", cci_wire_local_rank(w),
	      cci_wire_local_size(w), rank, n);
}

/* Put "<key><odd>-<rank>-of-<n>" under key (after a first value the second
 * put replaces), fence, and read every rank's.  odd: characters a launcher's
 * wire protocol may treat specially (";" ends a PMI-2 value, "=" a key). */
static void round_trip(cci_wire_t *w, int n, const char *key, const char *odd)
{
	char mine[64], want[64], *got;
	int rc;

	snprintf(mine, sizeof(mine), "%s%s-%d-of-%d", key, odd, rank, n);
	CHECK(cci_wire_put(w, key, "replaced") == CCI_WIRE_SUCCESS, "put: %s", cci_wire_error(w));
	CHECK(cci_wire_put(w, key, mine) == CCI_WIRE_SUCCESS, "put: %s", cci_wire_error(w));
	rc = cci_wire_fence(w);
	CHECK(rc == CCI_WIRE_SUCCESS, "fence: %s: %s", cci_wire_strerror(rc), cci_wire_error(w));
	for (int r = 0; r < n; r++) {
		snprintf(want, sizeof(want), "%s%s-%d-of-%d", key, odd, r, n);
		rc = cci_wire_get(w, r, key, &got);
		CHECK(rc == CCI_WIRE_SUCCESS, "get %s of rank %d: %s", key, r, cci_wire_error(w));
		CHECK(strcmp(got, want) == 0, "%s of rank %d is '%s', not '%s'", key, r, got, want);
		free(got);
	}
}

static void check_errors(cci_wire_t *w, int n)
{
	int other = (rank + 1) % n, rc;
	char *got = NULL;

	rc = cci_wire_get(w, other, "nobody-put-this", &got);
	CHECK(rc == CCI_WIRE_ENOTFOUND && cci_wire_error_rank(w) == other && !got,
	      "get of a missing key: %s (rank %d), expected CCI_WIRE_ENOTFOUND for rank %d",
	      cci_wire_strerror(rc), cci_wire_error_rank(w), other);
	CHECK(strstr(cci_wire_error(w), "nobody-put-this") != NULL,
	      "the error names no key: %s", cci_wire_error(w));
	CHECK(cci_wire_put(w, "a key", "v") == CCI_WIRE_EINVAL, "a key with a space accepted");
	CHECK(cci_wire_put(w, "cci_wire.host", "v") == CCI_WIRE_EINVAL, "a reserved key accepted");
	CHECK(cci_wire_put(w, "k", "a b") == CCI_WIRE_EINVAL, "a value with a space accepted");
	CHECK(cci_wire_get(w, n, "uri", &got) == CCI_WIRE_EINVAL, "rank %d accepted", n);
}

static const char *out_dir;
static int victim_exits;   /* -e: the victim exits instead of being killed */

static int run_kill(cci_wire_t *w, int n, int victim)
{
	char path[512];
	FILE *f;
	const struct timespec nap = { .tv_nsec = 300000000L };
	int rc;

	if (rank == victim) {
		/* Let the others enter the fence first: it dies mid-fence. */
		nanosleep(&nap, NULL);
		if (victim_exits)
			_exit(3);
		raise(SIGKILL);
	}
	CHECK(cci_wire_put(w, "uri", "x") == CCI_WIRE_SUCCESS, "put: %s", cci_wire_error(w));
	rc = cci_wire_fence(w);
	CHECK(rc == CCI_WIRE_EPEERDEAD && cci_wire_error_rank(w) == victim,
	      "fence with rank %d killed: %s (rank %d): %s", victim, cci_wire_strerror(rc),
	      cci_wire_error_rank(w), cci_wire_error(w));
	printf("rank %d of %d: rank %d reported dead: %s\n", rank, n, victim, cci_wire_error(w));
	if (out_dir) {
		snprintf(path, sizeof(path), "%s/rank.%d", out_dir, rank);
		f = fopen(path, "w");
		CHECK(f, "cannot write %s", path);
		fprintf(f, "rank %d of %d: rank %d reported dead: %s\n", rank, n, victim,
		        cci_wire_error(w));
		CHECK(fclose(f) == 0, "cannot write %s", path);
	}
	return 0;
}

static int run_stall(cci_wire_t *w, int n, int late)
{
	const struct timespec nap = { .tv_sec = 1, .tv_nsec = 0 };
	const char *t = getenv("CCI_WIRE_TIMEOUT");
	int rc;

	CHECK(t && atoi(t) >= 1 && atoi(t) <= 5, "-s needs CCI_WIRE_TIMEOUT of 1 to 5 s");
	if (rank == late)
		for (int i = 0; i < atoi(t) + 2; i++)
			nanosleep(&nap, NULL);
	rc = cci_wire_fence(w);
	/* The others entered the fence before giving up: the late rank may
	 * well complete it, and owes no verdict. */
	if (rank == late)
		return 0;
	CHECK(rc == CCI_WIRE_ETIMEDOUT && cci_wire_error_rank(w) == late,
	      "fence with rank %d late: %s (rank %d): %s", late, cci_wire_strerror(rc),
	      cci_wire_error_rank(w), cci_wire_error(w));
	printf("rank %d of %d: rank %d reported late: %s\n", rank, n, late, cci_wire_error(w));
	return 0;
}

int main(int argc, char **argv)
{
	const char *backend = NULL;
	int n = 0, victim = -1, late = -1, c, rc;
	char why[512];
	cci_wire_t *w;

	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt(argc, argv, "n:b:k:o:es:")) != -1) {
		switch (c) {
		case 'n': n = atoi(optarg); break;
		case 'b': backend = optarg; break;
		case 'k': victim = atoi(optarg); break;
		case 'o': out_dir = optarg; break;
		case 'e': victim_exits = 1; break;
		case 's': late = atoi(optarg); break;
		default: return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = cci_wire_init(&w, why, sizeof(why));
	CHECK(rc == CCI_WIRE_SUCCESS, "init: %s: %s", cci_wire_strerror(rc), why);
	rank = cci_wire_rank(w);
	CHECK(cci_wire_size(w) == n && rank >= 0 && rank < n, "rank %d of size %d, expected size %d",
	      rank, cci_wire_size(w), n);
	CHECK(!backend || strcmp(cci_wire_backend(w), backend) == 0, "backend %s, expected %s",
	      cci_wire_backend(w), backend);
	if (victim >= 0) {
		rc = run_kill(w, n, victim);
		/* The job is broken: leave without the launcher's goodbye. */
		_exit(rc);
	}
	if (late >= 0) {
		rc = run_stall(w, n, late);
		cci_wire_finalize(w);
		return rc;
	}
	check_hosts(w, n);
	round_trip(w, n, "uri", "");
	round_trip(w, n, "uri2", ";a=b;;%3B%");
	check_errors(w, n);
	rc = cci_wire_barrier(w);
	CHECK(rc == CCI_WIRE_SUCCESS, "barrier: %s", cci_wire_error(w));
	printf("rank %d of %d: ok (%s)\n", rank, n, cci_wire_backend(w));
	cci_wire_finalize(w);
	return 0;
}
