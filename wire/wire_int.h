/*
 * wire_int.h - the handle and the backend contract of libcci_wire.
 *
 * wire.c owns the handle: argument checks, the host exchange at init, the
 * wait of collective calls (deadline, watching the ranks of this host) and
 * error messages.  A backend moves keys and values through its launcher:
 * put() stores, fence_start() enters a collective, fence_test() tells
 * without blocking for long (10 ms at most) whether it has completed,
 * get() reads a value of the last completed fence.
 */
#ifndef CCI_WIRE_INT_H
#define CCI_WIRE_INT_H

#include <stdarg.h>
#include <sys/types.h>

#include "cci_wire.h"

struct cci_wire;

struct wire_backend {
	const char *name;
	/* Key and value are checked; the backend copies what it keeps. */
	int (*put)(struct cci_wire *w, const char *key, const char *value);
	int (*fence_start)(struct cci_wire *w);
	/* *done_p = 1 once the fence has completed on this rank. */
	int (*fence_test)(struct cci_wire *w, int *done_p);
	/* On success *value_p is malloc'd for the caller. */
	int (*get)(struct cci_wire *w, int rank, const char *key, char **value_p);
	/* Leave the job and free the backend's state (w->state). */
	void (*finalize)(struct cci_wire *w);
	/* The ranks that have not yet entered the current fence, when the
	 * backend can tell (NULL otherwise): the first such rank, or -1. */
	int (*fence_missing)(struct cci_wire *w);
};

struct wire_peer {
	char *host;
	pid_t pid;
	double dead_since;         /* seconds since the fence started; < 0: alive */
};

struct cci_wire {
	const struct wire_backend *ops;
	void *state;
	int rank, size, local_rank, local_size;
	struct wire_peer *peers;   /* size entries, after init's exchange */
	double timeout_s;
	char err[512];
	int err_rank;
};

/* Record the failure (message and blamed rank, -1 for none); returns rc. */
int wire_fail(struct cci_wire *w, int rc, int rank, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Seconds on the monotonic clock. */
double wire_now(void);

/* Backends: each returns CCI_WIRE_ENOLAUNCHER, writing nothing, when its
 * environment is absent; otherwise it fills ops, state, rank and size or
 * fails with a message in w->err. */
int wire_pmix_open(struct cci_wire *w);
int wire_pmi2_open(struct cci_wire *w);
int wire_pmi1_open(struct cci_wire *w);
int wire_local_open(struct cci_wire *w);

/* Is that process gone (no such pid, or a zombie awaiting its parent)? */
int wire_pid_dead(pid_t pid);

#endif /* CCI_WIRE_INT_H */
