/*
 * slist.h - the singly linked lists the plugins keep of their objects
 * (connections, requests, registrations, endpoints), chained through a
 * pointer field of the object: unlinking one and taking the head, written
 * once.
 *
 * The FIFO queues (sends waiting for credits, operations in flight,
 * messages waiting for a receive buffer) are such lists with a tail
 * pointer as well: appending and taking the head keep the two in step.
 *
 * Ownership: these only relink; the caller owns the objects (it frees
 * what it takes off) and holds whatever lock guards the list.  Nothing
 * here locks or allocates.  The macros take the address of the head
 * pointer, the object and the name of its link field.
 */
#ifndef CCI_COMMON_SLIST_H
#define CCI_COMMON_SLIST_H

#include <stddef.h>

/* Take item off the list at *headp, if it is on it (a no-op otherwise). */
#define CCI__SLIST_UNLINK(headp, item, field)                                          \
	do {                                                                           \
		for (__typeof__(*(headp)) *pp_ = (headp); *pp_; pp_ = &(*pp_)->field) { \
			if (*pp_ == (item)) {                                          \
				*pp_ = (item)->field;                                  \
				break;                                                 \
			}                                                              \
		}                                                                      \
	} while (0)

/* Take the head of the list at *headp into item; false (item NULL) when
 * the list is empty.  For draining a list: while (CCI__SLIST_POP(...)). */
#define CCI__SLIST_POP(headp, item, field) \
	(((item) = *(headp)) != NULL && ((*(headp) = (item)->field), 1))

/* Append item to the queue whose first element is *headp and last *tailp
 * (both NULL when it is empty). */
#define CCI__FIFO_PUSH(headp, tailp, item, field) \
	do {                                       \
		(item)->field = NULL;              \
		if (*(tailp))                      \
			(*(tailp))->field = (item); \
		else                               \
			*(headp) = (item);         \
		*(tailp) = (item);                 \
	} while (0)

/* Take the head off a non-empty queue (the caller has it from *headp); its
 * link is left as it was. */
#define CCI__FIFO_SHIFT(headp, tailp, field)          \
	do {                                          \
		*(headp) = (*(headp))->field;         \
		if (!*(headp))                        \
			*(tailp) = NULL;              \
	} while (0)

#endif /* CCI_COMMON_SLIST_H */
