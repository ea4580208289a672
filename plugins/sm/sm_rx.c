/*
 * sm_rx.c - the receive side: progress() (sm_poll.c) drains the rings
 * with records and hands each message record here, which posts a
 * RECV for it (RMA records go to sm_rma.c, which posts a write's
 * completion message here too), and each record is taken back
 * when its event is returned.
 */
#include "sm.h"

/* The ring holds garbage: stop reading it and let the control thread
 * break the connection.  rx_lock held. */
void sm_rx_fault(struct sm_conn *sc)
{
	SM_WARN("sm: malformed record from pid %d; connection closed", (int)sc->peer_pid);
	sc->rx_dead = 1;
	atomic_store(&sc->fault, CCI_ERR_DISCONNECTED);
	sm_tick_ask(sc);
}

static void rx_wake_producer(struct sm_conn *sc);

int sm_rx_post_at(struct sm_ep *sep, struct sm_conn *sc, struct sm_rec *rec, uint32_t skip)
{
	uint32_t len = rec->len - skip;
	int may;

	if (len > sep->mss) {
		sm_rx_fault(sc);
		return 0;
	}
	may = sm_ring_may_consume(&sc->rx, rec);
	if (may == 0)
		return 0; /* the next drain, once events came back */
	if (may == 2)
		rx_wake_producer(sc); /* it may use the whole ring now */
	/* Posted before it is consumed, so that without an event it stays
	 * in the ring for the next pass; rx_lock keeps its return (which
	 * releases it) waiting until it is consumed and counted. */
	if (sm_core->post_recv(sc->conn, (char *)sm_rec_payload(rec) + skip, len, rec) != CCI_SUCCESS)
		return 0;
	sm_ring_consume(&sc->rx, rec);
	cci__conn_hold(&sc->life);
	return 1;
}

/*
 * A record went back: free ring space, and wake a producer that waits for
 * it, if it sleeps on its OS handle (sm_peer_wake: the doorbell is read
 * only there).  A producer that polls flushes its queue at its next
 * progress call, so ringing it would cost a system call per release for
 * nothing (half the message rate of a sender that outruns its receiver).
 * No full fence between publishing tail and reading prod_waiting: in the
 * rare interleaving where both sides miss each other, the producer's own
 * progress or its control thread's tick (5 ms) flushes the queue.
 */
static void rx_wake_producer(struct sm_conn *sc)
{
	if (atomic_load_explicit(&sc->rx.ctl->prod_waiting, memory_order_relaxed)) {
		atomic_store_explicit(&sc->rx.ctl->prod_waiting, 0, memory_order_relaxed);
		sm_peer_wake(sc);
	}
}

static void rx_release(struct sm_conn *sc, struct sm_rec *rec)
{
	if (sm_ring_release(&sc->rx, rec))
		rx_wake_producer(sc);
}

void sm_rx_consume_release(struct sm_conn *sc, struct sm_rec *rec)
{
	sm_ring_consume(&sc->rx, rec);
	rx_release(sc, rec);
}

void sm_recv_returned(cci__evt_t *evt)
{
	struct sm_conn *sc = sm_conn_of(evt->conn);
	struct sm_ep *sep = sc->sep;
	int dead = 0;

	cci__spin_lock(&sep->rx_lock);
	if (!sc->rx_closed)
		rx_release(sc, evt->rx_buf);
	dead = cci__conn_drop(&sc->life);
	if (dead)
		CCI__DLIST_UNLINK(&sep->zombies, sc);
	cci__spin_unlock(&sep->rx_lock);
	if (dead)
		sm_conn_destroy(sc);
}
