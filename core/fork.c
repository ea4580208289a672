/*
 * fork.c - what fork() does to the library (api/cci.h, "Processes").
 *
 * The parent is never touched.  The child gets a copy of the library's
 * memory without its threads: the endpoints, connections, events and
 * registrations there stand for the parent's sockets, rings and libfabric
 * objects, which the child shares.  Any call on them from the child would
 * act on the parent's resources (send on its sockets, release slots of
 * its rings, unlink its socket paths), so in the child they are the
 * parent's: every inherited endpoint gets CCI__MAGIC_PARENT_EP, which the
 * checks of its connections and events also read (core.h), and calls on
 * them return CCI_EINVAL.  Nothing of them is freed or closed: that would
 * run plugin code on the parent's resources; the copies stay as memory
 * the child never reads again (parent_states keeps it reachable).  The
 * library itself is uninitialised in the child, so that cci_finalize()
 * there does nothing and cci_init() starts afresh, with plugins that
 * serve the child as any new process (a plugin that cannot, such as one
 * whose library keeps process-wide state, says so when it is asked for
 * devices).
 *
 * The core's global locks are held across fork() (taken in the prepare
 * handler), so that the child's copies are free: a thread of the parent
 * inside cci_init() or cci_create_endpoint() at that moment would
 * otherwise leave them locked for good in the child.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core.h"

static void fork_prepare(void)
{
	pthread_mutex_lock(&cci__g.lock);
	cci__shell_lock_all();
	cci__evt_orphans_lock();
}

static void fork_parent(void)
{
	cci__evt_orphans_unlock();
	cci__shell_unlock_all();
	pthread_mutex_unlock(&cci__g.lock);
}

/* The child's copies of its ancestors' state, newest first, kept
 * reachable (a leak checker in the child would otherwise report every
 * object of them); a child of a child keeps both. */
static struct saved_state {
	struct cci__globals g;
	struct saved_state *older;
} *parent_states;

static void fork_child(void)
{
	for (cci__ep_t *ep = cci__g.eps; ep; ep = core_ep(ep)->next_ep)
		core_ep(ep)->magic = CCI__MAGIC_PARENT_EP;
	/* The lists are the parent's: set aside, free nothing.  (glibc's
	 * malloc is usable in a fork child; without memory the copy is
	 * only unreachable, a leak checker's concern.) */
	if (cci__g.refcount || cci__g.eps) {
		struct saved_state *st = malloc(sizeof(*st));

		if (st) {
			st->g = cci__g;
			st->older = parent_states;
			parent_states = st;
		}
	}
	cci__g.refcount = 0;
	cci__g.eps = NULL;
	cci__g.plugins = NULL;
	cci__g.plugin_records = NULL;
	cci__g.nplugin_records = 0;
	cci__g.plugin_dirs = NULL;
	cci__g.nplugin_dirs = 0;
	cci__g.devs = NULL;
	cci__g.ndevs = 0;
	fork_parent();
}

__attribute__((constructor)) static void fork_handlers_install(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
