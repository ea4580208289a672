/*
 * ofi_disc.c - a connection's last word, and the wait for its answer.
 *
 * libfabric's completion of a send says that the provider took it, not
 * that the peer has it: over tcp the bytes may still be in a socket when
 * the program closes its endpoint, and a tcp socket closed with unread
 * data (credit returns) resets and drops what it still held.  Even a
 * DISC sent with FI_DELIVERY_COMPLETE was seen completed while the
 * messages before it never reached the peer's plugin (one client of 64
 * short of its last messages in the fault suite's load test).
 *
 * So the DISC of cci_disconnect and of endpoint teardown is marked
 * OFI_DISC_LAST, and its receiver's plugin answers it with a DISC_ACK
 * once it has read it from its completion queue: by then it has read
 * every message of the connection sent before it (one ordered stream;
 * the provider hands posted buffers its messages in arrival order).  The
 * sender keeps the connection's id in a list until the answer comes, and
 * endpoint teardown waits for the list to empty (ep_flush_ctl, bounded).
 *
 * What ends a wait: the DISC_ACK; the peer's own last DISC for a
 * connection this side no longer knows (both closed at once: neither
 * answers, and neither side needs the other's messages any more); the
 * exit of a peer process of this host (teardown looks, every
 * OFI_DISC_PROC_NS); and the bound OFI_DISC_ACK_WAIT_NS (a frozen host),
 * after which the progress thread forgets the entry.  Entries are
 * appended in time order, so the expired ones are at the front.
 *
 * A peer endpoint of this same process is not waited for: cci_finalize
 * stops every endpoint's progress before it frees any, so it could not
 * answer, and the process goes on reading for it anyway.
 *
 * Locking: sep->disc_lock guards the list and nothing is taken inside
 * it; callers may hold any other lock (oc->lock, cq_lock).
 */
#include <stdlib.h>
#include <string.h>

#include "ofi.h"

#define OFI_DISC_ACK_WAIT_NS 2000000000ull
#define OFI_DISC_PROC_NS 10000000ull

/* Remove entries [0, n) of the list; disc_lock held. */
static void waits_shift(struct ofi_ep *sep, uint32_t n)
{
	assert(cci__spin_held(&sep->disc_lock));
	sep->disc_n -= n;
	memmove(sep->disc_waits, sep->disc_waits + n, sep->disc_n * sizeof(*sep->disc_waits));
}

/* Await the answer to the last DISC oc is about to send; oc->lock held. */
void ofi_disc_await(struct ofi_conn *oc)
{
	struct ofi_ep *sep = oc->sep;
	struct ofi_disc_wait w = { oc->id, cci__now_ns() + OFI_DISC_ACK_WAIT_NS, { 0 } };
	uint32_t id = oc->id;

	assert(cci__mutex_held(&oc->lock));
	if (oc->peer_proc.host == sep->self.host) {
		if (oc->peer_proc.pid == sep->self.pid)
			return;
		w.proc = oc->peer_proc;
	}
	cci__spin_lock(&sep->disc_lock);
	if (sep->disc_n == sep->disc_cap) {
		uint32_t cap = sep->disc_cap ? sep->disc_cap * 2 : 16;
		struct ofi_disc_wait *v = realloc(sep->disc_waits, cap * sizeof(*v));

		if (!v) { /* no wait then: teardown does not hold for this one */
			cci__spin_unlock(&sep->disc_lock);
			OFI_LOG(CCI_LOG_CONN, "ofi: out of memory: the answer to the DISC of %08x is "
			        "not awaited", id);
			return;
		}
		sep->disc_waits = v;
		sep->disc_cap = cap;
	}
	sep->disc_waits[sep->disc_n++] = w;
	atomic_store_explicit(&sep->disc_out, sep->disc_n, memory_order_release);
	cci__spin_unlock(&sep->disc_lock);
}

void ofi_disc_answered(struct ofi_ep *sep, uint32_t id)
{
	cci__spin_lock(&sep->disc_lock);
	for (uint32_t i = 0; i < sep->disc_n; i++) {
		if (sep->disc_waits[i].id != id)
			continue;
		memmove(sep->disc_waits + i, sep->disc_waits + i + 1,
		        (sep->disc_n - i - 1) * sizeof(*sep->disc_waits));
		sep->disc_n--;
		break;
	}
	atomic_store_explicit(&sep->disc_out, sep->disc_n, memory_order_release);
	cci__spin_unlock(&sep->disc_lock);
}

/* Forget the waits of peers that exited; disc_lock held. */
static void waits_of_exited(struct ofi_ep *sep, uint64_t now)
{
	uint32_t kept = 0;

	assert(cci__spin_held(&sep->disc_lock));
	if (now - sep->disc_procs_ns < OFI_DISC_PROC_NS)
		return;
	sep->disc_procs_ns = now;
	for (uint32_t i = 0; i < sep->disc_n; i++)
		if (sep->disc_waits[i].proc.pid == 0 || !ofi_proc_exited(&sep->disc_waits[i].proc))
			sep->disc_waits[kept++] = sep->disc_waits[i];
	sep->disc_n = kept;
}

/* Forget the waits past their bound, and (check_procs) those of peer
 * processes that exited. */
void ofi_disc_expire(struct ofi_ep *sep, uint64_t now, int check_procs)
{
	uint32_t n = 0;

	if (atomic_load_explicit(&sep->disc_out, memory_order_acquire) == 0)
		return;
	cci__spin_lock(&sep->disc_lock);
	if (check_procs)
		waits_of_exited(sep, now);
	while (n < sep->disc_n && (int64_t)(now - sep->disc_waits[n].until_ns) >= 0)
		n++;
	if (n) {
		OFI_LOG(CCI_LOG_CONN, "ofi: %u DISC unanswered for %llu ms, the first of %08x: "
		        "its peer may not have had every message before it", n,
		        (unsigned long long)(OFI_DISC_ACK_WAIT_NS / 1000000u), sep->disc_waits[0].id);
		waits_shift(sep, n);
	}
	atomic_store_explicit(&sep->disc_out, sep->disc_n, memory_order_release);
	cci__spin_unlock(&sep->disc_lock);
}

void ofi_disc_waits_free(struct ofi_ep *sep)
{
	free(sep->disc_waits);
	sep->disc_waits = NULL;
	sep->disc_n = sep->disc_cap = 0;
	atomic_store_explicit(&sep->disc_out, 0, memory_order_relaxed);
}

/* A DISC or DISC_ACK, read by progress (cq_lock held); oc is the
 * connection its dst names, NULL when this side no longer has it. */
void ofi_disc_on_msg(struct ofi_conn *oc, struct ofi_ep *sep, const struct ofi_hdr *h)
{
	assert(cci__spin_held(&sep->cq_lock));
	if (h->type == OFI_T_DISC_ACK) {
		ofi_disc_answered(sep, h->dst);
	} else if (h->type == OFI_T_DISC && (h->aux & OFI_DISC_LAST)) {
		if (oc) {
			pthread_mutex_lock(&oc->lock);
			ofi_ctl_send(oc, OFI_T_DISC_ACK, 0, NULL, 0, 0);
			pthread_mutex_unlock(&oc->lock);
		} else {
			ofi_disc_answered(sep, h->dst);
		}
	}
}
