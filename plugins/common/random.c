/*
 * random.c - see random.h.
 */
#include <errno.h>
#include <sys/random.h>

#include "cci.h"
#include "random.h"

int cci__random_bytes(void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return CCI_ERROR;
		}
		p += n;
		len -= (size_t)n;
	}
	return CCI_SUCCESS;
}

int cci__random64(uint64_t *v)
{
	uint64_t r = 0;

	while (r == 0)
		if (cci__random_bytes(&r, sizeof(r)) != CCI_SUCCESS)
			return CCI_ERROR;
	*v = r;
	return CCI_SUCCESS;
}
