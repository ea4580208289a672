/*
 * endpoint.c - creating and destroying endpoints, the OS handle.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core.h"
#include "spin.h"

#define EP_ALIGN 64

/* The device cci_create_endpoint(NULL, ...) means: the default, else the first up. */
static cci__dev_t *default_device(void)
{
	for (int i = 0; i < cci__g.ndevs; i++)
		if (core_dev(cci__g.devs[i])->is_default && cci__g.devs[i]->pub.up)
			return cci__g.devs[i];
	for (int i = 0; i < cci__g.ndevs; i++)
		if (cci__g.devs[i]->pub.up)
			return cci__g.devs[i];
	return NULL;
}

/* The core part in a shell (shell.c), the plugin's part on its own: a
 * destroyed endpoint's shell stays mapped with a dead magic. */
static cci__ep_t *ep_alloc(cci__dev_t *dev)
{
	size_t priv = (dev->plugin->ep_priv_size + EP_ALIGN - 1) / EP_ALIGN * EP_ALIGN;
	cci__ep_t *ep = cci__shell_alloc();

	if (!ep)
		return NULL;
	ep->priv = aligned_alloc(EP_ALIGN, priv ? priv : EP_ALIGN);
	if (!ep->priv) {
		cci__shell_free(ep);
		return NULL;
	}
	memset(ep->priv, 0, priv);
	ep->pub.device = &dev->pub;
	ep->dev = dev;
	ep->plugin = dev->plugin;
	ep->os_epfd = core_ep(ep)->os_evfd = -1;
	pthread_mutex_init(&core_ep(ep)->rma_lock, NULL);
	core_ep(ep)->magic = CCI__MAGIC_EP;
	return ep;
}

/* The OS handle is an epoll set: the core's eventfd (readable while an
 * event is queued, see event.c) plus whatever wake-up descriptors the
 * plugin adds. */
static int os_handle_open(cci__ep_t *ep)
{
	struct epoll_event ev = { .events = EPOLLIN };

	ep->os_epfd = epoll_create1(EPOLL_CLOEXEC);
	core_ep(ep)->os_evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ep->os_epfd < 0 || core_ep(ep)->os_evfd < 0 ||
	    epoll_ctl(ep->os_epfd, EPOLL_CTL_ADD, core_ep(ep)->os_evfd, &ev) != 0) {
		LOG_ERR("endpoint: cannot create its OS handle (epoll/eventfd): %s", strerror(errno));
		return CCI_ENOMEM;
	}
	return CCI_SUCCESS;
}

static void ep_free(cci__ep_t *ep)
{
	if (ep->os_epfd >= 0)
		close(ep->os_epfd);
	if (core_ep(ep)->os_evfd >= 0)
		close(core_ep(ep)->os_evfd);
	cci__evt_drop_conn_refs(ep);
	cci__evt_pool_free(ep);
	cci__rma_table_free(ep);
	pthread_mutex_destroy(&core_ep(ep)->rma_lock);
	free(ep->uri);
	ep->uri = NULL;
	free(ep->priv);
	ep->priv = NULL;
	core_ep(ep)->magic = CCI__MAGIC_DEAD_EP;
	cci__shell_free(ep);
}

/* Check the arguments and pick the device; with the global lock held. */
static int ep_resolve_device(cci_device_t *device, cci__dev_t **dev_p)
{
	cci__dev_t *dev;

	assert(cci__mutex_held(&cci__g.lock));
	dev = device ? cci__dev_from_pub(device) : default_device();
	if (device && !dev)
		return CCI_EINVAL;
	if (!dev || !dev->pub.up)
		return CCI_ENODEV;
	*dev_p = dev;
	return CCI_SUCCESS;
}

CCI_API int cci_create_endpoint_at(cci_device_t *device, const char *service, int flags,
                                   cci_endpoint_t **endpoint, cci_os_handle_t *fd)
{
	cci__dev_t *dev = NULL;
	cci__ep_t *ep;
	int rc;

	static _Atomic int flags_logged;

	/* CCI_EP_ROUTING included: no transport routes. */
	cci__flags_keep(flags, 0, &flags_logged, CCI_LOG_EP, "cci_create_endpoint");
	if (!endpoint)
		return CCI_EINVAL;
	pthread_mutex_lock(&cci__g.lock);
	rc = cci__g.refcount > 0 ? ep_resolve_device(device, &dev) : CCI_ERROR;
	if (rc != CCI_SUCCESS)
		goto out_unlock;
	ep = ep_alloc(dev);
	if (!ep) {
		rc = CCI_ENOMEM;
		goto out_unlock;
	}
	if (fd && (rc = os_handle_open(ep)) != CCI_SUCCESS)
		goto err_free;
	rc = dev->plugin->ep_create(ep, service);
	if (rc != CCI_SUCCESS)
		goto err_free;
	core_ep(ep)->next_ep = cci__g.eps;
	cci__g.eps = ep;
	pthread_mutex_unlock(&cci__g.lock);
	LOG(CCI_LOG_EP, "endpoint %s opened on device %s", ep->uri ? ep->uri : "?", dev->pub.name);
	if (fd)
		*fd = ep->os_epfd;
	*endpoint = &ep->pub;
	return CCI_SUCCESS;

err_free:
	ep_free(ep);
out_unlock:
	pthread_mutex_unlock(&cci__g.lock);
	return rc;
}

CCI_API int cci_create_endpoint(cci_device_t *device, int flags, cci_endpoint_t **endpoint,
                                cci_os_handle_t *fd)
{
	return cci_create_endpoint_at(device, NULL, flags, endpoint, fd);
}

/* With the global lock held. */
int cci__ep_is_open(cci__ep_t *ep)
{
	assert(cci__mutex_held(&cci__g.lock));
	for (cci__ep_t *e = cci__g.eps; e; e = core_ep(e)->next_ep)
		if (e == ep)
			return 1;
	return 0;
}

/*
 * Teardown in the plugin's three steps (cci_plugin.h): close (no new
 * work), stop (its threads joined), free.  The endpoints are off
 * cci__g.eps already; global lock held.
 */
static void eps_close(cci__ep_t *list)
{
	for (cci__ep_t *ep = list; ep; ep = core_ep(ep)->next_ep) {
		atomic_store_explicit(&core_ep(ep)->closing, 1, memory_order_release);
		if (ep->plugin->ep_close)
			ep->plugin->ep_close(ep);
	}
}

static void eps_stop(cci__ep_t *list)
{
	for (cci__ep_t *ep = list; ep; ep = core_ep(ep)->next_ep)
		ep->plugin->ep_stop(ep);
}

static void eps_free(cci__ep_t *list)
{
	for (cci__ep_t *ep = list, *next; ep; ep = next) {
		next = core_ep(ep)->next_ep;
		ep->plugin->ep_free(ep);
		LOG(CCI_LOG_EP, "endpoint %s destroyed", ep->uri ? ep->uri : "?");
		ep_free(ep);
	}
}

static void eps_destroy(cci__ep_t *list)
{
	eps_close(list);
	eps_stop(list);
	eps_free(list);
}

/* Unlink ep and tear it down; global lock held. */
void cci__ep_destroy_locked(cci__ep_t *ep)
{
	assert(cci__mutex_held(&cci__g.lock));
	for (cci__ep_t **pp = &cci__g.eps; *pp; pp = &core_ep((*pp))->next_ep) {
		if (*pp == ep) {
			*pp = core_ep(ep)->next_ep;
			break;
		}
	}
	core_ep(ep)->next_ep = NULL;
	eps_destroy(ep);
}

/* Tear every endpoint down, each step on all before the next; global
 * lock held. */
void cci__eps_destroy_all_locked(void)
{
	cci__ep_t *list = cci__g.eps;

	assert(cci__mutex_held(&cci__g.lock));
	cci__g.eps = NULL;
	eps_destroy(list);
}

CCI_API int cci_destroy_endpoint(cci_endpoint_t *endpoint)
{
	cci__ep_t *ep = (cci__ep_t *)endpoint;
	int rc = CCI_SUCCESS;

	if (!ep)
		return CCI_EINVAL;
	pthread_mutex_lock(&cci__g.lock);
	if (cci__g.refcount == 0 || !cci__ep_is_open(ep))
		rc = CCI_EINVAL;
	else
		cci__ep_destroy_locked(ep);
	pthread_mutex_unlock(&cci__g.lock);
	return rc;
}

CCI_API int cci_arm_os_handle(cci_endpoint_t *endpoint, int flags)
{
	cci__ep_t *ep = cci__ep_live(endpoint);

	static _Atomic int flags_logged;

	cci__flags_keep(flags, 0, &flags_logged, CCI_LOG_EP, "cci_arm_os_handle");
	if (!ep || core_ep(ep)->os_evfd < 0)
		return CCI_EINVAL;
	if (cci__evq_settle(ep))
		return CCI_EAGAIN;
	ep->plugin->progress(ep);
	if (cci__evq_nonempty(ep))
		return CCI_EAGAIN;
	return cci__ep_arm(ep);
}
