/*
 * lock_held.h - where a function's comment says a lock is held, it
 * asserts so: assert(cci__mutex_held(&m)) or assert(cci__spin_held(&l)).
 * They tell whether some thread holds the lock, not which: enough to
 * catch a caller that took none.  A release build (NDEBUG) compiles the
 * assertions, and so these calls, away; the ASan and TSan builds of CI
 * (debugoptimized) keep them.
 */
#ifndef CCI_COMMON_LOCK_HELD_H
#define CCI_COMMON_LOCK_HELD_H

#include <assert.h>
#include <pthread.h>

#include "spin.h"

static inline int cci__mutex_held(pthread_mutex_t *m)
{
	if (pthread_mutex_trylock(m) != 0)
		return 1; /* EBUSY: taken, by this thread or another */
	pthread_mutex_unlock(m);
	return 0;
}

static inline int cci__spin_held(cci__spinlock_t *l)
{
	return atomic_load_explicit(&l->locked, memory_order_relaxed) != 0;
}

#endif /* CCI_COMMON_LOCK_HELD_H */
