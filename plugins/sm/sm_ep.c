/*
 * sm_ep.c - an endpoint: its doorbell, endpoint page and inbox, its listening
 * socket and control thread (none with progress = manual: progress()
 * runs its loop, sm_loop.c), progress and arming of the OS handle.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sm.h"

/* The inbox (sm_inbox.h): sealed against shrinking and growing only, so
 * that peers map it read-write and mark bits; and the private maps and
 * words of the same shape progress keeps. */
static int inbox_create(struct sm_ep *sep)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = (sizeof(struct sm_inbox) + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
	void *p;

	sep->inbox_fd = memfd_create("cci-sm-inbox", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (sep->inbox_fd < 0 || ftruncate(sep->inbox_fd, (off_t)len) != 0 ||
	    fcntl(sep->inbox_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
		goto err_errno;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, sep->inbox_fd, 0);
	if (p == MAP_FAILED)
		goto err_errno;
	sep->inbox = p;
	sep->inbox_len = len;
	sep->found = calloc(1, sizeof(*sep->found));
	sep->flush = calloc(1, sizeof(*sep->flush));
	sep->warm = calloc(1, sizeof(*sep->warm));
	sep->keep = calloc(SM_INBOX_WORDS, sizeof(*sep->keep));
	if (!sep->found || !sep->flush || !sep->warm || !sep->keep) {
		SM_ERR("sm: cannot create the endpoint's inbox: out of memory");
		return CCI_ENOMEM;
	}
	return CCI_SUCCESS;

err_errno:
	SM_ERR("sm: cannot create the endpoint's inbox (memfd): %s", strerror(errno));
	return cci__errno_status(errno);
}

/* The doorbell (in the OS handle's epoll set, if any), and the endpoint
 * page: RW here, sealed so that peers can only map it read-only. */
static int bell_page_create(struct sm_ep *sep)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = (sizeof(struct sm_ep_page) + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
	struct epoll_event ev = { .events = EPOLLIN };
	int epfd = sep->ep->os_epfd;
	const char *what = "doorbell";
	void *p;

	sep->bell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sep->bell_fd < 0 || (epfd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, sep->bell_fd, &ev) != 0))
		goto err_errno;
	what = "page (memfd)";
	sep->page_fd = memfd_create("cci-sm-ep", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (sep->page_fd < 0 || ftruncate(sep->page_fd, (off_t)len) != 0)
		goto err_errno;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, sep->page_fd, 0);
	if (p == MAP_FAILED)
		goto err_errno;
	sep->page = p;
	sep->page_len = len;
	sep->page->magic = SM_PAGE_MAGIC;
	sep->page->version = SM_PAGE_VERSION;
	sep->page->pid = (uint32_t)getpid();
	sep->page->nslots = SM_REG_SLOTS;
	sep->page->flags = epfd >= 0 ? SM_PAGE_SLEEPS : 0;
	if (fcntl(sep->page_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
	          F_SEAL_SEAL) != 0)
		goto err_errno;
	return CCI_SUCCESS;

err_errno:
	SM_ERR("sm: cannot create the endpoint %s: %s", what, strerror(errno));
	return cci__errno_status(errno);
}

static void ep_init_fields(struct sm_ep *sep, cci__ep_t *ep)
{
	const struct sm_dev *d = ep->dev->priv;

	sep->ep = ep; /* the rest is zero (the core's allocation) */
	sep->dev = d;
	sep->mss = d->mss;
	sep->listen_fd = -1;
	sep->bell_fd = sep->page_fd = sep->inbox_fd = -1;
	pthread_mutex_init(&sep->lock, NULL);
	pthread_mutex_init(&sep->bit_lock, NULL);
	pthread_mutex_init(&sep->reg_lock, NULL);
	pthread_mutex_init(&sep->peer_lock, NULL);
	ep->recv_buf_count = SM_BUF_COUNT_DEFAULT;
	ep->send_buf_count = SM_BUF_COUNT_DEFAULT;
	sm_pool_init(sep, SM_BUF_COUNT_DEFAULT);
	memset(&ep->rma_align, 0, sizeof(ep->rma_align));
}

/* Free what ep_create built; the control thread is stopped. */
static void ep_release(struct sm_ep *sep)
{
	sm_path_unlisten(sep);
	if (sep->bell_fd >= 0)
		close(sep->bell_fd);
	if (sep->page)
		munmap(sep->page, sep->page_len);
	if (sep->page_fd >= 0)
		close(sep->page_fd);
	if (sep->inbox)
		munmap(sep->inbox, sep->inbox_len);
	if (sep->inbox_fd >= 0)
		close(sep->inbox_fd);
	free(sep->found);
	free(sep->flush);
	free(sep->warm);
	free(sep->keep);
	sm_bits_fini(sep);
	cci__op_pool_fini(&sep->pool);
	free(sep->reg_free);
	free(sep->rx_bits);
	cci__due_heap_fini(&sep->due); /* every connection gave its slot back */
	sm_peers_fini(sep);
	pthread_mutex_destroy(&sep->lock);
	pthread_mutex_destroy(&sep->reg_lock);
	pthread_mutex_destroy(&sep->peer_lock);
}

int sm_ep_create(cci__ep_t *ep, const char *service)
{
	struct sm_ep *sep = sm_ep_of(ep);
	int rc;

	ep_init_fields(sep, ep);
	rc = sm_path_listen(sep, service);
	if (rc == CCI_SUCCESS)
		rc = bell_page_create(sep);
	if (rc == CCI_SUCCESS)
		rc = inbox_create(sep);
	if (rc == CCI_SUCCESS)
		rc = sm_pool_resize(sep, ep->send_buf_count);
	if (rc != CCI_SUCCESS)
		goto err_release;
	if (asprintf(&ep->uri, "sm://%s", sep->sock_path) < 0) {
		ep->uri = NULL;
		rc = CCI_ENOMEM;
		goto err_release;
	}
	rc = sm_loop_start(sep);
	if (rc != CCI_SUCCESS)
		goto err_free_uri;
	SM_LOG(CCI_LOG_EP, "sm: endpoint %s (mss %u, rma %s)", ep->uri, sep->mss,
	       sep->dev->rma_copy ? "copy" : "cma");
	return CCI_SUCCESS;

err_free_uri:
	free(ep->uri);
	ep->uri = NULL;
err_release:
	ep_release(sep);
	return rc;
}

void sm_ep_stop(cci__ep_t *ep)
{
	cci__engine_stop(&sm_ep_of(ep)->eng);
}

void sm_ep_free(cci__ep_t *ep)
{
	struct sm_ep *sep = sm_ep_of(ep);

	cci__engine_fini(&sep->eng);
	/* No other thread runs on this endpoint any more (API contract). */
	for (struct sm_conn *sc;
	     CCI__SLIST_POP(&sep->conns, sc, next) || CCI__SLIST_POP(&sep->zombies, sc, next);)
		sm_conn_destroy(sc);
	for (struct sm_req *req;
	     CCI__SLIST_POP(&sep->reqs, req, next) || CCI__SLIST_POP(&sep->posted, req, next);)
		sm_req_free(req);
	ep_release(sep);
}

int sm_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value)
{
	struct sm_ep *sep = sm_ep_of(ep);

	if (value == 0 || value > SM_BUF_COUNT_MAX)
		return CCI_ERANGE;
	if (name == CCI_OPT_ENDPT_RECV_BUF_COUNT)
		return sm_ring_size_for(value, sep->mss) ? CCI_SUCCESS : CCI_ERANGE;
	return sm_pool_resize(sep, value);
}

/*
 * Arm: drain the doorbell, raise the flag peers look at after publishing,
 * then look again (the inbox, the sweep's finds, the hot and pending
 * rings: sm_poll_pending) so that a record published before the flag was
 * visible is not slept through.  Such a record got no doorbell and will get none:
 * on CCI_EAGAIN the core keeps the OS handle readable until a progress
 * call has run (core/event.c, os_handle_ring_work), since no ring of ours
 * will come for it.
 */
int sm_arm(cci__ep_t *ep)
{
	struct sm_ep *sep = sm_ep_of(ep);
	uint64_t v;

	if (read(sep->bell_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		SM_LOG(CCI_LOG_EP, "sm: doorbell read: %s", strerror(errno));
	sm_loop_arm(sep);
	atomic_store_explicit(&sep->page->armed, 1, memory_order_relaxed);
	sm_fence();
	return sm_poll_pending(sep) ? CCI_EAGAIN : CCI_SUCCESS;
}

int sm_progress(cci__ep_t *ep)
{
	struct sm_ep *sep = sm_ep_of(ep);
	int rc, got;

	cci__engine_poll(&sep->eng); /* progress = manual: the control loop's work */
	/* The application is awake: peers need not ring any more, and a ring
	 * that came is drained now, so the OS handle is readable only while
	 * there is work.  Only endpoints that armed (waited on their OS
	 * handle) pay this system call; polling ones never arm. */
	if (atomic_load_explicit(&sep->page->armed, memory_order_relaxed)) {
		uint64_t v;
		atomic_store_explicit(&sep->page->armed, 0, memory_order_relaxed);
		if (read(sep->bell_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			SM_LOG(CCI_LOG_EP, "sm: doorbell read: %s", strerror(errno));
	}
	/* Another thread is receiving for us, or waits for the lock (sm_rx_lock). */
	if (atomic_load_explicit(&sep->rx_waiters, memory_order_relaxed) ||
	    !cci__spin_trylock(&sep->rx_lock))
		return CCI_SUCCESS;
	rc = sm_poll_rx(sep, &got);
	if (atomic_load_explicit(&sep->txq_busy, memory_order_relaxed))
		sm_tx_flush_marked(sep);
	else if (!got)
		sm_tx_warm_marked(sep); /* waiting for an answer, most likely */
	cci__spin_unlock(&sep->rx_lock);
	return rc;
}
