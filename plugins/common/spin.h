/*
 * spin.h - a small spinlock for critical sections on the message path
 * (the core's event queue, a plugin's receive scan).
 *
 * Those sections are a few pointer moves taken several times per message,
 * so a test-and-test-and-set lock beats a mutex: one atomic exchange to
 * take, a plain release store to give back, and a failed trylock costs a
 * single load.  A waiter that spins long yields its core, so a holder
 * preempted on a machine with more threads than cores does not make it
 * burn a time slice.  Never hold one across a blocking system call.
 */
#ifndef CCI_COMMON_SPIN_H
#define CCI_COMMON_SPIN_H

#include <sched.h>

typedef struct {
	int locked;
} cci__spinlock_t;

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

/* Take the lock if it is free; 1 if taken. */
static inline int cci__spin_trylock(cci__spinlock_t *l)
{
	return !__atomic_load_n(&l->locked, __ATOMIC_RELAXED) &&
	       !__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE);
}

static inline void cci__spin_unlock(cci__spinlock_t *l)
{
	__atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

#endif /* CCI_COMMON_SPIN_H */
