/*
 * hello.h - the core of every transport's handshake: what a connection
 * request and its answer say whatever the wire beneath them.
 *
 *   offset  size  field
 *   0       1     attr      cci_conn_attribute_t (a request; 0 in an answer)
 *   1       3     zero
 *   4       4     mss       the sender's largest message payload
 *   8       4     credits   receive buffers granted to the peer (0: the
 *                           transport has no window, as tcp)
 *   12      4     data_len  bytes of the connect payload (a request; 0 in
 *                           an answer)
 *   16      8     nonce     random per connect attempt; an answer echoes it
 *
 * 24 bytes in network byte order (netorder.h).  A transport writes its own
 * fields (magic, version, ids, addresses, ring sizes) before or after it
 * and the payload where its wire puts it.  The decoder treats its input as
 * hostile: every field is checked against the transport's limits and
 * *why (static text) names the first that is wrong.  Pure functions, no
 * state, no allocation.
 */
#ifndef CCI_COMMON_HELLO_H
#define CCI_COMMON_HELLO_H

#include <stdint.h>

#include "cci.h"

#define CCI__HELLO_LEN 24u

struct cci__hello {
	uint8_t attr;
	uint32_t mss;
	uint32_t credits;
	uint32_t data_len;
	uint64_t nonce;
};

/* What a transport accepts in a hello.  credits_max 0: the transport has
 * no window and a hello must carry 0 credits. */
struct cci__hello_limits {
	uint32_t mss_min, mss_max;
	uint32_t credits_min, credits_max;
};

enum cci__hello_kind {
	CCI__HELLO_REQUEST,  /* the client's: attr and payload length say what it asks */
	CCI__HELLO_ANSWER,   /* the server's: no attribute, no payload */
};

void cci__hello_encode(void *out, const struct cci__hello *h);
/* Decode the CCI__HELLO_LEN bytes at in as a hello of kind; CCI_SUCCESS
 * or CCI_EINVAL with *why.  *h is written only on success. */
int cci__hello_decode(const void *in, enum cci__hello_kind kind,
                      const struct cci__hello_limits *lim, struct cci__hello *h,
                      const char **why);

#endif /* CCI_COMMON_HELLO_H */
