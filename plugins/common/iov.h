/*
 * iov.h - gathering an application's iovec into one contiguous buffer:
 * the copy every transport makes of a send it cannot hand over as is
 * (a queued message, an inject, a frame), written once.
 *
 * Ownership: dst is the caller's and has room for the sum of the iov_len;
 * nothing here allocates or locks.
 */
#ifndef CCI_COMMON_IOV_H
#define CCI_COMMON_IOV_H

#include <stddef.h>
#include <string.h>
#include <sys/uio.h>

/* Copy the n pieces of iov one after the other to dst; returns the bytes
 * copied.  An empty piece may have a NULL base: it is not passed to
 * memcpy. */
static inline size_t cci__iov_gather(void *dst, const struct iovec *iov, size_t n)
{
	size_t off = 0;

	for (size_t i = 0; i < n; i++) {
		if (iov[i].iov_len)
			memcpy((char *)dst + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	return off;
}

#endif /* CCI_COMMON_IOV_H */
