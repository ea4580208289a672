/*
 * allreduce - pi by numerical integration over N processes, the partial
 * sums combined by an allreduce built on CCI.
 *
 *   allreduce [-n 2,4,8] [-v am|rma|both] [-k iters] [-m intervals] [-t secs]
 *   allreduce -r RANK -d DIR -n N -v am|rma [-k iters] [-m intervals] [-t secs]
 *   mpirun -np N allreduce -w -v am|rma [-x device] [-V] [-k iters] [-m intervals]
 *                                       [-t secs]
 *
 * For each variant and each N the launcher forks N ranks (before any CCI
 * call of its own, so nothing of the library crosses a fork).  The ranks
 * exchange URIs through a fresh directory, connect to their partners, and
 * run `iters` allreduces of their slice of the midpoint sum (after one
 * untimed one); each checks every result against the single-process sum
 * computed here, to 1e-12 relative.  One line per run gives the time per
 * allreduce; the last line is "P passed, F failed" and the exit status is
 * 0 only if every rank of every run passed.  Each run is bounded by -t.
 *
 * With -r the program is one rank only, of one run whose ranks are started
 * by hand or by a remote shell, on hosts that share DIR (created empty
 * beforehand); rank 0 prints the line.
 *
 * With -w the program is one rank of a run started by a launcher (Open
 * MPI's mpirun, MPICH's mpiexec.hydra, cci_wire_launch): rank, N and the
 * partners' URIs come from libcci_wire instead of -r, -n and a directory;
 * rank 0 prints the line.  Each rank reaches the ranks of its own host
 * through an sm endpoint and the others through an endpoint on the -x
 * device or transport (by default the first that is up and not sm); -V
 * prints, for each rank, the transport of each partner.  Without a
 * launcher, -x names the one device every rank uses.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ar.h"
#include "ex_util.h"

struct ar_opts {
	int rank;                  /* -r, or -1: launch every rank */
	bool wired;                /* -w: one rank, started by a launcher */
	const char *dir;
	const char *net_device;    /* -x */
	bool show_links;           /* -V */
	int ns[AR_MAX_RANKS];
	unsigned count;
	bool am, rma;
	unsigned iters, time_limit_s;
	uint64_t intervals;
};

static int fork_ranks(const struct ar_config *cfg, pid_t *pids)
{
	for (int i = 0; i < cfg->n; i++) {
		fflush(stdout);
		pids[i] = fork();
		if (pids[i] == 0) {
			int rc = ar_rank_main(cfg, i);

			fflush(stdout);
			fflush(stderr);
			_exit(rc);
		}
		if (pids[i] < 0)
			return -1;
	}
	return 0;
}

/* Reap the ranks until the deadline, then kill the rest; how many
 * exited 0. */
static int reap_ranks(int n, pid_t *pids, uint64_t deadline)
{
	const struct timespec nap = { .tv_nsec = 5000000L };
	int ok = 0, left = 0;

	for (int i = 0; i < n; i++)
		left += pids[i] > 0;
	while (left && ex_now_ns() < deadline) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);

		if (pid == 0)
			nanosleep(&nap, NULL);
		if (pid < 0 && errno != EINTR)
			break;
		for (int i = 0; pid > 0 && i < n; i++)
			if (pids[i] == pid) {
				ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
				pids[i] = 0;
				left--;
			}
	}
	for (int i = 0; i < n; i++)
		if (pids[i] > 0) {
			fprintf(stderr, "allreduce: rank %d still running at the time limit\n", i);
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
	return ok;
}

static bool read_result(const char *dir, double *us, double *sum)
{
	char path[512];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/result", dir);
	f = fopen(path, "r");
	if (!f)
		return false;
	ok = fscanf(f, "%lf %lf", us, sum) == 2;
	fclose(f);
	unlink(path);
	return ok;
}

static void clean_dir(const char *dir, int n)
{
	char path[512];

	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%d.uri", dir, i);
		unlink(path);
	}
	rmdir(dir);
}

/* One run of n ranks; true when every rank passed. */
static bool run_one(const struct ar_opts *o, const struct ar_exchange *ex, int n,
		    double reference)
{
	char dir[] = "/tmp/allreduce-XXXXXX";
	struct ar_config cfg = {
		.n = n, .ex = ex, .iters = o->iters, .intervals = o->intervals,
		.reference = reference, .dir = dir, .time_limit_s = o->time_limit_s,
		.net_device = o->net_device, .show_links = o->show_links,
	};
	pid_t pids[AR_MAX_RANKS] = { 0 };
	double us = 0, sum = 0;
	int ok = 0;
	bool good;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return false;
	}
	if (fork_ranks(&cfg, pids) == 0)
		ok = reap_ranks(n, pids, ex_deadline_ms(o->time_limit_s * 1000ull + 5000));
	else
		reap_ranks(n, pids, ex_deadline_ms(1000));
	good = read_result(dir, &us, &sum) && ok == n;
	printf("%-4s N=%d  %10.2f us per allreduce  pi = %.15f  rel. error %.1e  %s\n",
	       ex->name, n, us, sum, fabs(sum - reference) / reference,
	       good ? "ok" : "FAILED");
	fflush(stdout);
	clean_dir(dir, n);
	return good;
}

static void usage(void)
{
	fprintf(stderr, "usage: allreduce [-n 2,4,8] [-v am|rma|both] [-x device] [-V] "
		"[-k iters] [-m intervals] [-t secs]\n"
		"       allreduce -r RANK -d DIR -n N -v am|rma [-x device] [-V] [-k iters] "
		"[-m intervals] [-t secs]\n"
		"       LAUNCHER allreduce -w -v am|rma [-x device|transport] [-V] [-k iters] "
		"[-m intervals] [-t secs]\n");
	exit(EXIT_FAILURE);
}

static void parse_ns(struct ar_opts *o, const char *list)
{
	char *copy = strdup(list), *save = NULL;

	o->count = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int n = atoi(t);

		if (n < 2 || n > AR_MAX_RANKS || o->count == AR_MAX_RANKS)
			usage();
		o->ns[o->count++] = n;
	}
	free(copy);
	if (!o->count)
		usage();
}

static void parse_opts(struct ar_opts *o, int argc, char **argv)
{
	int c;

	*o = (struct ar_opts){ .rank = -1, .ns = { 2, 4, 8 }, .count = 3,
			       .am = true, .rma = true,
			       .iters = 1000, .time_limit_s = 60,
			       .intervals = 10000000 };
	while ((c = getopt(argc, argv, "n:v:k:m:t:r:d:wx:V")) != -1) {
		switch (c) {
		case 'x': o->net_device = optarg; break;
		case 'V': o->show_links = true; break;
		case 'r': o->rank = atoi(optarg); break;
		case 'd': o->dir = optarg; break;
		case 'w': o->wired = true; break;
		case 'n': parse_ns(o, optarg); break;
		case 'v':
			o->am = !strcmp(optarg, "am") || !strcmp(optarg, "both");
			o->rma = !strcmp(optarg, "rma") || !strcmp(optarg, "both");
			if (!o->am && !o->rma)
				usage();
			break;
		case 'k': o->iters = (unsigned)atoi(optarg); break;
		case 'm': o->intervals = strtoull(optarg, NULL, 10); break;
		case 't': o->time_limit_s = (unsigned)atoi(optarg); break;
		default: usage();
		}
	}
	if (optind != argc || o->intervals < AR_MAX_RANKS || !o->time_limit_s)
		usage();
	if (o->rank >= 0 && (!o->dir || o->count != 1 || o->rank >= o->ns[0] ||
			     o->am == o->rma))
		usage();
	if (o->wired && (o->rank >= 0 || o->dir || o->am == o->rma))
		usage();
}

/* -w: this process is one rank of a run its launcher started. */
static int run_wired(const struct ar_opts *o, double reference)
{
	struct ar_config cfg = {
		.ex = o->am ? &ar_am_exchange : &ar_rma_exchange,
		.iters = o->iters, .intervals = o->intervals, .reference = reference,
		.time_limit_s = o->time_limit_s,
		.net_device = o->net_device, .show_links = o->show_links,
	};
	char why[512];
	int rc, rank;

	rc = cci_wire_init(&cfg.wire, why, sizeof(why));
	if (rc != CCI_WIRE_SUCCESS) {
		fprintf(stderr, "allreduce: wire-up: %s\n", why);
		return EXIT_FAILURE;
	}
	cfg.n = cci_wire_size(cfg.wire);
	rank = cci_wire_rank(cfg.wire);
	if (cfg.n < 2 || cfg.n > AR_MAX_RANKS) {
		fprintf(stderr, "allreduce[%d]: %d ranks started; 2 to %d run\n", rank, cfg.n,
			AR_MAX_RANKS);
		rc = EXIT_FAILURE;
	} else {
		rc = ar_rank_main(&cfg, rank);
	}
	cci_wire_finalize(cfg.wire);
	return rc;
}

/* -r: this process is one rank of a run started elsewhere. */
static int run_rank(const struct ar_opts *o, double reference)
{
	double us = 0, sum = 0;
	struct ar_config cfg = {
		.n = o->ns[0], .ex = o->am ? &ar_am_exchange : &ar_rma_exchange,
		.iters = o->iters, .intervals = o->intervals, .reference = reference,
		.dir = o->dir, .time_limit_s = o->time_limit_s,
		.net_device = o->net_device, .show_links = o->show_links,
	};
	int rc = ar_rank_main(&cfg, o->rank);

	if (rc == EXIT_SUCCESS && o->rank == 0 && read_result(o->dir, &us, &sum))
		printf("%-4s N=%d  %10.2f us per allreduce  pi = %.15f  rel. error %.1e\n",
		       cfg.ex->name, cfg.n, us, sum, fabs(sum - reference) / reference);
	return rc;
}

int main(int argc, char **argv)
{
	const struct ar_exchange *exs[2];
	unsigned nex = 0, passed = 0, failed = 0;
	struct ar_opts o;
	double reference;

	parse_opts(&o, argc, argv);
	reference = ar_pi_partial(o.intervals, 0, o.intervals);
	if (o.rank >= 0)
		return run_rank(&o, reference);
	if (o.wired)
		return run_wired(&o, reference);
	if (o.am)
		exs[nex++] = &ar_am_exchange;
	if (o.rma)
		exs[nex++] = &ar_rma_exchange;
	printf("pi by the midpoint rule: %llu intervals, %u timed allreduces per run, "
	       "single process: %.15f\n", (unsigned long long)o.intervals, o.iters,
	       reference);
	for (unsigned v = 0; v < nex; v++)
		for (unsigned i = 0; i < o.count; i++) {
			if (run_one(&o, exs[v], o.ns[i], reference))
				passed++;
			else
				failed++;
		}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
