/*
 * lock.h - the endpoint's event lock.
 *
 * Its critical sections are a few pointer moves (pool and queue), taken
 * several times per message, so a test-and-test-and-set spinlock beats a
 * mutex here: one atomic exchange to take, a plain release store to give
 * back.  A waiter that spins long yields its core, so a holder preempted
 * on this 2-thread-per-core world does not make it burn a time slice.
 */
#ifndef CCI_CORE_LOCK_H
#define CCI_CORE_LOCK_H

#include <sched.h>

#include "cci_plugin.h"

static inline void cci__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline void cci__spin_lock(cci__spinlock_t *l)
{
	unsigned spins = 0;

	while (__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED)) {
			if (++spins < 256)
				cci__cpu_relax();
			else
				sched_yield();
		}
	}
}

static inline void cci__spin_unlock(cci__spinlock_t *l)
{
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

#endif /* CCI_CORE_LOCK_H */
