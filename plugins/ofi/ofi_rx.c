/*
 * ofi_rx.c - progress and the receive path.
 *
 * progress() reads the completion queue (one reader at a time: others
 * return at once) and dispatches: receive buffers holding application
 * messages become RECV events pointing into the buffer, control messages
 * are handled and their buffer posted again, transmit completions go to
 * ofi_tx.c.  A buffer lent as a RECV event is posted again when the
 * event is returned, and its credit goes back to the sender then.
 *
 * RO order does not rely on the provider: each message carries the
 * connection's sequence number and one that arrives early waits on the
 * connection's held list (bounded by the credits we granted).  The same
 * list keeps messages that arrive before the CONNECT event.  The
 * application never holds more than recv_buf_count RECV events: beyond
 * that, messages wait in order in the endpoint's backlog, and
 * cci_get_event returns CCI_ENOBUFS.
 */
#include <stddef.h>
#include <string.h>

#include "ofi.h"

#define OFI_CQ_BATCH 16
#define OFI_CQ_ROUNDS 4

_Static_assert(offsetof(struct ofi_op, obj) == sizeof(struct fi_context2) &&
               offsetof(struct ofi_rxbuf, obj) == sizeof(struct fi_context2),
               "completion contexts start with fi_context2 then the object kind");

static int rx_full(const struct ofi_ep *sep)
{
	return __atomic_load_n(&sep->rx_lent, __ATOMIC_RELAXED) >=
	       __atomic_load_n(&sep->rx_count, __ATOMIC_RELAXED);
}

static void post_recv(struct ofi_ep *sep, struct ofi_conn *oc, struct ofi_rxbuf *rb)
{
	/* Counted first: the application may return it as soon as it is posted. */
	__atomic_add_fetch(&sep->rx_lent, 1, __ATOMIC_RELAXED);
	if (ofi_core->post_recv(oc->conn, rb->data + rb->off, rb->len, rb) != CCI_SUCCESS) {
		__atomic_sub_fetch(&sep->rx_lent, 1, __ATOMIC_RELAXED);
		ofi_rx_repost(sep, rb); /* the loss is logged */
		ofi_conn_unref(oc);
	}
}

/* Hand rb (holding a reference on oc) to the application, or to the
 * backlog when it holds all it may; oc->lock and cq_lock held. */
static void deliver(struct ofi_ep *sep, struct ofi_conn *oc, struct ofi_rxbuf *rb)
{
	if (sep->backlog || rx_full(sep)) {
		rb->next = NULL;
		if (sep->backlog_tail)
			sep->backlog_tail->next = rb;
		else
			sep->backlog = rb;
		sep->backlog_tail = rb;
		return;
	}
	post_recv(sep, oc, rb);
}

/* cq_lock held. */
void ofi_backlog_drain(struct ofi_ep *sep)
{
	while (sep->backlog && !rx_full(sep)) {
		struct ofi_rxbuf *rb = sep->backlog;
		struct ofi_conn *oc = rb->oc;
		int live;

		sep->backlog = rb->next;
		if (!sep->backlog)
			sep->backlog_tail = NULL;
		pthread_mutex_lock(&oc->lock);
		live = oc->conn && oc->state != OFI_CONN_CLOSED;
		if (live)
			post_recv(sep, oc, rb);
		pthread_mutex_unlock(&oc->lock);
		if (!live) {
			ofi_rx_repost(sep, rb);
			ofi_conn_unref(oc);
		}
	}
}

/* Deliver what the held list allows; oc->lock and cq_lock held. */
static void held_drain(struct ofi_conn *oc)
{
	while (oc->held && (oc->attr != CCI_CONN_ATTR_RO || oc->held->seq == oc->rx_next)) {
		struct ofi_rxbuf *rb = oc->held;
		oc->held = rb->next;
		deliver(oc->sep, oc, rb);
		if (oc->attr == CCI_CONN_ATTR_RO)
			oc->rx_next++;
	}
}

/* Sorted by sequence number (wrapping). */
static void held_insert(struct ofi_conn *oc, struct ofi_rxbuf *rb)
{
	struct ofi_rxbuf **pp = &oc->held;

	while (*pp && (int32_t)((*pp)->seq - rb->seq) < 0)
		pp = &(*pp)->next;
	rb->next = *pp;
	*pp = rb;
}

/* The connection just opened: what arrived early goes out now. */
void ofi_conn_opened(struct ofi_conn *oc)
{
	held_drain(oc);
}

/* oc->lock held (and cq_lock). */
void ofi_held_free(struct ofi_conn *oc)
{
	while (oc->held) {
		struct ofi_rxbuf *rb = oc->held;
		oc->held = rb->next;
		ofi_rx_repost(oc->sep, rb);
		ofi_conn_unref(oc);
	}
}

/* Credits and signs of life carried by any header; oc->lock held. */
static void rx_header(struct ofi_conn *oc, const struct ofi_hdr *h)
{
	oc->rx_count++;
	if (h->credits == 0)
		return;
	oc->credits += h->credits;
	if (oc->msgq)
		ofi_msgq_flush(oc);
}

/* An application message in rb for connection oc (looked up by the
 * caller), with its header fields; cq_lock held. */
static void rx_msg(struct ofi_ep *sep, struct ofi_conn *oc, struct ofi_rxbuf *rb,
                   const struct ofi_hdr *h, uint32_t len)
{
	if (!oc) {
		ofi_rx_repost(sep, rb);
		return;
	}
	pthread_mutex_lock(&oc->lock);
	if (oc->state == OFI_CONN_CLOSED || !oc->conn || len > sep->mss) {
		pthread_mutex_unlock(&oc->lock);
		ofi_rx_repost(sep, rb);
		return;
	}
	rx_header(oc, h);
	rb->len = len;
	rb->seq = h->seq;
	rb->oc = oc;
	ofi_conn_ref(oc);
	if (oc->state == OFI_CONN_CONNECTING ||
	    (oc->attr == CCI_CONN_ATTR_RO && h->seq != oc->rx_next)) {
		held_insert(oc, rb);
	} else {
		deliver(sep, oc, rb);
		if (oc->attr == CCI_CONN_ATTR_RO) {
			oc->rx_next++;
			held_drain(oc);
		}
	}
	pthread_mutex_unlock(&oc->lock);
}

/* A message whose header came as remote CQ data (ofi_imm_pack). */
static void rx_imm(struct ofi_ep *sep, struct ofi_rxbuf *rb, uint64_t data, size_t len)
{
	struct ofi_conn *oc = sep->slots[data & 0xffffu];
	struct ofi_hdr h = { .type = OFI_T_MSG };
	uint32_t seq20 = (uint32_t)(data >> 28) & 0xfffffu;

	__atomic_sub_fetch(&sep->rx_posted, 1, __ATOMIC_RELAXED);
	rb->off = 0;
	if (!oc || (oc->id >> 16 & 0xfffu) != ((data >> 16) & 0xfffu) || (data >> 60) != OFI_T_MSG) {
		ofi_rx_repost(sep, rb);
		return;
	}
	/* The full sequence number nearest to the one expected. */
	h.seq = oc->rx_next + (uint32_t)((int32_t)((seq20 - oc->rx_next) << 12) >> 12);
	h.credits = (uint16_t)((data >> 48) & 0xfffu);
	rx_msg(sep, oc, rb, &h, (uint32_t)len);
}

/* A control message on a connection. */
static void rx_ctl(struct ofi_ep *sep, const struct ofi_hdr *h, const void *body, uint32_t len)
{
	struct ofi_conn *oc;

	if (h->type == OFI_T_REQ || h->type == OFI_T_CANCEL) {
		ofi_on_conn_msg(sep, h, body, len);
		return;
	}
	oc = ofi_conn_lookup(sep, h->dst);
	if (!oc)
		return;
	pthread_mutex_lock(&oc->lock);
	rx_header(oc, h);
	if (h->type == OFI_T_PING && oc->state == OFI_CONN_OPEN)
		ofi_ctl_send(oc, OFI_T_PONG, 0, NULL, 0, 0);
	else if (h->type >= OFI_T_MR_REQ && h->type <= OFI_T_MR_INVAL)
		ofi_on_mr_msg(oc, h, body, len);
	pthread_mutex_unlock(&oc->lock);
	if (h->type == OFI_T_ACCEPT || h->type == OFI_T_REJECT || h->type == OFI_T_DISC)
		ofi_on_conn_msg(sep, h, body, len);
}

static void rx_complete(struct ofi_ep *sep, struct ofi_rxbuf *rb, size_t len)
{
	const struct ofi_hdr *h = (const struct ofi_hdr *)rb->data;

	__atomic_sub_fetch(&sep->rx_posted, 1, __ATOMIC_RELAXED);
	if (len < OFI_HDR_LEN || h->version != OFI_WIRE_VERSION) {
		OFI_LOG(CCI_LOG_MSG, "ofi: malformed message of %zu bytes dropped", len);
		ofi_rx_repost(sep, rb);
		return;
	}
	rb->off = OFI_HDR_LEN;
	if (h->type == OFI_T_MSG) {
		rx_msg(sep, ofi_conn_lookup(sep, h->dst), rb, h, (uint32_t)(len - OFI_HDR_LEN));
		return;
	}
	rx_ctl(sep, h, rb->data + OFI_HDR_LEN, (uint32_t)(len - OFI_HDR_LEN));
	ofi_rx_repost(sep, rb);
}

static int ctx_obj(void *ctx)
{
	return *((const uint8_t *)ctx + sizeof(struct fi_context2));
}

static void cq_error(struct ofi_ep *sep)
{
	struct fi_cq_err_entry err;

	memset(&err, 0, sizeof(err));
	if (fi_cq_readerr(sep->cq, &err, 0) != 1)
		return;
	if (!err.op_context) {
		OFI_LOG(CCI_LOG_MSG, "ofi: a message sent without completion failed: %s",
		        ofi_lib.strerror(err.err));
		return;
	}
	if (ctx_obj(err.op_context) == OFI_OBJ_RX) {
		__atomic_sub_fetch(&sep->rx_posted, 1, __ATOMIC_RELAXED);
		if (err.err != FI_ECANCELED) {
			OFI_LOG(CCI_LOG_MSG, "ofi: receive failed: %s", ofi_lib.strerror(err.err));
			ofi_rx_repost(sep, err.op_context);
		}
		return;
	}
	OFI_LOG(CCI_LOG_MSG, "ofi: operation failed: %s (provider error %d)", ofi_lib.strerror(err.err),
	        err.prov_errno);
	ofi_tx_complete(sep, err.op_context, ofi_fi_status(err.err));
}

/* cq_lock held.  CCI_ENOBUFS when the application holds every buffer. */
int ofi_progress_locked(struct ofi_ep *sep)
{
	struct fi_cq_data_entry ent[OFI_CQ_BATCH];

	if (sep->backlog)
		ofi_backlog_drain(sep);
	for (int round = 0; round < OFI_CQ_ROUNDS; round++) {
		ssize_t n = fi_cq_read(sep->cq, ent, OFI_CQ_BATCH);

		if (n == -FI_EAVAIL) {
			sep->cq_seen++;
			cq_error(sep);
			continue;
		}
		if (n <= 0) {
			if (n != -FI_EAGAIN)
				OFI_LOG(CCI_LOG_EP, "ofi: fi_cq_read: %s", ofi_lib.strerror((int)-n));
			break;
		}
		sep->cq_seen += (uint64_t)n;
		for (ssize_t i = 0; i < n; i++) {
			if (!ent[i].op_context)
				continue;
			if (ctx_obj(ent[i].op_context) != OFI_OBJ_RX)
				ofi_tx_complete(sep, ent[i].op_context, CCI_SUCCESS);
			else if (ent[i].flags & FI_REMOTE_CQ_DATA)
				rx_imm(sep, ent[i].op_context, ent[i].data, ent[i].len);
			else
				rx_complete(sep, ent[i].op_context, ent[i].len);
		}
		if (n < OFI_CQ_BATCH)
			break;
	}
	if (__atomic_load_n(&sep->ctlq, __ATOMIC_RELAXED))
		ofi_ctlq_flush(sep);
	if (__atomic_load_n(&sep->tx_pending, __ATOMIC_RELAXED))
		ofi_tx_flush_all(sep);
	return rx_full(sep) ? CCI_ENOBUFS : CCI_SUCCESS;
}

int ofi_progress(cci__ep_t *ep)
{
	struct ofi_ep *sep = ofi_ep_of(ep);
	int rc;

	cci__engine_app_active(&sep->eng); /* the progress thread keeps off the CQ */
	if (__atomic_load_n(&sep->app_armed, __ATOMIC_RELAXED))
		__atomic_store_n(&sep->app_armed, 0, __ATOMIC_RELAXED);
	if (!cci__spin_trylock(&sep->cq_lock))
		return rx_full(sep) ? CCI_ENOBUFS : CCI_SUCCESS;
	rc = ofi_progress_locked(sep);
	cci__spin_unlock(&sep->cq_lock);
	return rc;
}

void ofi_recv_returned(cci__evt_t *evt)
{
	struct ofi_rxbuf *rb = evt->rx_buf;
	struct ofi_conn *oc = rb->oc;
	struct ofi_ep *sep = oc->sep;

	__atomic_sub_fetch(&sep->rx_lent, 1, __ATOMIC_RELAXED);
	ofi_rx_repost(sep, rb);
	/* The credit goes back with the next header to the peer; only a
	 * quarter of the window owed needs a message of its own. */
	if (__atomic_add_fetch(&oc->owed, 1, __ATOMIC_RELAXED) >= ofi_credit_quarter(oc)) {
		pthread_mutex_lock(&oc->lock);
		ofi_credit_maybe(oc, 0);
		pthread_mutex_unlock(&oc->lock);
	}
	ofi_conn_unref(oc);
}
