/*
 * peer_reg.h - the initiator's cache of a peer's registrations, for the
 * transports whose remote handles carry only the core key (ofi, verbs).
 *
 * The handle an application holds names a peer's registration by its
 * random core key, never by the transport's own remote key.  On the first
 * RMA naming a key on a connection, the initiator asks the target (REQ,
 * peer_reg_wire.h); the target checks the key against its registrations
 * and answers with the transport's remote key, the address to give for
 * offset 0, the length and the access flags, or a refusal (REP:
 * cci__peer_reg_learn).  Every RMA is then checked against that answer
 * (cci__peer_reg_check), never against the handle's own (possibly
 * forged) fields, before anything is posted.
 *
 * RMAs wait for the answer in a queue of the connection, in call order;
 * the transport keeps the queue (its operations' links) and asks
 * cci__peer_reg_gate about its head: go, wait, or fail.
 *
 * Ownership: one list per connection, its head and request counter
 * fields of the plugin's connection, guarded by whatever lock guards
 * that connection; the entries are malloc'd here and freed by
 * cci__peer_reg_unlink's caller or cci__peer_reg_free_all.  Finding and
 * checking (once per RMA) are inline and neither lock nor allocate.
 */
#ifndef CCI_COMMON_PEER_REG_H
#define CCI_COMMON_PEER_REG_H

#include <stdint.h>

#include "cci.h"

enum cci__peer_reg_state {
	CCI__PEER_REG_ASKED = 0, /* waiting for the target's answer */
	CCI__PEER_REG_KNOWN = 1,
	CCI__PEER_REG_REFUSED = 2 /* the target does not know the key */
};

struct cci__peer_reg {
	struct cci__peer_reg *next;
	uint64_t key;       /* the core key of the remote handle */
	uint32_t req_id;    /* of the request that asked */
	int state;          /* enum cci__peer_reg_state */
	uint32_t flags;     /* CCI_FLAG_READ / CCI_FLAG_WRITE the registration grants */
	uint64_t rkey;      /* the transport's remote key */
	uint64_t addr, len; /* the remote address of offset 0, and the length */
};

/* The target's answer (REP). */
struct cci__peer_reg_rep {
	int32_t status;     /* CCI_SUCCESS or CCI_ERR_RMA_HANDLE (a refusal) */
	uint32_t flags;     /* CCI_FLAG_READ / CCI_FLAG_WRITE of the registration */
	uint64_t key;       /* the core key asked about */
	uint64_t rkey;      /* the transport's remote key */
	uint64_t addr;      /* the remote address of offset 0 */
	uint64_t len;       /* the registration's length */
};

static inline struct cci__peer_reg *cci__peer_reg_find(struct cci__peer_reg *head, uint64_t key)
{
	for (; head; head = head->next)
		if (head->key == key)
			return head;
	return NULL;
}

/*
 * Record the target's answer r to request req_id: the registration's
 * flags, remote key, address and length, or a refusal.  CCI_SUCCESS, or
 * CCI_EINVAL when no request of that id and r->key is waiting (an answer
 * nobody asked for is ignored).
 */
int cci__peer_reg_learn(struct cci__peer_reg *head, uint32_t req_id,
                        const struct cci__peer_reg_rep *r);

/* Forget key (the target deregistered it); returns the entry unlinked,
 * for the caller to free, or NULL. */
struct cci__peer_reg *cci__peer_reg_unlink(struct cci__peer_reg **headp, uint64_t key);

/* Free every entry of the list at *headp (the connection's end). */
void cci__peer_reg_free_all(struct cci__peer_reg **headp);

/*
 * May an RMA of len bytes at remote offset roff, reading (is_read) or
 * writing, go to the registration c describes?  CCI_SUCCESS with the
 * remote address in *raddr_p; CCI_ERR_RMA_HANDLE when c is NULL or not
 * known, the target refused the key or its registration does not grant
 * the access; CCI_EINVAL when the range is empty or leaves the
 * registration (no overflow: huge values are refused).
 */
static inline int cci__peer_reg_check(const struct cci__peer_reg *c, int is_read, uint64_t roff,
                                      uint64_t len, uint64_t *raddr_p)
{
	uint32_t need = is_read ? CCI_FLAG_READ : CCI_FLAG_WRITE;

	if (!c || c->state != CCI__PEER_REG_KNOWN || (c->flags & need) != need)
		return CCI_ERR_RMA_HANDLE;
	if (len == 0 || roff > c->len || len > c->len - roff)
		return CCI_EINVAL;
	if (c->addr > UINT64_MAX - roff)
		return CCI_EINVAL;
	*raddr_p = c->addr + roff;
	return CCI_SUCCESS;
}

/* The RMA at the head of a connection's queue, as cci__peer_reg_gate
 * needs it. */
struct cci__peer_reg_rma {
	uint64_t key;       /* the core key of the remote handle */
	uint64_t roff, len; /* remote offset and length */
	int is_read;
	int fenced;         /* CCI_FLAG_FENCE, and earlier RMAs still run */
};

/* The transport's REQ about key, with request id req_id, on the
 * connection arg: CCI_SUCCESS once it is sent or queued. */
typedef int (*cci__peer_reg_ask_fn)(void *arg, uint32_t req_id, uint64_t key);

/*
 * May the RMA at the head of a connection's queue go?  The first RMA
 * naming a key asks the target (a new entry at *headp, its request id
 * ++*req_next, sent by ask(arg, ...)).  CCI_SUCCESS: it goes, checked by
 * cci__peer_reg_check, with the remote address and remote key in
 * *raddr_p and *rkey_p.  CCI_EAGAIN: it waits (for the answer, or for
 * the earlier RMAs a fence waits for); the transport asks again when an
 * answer came or an RMA completed.  Anything else: it fails with that
 * status (cci__peer_reg_check's, or CCI_ENOMEM when the request could not
 * be made: no later event would ask again).  The connection's lock held.
 */
int cci__peer_reg_gate(struct cci__peer_reg **headp, uint32_t *req_next,
                       const struct cci__peer_reg_rma *rma, cci__peer_reg_ask_fn ask, void *arg,
                       uint64_t *raddr_p, uint64_t *rkey_p);

#endif /* CCI_COMMON_PEER_REG_H */
