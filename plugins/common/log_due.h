/*
 * log_due.h - "at most once per interval", for a warning that a storm of
 * connects or a shortage of descriptors could otherwise repeat thousands
 * of times a second.  The caller keeps the time of the last warning (0:
 * never) in an atomic of its own, usually in its endpoint; any thread may
 * ask, and one caller per interval is told yes.
 */
#ifndef CCI_COMMON_LOG_DUE_H
#define CCI_COMMON_LOG_DUE_H

#include <stdatomic.h>
#include <stdint.h>

#include "clock.h"

/* True for one caller per every_ns, the time being now (a cci__now_ns()
 * value the caller read already, or a test's): it then owns the warning. */
static inline int cci__log_due_at(_Atomic uint64_t *last_ns, uint64_t every_ns, uint64_t now)
{
	uint64_t last = atomic_load_explicit(last_ns, memory_order_relaxed);

	/* A now older than the last warning (read by a slower thread) is
	 * within the interval. */
	return (last == 0 || (now > last && now - last >= every_ns)) &&
	       atomic_compare_exchange_strong_explicit(last_ns, &last, now, memory_order_relaxed,
	                                               memory_order_relaxed);
}

/* The same, now. */
static inline int cci__log_due(_Atomic uint64_t *last_ns, uint64_t every_ns)
{
	return cci__log_due_at(last_ns, every_ns, cci__now_ns());
}

#endif /* CCI_COMMON_LOG_DUE_H */
