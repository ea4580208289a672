/*
 * sm_loop.c - the per-endpoint control thread: the shared progress engine
 * (plugins/common/engine.h) with the listening socket and every control
 * socket as watchers, and a tick that runs while there is a connection or
 * a request to time.
 *
 * It accepts connection requests, answers PINGs (so a peer that computes
 * without calling the library still looks alive, while a stopped one does
 * not), notices peers that die (their control socket hangs up), and on
 * each tick flushes queued sends and runs the connect timeouts,
 * keepalives and send timeouts that are due.  It never touches the data
 * path of messages in flight.
 *
 * Its callbacks run with the loop lock held and take sep->lock.  A watcher
 * is stopped (under the loop lock) before its object is freed, which also
 * drops any event of it still pending in the batch being handled.
 *
 * progress = manual (an ini key, progress_key.h) starts no thread: the
 * application's progress() runs the loop (cci__engine_poll), so requests
 * are accepted, PINGs answered and timers run only while it calls.  With
 * an OS handle, the loop's descriptors join the doorbell in it
 * (cci__engine_handle_join): an application asleep there wakes for a
 * message, a connection request, a control message, once a tick while a
 * connection has work, and when the next timer is due (sm_loop_arm).
 */

#include "sm.h"

/* Records arriving or any control message count as signs of life.  A
 * record is seen at the next visit of the connection's timers (the data
 * path reads no clock), so it counts as heard then: a peer that falls
 * silent times out up to a visit (a quarter period) late, never early. */
static void conn_heard(struct sm_conn *sc, uint64_t now)
{
	uint64_t head;

	if (sc->base.timers.ka_us == 0)
		return;
	head = atomic_load_explicit(&sc->rx.ctl->head, memory_order_relaxed);
	if (head != sc->seen_head) {
		sc->seen_head = head;
		cci__ct_heard(&sc->base.timers, now);
	}
}

/* The oldest queued send (copy RMAs waiting for their DONE are the
 * peer's to time: they are off the queue, on rma_wait). */
static uint64_t oldest_send_ns(void *pc)
{
	struct sm_conn *sc = pc;
	uint64_t oldest;

	pthread_mutex_lock(&sc->tx_lock);
	oldest = sc->txq ? sc->txq->queued_ns : UINT64_MAX;
	pthread_mutex_unlock(&sc->tx_lock);
	return oldest;
}

static void ping(void *pc)
{
	struct sm_conn *sc = pc;

	if (sc->sock >= 0)
		sm_ctl_send(sc->sock, SM_CTL_PING, NULL, NULL, 0);
}

static void send_expired(void *pc)
{
	sm_conn_break(pc, CCI_ETIMEDOUT);
}

static const struct cci__conn_tick_ops tick_ops = {
	.oldest_send_ns = oldest_send_ns,
	.ping = ping,
	.connect_expired = NULL, /* conn_timers_due times connects: the connection goes */
	.send_expired = send_expired,
};

void sm_due_note(struct sm_conn *sc)
{
	assert(cci__mutex_held(&sc->sep->lock));
	cci__conn_due_note(&sc->sep->due, &sc->base, sc->conn, cci__now_ns());
}

/* Has sc work queued (its send timeout runs, and a flush)? */
static int txq_queued(struct sm_conn *sc)
{
	int queued;

	pthread_mutex_lock(&sc->tx_lock);
	queued = sc->txq != NULL;
	pthread_mutex_unlock(&sc->tx_lock);
	return queued;
}

/* One connection of the tick's list of work: 1 if the next tick must
 * visit it again, 0 if not, -1 if it is gone (its answer failed). */
static int conn_work(struct sm_conn *sc, uint64_t now)
{
	int fault;

	if (cci__conn_state(&sc->base) == CCI__CONN_CONNECTING)
		return sc->answer_until_ns ? sm_hs_answer_retry(sc, now) : 0;
	if (cci__conn_state(&sc->base) == CCI__CONN_BROKEN)
		return sm_conn_rx_release(sc);
	if (!cci__conn_is_open(&sc->base))
		return 0;
	fault = atomic_exchange(&sc->fault, 0);
	if (fault) {
		sm_conn_break(sc, fault);
		return 0;
	}
	sm_txq_flush(sc);
	return txq_queued(sc);
}

/* The timers of sc are due (it was taken off the heap): a connect past
 * its deadline fails and sc goes; an open connection gets its send
 * timeout and keepalive step; then sc is filed again for its next visit,
 * unless it left the connecting and open states (no timer runs then). */
static void conn_timers_due(struct sm_conn *sc, uint64_t now)
{
	switch (cci__conn_state(&sc->base)) {
	case CCI__CONN_CONNECTING:
		if (cci__ct_connect_expired(&sc->base.timers, now)) {
			sm_connect_failed(sc, CCI_ETIMEDOUT, 1);
			return;
		}
		break;
	case CCI__CONN_OPEN:
		conn_heard(sc, now); /* before the keepalive decides */
		if (!cci__conn_tick(&sc->base, sc->conn, sm_core, &tick_ops, sc, now))
			return;
		break;
	default:
		return;
	}
	cci__due_set(&sc->sep->due, &sc->base.due,
	             cci__conn_next_due(&sc->base, sc->conn, oldest_send_ns(sc), now));
}

static struct sm_conn *conn_of_due(struct cci__due *d)
{
	return (struct sm_conn *)(void *)((char *)d - offsetof(struct sm_conn, base.due));
}

/* The connections whose timers are due, each at most once (one filed
 * again as due now waits for the next tick).  sm's own loop rather than
 * cci__conn_due_tick: the keepalive must first read the receive ring for
 * records (conn_heard), and that base tick has no step before it. */
static void timers_tick(struct sm_ep *sep, uint64_t now)
{
	uint32_t budget = sep->due.n;
	struct cci__due *d;

	while (budget-- > 0 && (d = cci__due_take(&sep->due, now)) != NULL)
		conn_timers_due(conn_of_due(d), now);
}

/* The sweep flagged a ring with records: an application asleep on the OS
 * handle must wake for it (the sweep marked sep->found, fenced, then
 * looks at armed; arming raises armed, fences, then looks at found). */
static void sweep_wake(struct sm_ep *sep)
{
	static const uint64_t one = 1;

	sm_fence();
	if (atomic_load_explicit(&sep->page->armed, memory_order_relaxed) &&
	    write(sep->bell_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		SM_LOG(CCI_LOG_EP, "sm: own doorbell: %s", strerror(errno));
}

/*
 * Each tick: the connections with work (queued sends, faults, answers
 * waiting for descriptors: sep->timed), then those whose timers are due
 * (connect deadlines, keepalives, send timeouts: sep->due), so that
 * 10,000 idle connections cost nothing here, with a keepalive or not,
 * until one's probe is due; the sweep's SM_SWEEP_RINGS rings (sm_poll.c);
 * then the listening socket if descriptors ran
 * out (after the answers: each socket it accepts takes a descriptor they
 * wait for), connects waiting for a full backlog (one attempt per
 * server), requests that never came.  The tick runs while there is a
 * connection or a request (listing one starts it again), so that what
 * other threads ask for is seen within a tick without waking the loop.
 */
static void on_tick(void *owner, uint64_t now, int app_polled)
{
	struct sm_ep *sep = owner;
	struct sm_req *req, *rnext;

	(void)app_polled; /* the data path is the application's alone */
	pthread_mutex_lock(&sep->lock);
	sm_timed_take_asked(sep);
	for (struct sm_tlink *l = sep->timed, *next; l; l = next) {
		struct sm_conn *sc = sm_conn_of_tlink(l);
		next = l->next;
		if (conn_work(sc, now) == 0)
			sm_timed_remove(sc);
	}
	timers_tick(sep, now);
	if (sep->rx_cap && sm_poll_sweep(sep))
		sweep_wake(sep);
	sm_hs_listen_resume(sep);
	if (sep->dialq)
		sm_dial_retry(sep);
	for (req = sep->reqs; req; req = rnext) {
		rnext = req->next;
		/* since_ns may be later than now: listen_resume accepts in
		 * this very tick */
		if (cci__ns_since(req->since_ns, now) > SM_REQ_WAIT_NS) {
			SM_WARN("sm: %s: pid %d connected but never asked; dropped", sep->sock_path,
			        (int)req->peer_pid);
			sm_req_drop(sep, req);
		}
	}
	cci__engine_tick(&sep->eng, sep->conns != NULL || sep->reqs != NULL || sep->listen_paused);
	pthread_mutex_unlock(&sep->lock);
}

int sm_loop_start(struct sm_ep *sep)
{
	int rc;

	if (cci__engine_init(&sep->eng, sep, SM_TICK_S, !sep->dev->manual, NULL, on_tick) !=
	    CCI_SUCCESS) {
		SM_ERR("sm: cannot set up the control thread of %s: out of memory", sep->sock_path);
		return CCI_ENOMEM;
	}
	ev_io_init(&sep->listen_w, sm_hs_on_listen, sep->listen_fd, EV_READ);
	sep->listen_w.data = sep;
	ev_io_start(sep->eng.loop, &sep->listen_w);
	rc = sep->ep->os_epfd >= 0 ? cci__engine_handle_join(&sep->eng, sep->ep->os_epfd)
	                           : CCI_SUCCESS;
	if (rc == CCI_SUCCESS && cci__engine_start(&sep->eng) != CCI_SUCCESS) {
		SM_ERR("sm: cannot start the control thread of %s", sep->sock_path);
		rc = CCI_ENOMEM;
	}
	if (rc != CCI_SUCCESS)
		cci__engine_fini(&sep->eng);
	return rc;
}

/* progress = manual: wake an application asleep on the OS handle in a
 * tick while the tick has work (connections, requests or connects that
 * wait), when the first timer is due while only timers run, at least
 * every SM_SWEEP_SLEEP_NS while connections are open (the sweep), else
 * only for commands and the loop's descriptors.  Never sooner than a tick: the
 * timers act in the tick, which the loop runs at most once per tick. */
void sm_loop_arm(struct sm_ep *sep)
{
	uint64_t due, now, wait_ns = 0;
	int work, conns;

	if (!cci__engine_manual(&sep->eng))
		return;
	pthread_mutex_lock(&sep->lock);
	work = sep->timed || atomic_load_explicit(&sep->asked, memory_order_relaxed) ||
	       sep->reqs || sep->listen_paused || sep->dialq;
	conns = sep->conns != NULL;
	due = cci__due_first(&sep->due);
	pthread_mutex_unlock(&sep->lock);
	now = cci__now_ns();
	if (work || (due != CCI__DUE_NEVER && due < now + SM_TICK_NS))
		wait_ns = SM_TICK_NS;
	else if (due != CCI__DUE_NEVER)
		wait_ns = due - now;
	/* The sweep runs in the tick: with rings to sweep, wake for it now and then. */
	if (conns && (wait_ns == 0 || wait_ns > SM_SWEEP_SLEEP_NS))
		wait_ns = SM_SWEEP_SLEEP_NS;
	cci__engine_handle_arm(&sep->eng, wait_ns);
}
