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

/* True for one caller per every_ns: it then owns the warning. */
static inline int cci__log_due(_Atomic uint64_t *last_ns, uint64_t every_ns)
{
	uint64_t now = cci__now_ns();
	uint64_t last = atomic_load_explicit(last_ns, memory_order_relaxed);

	return (last == 0 || now - last >= every_ns) &&
	       atomic_compare_exchange_strong_explicit(last_ns, &last, now, memory_order_relaxed,
	                                               memory_order_relaxed);
}

#endif /* CCI_COMMON_LOG_DUE_H */
