/*
 * rpc_client_int.h - the client's state, shared by its connection half
 * (rpc_client.c: open, events, failure, close) and its call half
 * (rpc_call.c: call slots, rpc_call_async, rpc_wait, rpc_test).
 */
#ifndef CCI_EX_RPC_CLIENT_INT_H
#define CCI_EX_RPC_CLIENT_INT_H

#include <stdint.h>

#include <cci.h>

#include "rpc.h"
#include "rpc_wire.h"

/* Slot index bits of a call id; the rest is a sequence number. */
#define RPC_SLOT_BITS 20
#define RPC_NO_SLOT UINT32_MAX

enum rpc_slot_state { SLOT_FREE, SLOT_PENDING, SLOT_DONE };

/*
 * One call.  While PENDING the runtime owns result (the server may write
 * it) and the registrations; DONE holds the outcome until rpc_wait() or
 * rpc_test() collects it and frees the slot.
 */
struct rpc_slot {
	rpc_call_id_t id;          /* 0 while FREE */
	enum rpc_slot_state state;
	void *result;
	size_t result_cap;
	cci_rma_handle_t *arg_h;   /* registration of a large argument */
	cci_rma_handle_t *res_h;   /* registration of a large result buffer */
	uint64_t started_ns;
	int status;
	struct rpc_reply reply;
	uint32_t next_free;
};

struct rpc_client {
	struct rpc_client_opts o;
	cci_endpoint_t *ep;
	int fd;                     /* the endpoint's OS handle */
	cci_connection_t *conn;     /* NULL once broken */
	uint32_t inline_max;        /* argument bytes that fit a request */
	int dead;                   /* RPC_OK, or what every call gets now */
	uint32_t sends;             /* requests whose SEND event is pending */
	uint32_t inflight;          /* slots not FREE */
	uint32_t pending;           /* slots PENDING */
	uint32_t free_head;
	uint64_t seq;               /* call id sequence */
	uint64_t last_scan_ns;      /* of the call timeouts */
	uint64_t last_heard_ns;     /* last reply, or last probe sent */
	unsigned char ping[RPC_REQ_HDR]; /* the probe, apart from msg */
	struct rpc_slot *slots;
	unsigned char *msg;         /* one request being built */
};

/* Make progress: handle the next event, waiting up to deadline_ns
 * (ex_now_ns() time) for one, then whatever else is ready. */
void rpc_client_poll(struct rpc_client *c, uint64_t deadline_ns);

/* Send len bytes of c->msg, riding out CCI_ENOBUFS by polling (bounded by
 * the keepalive timeout).  RPC_OK, or the status the client is dead with. */
int rpc_client_send(struct rpc_client *c, uint32_t len);

/* Declare the connection broken: every PENDING call completes with status,
 * and so will every later one. */
void rpc_client_break(struct rpc_client *c, int status);

/* A reply arrived (len bytes at msg). */
void rpc_client_on_reply(struct rpc_client *c, const void *msg, uint32_t len);

/* Complete a PENDING slot: drop its registrations, keep the outcome. */
void rpc_slot_complete(struct rpc_client *c, struct rpc_slot *s, int status,
		       size_t result_len, int proc_rc);

/* Slots: allocated with the client, max_inflight of them. */
int rpc_slots_init(struct rpc_client *c);
void rpc_slots_fini(struct rpc_client *c);

/* Break the connection if a call waited past the call timeout. */
void rpc_slots_check_timeouts(struct rpc_client *c);

#endif /* CCI_EX_RPC_CLIENT_INT_H */
