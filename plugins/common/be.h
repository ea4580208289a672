/*
 * be.h - big-endian (network byte order) integers in wire bytes, at any
 * alignment: the codecs of the libfabric transport and of the
 * registration-key messages (peer_reg_wire.h).  Each is one load or
 * store and, on a little-endian host, one byte swap.  Pure inline
 * functions, no state.
 */
#ifndef CCI_COMMON_BE_H
#define CCI_COMMON_BE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline void cci__put_be16(void *out, uint16_t v)
{
	v = htobe16(v);
	memcpy(out, &v, sizeof(v));
}

static inline void cci__put_be32(void *out, uint32_t v)
{
	v = htobe32(v);
	memcpy(out, &v, sizeof(v));
}

static inline void cci__put_be64(void *out, uint64_t v)
{
	v = htobe64(v);
	memcpy(out, &v, sizeof(v));
}

static inline uint16_t cci__get_be16(const void *in)
{
	uint16_t v;

	memcpy(&v, in, sizeof(v));
	return be16toh(v);
}

static inline uint32_t cci__get_be32(const void *in)
{
	uint32_t v;

	memcpy(&v, in, sizeof(v));
	return be32toh(v);
}

static inline uint64_t cci__get_be64(const void *in)
{
	uint64_t v;

	memcpy(&v, in, sizeof(v));
	return be64toh(v);
}

#endif /* CCI_COMMON_BE_H */
