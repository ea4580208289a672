/*
 * leftover.h - finding and removing what processes of the library left on
 * this host when they died without cleaning up (SIGKILL, a crash, a
 * signal whose default action ended them).
 *
 * Two kinds of leftovers exist, both named after the pid that made them:
 *
 *   LEFTOVER_SHM_REGION  /dev/shm/<pid>:<n>:<m>, a region of libfabric's
 *                        shm provider (16 MiB each in 1.17), which the
 *                        provider unlinks at endpoint close or on a
 *                        catchable signal, never after SIGKILL;
 *   LEFTOVER_SM_DIR      <base>/<pid>, the sm plugin's directory of a
 *                        process and the listening socket files in it
 *                        (base: /tmp/cci-sm-<uid> or the ini path=).
 *
 * The sm plugin's rings and endpoint pages are memfds: the kernel frees
 * them with their last descriptor or mapping, so they never outlive every
 * process that used them and are no leftovers.
 *
 * Whose it is: an entry counts only when its name has the pattern of its
 * kind and it belongs to this process's effective uid; anything else in
 * the directory is not looked at, nor removed.
 *
 * Whether its owner is gone: pids are reused, so a pid that runs proves
 * nothing by itself.  The owner is gone when no process has the pid (or
 * it is a zombie), or when the process that has it started more than
 * LEFTOVER_CLOCK_SLACK_NS after the entry was made *and* does not hold it
 * (does not map the region; has no socket bound in the directory).  Both
 * are needed because start times (since boot) and file times (wall clock)
 * are compared across a clock that may have been stepped; a live owner
 * never loses its files to a step of the clock.
 *
 * A region is moreover kept while any process has it open or mapped for
 * writing (a write lease is refused then, fcntl F_SETLEASE): that holds
 * across pid namespaces, whose processes' pids we cannot see when they
 * share /dev/shm.  sm directories need no such check: sm names peers by
 * pid (URIs, cross-memory attach), so it never spans pid namespaces.
 *
 * A narrow race remains: a new process that got a dead one's pid and
 * creates its own entry of the same name between our check and our
 * unlink could lose it.  The entry's inode is checked again just before
 * the unlink, which leaves a window of two system calls.
 *
 * Nothing here logs: callers say what was removed, in their own words.
 * Thread-safe: no state is kept between calls.
 */
#ifndef CCI_COMMON_LEFTOVER_H
#define CCI_COMMON_LEFTOVER_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#define LEFTOVER_SHM_DIR "/dev/shm"
/* Start time against file time: the error of the two clocks' conversion
 * (10 ms ticks, a coarse file clock) with a wide margin. */
#define LEFTOVER_CLOCK_SLACK_NS 1000000000ll

enum leftover_kind {
	LEFTOVER_SHM_REGION,
	LEFTOVER_SM_DIR,
};

struct leftover {
	enum leftover_kind kind;
	char path[PATH_MAX];
	pid_t pid;          /* the pid in its name */
	int owner_alive;    /* 1: the process that made it still runs */
	uint64_t bytes;     /* its size; a directory's: the sum of its entries */
	uint64_t ino;       /* to check, before removing, that it is still this one */
	int64_t made_ns;    /* birth time (else change time), ns since the epoch */
};

/* Called for each leftover found, its owner alive or not; a nonzero
 * return stops the scan. */
typedef int (*leftover_fn)(const struct leftover *lo, void *arg);

/* Every entry of kind in dir (LEFTOVER_SHM_DIR for regions, an sm base for
 * directories), with its owner judged.  0, or the errno of opening dir
 * (ENOENT: nothing was ever made there). */
int leftover_scan(enum leftover_kind kind, const char *dir, leftover_fn fn, void *arg);

/* Remove lo (and a directory's entries) if its owner is still gone and it
 * is still the same inode.  0 once removed, else an errno: EBUSY when its
 * owner runs, ESTALE when another entry took its name, or what unlink or
 * rmdir said (EACCES, EPERM, ENOTEMPTY, ...). */
int leftover_remove(const struct leftover *lo);

/* Called by leftover_sweep for each leftover of a dead owner: err is 0
 * when it was removed, else the errno of leftover_remove. */
typedef void (*leftover_report_fn)(const struct leftover *lo, int err, void *arg);

/* Remove every leftover of kind in dir whose owner is gone; returns how
 * many were removed.  report may be NULL. */
int leftover_sweep(enum leftover_kind kind, const char *dir, leftover_report_fn report,
                   void *arg);

/* Whether the owner of an entry named for pid and made at made_ns is
 * gone; holds(pid, arg) says whether a running pid holds the entry. */
int leftover_owner_gone(pid_t pid, int64_t made_ns, int (*holds)(pid_t, const void *),
                        const void *arg);

/* The judgement alone, for the unit tests: exists = the pid runs (not a
 * zombie), start_ns = its start (wall clock, ns), holds = it holds the
 * entry. */
int leftover_judge(int exists, int64_t start_ns, int64_t made_ns, int holds);

/* The pid of a name of kind ("<pid>:<digits>:<digits>" or "<pid>"), or 0
 * if the name is not of that pattern. */
pid_t leftover_name_pid(enum leftover_kind kind, const char *name);

#endif /* CCI_COMMON_LEFTOVER_H */
