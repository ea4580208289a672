/*
 * ofi_pool.c - the endpoint's memory: receive buffers posted to the
 * provider, operation descriptors with their transmit buffers, and the
 * registration of both when the provider wants local buffers registered
 * (FI_MR_LOCAL).  Everything comes in slabs allocated at endpoint
 * creation or when a count grows, never on the message path.
 */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

#define OFI_OP_SLAB 32u
#define OFI_CTL_SLAB 256u
#define OFI_ALIGN 64u
/* A control message's buffer: the largest body is a REQ's. */
#define OFI_CTL_STRIDE ((OFI_HDR_LEN + OFI_CTL_BODY_MAX + OFI_ALIGN - 1) / OFI_ALIGN * OFI_ALIGN)

static size_t buf_stride(const struct ofi_ep *sep)
{
	return (OFI_HDR_LEN + sep->mss + OFI_ALIGN - 1) / OFI_ALIGN * OFI_ALIGN;
}

/*
 * Register len bytes at buf for the provider (FI_MR_LOCAL buffers, or RMA
 * targets), bound to the endpoint when it wants that (FI_MR_ENDPOINT).
 * key is the key we ask for (providers with FI_MR_PROV_KEY choose their
 * own); 0 picks one from a counter the random core keys will not meet.
 */
int ofi_mr_reg(struct ofi_ep *sep, void *buf, size_t len, uint64_t access, uint64_t key,
               struct fid_mr **mr_p)
{
	static _Atomic uint64_t next_key = 1ull << 62;
	struct fid_mr *mr;
	int rc;

	if (key == 0)
		key = atomic_fetch_add_explicit(&next_key, 1, memory_order_relaxed) + 1;
	if (sep->info->domain_attr->mr_key_size > 0 && sep->info->domain_attr->mr_key_size < sizeof(key))
		key &= (1ull << (8 * sep->info->domain_attr->mr_key_size)) - 1;
	rc = fi_mr_reg(sep->domain, buf, len, access, 0, key, 0, &mr, NULL);

	if (rc == 0 && (sep->mr_mode & FI_MR_ENDPOINT)) {
		rc = fi_mr_bind(mr, &sep->fep->fid, 0);
		if (rc == 0)
			rc = fi_mr_enable(mr);
		if (rc != 0)
			fi_close(&mr->fid);
	}
	if (rc != 0) {
		OFI_ERR("ofi: cannot register %zu bytes: %s", len, ofi_lib.strerror(-rc));
		return ofi_fi_status(-rc);
	}
	*mr_p = mr;
	return CCI_SUCCESS;
}

static void slab_free(struct ofi_slab *s)
{
	if (s->mr)
		fi_close(&s->mr->fid);
	free(s->bufs);
	free(s->mem);
	free(s);
}

/* n objects of size osz, each with a buffer of stride bytes. */
static struct ofi_slab *slab_new(struct ofi_ep *sep, uint32_t n, size_t osz, size_t stride,
                                 uint64_t access)
{
	struct ofi_slab *s = calloc(1, sizeof(*s));
	size_t bytes = stride * n;

	if (!s)
		return NULL;
	s->mem = calloc(n, osz);
	s->bufs = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
	if (!s->mem || !s->bufs ||
	    ((sep->mr_mode & FI_MR_LOCAL) && ofi_mr_reg(sep, s->bufs, bytes, access, 0, &s->mr))) {
		slab_free(s);
		return NULL;
	}
	return s;
}

/* ---- Receive buffers ---- */

static int rx_slab_add(struct ofi_ep *sep, uint32_t n)
{
	struct ofi_slab *s = slab_new(sep, n, sizeof(struct ofi_rxbuf), buf_stride(sep), FI_RECV);
	struct ofi_rxbuf *rb;

	if (!s)
		return CCI_ENOMEM;
	rb = s->mem;
	cci__spin_lock(&sep->rx_lock);
	for (uint32_t i = 0; i < n; i++) {
		rb[i].obj = OFI_OBJ_RX;
		rb[i].data = (char *)s->bufs + buf_stride(sep) * i;
		rb[i].desc = s->mr ? fi_mr_desc(s->mr) : NULL;
		rb[i].next = sep->rx_free;
		sep->rx_free = &rb[i];
	}
	s->next = sep->rx_slabs;
	sep->rx_slabs = s;
	cci__spin_unlock(&sep->rx_lock);
	return CCI_SUCCESS;
}

static void rx_free_push(struct ofi_ep *sep, struct ofi_rxbuf *rb)
{
	rb->oc = NULL;
	cci__spin_lock(&sep->rx_lock);
	rb->next = sep->rx_free;
	sep->rx_free = rb;
	cci__spin_unlock(&sep->rx_lock);
}

static int rx_post(struct ofi_ep *sep, struct ofi_rxbuf *rb)
{
	ssize_t rc;

	rb->oc = NULL;
	atomic_fetch_add_explicit(&sep->rx_posted, 1, memory_order_relaxed);
	rc = fi_recv(sep->fep, rb->data, OFI_HDR_LEN + sep->mss, rb->desc, FI_ADDR_UNSPEC, rb);
	if (rc == 0)
		return CCI_SUCCESS;
	atomic_fetch_sub_explicit(&sep->rx_posted, 1, memory_order_relaxed);
	OFI_LOG(CCI_LOG_EP, "ofi: fi_recv: %s", ofi_lib.strerror((int)-rc));
	rx_free_push(sep, rb);
	return ofi_fi_status((int)-rc);
}

/* Post buffers (allocating them if needed) until count + the control
 * reserve are with the provider. */
int ofi_rx_grow(struct ofi_ep *sep, uint32_t count)
{
	uint32_t want = count + OFI_RX_RESERVE;

	while (atomic_load_explicit(&sep->rx_posted, memory_order_relaxed) < want) {
		struct ofi_rxbuf *rb;
		int rc;

		cci__spin_lock(&sep->rx_lock);
		rb = sep->rx_free;
		if (rb)
			sep->rx_free = rb->next;
		cci__spin_unlock(&sep->rx_lock);
		if (rb)
			rc = rx_post(sep, rb);
		else
			rc = rx_slab_add(sep, want - atomic_load_explicit(&sep->rx_posted, memory_order_relaxed));
		if (rc != CCI_SUCCESS)
			return rc;
	}
	return CCI_SUCCESS;
}

/* A buffer came back (handled, or its event returned): post it again,
 * unless the receive count shrank. */
void ofi_rx_repost(struct ofi_ep *sep, struct ofi_rxbuf *rb)
{
	if (atomic_load_explicit(&sep->rx_posted, memory_order_relaxed) <
	    cci__lender_limit(&sep->lend) + OFI_RX_RESERVE) {
		rx_post(sep, rb);
		return;
	}
	rx_free_push(sep, rb);
}

/* ---- Operations ---- */

/*
 * Operations come in two pools: messages and RMAs, whose buffer holds a
 * message of mss bytes, and control messages, whose buffer holds the
 * largest control body (a REQ, about 1.3 KiB).  A control message may
 * wait for long in numbers (a REQ per connect in flight while the
 * provider opens its connection to the server, an ACCEPT per request
 * answered), and must not cost an mss-sized buffer each.
 */
static int op_slab_add(struct ofi_ep *sep, int ctl)
{
	uint32_t n = ctl ? OFI_CTL_SLAB : OFI_OP_SLAB;
	size_t stride = ctl ? OFI_CTL_STRIDE : buf_stride(sep);
	struct ofi_slab *s = slab_new(sep, n, sizeof(struct ofi_op), stride, FI_SEND);
	struct cci__op_pool *pool = ctl ? &sep->ctl_ops : &sep->ops;
	struct ofi_op *op;

	if (!s) {
		OFI_WARN("ofi: no memory for %u more operations of endpoint %s", n,
		         sep->ep->uri ? sep->ep->uri : sep->dev->core_name);
		return CCI_ENOMEM;
	}
	op = s->mem;
	cci__spin_lock(&sep->pool_lock);
	for (uint32_t i = 0; i < n; i++) {
		op[i].obj = OFI_OBJ_OP;
		op[i].buf = (char *)s->bufs + stride * i;
		op[i].desc = s->mr ? fi_mr_desc(s->mr) : NULL;
		cci__op_pool_add(pool, &op[i].link);
	}
	s->next = sep->op_slabs;
	sep->op_slabs = s;
	cci__spin_unlock(&sep->pool_lock);
	return CCI_SUCCESS;
}

static int ops_grow(void *sep)
{
	return op_slab_add(sep, 0);
}

static int ctl_ops_grow(void *sep)
{
	return op_slab_add(sep, 1);
}

void ofi_ops_init(struct ofi_ep *sep, uint32_t send_buf_count)
{
	cci__op_pool_init(&sep->ops, sizeof(struct ofi_op), send_buf_count, ops_grow, sep, NULL);
	cci__op_pool_init(&sep->ctl_ops, sizeof(struct ofi_op), 0, ctl_ops_grow, sep, NULL);
}

/* A cleared operation of kind; messages and RMAs are bounded by
 * send_buf_count (NULL), control messages by memory alone. */
struct ofi_op *ofi_op_get(struct ofi_ep *sep, uint8_t kind)
{
	int ctl = kind == OFI_OP_CTL;
	struct cci__op_link *l = cci__op_pool_get(ctl ? &sep->ctl_ops : &sep->ops, ctl);
	struct ofi_op *op;

	if (!l)
		return NULL;
	op = (struct ofi_op *)((char *)l - offsetof(struct ofi_op, link));
	memset(&op->fctx, 0, sizeof(op->fctx));
	memset(&op->next, 0, offsetof(struct ofi_op, buf) - offsetof(struct ofi_op, next));
	op->kind = kind;
	return op;
}

/* Back to its pool; drops the references it held (never called with
 * sep->lock held: the peer reference may take it). */
void ofi_op_put(struct ofi_ep *sep, struct ofi_op *op)
{
	struct ofi_conn *oc = op->oc;
	struct ofi_peer *peer = op->peer;

	op->oc = NULL;
	op->peer = NULL;
	cci__op_pool_put(op->kind == OFI_OP_CTL ? &sep->ctl_ops : &sep->ops, &op->link);
	if (oc)
		ofi_conn_unref(oc);
	ofi_peer_put(sep, peer);
}

/* Every slab, receive buffers and operations (no thread runs; the
 * endpoint is freed next, its free lists unread). */
void ofi_pool_fini(struct ofi_ep *sep)
{
	cci__op_pool_fini(&sep->ops);
	cci__op_pool_fini(&sep->ctl_ops);
	for (struct ofi_slab *s; CCI__SLIST_POP(&sep->rx_slabs, s, next);)
		slab_free(s);
	for (struct ofi_slab *s; CCI__SLIST_POP(&sep->op_slabs, s, next);)
		slab_free(s);
}
