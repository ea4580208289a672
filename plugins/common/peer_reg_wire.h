/*
 * peer_reg_wire.h - the registration-key messages, one vocabulary for the
 * transports whose remote handles carry only the core key (ofi, verbs;
 * the exchange itself is peer_reg.h's): their numbers, relative to the
 * first type number a transport gives them, and their bodies in network
 * byte order, with the encoders and the validating decoders of those
 * bodies (peer_reg_wire.c: pure functions, no state, fuzzed through each
 * transport's wire fuzzer).
 *
 *   REQ    aux: request id   body: u64 core key
 *   REP    aux: request id   body: i32 status, u32 flags, u64 core key,
 *                                  u64 remote key, u64 address of offset 0,
 *                                  u64 length (40 bytes)
 *   INVAL                    body: u64 core key, being deregistered
 *   DONE                     body: u64 core key: the sender of it has no
 *                                  RMA naming the key in flight, nor will
 *                                  (ofi; verbs does not use it)
 *
 * A transport numbers them base + CCI__PEER_REG_MSG_*, carries the
 * request id in its header, and checks a body's length against
 * cci__peer_reg_body_len before it decodes it.
 */
#ifndef CCI_COMMON_PEER_REG_WIRE_H
#define CCI_COMMON_PEER_REG_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "peer_reg.h"

enum cci__peer_reg_msg {
	CCI__PEER_REG_MSG_REQ = 0,
	CCI__PEER_REG_MSG_REP = 1,
	CCI__PEER_REG_MSG_INVAL = 2,
	CCI__PEER_REG_MSG_DONE = 3
};
#define CCI__PEER_REG_MSGS 4        /* a transport reserves this many type numbers */

#define CCI__PEER_REG_KEY_LEN 8u    /* REQ, INVAL and DONE */
#define CCI__PEER_REG_REP_LEN 40u

/* The body length of message msg (enum cci__peer_reg_msg). */
static inline uint32_t cci__peer_reg_body_len(int msg)
{
	return msg == CCI__PEER_REG_MSG_REP ? CCI__PEER_REG_REP_LEN : CCI__PEER_REG_KEY_LEN;
}

/* The core key of REQ, INVAL or DONE, to and from the
 * CCI__PEER_REG_KEY_LEN bytes of its body. */
void cci__peer_reg_key_encode(uint64_t key, void *out);
uint64_t cci__peer_reg_key_decode(const void *in);

void cci__peer_reg_rep_encode(const struct cci__peer_reg_rep *r, void *out);

/*
 * Decode and check the REP body of n bytes at in: exactly
 * CCI__PEER_REG_REP_LEN bytes, a status of CCI_SUCCESS or
 * CCI_ERR_RMA_HANDLE, only CCI_FLAG_READ and CCI_FLAG_WRITE in flags,
 * and, when the key is granted, a range that is not empty and does not
 * wrap and a remote key of at most rkey_max (the transport's width).
 * CCI_SUCCESS, or CCI_EINVAL with *why_p (static text; why_p may be
 * NULL) saying which; *r is written on success only.
 */
int cci__peer_reg_rep_decode(const void *in, size_t n, uint64_t rkey_max,
                             struct cci__peer_reg_rep *r, const char **why_p);

#endif /* CCI_COMMON_PEER_REG_WIRE_H */
