/*
 * ofi_ep.c - endpoint creation and destruction: fabric, domain,
 * completion queue (with a wait fd when the provider has one), address
 * vector, the RDM endpoint, receive buffers, operation pool, URI and the
 * progress thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "leftover.h"
#include "ofi.h"

#define OFI_DESTROY_FLUSH_NS 2000000000ull /* DISC messages get this long to be answered */

static void ep_init_fields(struct ofi_ep *sep, cci__ep_t *ep)
{
	const struct ofi_dev *d = ep->dev->priv;

	sep->ep = ep; /* the rest of *sep is zeroed by the core */
	sep->dev = d;
	sep->mss = d->mss;
	sep->wait_fd = -1;
	sep->rma_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
	pthread_mutex_init(&sep->lock, NULL);
	pthread_mutex_init(&sep->mr_lock, NULL);
	ofi_proc_self(&sep->self);
	ep->recv_buf_count = OFI_RECV_COUNT_DEFAULT;
	ep->send_buf_count = OFI_SEND_COUNT_DEFAULT;
	memset(&ep->rma_align, 0, sizeof(ep->rma_align));
}

/* The fi_info to open: the device's, or one bound to service. */
static int ep_info(struct ofi_ep *sep, const char *service)
{
	const struct fi_info *di = sep->dev->info;
	struct fi_info *list = NULL;
	const char *node = sep->dev->node[0] ? sep->dev->node : NULL;
	int rc;

	if (!service) {
		sep->info = ofi_lib.dupinfo(di);
		return sep->info ? CCI_SUCCESS : CCI_ENOMEM;
	}
	if (ofi_service_check(di, service) != CCI_SUCCESS)
		return CCI_EINVAL;
	rc = ofi_getinfo(di->fabric_attr->prov_name, di->domain_attr->name, di->fabric_attr->name,
	                 node, service, &list);
	if (rc != 0) {
		OFI_LOG(CCI_LOG_EP, "ofi: service %s: fi_getinfo: %s", service, ofi_lib.strerror(-rc));
		return rc == -FI_ENODATA ? CCI_EADDRNOTAVAIL : ofi_fi_status(-rc);
	}
	for (struct fi_info *fi = list; fi && !sep->info; fi = fi->next)
		if (strcmp(fi->fabric_attr->prov_name, di->fabric_attr->prov_name) == 0)
			sep->info = ofi_lib.dupinfo(fi);
	ofi_lib.freeinfo(list);
	return sep->info ? CCI_SUCCESS : CCI_EADDRNOTAVAIL;
}

/*
 * The completion queue.  An endpoint opened with an OS handle will sleep:
 * its CQ gets a wait fd, if the provider has one, for the progress thread
 * to sleep on.  Without one the CQ has no wait object, because a wait fd
 * costs a system call or two per completion (libfabric signals it on
 * every one): "endpoints opened without an OS handle pay no system call
 * for it on the data path".  The thread then polls while the application
 * does not.
 */
static int ep_open_cq(struct ofi_ep *sep)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD,
	                           .size = 4096 };
	int rc = -FI_ENOSYS;

	if (sep->ep->os_epfd >= 0)
		rc = fi_cq_open(sep->domain, &attr, &sep->cq, NULL);
	if (rc == 0 && fi_control(&sep->cq->fid, FI_GETWAIT, &sep->wait_fd) != 0) {
		fi_close(&sep->cq->fid);
		sep->cq = NULL;
		sep->wait_fd = -1;
		rc = -FI_ENOSYS;
	}
	if (rc != 0) {
		attr.wait_obj = FI_WAIT_NONE;
		rc = fi_cq_open(sep->domain, &attr, &sep->cq, NULL);
	}
	return rc;
}

static int ep_open_domain(struct ofi_ep *sep)
{
	struct fi_av_attr av = { .type = FI_AV_TABLE, .count = 64 };
	int rc;

	rc = ofi_lib.fabric(sep->info->fabric_attr, &sep->fabric, NULL);
	if (rc == 0)
		rc = fi_domain(sep->fabric, sep->info, &sep->domain, NULL);
	if (rc == 0)
		rc = ep_open_cq(sep);
	if (rc == 0 && fi_av_open(sep->domain, &av, &sep->av, NULL) != 0) {
		av.type = FI_AV_MAP;
		rc = fi_av_open(sep->domain, &av, &sep->av, NULL);
	}
	if (rc != 0)
		OFI_ERR("ofi: %s: cannot open the fabric, domain, CQ or AV: %s",
		        sep->info->fabric_attr->prov_name, ofi_lib.strerror(-rc));
	return rc == 0 ? CCI_SUCCESS : ofi_fi_status(-rc);
}

static void ep_reap_report(const struct leftover *lo, int err, void *arg)
{
	(void)arg;
	if (err == 0)
		OFI_LOG(CCI_LOG_EP, "ofi: removed %s (%llu bytes), left by pid %d, which is gone",
		        lo->path, (unsigned long long)lo->bytes, (int)lo->pid);
	else
		OFI_LOG(CCI_LOG_EP, "ofi: cannot remove %s, left by pid %d, which is gone: %s",
		        lo->path, (int)lo->pid, strerror(err));
}

/*
 * libfabric's shm provider names its region /dev/shm/<pid>:<n>:<m> and
 * unlinks it at close or on a catchable signal; a process killed with
 * SIGKILL leaves it (16 MiB each).  Left there, regions fill the tmpfs, and
 * once a dead process's pid comes round again (pid_max is small) the new
 * process cannot open its endpoint ("address in use").  So before each shm
 * endpoint opens, the regions of every dead process of our uid go, the
 * owner checked by pid and start time (plugins/common/leftover.h).
 */
static void ep_reap_stale_shm(const struct fi_info *info)
{
	if (strcmp(info->fabric_attr->prov_name, "shm") == 0)
		leftover_sweep(LEFTOVER_SHM_REGION, LEFTOVER_SHM_DIR, ep_reap_report, NULL);
}

/* How this endpoint learns that nobody is at an address (ofi_reach.c):
 * only where the providers were seen to keep quiet about it. */
static void ep_reach_init(struct ofi_ep *sep)
{
	const char *core = sep->dev->core_name;
	uint32_t fmt = sep->info->addr_format;

	if (strcmp(core, "shm") == 0 && fmt == FI_ADDR_STR) {
		sep->reach = OFI_REACH_BY_SHM;
		ofi_reach_shm_self(sep->addr, sep->addr_len);
	} else if (strcmp(core, "tcp") == 0 && (fmt == FI_SOCKADDR_IN || fmt == FI_SOCKADDR_IN6)) {
		sep->reach = OFI_REACH_BY_PROBE;
	}
}

static int ep_open_endpoint(struct ofi_ep *sep)
{
	size_t len = sizeof(sep->addr);
	struct ofi_sigs sigs;
	int rc;

	ep_reap_stale_shm(sep->info);
	/* shm sets its cleanup handlers at a process's first endpoint; an
	 * ignored signal stays ignored, the others are put back at exit
	 * (ofi_signal.c). */
	ofi_sig_save(&sigs);
	rc = fi_endpoint(sep->domain, sep->info, &sep->fep, NULL);
	ofi_sig_provider_note(&sigs);

	if (rc == 0)
		rc = fi_ep_bind(sep->fep, &sep->av->fid, 0);
	if (rc == 0)
		rc = fi_ep_bind(sep->fep, &sep->cq->fid, FI_TRANSMIT | FI_RECV);
	if (rc == 0)
		rc = fi_enable(sep->fep);
	if (rc == 0)
		rc = fi_getname(&sep->fep->fid, sep->addr, &len);
	if (rc != 0) {
		OFI_LOG(CCI_LOG_EP, "ofi: %s: cannot open the endpoint: %s",
		        sep->info->fabric_attr->prov_name, ofi_lib.strerror(-rc));
		return (rc == -FI_EADDRINUSE || rc == -FI_EBUSY) ? CCI_EBUSY : ofi_fi_status(-rc);
	}
	sep->addr_len = len;
	sep->mr_mode = (uint64_t)sep->info->domain_attr->mr_mode;
	sep->inject_size = sep->info->tx_attr->inject_size < OFI_INJECT_MAX ?
	                   sep->info->tx_attr->inject_size : OFI_INJECT_MAX;
	sep->iov_limit = sep->info->tx_attr->iov_limit;
	/* Message headers travel as remote CQ data where it is 8 bytes. */
	sep->imm = sep->info->domain_attr->cq_data_size >= sizeof(uint64_t);
	ep_reach_init(sep);
	sep->peer_max = sep->info->domain_attr->ep_cnt < UINT32_MAX ?
	                (uint32_t)sep->info->domain_attr->ep_cnt : 0;
	return CCI_SUCCESS;
}

static void close_fid(struct fid *f)
{
	if (f)
		fi_close(f);
}

/* Free everything ep_create built; no thread runs.  The provider endpoint
 * closes first, so that it holds nothing of what is freed after it. */
static void ep_release(struct ofi_ep *sep)
{
	close_fid(sep->fep ? &sep->fep->fid : NULL);
	ofi_conns_free_all(sep);
	cci__due_heap_fini(&sep->due);
	ofi_disc_waits_free(sep);
	ofi_reqs_free(sep);
	ofi_mrs_free(sep);
	ofi_pool_fini(sep);
	ofi_peers_free(sep);
	close_fid(sep->av ? &sep->av->fid : NULL);
	close_fid(sep->cq ? &sep->cq->fid : NULL);
	close_fid(sep->domain ? &sep->domain->fid : NULL);
	close_fid(sep->fabric ? &sep->fabric->fid : NULL);
	ofi_lib.freeinfo(sep->info); /* fi_freeinfo(NULL) does nothing */
	free(sep->slots);
	free(sep->slot_gen);
	pthread_mutex_destroy(&sep->lock);
	pthread_mutex_destroy(&sep->mr_lock);
}

static int ep_buffers(struct ofi_ep *sep, cci__ep_t *ep)
{
	size_t rx_size = sep->info->rx_attr->size;

	if (rx_size && rx_size < ep->recv_buf_count + OFI_RX_RESERVE)
		ep->recv_buf_count = rx_size > OFI_RX_RESERVE + 1 ? (uint32_t)(rx_size - OFI_RX_RESERVE) : 1;
	ofi_ops_init(sep, ep->send_buf_count);
	sep->slots = calloc(OFI_MAX_CONNS + 1, sizeof(*sep->slots));
	sep->slot_gen = calloc(OFI_MAX_CONNS + 1, sizeof(*sep->slot_gen));
	if (!sep->slots || !sep->slot_gen)
		return CCI_ENOMEM;
	/* A message for a connection of an earlier endpoint at this address
	 * names an id this one is unlikely to have handed out. */
	if (cci__random_bytes(&sep->gen_salt, sizeof(sep->gen_salt)) != CCI_SUCCESS)
		return CCI_ERROR;
	cci__lender_init(&sep->lend, ep->recv_buf_count);
	return ofi_rx_grow(sep, ep->recv_buf_count);
}

int ofi_ep_create(cci__ep_t *ep, const char *service)
{
	struct ofi_ep *sep = ofi_ep_of(ep);
	struct ofi_fds fds;
	int rc, snap;

	ep_init_fields(sep, ep); /* the device is up: dev_publish gave it its fi_info */
	/* libfabric opens descriptors without FD_CLOEXEC (ofi_fd.c). */
	snap = ofi_fds_snap(&fds);
	if (snap != CCI_SUCCESS)
		OFI_LOG(CCI_LOG_EP, "ofi: /proc/self/fd unreadable: libfabric's descriptors stay "
		        "inheritable");
	rc = ep_info(sep, service);
	if (rc == CCI_SUCCESS)
		rc = ep_open_domain(sep);
	if (rc == CCI_SUCCESS)
		rc = ep_open_endpoint(sep);
	if (snap == CCI_SUCCESS)
		ofi_fds_cloexec_new(&fds);
	if (rc == CCI_SUCCESS)
		rc = ep_buffers(sep, ep);
	if (rc == CCI_SUCCESS)
		rc = ofi_uri_make(sep, &ep->uri);
	if (rc == CCI_SUCCESS)
		rc = ofi_thread_start(sep);
	if (rc == CCI_SUCCESS)
		ofi_live_add(sep);
	if (rc != CCI_SUCCESS) {
		free(ep->uri);
		ep->uri = NULL;
		ep_release(sep);
		return rc;
	}
	OFI_LOG(CCI_LOG_EP, "ofi: endpoint %s (%s, mss %u, wait fd %s, mr_mode 0x%llx, "
	        "headers in CQ data %s)", ep->uri, sep->info->fabric_attr->prov_name, sep->mss,
	        sep->wait_fd >= 0 ? "yes" : "no", (unsigned long long)sep->mr_mode,
	        sep->imm ? "yes" : "no");
	return CCI_SUCCESS;
}

/* Let the DISC messages of the closing connections arrive (delivery
 * complete, where the provider offers it: see ctl_fi_send) and be
 * answered (ofi_disc.c): the peers then have everything sent before; a
 * peer that does not answer within the bound (a frozen host) is given
 * up. */
static void ep_flush_ctl(struct ofi_ep *sep)
{
	uint64_t stop = cci__now_ns() + OFI_DESTROY_FLUSH_NS;

	while ((atomic_load_explicit(&sep->ctl_out, memory_order_acquire) > 0 ||
	        atomic_load_explicit(&sep->disc_out, memory_order_acquire) > 0) &&
	       cci__now_ns() < stop) {
		cci__spin_lock(&sep->cq_lock);
		ofi_progress_locked(sep);
		cci__spin_unlock(&sep->cq_lock);
		ofi_disc_expire(sep, cci__now_ns(), 1); /* peers that exited will not answer */
	}
	if (atomic_load_explicit(&sep->disc_out, memory_order_acquire) > 0)
		OFI_LOG(CCI_LOG_CONN, "ofi: endpoint %s closes with %u DISC unanswered after %llu ms, "
		        "the first of %08x", sep->ep->uri, atomic_load(&sep->disc_out),
		        (unsigned long long)(OFI_DESTROY_FLUSH_NS / 1000000u), sep->disc_waits[0].id);
}

void ofi_ep_stop(cci__ep_t *ep)
{
	struct ofi_ep *sep = ofi_ep_of(ep);

	ofi_thread_stop(sep);
	ofi_live_del(sep);
}

void ofi_ep_free(cci__ep_t *ep)
{
	struct ofi_ep *sep = ofi_ep_of(ep);

	/* No other thread runs on this endpoint any more (API contract). */
	ofi_conns_close_all(sep);
	ep_flush_ctl(sep);
	ep_release(sep);
}

int ofi_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value)
{
	struct ofi_ep *sep = ofi_ep_of(ep);
	size_t rx_size = sep->info->rx_attr->size;

	if (value == 0 || value > OFI_BUF_COUNT_MAX)
		return CCI_ERANGE;
	if (name == CCI_OPT_ENDPT_SEND_BUF_COUNT) {
		cci__op_pool_set_limit(&sep->ops, value);
		return CCI_SUCCESS;
	}
	if (rx_size && value + OFI_RX_RESERVE > rx_size)
		return CCI_ERANGE;
	cci__lender_set_limit(&sep->lend, value);
	return ofi_rx_grow(sep, value);
}
