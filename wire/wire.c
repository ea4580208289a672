/*
 * wire.c - the public calls of libcci_wire: backend choice, argument
 * checks, the host exchange of init, and the wait of collective calls.
 *
 * A launcher that loses a rank may say nothing about it to the others
 * (PMI-1 has no word for it; PMIx servers may keep a fence waiting), so
 * while a collective call waits it watches the ranks of its own host by
 * pid: one that is gone for longer than a grace period, while the fence
 * has still not completed, is named as dead.  The grace period covers a
 * rank that passed the fence and exited before this rank's launcher
 * connection delivered the same news.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wire_int.h"

#define PEER_GRACE_S 1.0
#define PEER_CHECK_S 0.05
#define KEY_HOST "cci_wire.host"
#define KEY_PID "cci_wire.pid"

const char *cci_wire_strerror(int status)
{
	switch (status) {
	case CCI_WIRE_SUCCESS: return "CCI_WIRE_SUCCESS";
	case CCI_WIRE_ENOLAUNCHER: return "CCI_WIRE_ENOLAUNCHER";
	case CCI_WIRE_ELAUNCHER: return "CCI_WIRE_ELAUNCHER";
	case CCI_WIRE_EPEERDEAD: return "CCI_WIRE_EPEERDEAD";
	case CCI_WIRE_ETIMEDOUT: return "CCI_WIRE_ETIMEDOUT";
	case CCI_WIRE_ENOTFOUND: return "CCI_WIRE_ENOTFOUND";
	case CCI_WIRE_EINVAL: return "CCI_WIRE_EINVAL";
	case CCI_WIRE_ENOMEM: return "CCI_WIRE_ENOMEM";
	default: return "unknown cci_wire status";
	}
}

int wire_fail(struct cci_wire *w, int rc, int rank, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->err, sizeof(w->err), fmt, ap);
	va_end(ap);
	w->err_rank = rank;
	return rc;
}

double wire_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int wire_pid_dead(pid_t pid)
{
	char path[64], buf[256], *paren;
	FILE *f;
	int dead = 0;

	if (pid <= 0)
		return 0;
	if (kill(pid, 0) != 0)
		return errno == ESRCH;
	/* A zombie still answers kill(): its state in /proc says Z. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return errno == ENOENT;
	if (fgets(buf, sizeof(buf), f) && (paren = strrchr(buf, ')')) != NULL)
		dead = paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
	fclose(f);
	return dead;
}

/* ------------------------------------------------------------ checks */

static int key_check(struct cci_wire *w, const char *key, int reserved_ok)
{
	size_t n = key ? strlen(key) : 0;

	if (n == 0 || n > CCI_WIRE_KEY_MAX)
		return wire_fail(w, CCI_WIRE_EINVAL, -1, "key '%s': 1 to %d characters",
		                 key ? key : "(null)", CCI_WIRE_KEY_MAX);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)key[i]) && !strchr("_-.", key[i]))
			return wire_fail(w, CCI_WIRE_EINVAL, -1,
			                 "key '%s': only letters, digits, '_', '-' and '.'", key);
	if (!reserved_ok && strncmp(key, "cci_wire.", 9) == 0)
		return wire_fail(w, CCI_WIRE_EINVAL, -1, "key '%s': cci_wire.* is reserved", key);
	return CCI_WIRE_SUCCESS;
}

static int value_check(struct cci_wire *w, const char *key, const char *value)
{
	size_t n = value ? strlen(value) : 0;

	if (!value || n > CCI_WIRE_VALUE_MAX)
		return wire_fail(w, CCI_WIRE_EINVAL, -1, "value of key '%s': 0 to %d characters",
		                 key, CCI_WIRE_VALUE_MAX);
	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)value[i]))
			return wire_fail(w, CCI_WIRE_EINVAL, -1,
			                 "value of key '%s': printable characters without spaces", key);
	return CCI_WIRE_SUCCESS;
}

static int rank_check(struct cci_wire *w, int rank)
{
	if (rank < 0 || rank >= w->size)
		return wire_fail(w, CCI_WIRE_EINVAL, rank, "rank %d: not in 0..%d", rank,
		                 w->size - 1);
	return CCI_WIRE_SUCCESS;
}

/* ---------------------------------------------------- collective wait */

/* A rank of this host that is gone while the fence waits, or -1. */
static int peers_dead(struct cci_wire *w, double elapsed)
{
	if (!w->peers)
		return -1;
	for (int r = 0; r < w->size; r++) {
		struct wire_peer *p = &w->peers[r];

		if (r == w->rank || strcmp(p->host, w->peers[w->rank].host) != 0)
			continue;
		if (!wire_pid_dead(p->pid))
			continue;
		if (p->dead_since < 0)
			p->dead_since = elapsed;
		else if (elapsed - p->dead_since >= PEER_GRACE_S)
			return r;
	}
	return -1;
}

static int collective_timeout(struct cci_wire *w, const char *what)
{
	int missing = w->ops->fence_missing ? w->ops->fence_missing(w) : -1;

	if (missing >= 0)
		return wire_fail(w, CCI_WIRE_ETIMEDOUT, missing,
		                 "%s timed out after %.0f s (CCI_WIRE_TIMEOUT): rank %d never joined",
		                 what, w->timeout_s, missing);
	return wire_fail(w, CCI_WIRE_ETIMEDOUT, -1,
	                 "%s timed out after %.0f s (CCI_WIRE_TIMEOUT) waiting for the %s launcher",
	                 what, w->timeout_s, w->ops->name);
}

/*
 * The launcher failed the collective call (PMIx reports a participant
 * that is gone this way): name a rank of this host that is gone.  The
 * first look that finds one decides, and the call returns only after the
 * grace period in any case: the other survivors, failed at about the same
 * time, look before this rank can exit, so none of them mistakes it for
 * the rank that died first.
 */
static int collective_failed(struct cci_wire *w, const char *what, int rc)
{
	const struct timespec nap = { .tv_nsec = 20000000L };
	double end = wire_now() + PEER_GRACE_S;
	char launcher[sizeof(w->err)];
	int dead = -1;

	if (!w->peers)
		return rc;
	snprintf(launcher, sizeof(launcher), "%s", w->err);
	do {
		for (int r = 0; dead < 0 && r < w->size; r++)
			if (r != w->rank && strcmp(w->peers[r].host, w->peers[w->rank].host) == 0 &&
			    wire_pid_dead(w->peers[r].pid))
				dead = r;
		nanosleep(&nap, NULL);
	} while (wire_now() < end);
	if (dead < 0)
		return rc;
	return wire_fail(w, CCI_WIRE_EPEERDEAD, dead,
	                 "%s: rank %d (pid %d on %s) exited before joining it (%s)", what, dead,
	                 (int)w->peers[dead].pid, w->peers[dead].host, launcher);
}

static int collective(struct cci_wire *w, const char *what)
{
	double start = wire_now(), checked = 0;
	int done = 0, rc, dead;

	for (int r = 0; w->peers && r < w->size; r++)
		w->peers[r].dead_since = -1;
	rc = w->ops->fence_start(w);
	while (rc == CCI_WIRE_SUCCESS && !done) {
		double elapsed;

		rc = w->ops->fence_test(w, &done);
		if (rc != CCI_WIRE_SUCCESS || done)
			break;
		elapsed = wire_now() - start;
		if (elapsed - checked >= PEER_CHECK_S) {
			checked = elapsed;
			dead = peers_dead(w, elapsed);
			if (dead >= 0)
				return wire_fail(w, CCI_WIRE_EPEERDEAD, dead,
				                 "%s: rank %d (pid %d on %s) exited before joining it",
				                 what, dead, (int)w->peers[dead].pid,
				                 w->peers[dead].host);
		}
		if (elapsed >= w->timeout_s)
			return collective_timeout(w, what);
	}
	return rc == CCI_WIRE_ELAUNCHER ? collective_failed(w, what, rc) : rc;
}

/* ---------------------------------------------------------------- init */

static int backend_open(struct cci_wire *w)
{
	static const struct {
		const char *name;
		int (*open)(struct cci_wire *);
	} order[] = { { "pmix", wire_pmix_open }, { "pmi2", wire_pmi2_open },
	              { "pmi1", wire_pmi1_open }, { "local", wire_local_open } };
	const char *want = getenv("CCI_WIRE_BACKEND");
	int rc;

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		if (want && *want && strcmp(want, order[i].name) != 0)
			continue;
		rc = order[i].open(w);
		if (rc != CCI_WIRE_ENOLAUNCHER || w->err[0])
			return rc;
		if (want && *want)
			return wire_fail(w, rc, -1, "CCI_WIRE_BACKEND=%s, but its environment is "
			                 "absent (see cci_wire.h)", want);
	}
	if (want && *want)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1,
		                 "CCI_WIRE_BACKEND=%s: no such backend (pmix, pmi2, pmi1, local)", want);
	return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1,
	                 "no launcher found: looked for PMIX_RANK and PMIX_NAMESPACE (PMIx: "
	                 "mpirun, srun --mpi=pmix), PMI_FD with PMI_JOBID or "
	                 "SLURM_MPI_TYPE=pmi2 (PMI-2: srun --mpi=pmi2), PMI_FD, PMI_RANK and "
	                 "PMI_SIZE (PMI-1: mpiexec.hydra), CCI_WIRE_DIR, CCI_WIRE_RANK and CCI_WIRE_SIZE (one "
	                 "host: cci_wire_launch)");
}

static double timeout_from_env(void)
{
	const char *s = getenv("CCI_WIRE_TIMEOUT");
	char *end;
	double t;

	if (!s || !*s)
		return 60;
	t = strtod(s, &end);
	return (*end || t <= 0) ? 60 : t;
}

/* Hosts and pids of every rank, then this rank's place on its host. */
static int peers_learn(struct cci_wire *w)
{
	char *v;
	int rc;

	w->peers = calloc((size_t)w->size, sizeof(*w->peers));
	if (!w->peers)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for %d ranks", w->size);
	for (int r = 0; r < w->size; r++) {
		rc = w->ops->get(w, r, KEY_HOST, &w->peers[r].host);
		if (rc == CCI_WIRE_SUCCESS)
			rc = w->ops->get(w, r, KEY_PID, &v);
		if (rc != CCI_WIRE_SUCCESS)
			return rc;
		w->peers[r].pid = (pid_t)atol(v);
		free(v);
	}
	for (int r = 0; r < w->size; r++) {
		if (strcmp(w->peers[r].host, w->peers[w->rank].host) != 0)
			continue;
		w->local_rank += r < w->rank;
		w->local_size++;
	}
	return CCI_WIRE_SUCCESS;
}

static int init_exchange(struct cci_wire *w)
{
	char host[HOST_NAME_MAX + 1] = "", pid[32];
	int rc;

	if (gethostname(host, sizeof(host)) != 0 || value_check(w, "host", host) != 0)
		return wire_fail(w, CCI_WIRE_EINVAL, -1, "gethostname() gave no usable host name");
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	rc = w->ops->put(w, KEY_HOST, host);
	if (rc == CCI_WIRE_SUCCESS)
		rc = w->ops->put(w, KEY_PID, pid);
	if (rc == CCI_WIRE_SUCCESS)
		rc = collective(w, "init's fence");
	if (rc == CCI_WIRE_SUCCESS)
		rc = peers_learn(w);
	return rc;
}

static void wire_free(struct cci_wire *w)
{
	for (int r = 0; w->peers && r < w->size; r++)
		free(w->peers[r].host);
	free(w->peers);
	free(w);
}

int cci_wire_init(cci_wire_t **wire_p, char *why, unsigned why_len)
{
	struct cci_wire *w;
	int rc;

	if (!wire_p)
		return CCI_WIRE_EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return CCI_WIRE_ENOMEM;
	w->err_rank = -1;
	w->timeout_s = timeout_from_env();
	rc = backend_open(w);
	if (rc == CCI_WIRE_SUCCESS) {
		rc = init_exchange(w);
		if (rc != CCI_WIRE_SUCCESS)
			w->ops->finalize(w);
	}
	if (rc != CCI_WIRE_SUCCESS) {
		if (why && why_len)
			snprintf(why, why_len, "%s", w->err);
		wire_free(w);
		return rc;
	}
	w->err[0] = '\0';
	w->err_rank = -1;
	*wire_p = w;
	return CCI_WIRE_SUCCESS;
}

void cci_wire_finalize(cci_wire_t *w)
{
	if (!w)
		return;
	w->ops->finalize(w);
	wire_free(w);
}

/* ------------------------------------------------------------ the rest */

const char *cci_wire_backend(const cci_wire_t *w) { return w->ops->name; }
int cci_wire_rank(const cci_wire_t *w) { return w->rank; }
int cci_wire_size(const cci_wire_t *w) { return w->size; }
int cci_wire_local_rank(const cci_wire_t *w) { return w->local_rank; }
int cci_wire_local_size(const cci_wire_t *w) { return w->local_size; }
const char *cci_wire_error(const cci_wire_t *w) { return w->err; }
int cci_wire_error_rank(const cci_wire_t *w) { return w->err_rank; }

const char *cci_wire_host(const cci_wire_t *w, int rank)
{
	return rank >= 0 && rank < w->size ? w->peers[rank].host : NULL;
}

int cci_wire_put(cci_wire_t *w, const char *key, const char *value)
{
	int rc = key_check(w, key, 0);

	if (rc == CCI_WIRE_SUCCESS)
		rc = value_check(w, key, value);
	return rc == CCI_WIRE_SUCCESS ? w->ops->put(w, key, value) : rc;
}

int cci_wire_fence(cci_wire_t *w)
{
	return collective(w, "fence");
}

int cci_wire_barrier(cci_wire_t *w)
{
	return collective(w, "barrier");
}

int cci_wire_get(cci_wire_t *w, int rank, const char *key, char **value_p)
{
	int rc = key_check(w, key, 0);

	if (rc == CCI_WIRE_SUCCESS)
		rc = rank_check(w, rank);
	if (rc == CCI_WIRE_SUCCESS && !value_p)
		rc = wire_fail(w, CCI_WIRE_EINVAL, -1, "get of key '%s': value_p is NULL", key);
	return rc == CCI_WIRE_SUCCESS ? w->ops->get(w, rank, key, value_p) : rc;
}
