/*
 * netorder.h - integers in wire bytes in network byte order (big-endian),
 * at any alignment and on any host: the codecs of the network transports
 * (tcp, sock, verbs, ofi, and the records they share: emulated RMA,
 * registration keys, the hello core).  A field is copied
 * whole and swapped once (one load or store and a bswap on x86).  Pure
 * inline functions, no state.
 */
#ifndef CCI_COMMON_NETORDER_H
#define CCI_COMMON_NETORDER_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void cci__put16(void *out, uint16_t v)
{
	v = htobe16(v);
	memcpy(out, &v, sizeof(v));
}

static inline void cci__put32(void *out, uint32_t v)
{
	v = htobe32(v);
	memcpy(out, &v, sizeof(v));
}

static inline void cci__put64(void *out, uint64_t v)
{
	v = htobe64(v);
	memcpy(out, &v, sizeof(v));
}

static inline uint16_t cci__get16(const void *in)
{
	uint16_t v;

	memcpy(&v, in, sizeof(v));
	return be16toh(v);
}

static inline uint32_t cci__get32(const void *in)
{
	uint32_t v;

	memcpy(&v, in, sizeof(v));
	return be32toh(v);
}

static inline uint64_t cci__get64(const void *in)
{
	uint64_t v;

	memcpy(&v, in, sizeof(v));
	return be64toh(v);
}

#endif /* CCI_COMMON_NETORDER_H */
