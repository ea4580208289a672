/*
 * sm_peer.c - what a peer's hello hands over: its receive ring, mapped
 * once per connection, and its endpoint (doorbell, page and inbox), held
 * once per peer endpoint and shared by every connection to it.
 *
 * Every hello of an endpoint carries the same page, doorbell and inbox.  Mapped
 * per connection, 10,000 connections to one server would hold 10,000
 * doorbell descriptors and 10,000 mappings of its 32 MiB page (320 GiB of
 * address space).  The page's memfd inode names the peer endpoint
 * instead: the first hello maps the page and keeps the doorbell, later
 * ones take a reference and close their copies, and the last reference
 * unmaps and closes (the inbox likewise: mapped with the first hello).  The inode cannot be reused while we hold the page
 * mapped (and memfd inode numbers are 64-bit counters on the kernel's
 * internal mount), so the name is never ambiguous.  Every descriptor a
 * hello brings is closed here: only the doorbell stays, once per peer.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sm.h"

#define SM_PEER_TAB_MIN 16u

/* A memfd of the peer's with the seals we rely on, mapped.  CCI_EINVAL for
 * a descriptor that is not such a memfd, CCI_ENOMEM when the mapping is
 * refused (memory, vm.max_map_count). */
static int seg_map(int fd, int need_seals, int prot, size_t min, void **p, size_t *len,
                   uint64_t *ino, uint64_t *dev)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	void *m;

	if (seals < 0 || (seals & need_seals) != need_seals || fstat(fd, &st) != 0 ||
	    (uint64_t)st.st_size < min || (uint64_t)st.st_size > (SM_RING_MAX_SIZE << 1))
		return CCI_EINVAL;
	m = mmap(NULL, (size_t)st.st_size, prot, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return errno == ENOMEM || errno == EAGAIN ? CCI_ENOMEM : CCI_EINVAL;
	*p = m;
	*len = (size_t)st.st_size;
	if (ino) {
		*ino = (uint64_t)st.st_ino;
		*dev = (uint64_t)st.st_dev;
	}
	return CCI_SUCCESS;
}

static uint32_t peer_hash(uint64_t ino, uint32_t cap)
{
	return (uint32_t)((ino * 0x9e3779b97f4a7c15ull) >> 32) & (cap - 1);
}

/* Room for one more peer (the chains stay short); peer_lock held. */
static int tab_grow(struct sm_ep *sep)
{
	uint32_t cap = sep->peer_cap ? sep->peer_cap * 2 : SM_PEER_TAB_MIN;
	struct sm_peer **tab;

	if (sep->npeers < sep->peer_cap)
		return CCI_SUCCESS;
	tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return sep->peer_cap ? CCI_SUCCESS : CCI_ENOMEM; /* longer chains will do */
	for (uint32_t i = 0; i < sep->peer_cap; i++) {
		for (struct sm_peer *p; CCI__SLIST_POP(&sep->peer_tab[i], p, next);) {
			uint32_t b = peer_hash(p->ino, cap);
			p->next = tab[b];
			tab[b] = p;
		}
	}
	free(sep->peer_tab);
	sep->peer_tab = tab;
	sep->peer_cap = cap;
	return CCI_SUCCESS;
}

/* A new peer from its page (fd), doorbell (*bell, taken on success) and
 * inbox (inbox_fd); peer_lock held. */
static int peer_new(struct sm_ep *sep, int fd, int *bell, int inbox_fd, struct sm_peer **out,
                    const char **why)
{
	struct sm_peer *p = calloc(1, sizeof(*p));
	void *pg = NULL, *in = NULL;
	int rc = p ? tab_grow(sep) : CCI_ENOMEM;

	if (rc == CCI_SUCCESS)
		rc = seg_map(fd, F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE, PROT_READ,
		             sizeof(struct sm_ep_page), &pg, &p->page_len, &p->ino, &p->dev);
	*why = rc == CCI_ENOMEM ? "no memory or mapping left for its endpoint page"
	                        : "its endpoint page is not a sealed memfd";
	if (rc != CCI_SUCCESS)
		goto err_free;
	p->page = pg;
	rc = CCI_EINVAL;
	*why = "its endpoint page has another layout";
	if (p->page->magic != SM_PAGE_MAGIC || p->page->version != SM_PAGE_VERSION ||
	    p->page->nslots != SM_REG_SLOTS)
		goto err_unmap;
	/* Its size is all we rely on (sealed): we mark bits below
	 * SM_INBOX_BITS only (sm_ring_attach checks a ring's). */
	rc = seg_map(inbox_fd, F_SEAL_SHRINK | F_SEAL_GROW, PROT_READ | PROT_WRITE,
	             sizeof(struct sm_inbox), &in, &p->inbox_len, NULL, NULL);
	*why = rc == CCI_ENOMEM ? "no memory or mapping left for its inbox"
	                        : "its inbox is not a sealed memfd";
	if (rc != CCI_SUCCESS)
		goto err_unmap;
	p->inbox = in;
	rc = CCI_EINVAL;
	/* Our writes to the doorbell must never block. */
	*why = "its doorbell is not a descriptor we can write";
	if (fcntl(*bell, F_SETFL, O_NONBLOCK) != 0)
		goto err_unmap_inbox;
	p->bell = *bell;
	*bell = -1;
	p->sleeps = (p->page->flags & SM_PAGE_SLEEPS) != 0;
	p->refs = 1;
	p->next = sep->peer_tab[peer_hash(p->ino, sep->peer_cap)];
	sep->peer_tab[peer_hash(p->ino, sep->peer_cap)] = p;
	sep->npeers++;
	*out = p;
	return CCI_SUCCESS;

err_unmap_inbox:
	munmap(in, p->inbox_len);
err_unmap:
	munmap(pg, p->page_len);
err_free:
	free(p);
	return rc;
}

/* The peer endpoint whose page fd is, with a reference: the one we hold
 * already, or a new one keeping *bell. */
static int peer_get(struct sm_ep *sep, int fd, int *bell, int inbox_fd, struct sm_peer **out,
                    const char **why)
{
	struct stat st;
	struct sm_peer *p = NULL;
	int rc = CCI_SUCCESS;

	if (fstat(fd, &st) != 0) {
		*why = "its endpoint page is not a file";
		return CCI_EINVAL;
	}
	pthread_mutex_lock(&sep->peer_lock);
	if (sep->peer_cap)
		for (p = sep->peer_tab[peer_hash((uint64_t)st.st_ino, sep->peer_cap)]; p; p = p->next)
			if (p->ino == (uint64_t)st.st_ino && p->dev == (uint64_t)st.st_dev)
				break;
	if (p) {
		p->refs++;
		*out = p;
	} else {
		rc = peer_new(sep, fd, bell, inbox_fd, out, why);
	}
	pthread_mutex_unlock(&sep->peer_lock);
	return rc;
}

void sm_peer_put(struct sm_ep *sep, struct sm_peer *p)
{
	int last;

	if (!p)
		return;
	pthread_mutex_lock(&sep->peer_lock);
	last = --p->refs == 0;
	if (last) {
		CCI__SLIST_UNLINK(&sep->peer_tab[peer_hash(p->ino, sep->peer_cap)], p, next);
		sep->npeers--;
	}
	pthread_mutex_unlock(&sep->peer_lock);
	if (!last)
		return;
	munmap((void *)p->page, p->page_len);
	munmap(p->inbox, p->inbox_len);
	close(p->bell);
	free(p);
}

int sm_hello_map(struct sm_ep *sep, const struct sm_ctl_hello *h, int *fds,
                 struct sm_hello_maps *m, const char **why)
{
	int rc;

	memset(m, 0, sizeof(*m));
	rc = seg_map(fds[0], F_SEAL_SHRINK, PROT_READ | PROT_WRITE, SM_RING_CTL_BYTES, &m->seg,
	             &m->seg_len, NULL, NULL);
	*why = rc == CCI_ENOMEM ? "no memory or mapping left for its ring"
	                        : "its ring is not a sealed memfd";
	if (rc == CCI_SUCCESS && (sm_ring_attach(&m->ring, m->seg, m->seg_len) != 0 ||
	                          m->ring.size != h->ring_size)) {
		*why = "its ring is not the one it announced";
		rc = CCI_EINVAL;
	}
	if (rc == CCI_SUCCESS)
		rc = peer_get(sep, fds[2], &fds[1], fds[3], &m->peer, why);
	for (int i = 0; i < SM_HELLO_FDS; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
	if (rc != CCI_SUCCESS)
		sm_hello_unmap(sep, m);
	return rc;
}

void sm_hello_unmap(struct sm_ep *sep, struct sm_hello_maps *m)
{
	if (m->seg)
		munmap(m->seg, m->seg_len);
	sm_peer_put(sep, m->peer);
	memset(m, 0, sizeof(*m));
}

void sm_peers_fini(struct sm_ep *sep)
{
	/* Every connection and request let go of its peer before: one left
	 * would be a leaked mapping and descriptor. */
	assert(sep->npeers == 0);
	if (sep->npeers)
		SM_ERR("sm: %s: %u peer endpoints still referenced at teardown", sep->sock_path,
		       sep->npeers);
	free(sep->peer_tab);
	sep->peer_tab = NULL;
	sep->peer_cap = sep->npeers = 0;
}
