/*
 * grow.c - doubling an array for one more element; see grow.h.
 */
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "grow.h"

int cci__grow(void *arrp, uint32_t n, uint32_t *cap, uint32_t first, size_t elem)
{
	uint32_t want = *cap ? *cap * 2 : first;
	char *a, *grown;

	if (n < *cap)
		return CCI_SUCCESS;
	/* The pointer is read and written as bytes: its type is the caller's. */
	memcpy(&a, arrp, sizeof(a));
	grown = realloc(a, elem * want);
	if (!grown)
		return CCI_ENOMEM;
	memset(grown + elem * *cap, 0, elem * (want - *cap));
	memcpy(arrp, &grown, sizeof(grown));
	*cap = want;
	return CCI_SUCCESS;
}
