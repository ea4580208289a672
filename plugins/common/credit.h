/*
 * credit.h - credit flow control of ofi and verbs.  Each side grants the
 * other a window of receive buffers; a message that fills one spends a
 * credit, given back once the buffer is posted again (its event returned)
 * in any header, or alone in a CREDIT message once a quarter of the window
 * is owed.  Where the plugins differed, this keeps what
 * tests/unit/credit_test.c tests: credits beyond the peer's grant are
 * refused (ofi added them; a peer keeping to the protocol sends none).
 * verbs counts the buffers it holds (_rx, _returned) to refuse an overrun;
 * ofi owes without counting them (_owe).
 *
 * Locking: none of its own; calls are made under the lock of the plugin's
 * connection (ofi: oc->lock; verbs: the endpoint's), except _owe and
 * _owed: ofi owes from the thread returning an event, without that lock,
 * while a sender holding it takes owed into a header.  So owed alone is
 * atomic, relaxed: a count, publishing no other memory.  window is set
 * before the connection can receive.  Inline: called once a message.
 */
#ifndef CCI_COMMON_CREDIT_H
#define CCI_COMMON_CREDIT_H

#include <stdatomic.h>
#include <stdint.h>

#include "cci.h"

struct cci__credit {
	uint32_t tx;              /* messages we may still send */
	uint32_t tx_max;          /* what the peer granted: tx never exceeds it */
	uint32_t window;          /* what we granted the peer */
	uint32_t rx_used;         /* granted buffers the peer has filled and we hold */
	_Atomic uint32_t owed;    /* buffers posted again, not yet told to the peer */
};

static inline void cci__credit_init(struct cci__credit *c, uint32_t granted, uint32_t window)
{
	c->tx = c->tx_max = granted;
	c->window = window;
	c->rx_used = 0;
	atomic_store_explicit(&c->owed, 0, memory_order_relaxed);
}

/* Spend one credit to send: 1, or 0 when none is left. */
static inline int cci__credit_take(struct cci__credit *c)
{
	if (c->tx == 0)
		return 0;
	c->tx--;
	return 1;
}

/* Credits in a header: CCI_ERROR (none added) beyond what the peer granted. */
static inline int cci__credit_in(struct cci__credit *c, uint32_t n)
{
	if (n > c->tx_max || c->tx > c->tx_max - n)
		return CCI_ERROR;
	c->tx += n;
	return CCI_SUCCESS;
}

static inline uint32_t cci__credit_owed(const struct cci__credit *c)
{
	return atomic_load_explicit(&c->owed, memory_order_relaxed);
}

/* Should a CREDIT message carry what is owed now (a quarter of the window)? */
static inline int cci__credit_explicit_due(const struct cci__credit *c)
{
	return cci__credit_owed(c) >= (c->window / 4 ? c->window / 4 : 1);
}

/* One buffer was posted again (no lock needed): 1 when a CREDIT is due. */
static inline int cci__credit_owe(struct cci__credit *c)
{
	atomic_fetch_add_explicit(&c->owed, 1, memory_order_relaxed);
	return cci__credit_explicit_due(c);
}

/* A message spending a credit of ours arrived: CCI_ERROR beyond our grant. */
static inline int cci__credit_rx(struct cci__credit *c)
{
	if (c->rx_used + cci__credit_owed(c) >= c->window)
		return CCI_ERROR;
	c->rx_used++;
	return CCI_SUCCESS;
}

/* One buffer counted by cci__credit_rx was posted again. */
static inline void cci__credit_returned(struct cci__credit *c)
{
	if (c->rx_used > 0) {
		c->rx_used--;
		cci__credit_owe(c);
	}
}

/* Credits for the next header: all owed, at most max; the rest stays owed. */
static inline uint32_t cci__credit_piggyback(struct cci__credit *c, uint32_t max)
{
	uint32_t n = cci__credit_owed(c);

	/* others only add: ends once none came in between */
	while (n && !atomic_compare_exchange_weak_explicit(&c->owed, &n, n > max ? n - max : 0,
	                                                   memory_order_relaxed,
	                                                   memory_order_relaxed))
		;
	return n > max ? max : n;
}

/* n credits of a header that was not sent are owed again. */
static inline void cci__credit_unsent(struct cci__credit *c, uint32_t n)
{
	atomic_fetch_add_explicit(&c->owed, n, memory_order_relaxed);
}

#endif /* CCI_COMMON_CREDIT_H */
