/*
 * rpc_call.c - the client's calls: a table of max_inflight slots, each
 * holding one call from rpc_call_async() until its outcome is collected.
 * A call id is the slot index plus a sequence number, so a late reply to
 * a call that already failed (or an id used twice) finds no match.
 */
#include <stdlib.h>
#include <string.h>

#include "ex_util.h"
#include "rpc_client_int.h"
#include "rpc_log.h"
#include "rpc_wire.h"

#define RPC_SLOT_MASK ((1ull << RPC_SLOT_BITS) - 1)
#define RPC_WAIT_SLICE_MS 100

int rpc_slots_init(struct rpc_client *c)
{
	c->slots = calloc(c->o.max_inflight, sizeof(*c->slots));
	if (!c->slots)
		return RPC_ENOMEM;
	for (uint32_t i = 0; i < c->o.max_inflight; i++)
		c->slots[i].next_free = i + 1 < c->o.max_inflight ? i + 1 : RPC_NO_SLOT;
	c->free_head = 0;
	return RPC_OK;
}

void rpc_slots_fini(struct rpc_client *c)
{
	free(c->slots);
	c->slots = NULL;
}

static struct rpc_slot *slot_find(struct rpc_client *c, rpc_call_id_t id)
{
	uint64_t i = (id & RPC_SLOT_MASK);

	if (!id || i >= c->o.max_inflight || c->slots[i].id != id)
		return NULL;
	return &c->slots[i];
}

static void slot_free(struct rpc_client *c, struct rpc_slot *s)
{
	uint32_t i = (uint32_t)(s - c->slots);

	*s = (struct rpc_slot){ .next_free = c->free_head };
	c->free_head = i;
	c->inflight--;
}

static void slot_deregister(struct rpc_client *c, struct rpc_slot *s)
{
	if (s->arg_h)
		rpc_cci_fail(cci_rma_deregister(c->ep, s->arg_h), "cci_rma_deregister");
	if (s->res_h)
		rpc_cci_fail(cci_rma_deregister(c->ep, s->res_h), "cci_rma_deregister");
	s->arg_h = s->res_h = NULL;
}

void rpc_slot_complete(struct rpc_client *c, struct rpc_slot *s, int status,
		       size_t result_len, int proc_rc)
{
	slot_deregister(c, s);
	s->state = SLOT_DONE;
	s->status = status;
	s->reply = (struct rpc_reply){ .result_len = result_len, .proc_rc = proc_rc };
	c->pending--;
}

void rpc_slots_check_timeouts(struct rpc_client *c)
{
	uint64_t limit = (uint64_t)c->o.call_timeout_ms * 1000000ull;
	uint64_t now = ex_now_ns();

	for (uint32_t i = 0; i < c->o.max_inflight && !c->dead; i++) {
		struct rpc_slot *s = &c->slots[i];

		if (s->state == SLOT_PENDING && now - s->started_ns > limit) {
			rpc_log("call unanswered for %u ms: giving up on the server",
				c->o.call_timeout_ms);
			rpc_client_break(c, RPC_ETIMEDOUT);
		}
	}
}

/* The outcome of a reply that matched a pending call. */
static int reply_status(struct rpc_slot *s, const struct rpc_rep *rep)
{
	if (rep->status > RPC_ECCI || rep->status == RPC_EAGAIN)
		return RPC_EPROTO;
	if (rep->status != RPC_OK)
		return (int)rep->status;
	if (rep->result_len > s->result_cap)
		return RPC_EPROTO;
	if (rep->flags & RPC_F_RES_RMA)
		return s->res_h ? RPC_OK : RPC_EPROTO;
	if (rep->result_len)
		memcpy(s->result, rep->result, rep->result_len);
	return RPC_OK;
}

void rpc_client_on_reply(struct rpc_client *c, const void *msg, uint32_t len)
{
	struct rpc_rep rep;
	struct rpc_slot *s;
	int status;

	if (!rpc_rep_decode(msg, len, &rep)) {
		rpc_log("dropped a malformed reply (%u bytes)", len);
		return;
	}
	s = slot_find(c, rep.call_id);
	if (!s || s->state != SLOT_PENDING)
		return; /* the call failed already: a late reply */
	status = reply_status(s, &rep);
	if (status == RPC_EPROTO)
		rpc_log("reply to call %llx is inconsistent",
			(unsigned long long)rep.call_id);
	rpc_slot_complete(c, s, status, status == RPC_OK ? rep.result_len : 0,
			  rep.proc_rc);
}

/* Register what does not fit inline and note it in the request. */
static int call_register(struct rpc_client *c, struct rpc_slot *s,
			 struct rpc_req *req, const void *arg, void *result)
{
	int rc;

	if (req->arg_len > c->inline_max) {
		/* the server only reads it: the cast drops const for the API */
		rc = cci_rma_register(c->ep, (void *)(uintptr_t)arg, req->arg_len,
				      CCI_FLAG_READ, &s->arg_h);
		if (rc != CCI_SUCCESS)
			return rpc_cci_fail(rc, "cci_rma_register(argument)");
		memcpy(&req->arg_handle, s->arg_h, sizeof(req->arg_handle));
		req->flags |= RPC_F_ARG_RMA;
	}
	if (req->result_cap > c->inline_max) {
		rc = cci_rma_register(c->ep, result, req->result_cap,
				      CCI_FLAG_WRITE, &s->res_h);
		if (rc != CCI_SUCCESS)
			return rpc_cci_fail(rc, "cci_rma_register(result)");
		memcpy(&req->res_handle, s->res_h, sizeof(req->res_handle));
		req->flags |= RPC_F_RES_RMA;
	}
	return RPC_OK;
}

static int call_check(const struct rpc_client *c, const char *proc,
		      const void *arg, size_t arg_len, const void *result,
		      size_t result_cap)
{
	size_t name_len = proc ? strnlen(proc, RPC_NAME_MAX + 1) : 0;

	if (c->dead)
		return c->dead;
	if (name_len == 0 || name_len > RPC_NAME_MAX || (arg_len && !arg) ||
	    (result_cap && !result))
		return RPC_EINVAL;
	if (arg_len > UINT32_MAX)
		return RPC_E2BIG;
	return c->free_head == RPC_NO_SLOT ? RPC_EBUSY : RPC_OK;
}

/* Take the first free slot for a call, with a fresh id. */
static struct rpc_slot *slot_take(struct rpc_client *c, void *result,
				  size_t result_cap)
{
	uint32_t i = c->free_head;
	struct rpc_slot *s = &c->slots[i];

	c->free_head = s->next_free;
	c->inflight++;
	s->id = ++c->seq << RPC_SLOT_BITS | i;
	s->result = result;
	s->result_cap = result_cap;
	s->started_ns = ex_now_ns();
	s->state = SLOT_PENDING;
	if (!c->pending++)
		c->last_heard_ns = s->started_ns; /* the silence starts now */
	return s;
}

int rpc_call_async(struct rpc_client *c, const char *proc, const void *arg,
		   size_t arg_len, void *result, size_t result_cap,
		   rpc_call_id_t *id_p)
{
	int rc = call_check(c, proc, arg, arg_len, result, result_cap);
	struct rpc_req req = { .kind = RPC_KIND_CALL };
	struct rpc_slot *s;

	if (rc != RPC_OK)
		return rc;
	if (result_cap > UINT32_MAX)
		result_cap = UINT32_MAX; /* no server offers more */
	s = slot_take(c, result, result_cap);
	req.call_id = s->id;
	strcpy(req.proc, proc);
	req.arg_len = (uint32_t)arg_len;
	req.result_cap = (uint32_t)result_cap;
	rc = call_register(c, s, &req, arg, result);
	if (rc == RPC_OK) {
		rpc_req_encode(&req, c->msg);
		if (!(req.flags & RPC_F_ARG_RMA) && arg_len)
			memcpy(c->msg + RPC_REQ_HDR, arg, arg_len);
		rc = rpc_client_send(c, RPC_REQ_HDR +
				     (req.flags & RPC_F_ARG_RMA ? 0 : req.arg_len));
	}
	if (rc != RPC_OK) {
		/* the send may have broken the connection, completing s */
		if (s->state == SLOT_PENDING)
			rpc_slot_complete(c, s, rc, 0, 0);
		slot_free(c, s);
		return rc;
	}
	*id_p = s->id;
	return RPC_OK;
}

/* Hand out a DONE slot's outcome and free it. */
static int slot_collect(struct rpc_client *c, struct rpc_slot *s,
			struct rpc_reply *reply_p)
{
	int status = s->status;

	if (reply_p)
		*reply_p = s->reply;
	slot_free(c, s);
	return status;
}

int rpc_test(struct rpc_client *c, rpc_call_id_t id, struct rpc_reply *reply_p)
{
	struct rpc_slot *s = slot_find(c, id);

	if (!s)
		return RPC_EINVAL;
	if (s->state == SLOT_PENDING)
		rpc_client_poll(c, 0);
	if (s->state == SLOT_PENDING)
		return RPC_EAGAIN;
	return slot_collect(c, s, reply_p);
}

int rpc_wait(struct rpc_client *c, rpc_call_id_t id, struct rpc_reply *reply_p)
{
	struct rpc_slot *s = slot_find(c, id);

	if (!s)
		return RPC_EINVAL;
	/* each slice ends on an event or after RPC_WAIT_SLICE_MS; the
	 * keepalive (or the call timeout) ends the whole wait */
	while (s->state == SLOT_PENDING)
		rpc_client_poll(c, ex_deadline_ms(RPC_WAIT_SLICE_MS));
	return slot_collect(c, s, reply_p);
}

int rpc_call(struct rpc_client *c, const char *proc, const void *arg,
	     size_t arg_len, void *result, size_t result_cap,
	     struct rpc_reply *reply_p)
{
	rpc_call_id_t id;
	int rc = rpc_call_async(c, proc, arg, arg_len, result, result_cap, &id);

	if (rc != RPC_OK)
		return rc;
	return rpc_wait(c, id, reply_p);
}
