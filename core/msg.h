/*
 * msg.h - what send and RMA share: the waiter of CCI_FLAG_BLOCKING.
 */
#ifndef CCI_CORE_MSG_H
#define CCI_CORE_MSG_H

#include "core.h"

/* A blocking call's completion slot, passed to the plugin as the context. */
struct cci__waiter {
	_Atomic int done; /* set with release ordering by cci__send_done() */
	int status;
};

/* Drive progress on ep until w is done; returns its status. */
int cci__wait_blocking(cci__ep_t *ep, struct cci__waiter *w);

#endif /* CCI_CORE_MSG_H */
