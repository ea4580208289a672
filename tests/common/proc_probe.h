/*
 * proc_probe.h - what the tests ask of other processes through /proc and
 * exec: whether a process has stopped (SIGSTOP), and which descriptors a
 * program exec'd from this process starts with (close-on-exec checks).
 */
#ifndef CCI_TEST_PROC_PROBE_H
#define CCI_TEST_PROC_PROBE_H

#include <sys/types.h>

/* The state letter of process pid (R, S, T, ...), or 0 if there is none. */
char proc_state(pid_t pid);

/* Wait up to ms for pid to be stopped (state T or t); 0 once it is, -1
 * at the deadline. */
int proc_wait_stopped(pid_t pid, unsigned ms);

/* The descriptors a program exec'd by a child of this process starts
 * with: the child runs a shell that lists its own into a pipe.  Fills
 * out[0..max) and returns how many, or -1 when the pipe, the fork or the
 * shell failed. */
int proc_fds_after_exec(int *out, int max);

#endif /* CCI_TEST_PROC_PROBE_H */
