/*
 * listen_guard.c - see listen_guard.h.
 */
#include <errno.h>
#include <string.h>

#include "listen_guard.h"
#include "log_due.h"

void cci__listen_guard_init(struct cci__listen_guard *g, const struct cci_core *core,
                            const char *transport, const char *where,
                            uint64_t retry_every_ns, uint64_t warn_every_ns,
                            void (*watch)(void *arg, int on), void *arg)
{
	memset(g, 0, sizeof(*g));
	g->core = core;
	g->transport = transport;
	g->where = where;
	g->retry_every_ns = retry_every_ns;
	g->warn_every_ns = warn_every_ns;
	g->watch = watch;
	g->arg = arg;
}

void cci__listen_pause(struct cci__listen_guard *g, unsigned why)
{
	unsigned was = cci__listen_paused(g);

	if (was & why)
		return;
	atomic_store_explicit(&g->paused, was | why, memory_order_relaxed);
	if (!was)
		g->watch(g->arg, 0);
}

void cci__listen_resume(struct cci__listen_guard *g, unsigned why)
{
	unsigned was = cci__listen_paused(g);

	if (!(was & why))
		return;
	atomic_store_explicit(&g->paused, was & ~why, memory_order_relaxed);
	if (!(was & ~why))
		g->watch(g->arg, 1);
}

int cci__listen_accept_failed(struct cci__listen_guard *g, int err, uint64_t now)
{
	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return 0;
	cci__listen_pause(g, CCI__LISTEN_NOFD);
	g->retry_ns = now + g->retry_every_ns;
	g->fails++;
	if (!g->since_ns) { /* a new shortage */
		g->since_ns = now;
		g->fails = 1;
	}
	/* Said once a shortage, as soon as the interval since the last
	 * warning (of an earlier shortage) allows: a long one is never
	 * silent. */
	if (g->warned)
		return 1;
	g->warned = cci__log_due_at(&g->warned_ns, g->warn_every_ns, now);
	if (g->warned)
		g->core->log(CCI_LOG_WARN,
		             "%s: %s: cannot accept connections: %s; they wait in the listen "
		             "backlog, tried again every %llu ms and when a descriptor of this "
		             "endpoint frees", g->transport, g->where, strerror(err),
		             (unsigned long long)(g->retry_every_ns / 1000000));
	return 1;
}

void cci__listen_recovered(struct cci__listen_guard *g, uint64_t now)
{
	/* A shortage too short to be reported (the interval had not passed)
	 * ends quietly too. */
	if (g->warned)
		g->core->log(CCI_LOG_WARN,
		             "%s: %s: accepting connections again, after %llu attempts failed in "
		             "%.1f s", g->transport, g->where, (unsigned long long)g->fails,
		             (double)(now - g->since_ns) / 1e9);
	g->since_ns = 0;
	g->warned = 0;
}

void cci__listen_tick(struct cci__listen_guard *g, uint64_t now)
{
	if ((cci__listen_paused(g) & CCI__LISTEN_NOFD) && now >= g->retry_ns)
		cci__listen_resume(g, CCI__LISTEN_NOFD);
}
