/*
 * random.h - random bytes from the kernel, for ids, nonces and RMA keys
 * that a peer must not guess and that differ between process lives.
 */
#ifndef CCI_COMMON_RANDOM_H
#define CCI_COMMON_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* Fill buf with len random bytes; CCI_SUCCESS, or CCI_ERROR when the
 * kernel refuses (getrandom failing other than by EINTR). */
int cci__random_bytes(void *buf, size_t len);

/* A random 64-bit value, never 0 (0 means "none" in ids and keys). */
int cci__random64(uint64_t *v);

#endif /* CCI_COMMON_RANDOM_H */
