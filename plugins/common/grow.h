/*
 * grow.h - room for one more element in an array that a plugin grows by
 * doubling: sm's and tcp's sets of readable connections, sock's
 * connection slots, sm's stack of freed registration slots.  Written
 * once, on the cold paths where a connection joins or memory is
 * registered; the arrays are read on the message path, never grown there.
 * The sets are unordered, so a connection that leaves is replaced by the
 * last one: CCI__ISET_* when each element keeps its place (constant time,
 * for sets of thousands), CCI__SET_REMOVE when it does not (a scan).
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

/*
 * An indexed set: arr holds n pointers to objects each of which keeps
 * its place in arr in a uint32_t field of its own (named by field), so
 * that one leaves in constant time.  ADD needs room (cci__grow first).
 * REMOVE is a no-op for an object not in the set (its field does not
 * lead to it: never added, or its add was undone).
 */
#define CCI__ISET_ADD(arr, n, item, field)          \
	do {                                        \
		(item)->field = (n);                \
		(arr)[(n)++] = (item);              \
	} while (0)

#define CCI__ISET_REMOVE(arr, n, item, field)                          \
	do {                                                           \
		uint32_t i_ = (item)->field;                           \
		if (i_ < (n) && (arr)[i_] == (item)) {                 \
			(arr)[i_] = (arr)[--(n)];                      \
			(arr)[i_]->field = i_;                         \
		}                                                      \
	} while (0)

#endif /* CCI_COMMON_GROW_H */
