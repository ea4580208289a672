/*
 * cci_wire.h - wire-up for programs started by a launcher: who am I, who
 * are the others, where do they listen.
 *
 * A separate library (libcci_wire), beside libcci and independent of it:
 * libcci never needs a launcher, and this library never calls libcci.  A
 * program started N times by a launcher learns its rank (0..N-1), the size
 * N, its local rank among the ranks of its host, and the host of every
 * rank; it publishes short strings under keys (its endpoint URI), makes
 * them visible with a fence, and reads any rank's value.
 *
 * The backend is chosen at cci_wire_init() from the environment the
 * launcher set, in this order:
 *   pmix   PMIX_RANK and PMIX_NAMESPACE: Open MPI's mpirun, srun --mpi=pmix
 *          (only in a library built with libpmix-dev);
 *   pmi2   PMI_FD with PMI_JOBID or SLURM_MPI_TYPE=pmi2: the PMI-2 wire
 *          protocol to Slurm's srun --mpi=pmi2, spoken directly over that
 *          descriptor (mpiexec.hydra speaks it too when the ranks are given
 *          CCI_WIRE_BACKEND=pmi2);
 *   pmi1   PMI_FD, PMI_RANK and PMI_SIZE: the PMI-1 wire protocol to
 *          MPICH's mpiexec.hydra, spoken directly over that descriptor;
 *   local  CCI_WIRE_DIR, CCI_WIRE_RANK and CCI_WIRE_SIZE: ranks of one host
 *          that share a directory, as cci_wire_launch starts them.
 * CCI_WIRE_BACKEND=pmix|pmi2|pmi1|local picks one instead of that order.
 *
 * mpiexec.hydra -disable-auto-cleanup tells the other ranks of a rank's
 * death with SIGUSR1, whose default action ends a process: from
 * cci_wire_init() to cci_wire_finalize() the pmi1 and pmi2 backends catch
 * SIGUSR1 when the program left it at its default, and the next collective
 * call reports the death.
 *
 * Every collective call (cci_wire_init, cci_wire_fence, cci_wire_barrier)
 * waits at most CCI_WIRE_TIMEOUT seconds (default 60).  While it waits it
 * watches the ranks of its own host (by the pid each published at init):
 * one that exited makes the call fail with CCI_WIRE_EPEERDEAD and that
 * rank named, after a grace period of a second, as does a launcher that
 * fails the call because a rank of this host died.  A rank on another host
 * that dies is reported by the launcher only, if at all (CCI_WIRE_ELAUNCHER,
 * or CCI_WIRE_ETIMEDOUT naming the missing rank when the backend knows it).
 * A call that fails this way leaves the job broken: finalize the handle.
 *
 * Statuses are int values of enum cci_wire_status.  After a failure,
 * cci_wire_error() says what failed, naming the rank, key, variable or
 * file involved, and cci_wire_error_rank() gives the rank it blames.
 *
 * Thread safety: one handle is used by one thread at a time.
 */
#ifndef CCI_WIRE_H
#define CCI_WIRE_H

#ifdef __cplusplus
extern "C" {
#endif

#define CCI_WIRE_KEY_MAX 32    /* characters of a key: letters, digits, '_', '-', '.' */
#define CCI_WIRE_VALUE_MAX 511 /* characters of a value: printable, no space */

enum cci_wire_status {
	CCI_WIRE_SUCCESS = 0,
	CCI_WIRE_ENOLAUNCHER,  /* no backend's environment, or that backend not built */
	CCI_WIRE_ELAUNCHER,    /* the launcher refused a request or went away */
	CCI_WIRE_EPEERDEAD,    /* a rank exited before joining a collective call */
	CCI_WIRE_ETIMEDOUT,    /* a collective call outlasted CCI_WIRE_TIMEOUT */
	CCI_WIRE_ENOTFOUND,    /* that rank published no such key before the fence */
	CCI_WIRE_EINVAL,       /* a bad argument: key, value or rank */
	CCI_WIRE_ENOMEM,
};

typedef struct cci_wire cci_wire_t;

/*
 * Join the job: pick the backend, connect to the launcher, learn rank and
 * size, and (collectively: every rank calls it) exchange hosts.  On
 * success *wire_p is a handle owned by the caller until
 * cci_wire_finalize().  On failure *wire_p is untouched and, when why is
 * not NULL, why holds a message of at most why_len - 1 characters; with
 * CCI_WIRE_ENOLAUNCHER it names every variable looked for.
 */
int cci_wire_init(cci_wire_t **wire_p, char *why, unsigned why_len);

/* Leave the job and free the handle and every string it lent. */
void cci_wire_finalize(cci_wire_t *wire);

/* "pmix", "pmi2", "pmi1" or "local"; a static string. */
const char *cci_wire_backend(const cci_wire_t *wire);

int cci_wire_rank(const cci_wire_t *wire);
int cci_wire_size(const cci_wire_t *wire);
/* This rank's index among the ranks of its host (ranks in order), and how
 * many ranks its host has. */
int cci_wire_local_rank(const cci_wire_t *wire);
int cci_wire_local_size(const cci_wire_t *wire);

/* The host name of rank, as that rank's gethostname() gave it; NULL for a
 * rank out of range.  Owned by the handle until cci_wire_finalize(). */
const char *cci_wire_host(const cci_wire_t *wire, int rank);

/*
 * Publish value under key for every rank.  Others are sure to see it
 * after the next cci_wire_fence() that both sides have passed (some
 * backends show it earlier); putting a key twice before that fence keeps
 * the last value.  Give a key its value once: a reader between two puts
 * may see either.  Both strings are copied.  Keys starting "cci_wire." are
 * the library's own.
 */
int cci_wire_put(cci_wire_t *wire, const char *key, const char *value);

/* Collective: every rank's puts so far become visible to every rank. */
int cci_wire_fence(cci_wire_t *wire);

/*
 * Read the value rank published under key before the last fence.  On
 * success *value_p is a string the caller owns and frees with free().
 * CCI_WIRE_ENOTFOUND when rank put no such key.
 */
int cci_wire_get(cci_wire_t *wire, int rank, const char *key, char **value_p);

/* Collective: return once every rank has called it. */
int cci_wire_barrier(cci_wire_t *wire);

/* The message of the last failed call on wire ("" before any); owned by
 * the handle, valid until its next call. */
const char *cci_wire_error(const cci_wire_t *wire);

/* The rank the last failure blames (the dead or missing rank, the rank
 * whose key was not found), or -1. */
int cci_wire_error_rank(const cci_wire_t *wire);

/* The name of a status ("CCI_WIRE_EPEERDEAD"); a static string. */
const char *cci_wire_strerror(int status);

#ifdef __cplusplus
}
#endif

#endif /* CCI_WIRE_H */
