/*
 * ofi_live.c - the endpoints of this process, for connections between two
 * of them.
 *
 * libfabric 1.17's shm provider reaches a peer endpoint of the same
 * process through a pointer to its memory, which dangles once that
 * endpoint is closed: sending to it, or even inserting its name in an
 * address vector again, crashes the process.  So when an endpoint is
 * destroyed, the connections other endpoints of this process have to it
 * break at once and its address leaves their address vectors (the
 * endpoint's own DISC message may not have been read yet), and the name
 * is remembered so that a later connect to it is refused instead of
 * inserted.  For other providers this only makes a local peer's
 * departure known a little earlier.
 *
 * Cutting an address off an endpoint (its connections broken, the
 * address out of the AV) serves other endpoints too: ofi_peer_cut, for an
 * shm peer whose process exited (ofi_hs.c).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grow.h"

#include "ofi.h"

#define OFI_DEAD_MAX 1024

struct dead_name {
	struct dead_name *next;
	size_t len;
	uint8_t addr[OFI_ADDR_MAX];
};

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ofi_ep *live;
static struct dead_name *dead;
static int ndead;

/* live_lock held. */
static void dead_forget(const uint8_t *addr, size_t len)
{
	assert(cci__mutex_held(&live_lock));
	for (struct dead_name **pp = &dead; *pp; pp = &(*pp)->next) {
		struct dead_name *d = *pp;
		if (d->len == len && memcmp(d->addr, addr, len) == 0) {
			*pp = d->next;
			free(d);
			ndead--;
			return;
		}
	}
}

/* live_lock held. */
static void dead_remember(const struct ofi_ep *sep)
{
	struct dead_name *d;

	assert(cci__mutex_held(&live_lock));
	if (sep->info->addr_format != FI_ADDR_STR)
		return;
	while (ndead >= OFI_DEAD_MAX) { /* forget the oldest */
		struct dead_name **pp = &dead;
		while ((*pp)->next)
			pp = &(*pp)->next;
		free(*pp);
		*pp = NULL;
		ndead--;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return;
	memcpy(d->addr, sep->addr, sep->addr_len);
	d->len = sep->addr_len;
	d->next = dead;
	dead = d;
	ndead++;
}

void ofi_live_add(struct ofi_ep *sep)
{
	pthread_mutex_lock(&live_lock);
	dead_forget(sep->addr, sep->addr_len);
	sep->live_next = live;
	live = sep;
	pthread_mutex_unlock(&live_lock);
}

/* Is addr a closed endpoint of this process? */
int ofi_live_gone(const struct ofi_ep *sep, const uint8_t *addr, size_t len)
{
	int gone = 0;

	if (sep->info->addr_format != FI_ADDR_STR)
		return 0;
	pthread_mutex_lock(&live_lock);
	for (struct dead_name *d = dead; d && !gone; d = d->next)
		gone = d->len == len && memcmp(d->addr, addr, len) == 0;
	pthread_mutex_unlock(&live_lock);
	return gone;
}

/* p leaves y's AV: y's connections to it break (connects to it are
 * refused) and nothing is sent to it any more.  y->lock held. */
static void peer_cut(struct ofi_ep *y, struct ofi_peer *p)
{
	assert(cci__mutex_held(&y->lock));
	atomic_store_explicit(&p->cut, 1, memory_order_release);
	for (struct ofi_conn *oc = y->conns; oc; oc = oc->next) {
		if (oc->peer != p)
			continue;
		pthread_mutex_lock(&oc->lock);
		ofi_conn_break(oc, CCI_ERR_DISCONNECTED);
		if (ofi_conn_state(oc) == CCI__CONN_CONNECTING)
			atomic_store_explicit(&oc->refused, 1, memory_order_release); /* the timer fails it */
		pthread_mutex_unlock(&oc->lock);
	}
	fi_av_remove(y->av, &p->fa, 1, 0);
	y->npeers--;
}

/* y forgets the endpoint at addr.  live_lock held. */
static void cut_peer(struct ofi_ep *y, const uint8_t *addr, size_t len)
{
	assert(cci__mutex_held(&live_lock));
	pthread_mutex_lock(&y->lock);
	for (struct ofi_peer *p = y->peers; p; p = p->next)
		if (!atomic_load_explicit(&p->cut, memory_order_relaxed) && p->len == len &&
		    memcmp(p->addr, addr, len) == 0)
			peer_cut(y, p);
	pthread_mutex_unlock(&y->lock);
}

/* An entry of sep's AV that can no longer serve (the process behind it
 * is gone) is cut off, so that the address can be inserted afresh. */
void ofi_peer_cut(struct ofi_ep *sep, struct ofi_peer *p)
{
	pthread_mutex_lock(&sep->lock);
	if (!atomic_load_explicit(&p->cut, memory_order_acquire))
		peer_cut(sep, p);
	pthread_mutex_unlock(&sep->lock);
}

void ofi_live_del(struct ofi_ep *sep)
{
	pthread_mutex_lock(&live_lock);
	CCI__SLIST_UNLINK(&live, sep, live_next);
	for (struct ofi_ep *y = live; y; y = y->live_next)
		if (y->info->addr_format == sep->info->addr_format &&
		    strcmp(y->dev->core_name, sep->dev->core_name) == 0)
			cut_peer(y, sep->addr, sep->addr_len);
	dead_remember(sep);
	pthread_mutex_unlock(&live_lock);
}

/* ofi_fds_cloexec_tcp's test, in a fork child: is this TCP socket one of
 * an endpoint listed (its listening socket, or one rxm accepted on it:
 * the endpoint's address is the local one) or one rxm connected to a
 * peer of an endpoint (the peer's address is the remote one)?  The lists
 * are the parent's copies, read without their locks: no other thread
 * runs in the child, and each list was whole at every moment. */
static int live_owns(const struct sockaddr *local, socklen_t llen, const struct sockaddr *peer,
                     socklen_t plen, void *arg)
{
	(void)arg;
	for (const struct ofi_ep *y = live; y; y = y->live_next) {
		uint32_t fmt = y->info->addr_format;

		if (fmt != FI_SOCKADDR_IN && fmt != FI_SOCKADDR_IN6)
			continue;
		if (ofi_sa_match(local, llen, y->addr, y->addr_len, 1))
			return 1;
		for (const struct ofi_peer *p = y->peers; peer && p; p = p->next)
			if (ofi_sa_match(peer, plen, p->addr, p->len, 0))
				return 1;
	}
	return 0;
}

/* Is an endpoint listed one whose provider opens TCP sockets? */
static int live_tcp(void)
{
	for (const struct ofi_ep *y = live; y; y = y->live_next)
		if (y->info->addr_format == FI_SOCKADDR_IN || y->info->addr_format == FI_SOCKADDR_IN6)
			return 1;
	return 0;
}

/*
 * In a child of fork() the endpoints listed are the parent's (core/fork.c):
 * the child starts with none and no dead names, and with a lock that a
 * thread the child does not have may have held at the fork.  The lists'
 * memory is the parent's copy, left as it is.  First, the TCP sockets
 * libfabric opened for them after they were created (rxm connects and
 * accepts during progress) are made close-on-exec, before the child can
 * exec (ofi_fd.c).  glibc forgets this handler when the module is
 * dlclose'd (__cxa_finalize unregisters a module's fork handlers).
 */
static struct dead_name *parent_dead; /* kept reachable, never read */

static void live_fork_child(void)
{
	if (live_tcp())
		ofi_fds_cloexec_tcp(live_owns, NULL);
	pthread_mutex_init(&live_lock, NULL);
	live = NULL;
	parent_dead = dead;
	dead = NULL;
	ndead = 0;
}

/*
 * The process exits with endpoints open (exit() or a return from main
 * without cci_finalize): their progress threads stop first, each within
 * OFI_EXIT_JOIN_NS.  exit() ends the other threads wherever they are, and
 * libfabric 1.17's shm keeps a spinlock in each endpoint's region, taken
 * by the endpoint's own progress and by every peer sending to it: a
 * thread ended inside a send to a peer, or inside its own progress,
 * leaves that lock held for good, and the peer spins forever in its next
 * progress (or its next send here).  Seen: a live server spun in
 * cci_get_event after a client exited with sends in flight.  The
 * application's own threads are the application's to stop.
 *
 * The shm provider's signal handlers go first (ofi_signal.c: libfabric's
 * destructor frees what they read), and the names of the process's own
 * shm regions with them: nothing else would remove them before a later
 * process's sweep.
 *
 * An exit handler of this module (__cxa_atexit with its __dso_handle), not
 * a destructor: exit() runs it before any destructor, and libfabric's can
 * come before this module's (the dynamic loader finalizes in load order
 * the objects that do not depend on each other, and a program that loaded
 * libfabric before cci_init has it first).  The module's dlclose after
 * cci_finalize runs it too (no endpoint is listed then) and forgets it.
 * Not atexit(): ThreadSanitizer's keeps the function past the dlclose and
 * calls it unmapped at exit.
 */
extern void *__dso_handle __attribute__((visibility("hidden")));
int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static void live_exit(void *unused)
{
	struct ofi_ep **v = NULL;
	uint32_t n = 0, cap = 0;
	struct timespec dl;

	(void)unused;
	ofi_sig_provider_forget();
	pthread_mutex_lock(&live_lock);
	for (struct ofi_ep *y = live; y; y = y->live_next) {
		if (y->reach == OFI_REACH_BY_SHM)
			ofi_reach_shm_unlink_own(y->addr, y->addr_len);
		if (!y->eng.thread_started || cci__grow(&v, n, &cap, 8, sizeof(*v)) != CCI_SUCCESS)
			continue;
		cci__engine_cmd(&y->eng, CCI__ENGINE_STOP);
		v[n++] = y;
	}
	pthread_mutex_unlock(&live_lock); /* the threads may want it to finish a round */
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += OFI_EXIT_JOIN_NS / 1000000000ull;
	for (uint32_t i = 0; i < n; i++)
		if (pthread_timedjoin_np(v[i]->eng.thread, NULL, &dl) == 0)
			v[i]->eng.thread_started = 0;
	if (n)
		OFI_LOG(CCI_LOG_EP, "ofi: the process exits with %u endpoint(s) open: their progress "
		        "threads stopped", n);
	free(v);
}

__attribute__((constructor)) static void live_handlers_install(void)
{
	pthread_atfork(NULL, NULL, live_fork_child);
	__cxa_atexit(live_exit, NULL, &__dso_handle);
}

void ofi_live_fini(void)
{
	pthread_mutex_lock(&live_lock);
	for (struct dead_name *d; CCI__SLIST_POP(&dead, d, next);)
		free(d);
	ndead = 0;
	pthread_mutex_unlock(&live_lock);
}
