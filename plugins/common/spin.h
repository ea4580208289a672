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
#include <stdatomic.h>

/* Zeroed memory is an unlocked lock; so is CCI__SPIN_INIT. */
typedef struct {
	atomic_int locked;
} cci__spinlock_t;

#define CCI__SPIN_INIT { 0 }

static inline void cci__spin_init(cci__spinlock_t *l)
{
	atomic_init(&l->locked, 0);
}

static inline void cci__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static inline void cci__spin_lock(cci__spinlock_t *l)
{
	unsigned spins = 0;

	while (atomic_exchange_explicit(&l->locked, 1, memory_order_acquire)) {
		while (atomic_load_explicit(&l->locked, memory_order_relaxed)) {
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
	return !atomic_load_explicit(&l->locked, memory_order_relaxed) &&
	       !atomic_exchange_explicit(&l->locked, 1, memory_order_acquire);
}

static inline void cci__spin_unlock(cci__spinlock_t *l)
{
	atomic_store_explicit(&l->locked, 0, memory_order_release);
}

#endif /* CCI_COMMON_SPIN_H */
