/*
 * le.h - little-endian integers in wire bytes, written and read byte by
 * byte, so any alignment and any host byte order do: the codecs of the
 * sockets and verbs transports.  Pure inline functions, no state.
 */
#ifndef CCI_COMMON_LE_H
#define CCI_COMMON_LE_H

#include <stdint.h>

static inline void cci__put16(void *out, uint16_t v)
{
	uint8_t *p = out;

	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void cci__put32(void *out, uint32_t v)
{
	uint8_t *p = out;

	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void cci__put64(void *out, uint64_t v)
{
	uint8_t *p = out;

	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t cci__get16(const void *in)
{
	const uint8_t *p = in;

	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t cci__get32(const void *in)
{
	const uint8_t *p = in;

	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t cci__get64(const void *in)
{
	const uint8_t *p = in;

	return (uint64_t)cci__get32(p) | (uint64_t)cci__get32(p + 4) << 32;
}

#endif /* CCI_COMMON_LE_H */
