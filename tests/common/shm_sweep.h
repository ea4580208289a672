/*
 * shm_sweep.h - removing the shared-memory regions that killed processes
 * leave behind in /dev/shm.
 *
 * libfabric's shm provider names an endpoint's region after the pid that
 * made it ("<pid>:<n>:<n>") and removes it when the process exits; a
 * process killed with SIGKILL, as the fault tests kill peers, never does.
 * Once the pids wrap, a later process that gets the same pid cannot
 * create its endpoint (fi_enable fails with EBUSY), so a long test run
 * would fail by chance.  The test runners sweep after every test.
 */
#ifndef CCI_TEST_SHM_SWEEP_H
#define CCI_TEST_SHM_SWEEP_H

/* Remove every region in /dev/shm named like the shm provider's whose
 * pid names no live process; returns how many were removed. */
int test_shm_sweep(void);

#endif /* CCI_TEST_SHM_SWEEP_H */
