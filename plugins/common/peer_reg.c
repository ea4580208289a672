/*
 * peer_reg.c - the initiator's cache of a peer's registrations; see
 * peer_reg.h.
 */
#include <stdlib.h>

#include "peer_reg.h"
#include "slist.h"

/* Ask the target about key: a new entry, waiting, linked at *headp once
 * the request went.  NULL when there is no memory or it could not go. */
static struct cci__peer_reg *ask_new(struct cci__peer_reg **headp, uint32_t *req_next,
                                     uint64_t key, cci__peer_reg_ask_fn ask, void *arg)
{
	struct cci__peer_reg *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->key = key;
	c->req_id = ++*req_next;
	if (ask(arg, c->req_id, key) != CCI_SUCCESS) {
		free(c);
		return NULL;
	}
	c->next = *headp;
	*headp = c;
	return c;
}

int cci__peer_reg_gate(struct cci__peer_reg **headp, uint32_t *req_next,
                       const struct cci__peer_reg_rma *rma, cci__peer_reg_ask_fn ask, void *arg,
                       uint64_t *raddr_p, uint64_t *rkey_p)
{
	struct cci__peer_reg *c = cci__peer_reg_find(*headp, rma->key);
	int rc;

	if (!c)
		return ask_new(headp, req_next, rma->key, ask, arg) ? CCI_EAGAIN : CCI_ENOMEM;
	if (c->state == CCI__PEER_REG_ASKED || rma->fenced)
		return CCI_EAGAIN;
	rc = cci__peer_reg_check(c, rma->is_read, rma->roff, rma->len, raddr_p);
	if (rc == CCI_SUCCESS)
		*rkey_p = c->rkey;
	return rc;
}

int cci__peer_reg_learn(struct cci__peer_reg *head, uint32_t req_id,
                        const struct cci__peer_reg_rep *r)
{
	struct cci__peer_reg *c = cci__peer_reg_find(head, r->key);

	if (!c || c->state != CCI__PEER_REG_ASKED || c->req_id != req_id)
		return CCI_EINVAL;
	if (r->status != CCI_SUCCESS) {
		c->state = CCI__PEER_REG_REFUSED;
		return CCI_SUCCESS;
	}
	c->state = CCI__PEER_REG_KNOWN;
	c->flags = r->flags;
	c->rkey = r->rkey;
	c->addr = r->addr;
	c->len = r->len;
	return CCI_SUCCESS;
}

struct cci__peer_reg *cci__peer_reg_unlink(struct cci__peer_reg **headp, uint64_t key)
{
	for (struct cci__peer_reg **pp = headp; *pp; pp = &(*pp)->next) {
		struct cci__peer_reg *c = *pp;

		if (c->key == key) {
			*pp = c->next;
			c->next = NULL;
			return c;
		}
	}
	return NULL;
}

void cci__peer_reg_free_all(struct cci__peer_reg **headp)
{
	for (struct cci__peer_reg *c; CCI__SLIST_POP(headp, c, next);)
		free(c);
}
