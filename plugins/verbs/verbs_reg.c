/*
 * verbs_reg.c - the initiator's cache of a peer's registrations.  A
 * remote handle's core key is shown to the target (MR_REQ), which checks
 * it against its own table before it answers with the region's remote
 * key, address, length and access (MR_REP); every RMA is then checked
 * against that answer here, before anything is posted.  A forged key is
 * refused by the target, an out-of-bounds or forbidden access by this
 * check, and the region's remote key bounds the rest in the adapter.
 */
#include <stdlib.h>

#include "verbs_proto.h"

struct verbs_mrc *verbs_mrc_find(struct verbs_mrc *head, uint64_t key)
{
	for (; head; head = head->next)
		if (head->key == key)
			return head;
	return NULL;
}

int verbs_mrc_learn(struct verbs_mrc *head, uint32_t req_id, const struct verbs_mr_rep *rep)
{
	struct verbs_mrc *c = verbs_mrc_find(head, rep->key);

	if (!c || c->state != VERBS_MRC_ASKED || c->req_id != req_id)
		return CCI_EINVAL;
	if (rep->status != CCI_SUCCESS) {
		c->state = VERBS_MRC_REFUSED;
		return CCI_SUCCESS;
	}
	c->state = VERBS_MRC_KNOWN;
	c->flags = rep->flags;
	c->rkey = rep->rkey;
	c->addr = rep->addr;
	c->len = rep->len;
	return CCI_SUCCESS;
}

struct verbs_mrc *verbs_mrc_unlink(struct verbs_mrc **head, uint64_t key)
{
	for (struct verbs_mrc **pp = head; *pp; pp = &(*pp)->next) {
		struct verbs_mrc *c = *pp;

		if (c->key == key) {
			*pp = c->next;
			c->next = NULL;
			return c;
		}
	}
	return NULL;
}

int verbs_mrc_check(const struct verbs_mrc *c, int is_read, uint64_t roff, uint64_t len,
                    uint64_t *raddr_p)
{
	uint32_t need = is_read ? CCI_FLAG_READ : CCI_FLAG_WRITE;

	if (!c || c->state != VERBS_MRC_KNOWN || (c->flags & need) != need)
		return CCI_ERR_RMA_HANDLE;
	if (len == 0 || roff > c->len || len > c->len - roff)
		return CCI_EINVAL;
	if (c->addr > UINT64_MAX - roff)
		return CCI_EINVAL;
	*raddr_p = c->addr + roff;
	return CCI_SUCCESS;
}
