/*
 * rma.c - RMA registrations (random 64-bit keys in a per-endpoint hash
 * table), the target-side lookup, and cci_rma's checks.
 *
 * A handle is a value, as in CCI 2: the application may copy its 32 bytes
 * anywhere (its own structures, a message that a peer echoes back) and
 * pass the copy wherever the original goes.  So a handle is resolved from
 * its contents, never its address: its key finds the registration in a
 * chained hash table of the endpoint, and the whole 32 bytes must then
 * equal the registration's own.  The table doubles when the registrations
 * outnumber its buckets, so a lookup costs the same with ten
 * registrations or a million.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "msg.h"
#include "random.h"

#define RMA_BUCKETS_MIN 1024u /* power of two */
#define RMA_FLAGS (CCI_FLAG_READ | CCI_FLAG_WRITE)
#define RMA_OP_FLAGS (RMA_FLAGS | CCI_FLAG_FENCE | CCI_FLAG_BLOCKING | CCI_FLAG_SILENT | CCI_FLAG_NO_COPY)

static uint32_t hash_of(uint64_t key)
{
	return (uint32_t)((key ^ (key >> 29)) * 0x9e3779b97f4a7c15ull >> 32);
}

static uint32_t bucket_of(cci__ep_t *ep, uint64_t key)
{
	return hash_of(key) & (core_ep(ep)->rma_buckets - 1);
}

/* With rma_lock held. */
static cci__rma_reg_t *reg_find(cci__ep_t *ep, uint64_t key)
{
	assert(cci__mutex_held(&core_ep(ep)->rma_lock));
	if (!core_ep(ep)->rma_table)
		return NULL;
	for (cci__rma_reg_t *r = core_ep(ep)->rma_table[bucket_of(ep, key)]; r; r = core_reg(r)->hnext)
		if (cci__handle_key(&r->handle) == key)
			return r;
	return NULL;
}

static void link_key(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	uint32_t b = bucket_of(ep, cci__handle_key(&reg->handle));

	core_reg(reg)->hnext = core_ep(ep)->rma_table[b];
	core_ep(ep)->rma_table[b] = reg;
}

/*
 * Make room for one more registration: the table at first use, or one
 * twice as large once the registrations would outnumber the buckets (all
 * entries relinked).  With rma_lock held.  If memory runs out the old
 * table stays: longer chains, still correct.
 */
static int table_reserve(cci__ep_t *ep)
{
	struct cci__ep_core *ce = core_ep(ep);
	uint32_t n = ce->rma_buckets ? ce->rma_buckets * 2 : RMA_BUCKETS_MIN;
	cci__rma_reg_t **by_key, **old_key, *r, *next;
	uint32_t old = ce->rma_buckets;

	assert(cci__mutex_held(&ce->rma_lock));
	if (ce->rma_table && (ce->rma_count < old || old >= 1u << 30))
		return CCI_SUCCESS;
	by_key = calloc(n, sizeof(*by_key));
	if (!by_key)
		return ce->rma_table ? CCI_SUCCESS : CCI_ENOMEM;
	old_key = ce->rma_table;
	ce->rma_table = by_key;
	ce->rma_buckets = n;
	for (uint32_t b = 0; b < old; b++) {
		for (r = old_key[b]; r; r = next) {
			next = core_reg(r)->hnext;
			link_key(ep, r);
		}
	}
	free(old_key);
	return CCI_SUCCESS;
}

/* Insert reg under a fresh random key; with rma_lock held. */
static int reg_insert(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	uint64_t key;
	int rc;

	assert(cci__mutex_held(&core_ep(ep)->rma_lock));
	rc = table_reserve(ep);
	if (rc != CCI_SUCCESS)
		return rc;
	do {
		if (cci__random64(&key) != CCI_SUCCESS) {
			LOG_ERR("rma: no random key for a registration: getrandom failed: %s",
			        strerror(errno));
			return CCI_ERROR;
		}
	} while (key == 0 || reg_find(ep, key)); /* 0 marks a dead handle */
	reg->handle.stuff[0] = key;
	link_key(ep, reg);
	core_ep(ep)->rma_count++;
	return CCI_SUCCESS;
}

/* With rma_lock held. */
static void reg_unlink(cci__ep_t *ep, cci__rma_reg_t *reg)
{
	cci__rma_reg_t **pp = &core_ep(ep)->rma_table[bucket_of(ep, cci__handle_key(&reg->handle))];

	assert(cci__mutex_held(&core_ep(ep)->rma_lock));
	for (; *pp; pp = &core_reg((*pp))->hnext) {
		if (*pp == reg) {
			*pp = core_reg(reg)->hnext;
			break;
		}
	}
	core_ep(ep)->rma_count--;
}

/*
 * A registration is over: its key is out of the table, so every copy of
 * its handle is refused, and the original reads as key 0 (never issued),
 * since the application's pointer to it stays mapped (shell.c).
 */
static void reg_free(cci__rma_reg_t *r)
{
	core_reg(r)->magic = CCI__MAGIC_DEAD_REG;
	memset(&r->handle, 0, sizeof(r->handle));
	cci__shell_free(r);
}

/*
 * The live registration of this endpoint whose handle h is, the original
 * or any byte copy of it, or NULL; rma_lock held.  h is read once, whole,
 * in case the application changes its copy meanwhile; every byte must
 * match, so a handle of another endpoint (another key) or an altered copy
 * never resolves.
 */
static cci__rma_reg_t *reg_find_handle(cci__ep_t *ep, const struct cci_rma_handle *h)
{
	struct cci_rma_handle v;
	cci__rma_reg_t *r;

	assert(cci__mutex_held(&core_ep(ep)->rma_lock));
	memcpy(&v, h, sizeof(v));
	r = v.stuff[0] ? reg_find(ep, v.stuff[0]) : NULL;
	return r && memcmp(&r->handle, &v, sizeof(v)) == 0 ? r : NULL;
}

CCI_API int cci_rma_register(cci_endpoint_t *endpoint, void *start, uint64_t length, int flags,
                             cci_rma_handle_t **rma_handle)
{
	cci__ep_t *ep = cci__ep_live(endpoint);
	cci__rma_reg_t *reg;
	static _Atomic int flags_logged;
	int rc;

	/* Access bits only; they are enforced, at the target too. */
	flags = cci__flags_keep(flags, RMA_FLAGS, &flags_logged, CCI_LOG_RMA, "cci_rma_register");
	if (!ep || !start || length == 0 || !rma_handle ||
	    (uintptr_t)start + length < (uintptr_t)start)
		return CCI_EINVAL;
	reg = cci__shell_alloc();
	if (!reg)
		return CCI_ENOMEM;
	core_reg(reg)->magic = CCI__MAGIC_REG;
	reg->ep = ep;
	reg->start = start;
	reg->length = length;
	reg->flags = flags;
	reg->handle.stuff[1] = (uint64_t)(uintptr_t)start;
	reg->handle.stuff[2] = length;
	reg->handle.stuff[3] = (uint64_t)(uint32_t)flags;
	pthread_mutex_lock(&core_ep(ep)->rma_lock);
	rc = reg_insert(ep, reg);
	pthread_mutex_unlock(&core_ep(ep)->rma_lock);
	if (rc == CCI_SUCCESS && ep->plugin->rma_register)
		rc = ep->plugin->rma_register(ep, reg);
	if (rc != CCI_SUCCESS) {
		pthread_mutex_lock(&core_ep(ep)->rma_lock);
		reg_unlink(ep, reg);
		pthread_mutex_unlock(&core_ep(ep)->rma_lock);
		reg_free(reg);
		return rc;
	}
	LOG(CCI_LOG_RMA, "registered %p+%lu flags %d", start, (unsigned long)length, flags);
	*rma_handle = &reg->handle;
	return CCI_SUCCESS;
}

/* Find the registration behind one of this endpoint's own handles. */
static cci__rma_reg_t *local_reg(cci__ep_t *ep, const struct cci_rma_handle *h)
{
	cci__rma_reg_t *r;

	pthread_mutex_lock(&core_ep(ep)->rma_lock);
	r = reg_find_handle(ep, h);
	pthread_mutex_unlock(&core_ep(ep)->rma_lock);
	return r;
}

CCI_API int cci_rma_deregister(cci_endpoint_t *endpoint, cci_rma_handle_t *rma_handle)
{
	cci__ep_t *ep = cci__ep_live(endpoint);
	cci__rma_reg_t *r;

	if (!ep || !rma_handle)
		return CCI_EINVAL;
	pthread_mutex_lock(&core_ep(ep)->rma_lock);
	r = reg_find_handle(ep, rma_handle);
	if (r)
		reg_unlink(ep, r);
	pthread_mutex_unlock(&core_ep(ep)->rma_lock);
	if (!r)
		return CCI_EINVAL;
	if (ep->plugin->rma_deregister)
		ep->plugin->rma_deregister(ep, r);
	reg_free(r);
	return CCI_SUCCESS;
}

static int range_inside(uint64_t offset, uint64_t len, uint64_t size)
{
	return offset <= size && len <= size - offset;
}

int cci__rma_lookup(cci__ep_t *ep, uint64_t key, uint64_t offset, uint64_t len, int access,
                    void **addr)
{
	cci__rma_reg_t *r;
	int rc = CCI_SUCCESS;

	pthread_mutex_lock(&core_ep(ep)->rma_lock);
	r = reg_find(ep, key);
	if (!r || (r->flags & access) != access)
		rc = CCI_ERR_RMA_HANDLE;
	else if (!range_inside(offset, len, r->length))
		rc = CCI_EINVAL;
	else
		*addr = (char *)r->start + offset;
	pthread_mutex_unlock(&core_ep(ep)->rma_lock);
	return rc;
}

int cci__rma_with_reg(cci__ep_t *ep, uint64_t key, int (*fn)(cci__rma_reg_t *reg, void *arg),
                      void *arg)
{
	cci__rma_reg_t *r;
	int rc = CCI_ERR_RMA_HANDLE;

	pthread_mutex_lock(&core_ep(ep)->rma_lock);
	r = reg_find(ep, key);
	if (r)
		rc = fn(r, arg);
	pthread_mutex_unlock(&core_ep(ep)->rma_lock);
	return rc;
}

void cci__rma_table_free(cci__ep_t *ep)
{
	if (!core_ep(ep)->rma_table)
		return;
	for (uint32_t b = 0; b < core_ep(ep)->rma_buckets; b++) {
		cci__rma_reg_t *r = core_ep(ep)->rma_table[b], *next;
		for (; r; r = next) {
			next = core_reg(r)->hnext;
			reg_free(r);
		}
	}
	free(core_ep(ep)->rma_table);
	core_ep(ep)->rma_table = NULL;
	core_ep(ep)->rma_buckets = 0;
	core_ep(ep)->rma_count = 0;
}

/* The initiator's checks of cci_rma; the target checks again. */
static int rma_check(cci__conn_t *c, const void *msg_ptr, uint32_t msg_len,
                     const struct cci_rma_handle *rh, uint64_t local_offset,
                     cci__rma_reg_t *lr, uint64_t remote_offset, uint64_t data_len, int flags)
{
	int op = flags & RMA_FLAGS;

	if (op != CCI_FLAG_READ && op != CCI_FLAG_WRITE)
		return CCI_EINVAL;
	if (c->pub.attribute != CCI_CONN_ATTR_RO && c->pub.attribute != CCI_CONN_ATTR_RU)
		return CCI_EINVAL;
	if (msg_len > c->pub.max_send_size)
		return CCI_EMSGSIZE;
	if (!lr || cci__handle_key(rh) == 0)
		return CCI_ERR_RMA_HANDLE;
	if (!range_inside(local_offset, data_len, lr->length) ||
	    !range_inside(remote_offset, data_len, cci__handle_len(rh)))
		return CCI_EINVAL;
	if ((cci__handle_flags(rh) & op) != op)
		return CCI_ERR_RMA_HANDLE;
	return (msg_len > 0 && !msg_ptr) ? CCI_EINVAL : CCI_SUCCESS;
}

CCI_API int cci_rma(cci_connection_t *connection, const void *msg_ptr, uint32_t msg_len,
                    cci_rma_handle_t *local_handle, uint64_t local_offset,
                    cci_rma_handle_t *remote_handle, uint64_t remote_offset, uint64_t data_len,
                    const void *context, int flags)
{
	cci__conn_t *c = cci__conn_live(connection);
	struct cci__waiter w = { 0, CCI_SUCCESS };
	cci__rma_reg_t *lr;
	static _Atomic int flags_logged;
	int rc;

	flags = cci__flags_keep(flags, RMA_OP_FLAGS, &flags_logged, CCI_LOG_RMA, "cci_rma");
	if (!c && cci__conn_is_dead(connection))
		return CCI_ERR_DISCONNECTED;
	if (!c || !local_handle || !remote_handle || data_len == 0)
		return CCI_EINVAL;
	lr = local_reg(c->ep, local_handle);
	rc = rma_check(c, msg_ptr, msg_len, remote_handle, local_offset, lr, remote_offset,
	               data_len, flags);
	if (rc != CCI_SUCCESS)
		return rc;
	if (core_conn(c)->disconnected)
		return CCI_ERR_DISCONNECTED;
	if (flags & CCI_FLAG_BLOCKING)
		context = &w;
	rc = c->ep->plugin->rma(c, msg_ptr, msg_len, lr, local_offset, remote_handle,
	                        remote_offset, data_len, (void *)context, flags);
	if (rc != CCI_SUCCESS || !(flags & CCI_FLAG_BLOCKING))
		return rc;
	return cci__wait_blocking(c->ep, &w);
}
