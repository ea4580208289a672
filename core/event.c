/*
 * event.c - the endpoint's event pool and queue; cci_get_event and
 * cci_return_event.
 *
 * Events come from a per-endpoint free list that grows in chunks, so the
 * message path never calls malloc.  One mutex per endpoint guards the pool
 * and the queue.  A queued or lent event holds a reference on its
 * connection, so a connection outlives every event that names it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core.h"
#include "spin.h"

#define EVT_CHUNK 64

/* A chunk of events; the first word links chunks for freeing. */
struct evt_chunk {
	struct evt_chunk *next;
	struct cci__evt_core evts[EVT_CHUNK];
};

/* Called with core_ep(ep)->lock held. */
static int pool_grow(cci__ep_t *ep)
{
	struct evt_chunk *c;

	assert(cci__spin_held(&core_ep(ep)->lock));
	c = calloc(1, sizeof(*c));
	if (!c)
		return CCI_ENOMEM;
	c->next = core_ep(ep)->evt_chunks;
	core_ep(ep)->evt_chunks = c;
	for (int i = 0; i < EVT_CHUNK; i++) {
		c->evts[i].evt.ep = ep;
		c->evts[i].magic = CCI__MAGIC_EVT;
		c->evts[i].next = core_ep(ep)->evt_pool;
		core_ep(ep)->evt_pool = &c->evts[i].evt;
	}
	return CCI_SUCCESS;
}

static void evt_reset(cci__evt_t *e)
{
	/* Only the header: req_data is rewritten by whoever uses it. */
	memset(&e->ev, 0, sizeof(e->ev));
	e->conn = NULL;
	core_evt(e)->next = NULL;
	e->rx_buf = NULL;
	e->req_state = NULL;
	core_evt(e)->answered = 0;
	core_evt(e)->lent = 0;
}

cci__evt_t *cci__evt_get(cci__ep_t *ep)
{
	cci__evt_t *e;

	cci__spin_lock(&core_ep(ep)->lock);
	if (!core_ep(ep)->evt_pool && pool_grow(ep) != CCI_SUCCESS) {
		cci__spin_unlock(&core_ep(ep)->lock);
		return NULL;
	}
	e = core_ep(ep)->evt_pool;
	core_ep(ep)->evt_pool = core_evt(e)->next;
	cci__spin_unlock(&core_ep(ep)->lock);
	evt_reset(e);
	return e;
}

/* With core_ep(ep)->lock held. */
static void evt_put_locked(cci__ep_t *ep, cci__evt_t *e)
{
	assert(cci__spin_held(&core_ep(ep)->lock));
	e->conn = NULL;
	core_evt(e)->next = core_ep(ep)->evt_pool;
	core_ep(ep)->evt_pool = e;
}

static void os_handle_ring(cci__ep_t *ep)
{
	uint64_t one = 1;
	ssize_t n;

	do
		n = write(core_ep(ep)->os_evfd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

/*
 * The OS handle is level-triggered on the event queue: its eventfd holds a
 * count (rung) whenever an event is queued, so a waiter sees it however
 * the event came (the wire, a timer, or a call such as cci_accept).  Only
 * the first event into an empty queue pays the write, and none while a
 * thread inside cci_get_event's progress will look at the queue when it
 * leaves (it rings then for what it leaves behind).  With core_ep(ep)->lock held;
 * returns whether the caller must ring after unlocking.
 */
static int os_handle_should_ring(cci__ep_t *ep)
{
	assert(cci__spin_held(&core_ep(ep)->lock));
	if (core_ep(ep)->os_evfd < 0 || core_ep(ep)->rung || core_ep(ep)->pollers > 0 ||
	    !cci__evq_nonempty(ep))
		return 0;
	core_ep(ep)->rung = 1;
	return 1;
}

void cci__evt_post(cci__ep_t *ep, cci__evt_t *e)
{
	int ring;

	core_evt(e)->next = NULL;
	cci__spin_lock(&core_ep(ep)->lock);
	if (e->conn)
		core_conn(e->conn)->refs++;
	if (core_ep(ep)->evq_tail)
		core_evt(core_ep(ep)->evq_tail)->next = e;
	else
		atomic_store_explicit(&core_ep(ep)->evq_head, e, memory_order_relaxed);
	core_ep(ep)->evq_tail = e;
	core_ep(ep)->evq_len++;
	ring = os_handle_should_ring(ep);
	cci__spin_unlock(&core_ep(ep)->lock);
	if (ring)
		os_handle_ring(ep);
	LOG(CCI_LOG_EVENT, "ep %p: posted %s", (void *)ep, cci_event_type_str(e->ev.type));
}

/* Drop the connection reference of an event; with the lock of c's
 * endpoint held.  Returns the connection if that was its last reference. */
static cci__conn_t *conn_unref_locked(cci__conn_t *c)
{
	assert(!c || cci__spin_held(&core_ep(c->ep)->lock));
	if (c && --core_conn(c)->refs == 0)
		return c;
	return NULL;
}

/*
 * Let the plugin take back what stands behind an event.  A request the
 * application returned without answering is rejected first, so the client
 * hears no rather than waiting for its timeout.
 */
static void evt_release_to_plugin(cci__evt_t *e)
{
	const struct cci_plugin *p = e->ep->plugin;

	if (e->req_state) {
		if (!core_evt(e)->answered) {
			core_evt(e)->answered = 1;
			LOG(CCI_LOG_CONN, "ep %p: a connection request returned unanswered is rejected",
			    (void *)e->ep);
			p->reject(e);
		}
		p->request_done(e);
	} else if (e->rx_buf && p->recv_returned) {
		p->recv_returned(e);
	}
}

/* Remove the queued (not yet lent) events of conn. */
void cci__evt_purge_conn(cci__ep_t *ep, cci__conn_t *conn)
{
	cci__evt_t *keep_head = NULL, *keep_tail = NULL, *drop = NULL, *e, *next;
	cci__conn_t *dead = NULL;

	cci__spin_lock(&core_ep(ep)->lock);
	for (e = atomic_load_explicit(&core_ep(ep)->evq_head, memory_order_relaxed); e; e = next) {
		next = core_evt(e)->next;
		core_evt(e)->next = NULL;
		if (e->conn == conn) {
			core_evt(e)->next = drop;
			drop = e;
			core_ep(ep)->evq_len--;
		} else {
			if (keep_tail)
				core_evt(keep_tail)->next = e;
			else
				keep_head = e;
			keep_tail = e;
		}
	}
	atomic_store_explicit(&core_ep(ep)->evq_head, keep_head, memory_order_relaxed);
	core_ep(ep)->evq_tail = keep_tail;
	cci__spin_unlock(&core_ep(ep)->lock);
	for (e = drop; e; e = next) {
		next = core_evt(e)->next;
		evt_release_to_plugin(e);
		cci__spin_lock(&core_ep(ep)->lock);
		dead = conn_unref_locked(e->conn);
		evt_put_locked(ep, e);
		cci__spin_unlock(&core_ep(ep)->lock);
		cci__conn_free(dead);
	}
}

static void os_handle_drain(cci__ep_t *ep)
{
	uint64_t v;
	ssize_t n;

	do
		n = read(core_ep(ep)->os_evfd, &v, sizeof(v));
	while (n < 0 && errno == EINTR);
}

/* Quiet the OS handle if it was rung for events and none is queued now;
 * with core_ep(ep)->lock held (so a ring for a later event is never
 * eaten), and only when rung (endpoints without a handle pay no system
 * call).  A ring for plugin work (work_rung) stays: see os_handle_ring_work. */
static void os_handle_quiet_locked(cci__ep_t *ep)
{
	assert(cci__spin_held(&core_ep(ep)->lock));
	if (!cci__evq_nonempty(ep) && core_ep(ep)->rung && !core_ep(ep)->work_rung) {
		os_handle_drain(ep);
		core_ep(ep)->rung = 0;
	}
}

/* Pop the next queued event and lend it; NULL if none.  With core_ep(ep)->lock
 * held.  An emptied queue quiets the OS handle. */
static cci__evt_t *evq_pop_locked(cci__ep_t *ep)
{
	cci__evt_t *e = atomic_load_explicit(&core_ep(ep)->evq_head, memory_order_relaxed);

	assert(cci__spin_held(&core_ep(ep)->lock));
	if (e) {
		atomic_store_explicit(&core_ep(ep)->evq_head, core_evt(e)->next, memory_order_relaxed);
		if (!core_evt(e)->next)
			core_ep(ep)->evq_tail = NULL;
		core_ep(ep)->evq_len--;
		core_evt(e)->lent = 1;
	}
	os_handle_quiet_locked(ep);
	return e;
}

/* This thread runs progress next (and arms after it, if it leaves the
 * queue empty): the work a ring announced is looked at now, so the ring
 * may go.  With core_ep(ep)->lock held. */
static void os_handle_take_work_locked(cci__ep_t *ep)
{
	assert(cci__spin_held(&core_ep(ep)->lock));
	core_ep(ep)->work_rung = 0;
	os_handle_quiet_locked(ep);
}

static cci__evt_t *evq_pop(cci__ep_t *ep)
{
	cci__evt_t *e;

	cci__spin_lock(&core_ep(ep)->lock);
	e = evq_pop_locked(ep);
	cci__spin_unlock(&core_ep(ep)->lock);
	return e;
}

/* Before arming: returns whether any event is queued.  When none is, the
 * caller runs progress next, so a ring for plugin work may go, and one
 * for events no longer queued (purged with their connection, say) too. */
int cci__evq_settle(cci__ep_t *ep)
{
	int queued;

	cci__spin_lock(&core_ep(ep)->lock);
	queued = cci__evq_nonempty(ep);
	if (!queued)
		os_handle_take_work_locked(ep);
	cci__spin_unlock(&core_ep(ep)->lock);
	return queued;
}

/*
 * Make the OS handle readable although the queue may be empty: the plugin
 * has something (a record in a ring, a buffer given back to a starved
 * endpoint) that only the next cci_get_event's progress turns into an
 * event.  Such a ring is marked work_rung, and popping the queue empty
 * does not quiet it: only a thread about to run progress does
 * (os_handle_take_work_locked).  Otherwise a pop that followed this ring
 * in the same call (an event another thread posted meanwhile) would drain
 * the handle while the plugin, armed already, rings nothing more for what
 * it holds: the application would sleep on a handle that stays quiet
 * while cci_get_event has an event for it.
 */
static void os_handle_ring_work(cci__ep_t *ep)
{
	int ring;

	cci__spin_lock(&core_ep(ep)->lock);
	ring = !core_ep(ep)->rung;
	core_ep(ep)->rung = 1;
	core_ep(ep)->work_rung = 1;
	cci__spin_unlock(&core_ep(ep)->lock);
	if (ring)
		os_handle_ring(ep);
}

/*
 * The queue was left empty: let the plugin arrange for the handle to turn
 * readable when something arrives.  Returns CCI_EAGAIN, with the handle
 * readable, when something already has: work the plugin holds (rung for
 * until a progress call takes it), or an event another thread queued
 * (rung for by its post, or by the thread whose progress posted it).
 */
int cci__ep_arm(cci__ep_t *ep)
{
	int rc = ep->plugin->arm ? ep->plugin->arm(ep) : CCI_SUCCESS;

	if (rc == CCI_EAGAIN)
		os_handle_ring_work(ep);
	else if (rc == CCI_SUCCESS && cci__evq_nonempty(ep))
		rc = CCI_EAGAIN;
	return rc;
}

/*
 * cci_get_event on an endpoint with an OS handle.  Events posted while
 * this thread runs progress do not ring (it pops one at once); what it
 * leaves queued is rung for as it leaves, and an empty queue re-arms the
 * plugin, so the handle is readable exactly when another call would
 * return an event.
 */
static int get_event_with_handle(cci__ep_t *ep, cci__evt_t **e_p)
{
	cci__evt_t *e;
	int prc = CCI_SUCCESS, ring, empty;
	uint32_t returns = 0;

	cci__spin_lock(&core_ep(ep)->lock);
	e = evq_pop_locked(ep);
	if (!e) {
		core_ep(ep)->pollers++;
		os_handle_take_work_locked(ep);
	}
	cci__spin_unlock(&core_ep(ep)->lock);
	if (!e) {
		returns = atomic_load_explicit(&core_ep(ep)->returns, memory_order_seq_cst);
		prc = ep->plugin->progress(ep);
		cci__spin_lock(&core_ep(ep)->lock);
		core_ep(ep)->pollers--;
		e = evq_pop_locked(ep);
		ring = os_handle_should_ring(ep);
		cci__spin_unlock(&core_ep(ep)->lock);
		if (ring)
			os_handle_ring(ep);
	}
	empty = !cci__evq_nonempty(ep);
	if (!e && prc == CCI_ENOBUFS) {
		/* Nothing can come until the application returns an event:
		 * the return rings the handle (cci_return_event).  One made
		 * by another thread since this progress began may have seen
		 * starved still 0: the count of returns tells, and this
		 * thread rings for it (each side writes, then reads the
		 * other's word, so one of them sees the other). */
		atomic_store_explicit(&core_ep(ep)->starved, 1, memory_order_seq_cst);
		if (atomic_load_explicit(&core_ep(ep)->returns, memory_order_seq_cst) != returns &&
		    atomic_exchange_explicit(&core_ep(ep)->starved, 0, memory_order_seq_cst))
			os_handle_ring_work(ep);
		return CCI_ENOBUFS;
	}
	if (empty && cci__ep_arm(ep) == CCI_EAGAIN && !e)
		e = evq_pop(ep);
	if (!e)
		return CCI_EAGAIN;
	*e_p = e;
	return CCI_SUCCESS;
}

CCI_API int cci_get_event(cci_endpoint_t *endpoint, cci_event_t **event)
{
	cci__ep_t *ep = cci__ep_live(endpoint);
	cci__evt_t *e = NULL;
	int rc = CCI_SUCCESS;

	if (!ep || !event)
		return CCI_EINVAL;
	if (core_ep(ep)->os_evfd >= 0) {
		rc = get_event_with_handle(ep, &e);
	} else {
		/* Hand out what is queued before looking for more. */
		e = cci__evq_nonempty(ep) ? evq_pop(ep) : NULL;
		if (!e) {
			rc = ep->plugin->progress(ep);
			e = cci__evq_nonempty(ep) ? evq_pop(ep) : NULL;
		}
		if (!e)
			rc = rc == CCI_ENOBUFS ? CCI_ENOBUFS : CCI_EAGAIN;
	}
	if (!e)
		return rc;
	*event = &e->ev;
	LOG(CCI_LOG_EVENT, "ep %p: handed out %s", (void *)ep, cci_event_type_str(e->ev.type));
	return CCI_SUCCESS;
}

CCI_API int cci_return_event(cci_event_t *event)
{
	cci__evt_t *e = cci__evt_live(event);
	cci__ep_t *ep;
	cci__conn_t *dead;

	/* Not an event of the library's (a connection or an endpoint, say). */
	if (!e)
		return CCI_EINVAL;
	ep = e->ep;
	if (!core_evt(e)->lent)
		return CCI_EINVAL; /* returned twice, or never handed out */
	core_evt(e)->lent = 0;
	evt_release_to_plugin(e);
	cci__spin_lock(&core_ep(ep)->lock);
	dead = conn_unref_locked(e->conn);
	evt_put_locked(ep, e);
	cci__spin_unlock(&core_ep(ep)->lock);
	cci__conn_free(dead);
	/* A buffer is free again: what waited for one can arrive now, so a
	 * waiter on the OS handle must look (see get_event_with_handle for
	 * the count). */
	atomic_fetch_add_explicit(&core_ep(ep)->returns, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&core_ep(ep)->starved, memory_order_seq_cst) &&
	    atomic_exchange_explicit(&core_ep(ep)->starved, 0, memory_order_seq_cst))
		os_handle_ring_work(ep);
	return CCI_SUCCESS;
}

/* A dying endpoint: drop the references that queued and lent events hold
 * on connections, freeing the connections nobody else holds.  No other
 * thread reaches the endpoint now; the lock is taken as everywhere a
 * reference drops, and is free. */
void cci__evt_drop_conn_refs(cci__ep_t *ep)
{
	for (struct evt_chunk *c = core_ep(ep)->evt_chunks; c; c = c->next) {
		for (int i = 0; i < EVT_CHUNK; i++) {
			cci__conn_t *dead;

			cci__spin_lock(&core_ep(ep)->lock);
			dead = conn_unref_locked(c->evts[i].evt.conn);
			c->evts[i].evt.conn = NULL;
			cci__spin_unlock(&core_ep(ep)->lock);
			cci__conn_free(dead);
		}
	}
}

/*
 * Chunks that held an event still lent when its endpoint died: kept for
 * good, their events marked dead, so that the application's late
 * cci_return_event() (or cci_accept()) reads a dead magic instead of
 * freed memory.  Only a program that never returns those events pays.
 */
static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;
static struct evt_chunk *orphans;

/* The library is being unloaded: nobody can return those events now. */
__attribute__((destructor)) static void orphans_release(void)
{
	pthread_mutex_lock(&orphans_lock);
	while (orphans) {
		struct evt_chunk *next = orphans->next;

		free(orphans);
		orphans = next;
	}
	pthread_mutex_unlock(&orphans_lock);
}

void cci__evt_orphans_lock(void)
{
	pthread_mutex_lock(&orphans_lock);
}

void cci__evt_orphans_unlock(void)
{
	pthread_mutex_unlock(&orphans_lock);
}

static int chunk_has_lent(const struct evt_chunk *c)
{
	for (int i = 0; i < EVT_CHUNK; i++)
		if (c->evts[i].lent)
			return 1;
	return 0;
}

/* Free every event of a dying endpoint. */
void cci__evt_pool_free(cci__ep_t *ep)
{
	struct evt_chunk *c = core_ep(ep)->evt_chunks, *next;

	for (; c; c = next) {
		next = c->next;
		if (!chunk_has_lent(c)) {
			free(c);
			continue;
		}
		for (int i = 0; i < EVT_CHUNK; i++) {
			c->evts[i].magic = CCI__MAGIC_DEAD_EVT;
			c->evts[i].evt.ep = NULL;
		}
		pthread_mutex_lock(&orphans_lock);
		c->next = orphans;
		orphans = c;
		pthread_mutex_unlock(&orphans_lock);
	}
	core_ep(ep)->evt_chunks = NULL;
	core_ep(ep)->evt_pool = NULL;
	atomic_store_explicit(&core_ep(ep)->evq_head, NULL, memory_order_relaxed);
	core_ep(ep)->evq_tail = NULL;
}
