/*
 * shm_sweep.h - removing what killed processes of the library leave on
 * this host, after each test that kills peers.
 *
 * libfabric's shm provider names an endpoint's region after the pid that
 * made it ("/dev/shm/<pid>:<n>:<m>") and the sm plugin a process's
 * directory (/tmp/cci-sm-<uid>/<pid>); a process killed with SIGKILL, as
 * the fault tests kill peers, removes neither.  The library sweeps them
 * when an endpoint is created; the test runners also sweep after every
 * test, so that a run leaves /dev/shm and the sm directory as it found
 * them even when its last test kills.  The owner is checked by pid and
 * start time (plugins/common/leftover.h): files of live processes, other
 * test runs' included, stay.
 */
#ifndef CCI_TEST_SHM_SWEEP_H
#define CCI_TEST_SHM_SWEEP_H

/* Remove the shm regions and default sm directories of this uid's dead
 * processes; returns how many were removed. */
int test_shm_sweep(void);

#endif /* CCI_TEST_SHM_SWEEP_H */
