/*
 * dlist.h - the doubly linked lists a plugin keeps where an object must
 * leave its list in constant time (a connection among thousands, a
 * handshake dropped by its own timer), chained through prev and next
 * fields of the object.
 *
 * Ownership: these only relink; the caller owns the objects and holds
 * whatever lock guards the list.  Nothing here locks or allocates.  The
 * macros take the address of the head pointer (and of the tail pointer,
 * for a queue) and the object.
 */
#ifndef CCI_COMMON_DLIST_H
#define CCI_COMMON_DLIST_H

#include <stddef.h>

/* Put item first on the list at *headp. */
#define CCI__DLIST_PUSH(headp, item)                  \
	do {                                          \
		(item)->prev = NULL;                  \
		(item)->next = *(headp);              \
		if (*(headp))                         \
			(*(headp))->prev = (item);    \
		*(headp) = (item);                    \
	} while (0)

/* Take item off the list at *headp (a no-op for an item on no list, whose
 * links are NULL); its links are NULL after. */
#define CCI__DLIST_UNLINK(headp, item)                             \
	do {                                                       \
		if ((item)->prev)                                  \
			(item)->prev->next = (item)->next;         \
		else if (*(headp) == (item))                       \
			*(headp) = (item)->next;                   \
		if ((item)->next)                                  \
			(item)->next->prev = (item)->prev;         \
		(item)->next = (item)->prev = NULL;                \
	} while (0)

/* A queue served in order is such a list with a tail pointer as well:
 * append at the tail, unlink anywhere (a no-op for an item on no list). */
#define CCI__DQ_APPEND(headp, tailp, item)                 \
	do {                                               \
		(item)->next = NULL;                       \
		(item)->prev = *(tailp);                   \
		if (*(tailp))                              \
			(*(tailp))->next = (item);         \
		else                                       \
			*(headp) = (item);                 \
		*(tailp) = (item);                         \
	} while (0)

#define CCI__DQ_UNLINK(headp, tailp, item)                 \
	do {                                               \
		if (*(tailp) == (item))                    \
			*(tailp) = (item)->prev;           \
		CCI__DLIST_UNLINK(headp, item);            \
	} while (0)

#endif /* CCI_COMMON_DLIST_H */
