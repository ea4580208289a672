/*
 * peer_reg.c - the initiator's cache of a peer's registrations; see
 * peer_reg.h.
 */
#include <stdlib.h>

#include "peer_reg.h"
#include "slist.h"

struct cci__peer_reg *cci__peer_reg_ask(struct cci__peer_reg **headp, uint64_t key,
                                        uint32_t req_id,
                                        int (*ask)(void *arg, uint32_t req_id, uint64_t key),
                                        void *arg)
{
	struct cci__peer_reg *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->key = key;
	c->req_id = req_id;
	if (ask(arg, req_id, key) != CCI_SUCCESS) {
		free(c);
		return NULL;
	}
	c->next = *headp;
	*headp = c;
	return c;
}

int cci__peer_reg_learn(struct cci__peer_reg *head, uint32_t req_id, uint64_t key, int status,
                        uint32_t flags, uint64_t rkey, uint64_t addr, uint64_t len)
{
	struct cci__peer_reg *c = cci__peer_reg_find(head, key);

	if (!c || c->state != CCI__PEER_REG_ASKED || c->req_id != req_id)
		return CCI_EINVAL;
	if (status != CCI_SUCCESS) {
		c->state = CCI__PEER_REG_REFUSED;
		return CCI_SUCCESS;
	}
	c->state = CCI__PEER_REG_KNOWN;
	c->flags = flags;
	c->rkey = rkey;
	c->addr = addr;
	c->len = len;
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
