/*
 * grow.h - room for one more element in an array that a plugin grows by
 * doubling: sm's and tcp's sets of readable connections, sock's
 * connection slots, sm's stack of freed registration slots.  Written
 * once, on the cold paths where a connection joins or memory is
 * registered; the arrays are read on the message path, never grown there.
 * The sets are unordered, so a connection that leaves is replaced by the
 * last one (CCI__SET_REMOVE).
 *
 * Ownership: the array is the caller's (malloc'd through here, freed by
 * the caller with free()); the caller holds whatever lock guards it.
 */
#ifndef CCI_COMMON_GROW_H
#define CCI_COMMON_GROW_H

#include <stddef.h>
#include <stdint.h>

/*
 * arrp is the address of the array pointer (any element type), holding
 * n used elements of *cap, each elem bytes.  When n has reached *cap, the
 * array doubles (to first elements when it has none), the new elements
 * zeroed.  CCI_SUCCESS, or CCI_ENOMEM with the array unchanged.
 */
int cci__grow(void *arrp, uint32_t n, uint32_t *cap, uint32_t first, size_t elem);

/* Take item out of arr, an array of n pointers used as a set (no order:
 * the last element takes its place); a no-op if it is not there. */
#define CCI__SET_REMOVE(arr, n, item)                        \
	do {                                                 \
		for (uint32_t i_ = 0; i_ < (n); i_++) {      \
			if ((arr)[i_] == (item)) {           \
				(arr)[i_] = (arr)[--(n)];    \
				break;                       \
			}                                    \
		}                                            \
	} while (0)

#endif /* CCI_COMMON_GROW_H */
