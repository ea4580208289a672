/*
 * shm_sweep.c - see shm_sweep.h.
 */
#include "shm_sweep.h"

#include <stdio.h>
#include <unistd.h>

#include "leftover.h"

int test_shm_sweep(void)
{
	char base[64];

	snprintf(base, sizeof(base), "/tmp/cci-sm-%u", (unsigned)geteuid());
	return leftover_sweep(LEFTOVER_SHM_REGION, LEFTOVER_SHM_DIR, NULL, NULL) +
	       leftover_sweep(LEFTOVER_SM_DIR, base, NULL, NULL);
}
