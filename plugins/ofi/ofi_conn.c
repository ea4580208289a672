/*
 * ofi_conn.c - connections: the table of connection ids, creation,
 * disconnect, the endpoint's end, and freeing once unreferenced.
 *
 * Every message carries the receiver's connection id; ids hold a
 * generation so that a message for a closed connection never reaches a
 * new one in the same slot.  The handshake that opens a connection is
 * ofi_hs.c's.
 */
#include <stdlib.h>

#include "ofi.h"

/* cq_lock held. */
static int slot_alloc(struct ofi_ep *sep, struct ofi_conn *oc)
{
	assert(cci__spin_held(&sep->cq_lock));
	for (uint32_t n = 0; n < OFI_MAX_CONNS; n++) {
		uint32_t s = (sep->slot_hint + n) % OFI_MAX_CONNS + 1;

		if (sep->slots[s])
			continue;
		sep->slot_gen[s]++;
		oc->id = s | (uint32_t)((sep->slot_gen[s] + sep->gen_salt) & 0xffffu) << 16;
		sep->slots[s] = oc;
		sep->slot_hint = s;
		return CCI_SUCCESS;
	}
	return CCI_ENOMEM;
}

struct ofi_conn *ofi_conn_new(struct ofi_ep *sep, cci_conn_attribute_t attr, void *context)
{
	struct ofi_conn *oc = calloc(1, sizeof(*oc));
	uint32_t window;
	int rc;

	if (!oc || !(oc->conn = ofi_core->conn_alloc(sep->ep, attr, context))) {
		free(oc);
		return NULL;
	}
	*(struct ofi_conn **)oc->conn->priv = oc;
	oc->sep = sep;
	cci__conn_life_init(&oc->life);
	oc->attr = (int)attr;
	window = cci__lender_limit(&sep->lend);
	cci__credit_init(&oc->cr, 0, window < OFI_WINDOW_MAX ? window : OFI_WINDOW_MAX);
	pthread_mutex_init(&oc->lock, NULL);
	cci__spin_lock(&sep->cq_lock);
	rc = slot_alloc(sep, oc);
	cci__spin_unlock(&sep->cq_lock);
	if (rc != CCI_SUCCESS)
		goto fail;
	pthread_mutex_lock(&sep->lock);
	rc = cci__due_reserve(&sep->due);
	if (rc == CCI_SUCCESS) {
		CCI__DLIST_PUSH(&sep->conns, oc);
		/* connecting: the tick watches it from the next one on */
		atomic_fetch_add_explicit(&sep->connecting, 1, memory_order_relaxed);
		cci__due_set(&sep->due, &oc->base.due, cci__engine_now(&sep->eng));
	}
	pthread_mutex_unlock(&sep->lock);
	if (rc == CCI_SUCCESS)
		return oc;
	cci__spin_lock(&sep->cq_lock);
	sep->slots[oc->id & 0xffffu] = NULL;
	cci__spin_unlock(&sep->cq_lock);
fail:
	ofi_core->conn_release(oc->conn);
	pthread_mutex_destroy(&oc->lock);
	free(oc);
	return NULL;
}

/* Take oc out of the table and onto sep->gone: no message reaches it,
 * the timers forget it, its id is free.  Again later, a no-op. */
static void conn_take_out(struct ofi_conn *oc, int cq_held)
{
	struct ofi_ep *sep = oc->sep;

	if (!cq_held)
		cci__spin_lock(&sep->cq_lock);
	if (sep->slots[oc->id & 0xffffu] == oc)
		sep->slots[oc->id & 0xffffu] = NULL;
	pthread_mutex_lock(&oc->lock);
	ofi_held_free(oc);
	pthread_mutex_unlock(&oc->lock);
	if (!cq_held)
		cci__spin_unlock(&sep->cq_lock);
	pthread_mutex_lock(&sep->lock);
	if (!oc->retired) {
		cci__due_clear(&sep->due, &oc->base.due);
		cci__due_unreserve(&sep->due);
		CCI__DLIST_UNLINK(&sep->conns, oc);
		CCI__DLIST_PUSH(&sep->gone, oc);
		oc->retired = 1;
	}
	pthread_mutex_unlock(&sep->lock);
}

/* Take oc out of service (conn_take_out); it is freed once the last
 * reference goes.  Drops the table's reference. */
void ofi_conn_unlist(struct ofi_conn *oc, int cq_held)
{
	conn_take_out(oc, cq_held);
	ofi_conn_unref(oc);
}

/*
 * A connection broken for OFI_RETIRE_NS (the peer left, died or timed
 * out: whatever it sent before its DISC came long since) that the
 * application has not disconnected, which CCI cannot make it do: it
 * leaves the table, so that its id serves a new connection and the tick
 * walks it no more.  What the application holds is its object alone
 * until cci_disconnect, which drops the table's reference.  The caller
 * holds a reference of its own and no lock.
 */
void ofi_conn_retire(struct ofi_conn *oc)
{
	conn_take_out(oc, 0);
}

/* sep->lock held (or no other thread runs); oc is on no list. */
static void conn_free(struct ofi_conn *oc)
{
	cci__peer_reg_free_all(&oc->mrc);
	ofi_keys_free(oc);
	if (oc->peer)
		ofi_peer_put_locked(oc->peer);
	ofi_pidw_put(ofi_conn_pidw(oc));
	pthread_mutex_destroy(&oc->lock);
	free(oc);
}

/* Free the connections taken out of service whose last reference went
 * since (sep->freeable). */
void ofi_conns_sweep(struct ofi_ep *sep)
{
	struct cci__conn_life *list = cci__conn_graves_take(&sep->freeable);

	if (!list)
		return;
	pthread_mutex_lock(&sep->lock);
	for (struct ofi_conn *oc; list != NULL;) {
		oc = (struct ofi_conn *)((char *)list - offsetof(struct ofi_conn, life));
		list = list->next_grave;
		CCI__DLIST_UNLINK(&sep->gone, oc);
		/* Whoever dropped the last reference did it holding oc->lock:
		 * wait until it left. */
		pthread_mutex_lock(&oc->lock);
		pthread_mutex_unlock(&oc->lock);
		conn_free(oc);
	}
	pthread_mutex_unlock(&sep->lock);
}

/* Tell the peer (if it still listens; its answer is awaited, ofi_disc.c)
 * and drop the work; oc->lock held. */
static void conn_close(struct ofi_conn *oc)
{
	assert(cci__mutex_held(&oc->lock));
	if (ofi_conn_state(oc) == CCI__CONN_OPEN &&
	    !ofi_pidw_unreachable(oc->sep, ofi_conn_pidw(oc))) {
		/* awaited before it leaves: the answer may come at once */
		ofi_disc_await(oc);
		if (ofi_ctl_send(oc, OFI_T_DISC, OFI_DISC_LAST, NULL, 0, OFI_CTL_TRACKED) != CCI_SUCCESS)
			ofi_disc_answered(oc->sep, oc->id);
	}
	ofi_conn_move(oc, CCI__CONN_CLOSED);
	ofi_tx_fail_all(oc, CCI_ERR_DISCONNECTED, 0);
}

int ofi_disconnect(cci__conn_t *conn)
{
	struct ofi_conn *oc = ofi_conn_of(conn);

	pthread_mutex_lock(&oc->lock);
	conn_close(oc);
	oc->conn = NULL;
	pthread_mutex_unlock(&oc->lock);
	ofi_conn_unlist(oc, 0);
	ofi_core->conn_release(conn);
	OFI_LOG(CCI_LOG_CONN, "ofi: disconnected %08x", oc->id);
	return CCI_SUCCESS;
}

/* Endpoint destruction: tell every peer, drop the work (no thread runs). */
void ofi_conns_close_all(struct ofi_ep *sep)
{
	for (struct ofi_conn *oc = sep->conns; oc; oc = oc->next) {
		pthread_mutex_lock(&oc->lock);
		conn_close(oc);
		pthread_mutex_unlock(&oc->lock);
	}
}

/* Endpoint destruction, after the provider endpoint is closed. */
void ofi_conns_free_all(struct ofi_ep *sep)
{
	struct ofi_conn *lists[2] = { sep->conns, sep->gone };

	sep->conns = sep->gone = NULL;
	cci__conn_graves_init(&sep->freeable);
	for (int i = 0; i < 2; i++) {
		for (struct ofi_conn *oc; CCI__SLIST_POP(&lists[i], oc, next);) {
			if (oc->conn)
				ofi_core->conn_release(oc->conn);
			conn_free(oc);
		}
	}
}

void ofi_conn_timeouts_changed(cci__conn_t *conn)
{
	struct ofi_conn *oc = ofi_conn_of(conn);

	cci__conn_keepalive_changed(&oc->base, conn, &oc->lock);
	ofi_conn_touch(oc);
}
