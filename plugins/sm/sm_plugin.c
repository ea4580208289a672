/*
 * sm_plugin.c - the shared-memory transport's ops table, its device, and
 * endpoint creation and destruction.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sm.h"

const struct cci_core *sm_core;

extern const struct cci_plugin cci_ctp_sm_plugin;

static const char sm_info[] =
	"shared memory between processes of this host (rings in memfd segments, "
	"RMA by cross-memory attach)";

static int sm_init(const struct cci_core *core)
{
	if (!core || core->size < sizeof(struct cci_core))
		return CCI_EINVAL;
	sm_core = core;
	return CCI_SUCCESS;
}

static struct sm_dev *dev_defaults(void)
{
	struct sm_dev *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	snprintf(d->base, sizeof(d->base), "/tmp/cci-sm-%u", (unsigned)geteuid());
	d->mss = SM_MSS_DEFAULT;
	return d;
}

static void dev_publish(cci__dev_t *dev, struct sm_dev *d)
{
	dev->priv = d;
	dev->pub.up = 1;
	dev->pub.max_send_size = d->mss;
	dev->pub.rate = 0;
	dev->pub.info = sm_info;
}

static int sm_discover(void)
{
	struct sm_dev *d = dev_defaults();
	cci__dev_t *dev;

	if (!d)
		return CCI_ENOMEM;
	dev = sm_core->dev_add(&cci_ctp_sm_plugin, "sm");
	if (!dev) {
		free(d);
		return CCI_ENOMEM;
	}
	dev_publish(dev, d);
	return CCI_SUCCESS;
}

/* path= must be absolute: endpoint URIs are sm://<path>/<pid>/<id>. */
static int path_check(const char *value, void *field, char *why, size_t whylen)
{
	(void)field;
	if (value[0] == '/')
		return CCI_SUCCESS;
	snprintf(why, whylen, "is not an absolute path");
	return CCI_EINVAL;
}

static const char *const sm_rma_modes[] = { "cma", "copy", NULL };

/* The ini keys, as plugins/sm/README.md lists them. */
static const struct cci_conf_key sm_conf_keys[] = {
	{ .name = "path", .type = CCI_CONF_STRING, .check = path_check,
	  .offset = offsetof(struct sm_dev, base), .size = SM_BASE_SIZE,
	  .help = "absolute directory of the endpoints' sockets; endpoint URIs read "
	          "sm://<path>/<pid>/<id> (default /tmp/cci-sm-<uid>)" },
	{ .name = "mss", .type = CCI_CONF_UINT, .min = SM_MSS_MIN, .max = SM_MSS_MAX,
	  .def = CCI_CONF_NUM(SM_MSS_DEFAULT), .offset = offsetof(struct sm_dev, mss),
	  .size = sizeof(uint32_t), .help = "largest message, in bytes" },
	{ .name = "rma", .type = CCI_CONF_CHOICE, .choices = sm_rma_modes, .def = "cma",
	  .offset = offsetof(struct sm_dev, rma_copy), .size = sizeof(int),
	  .help = "how RMA moves data: cma copies straight between the processes "
	          "(falling back to copy when the kernel forbids it), copy goes through "
	          "shared bounce buffers" },
	{ .name = NULL },
};

static int sm_dev_configure(cci__dev_t *dev)
{
	struct sm_dev *d = dev_defaults();
	int rc;

	if (!d)
		return CCI_ENOMEM;
	rc = sm_core->conf_parse(dev, sm_conf_keys, d, NULL);
	if (rc != CCI_SUCCESS) {
		free(d);
		return rc;
	}
	dev_publish(dev, d);
	return CCI_SUCCESS;
}

static void sm_dev_free(cci__dev_t *dev)
{
	free(dev->priv);
	dev->priv = NULL;
}

/* The endpoint page: RW here, sealed so that peers can only map it read-only. */
static int page_create(struct sm_ep *sep)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = (sizeof(struct sm_ep_page) + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
	void *p;

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
	if (fcntl(sep->page_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
	          F_SEAL_SEAL) != 0)
		goto err_errno;
	return CCI_SUCCESS;

err_errno:
	SM_ERR("sm: cannot create the endpoint page (memfd): %s", strerror(errno));
	return cci__errno_status(errno);
}

static int bell_create(struct sm_ep *sep)
{
	cci__ep_t *ep = sep->ep;
	struct epoll_event ev = { .events = EPOLLIN };

	sep->bell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sep->bell_fd < 0)
		goto err_errno;
	if (ep->os_epfd >= 0 && epoll_ctl(ep->os_epfd, EPOLL_CTL_ADD, sep->bell_fd, &ev) != 0)
		goto err_errno;
	return CCI_SUCCESS;

err_errno:
	SM_ERR("sm: cannot create the endpoint doorbell: %s", strerror(errno));
	return cci__errno_status(errno);
}

static void ep_init_fields(struct sm_ep *sep, cci__ep_t *ep)
{
	const struct sm_dev *d = ep->dev->priv;

	memset(sep, 0, sizeof(*sep));
	sep->ep = ep;
	sep->dev = d;
	sep->mss = d->mss;
	sep->rma_copy = d->rma_copy;
	sep->listen_fd = -1;
	sep->bell_fd = sep->page_fd = -1;
	pthread_mutex_init(&sep->lock, NULL);
	pthread_mutex_init(&sep->reg_lock, NULL);
	pthread_mutex_init(&sep->pool_lock, NULL);
	ep->recv_buf_count = SM_BUF_COUNT_DEFAULT;
	ep->send_buf_count = SM_BUF_COUNT_DEFAULT;
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
	sm_pool_fini(sep);
	free(sep->rx_set);
	pthread_mutex_destroy(&sep->lock);
	pthread_mutex_destroy(&sep->reg_lock);
	pthread_mutex_destroy(&sep->pool_lock);
}

static int sm_ep_create(cci__ep_t *ep, const char *service)
{
	struct sm_ep *sep = sm_ep_of(ep);
	size_t ulen;
	int rc;

	ep_init_fields(sep, ep);
	rc = sm_path_listen(sep, service);
	if (rc == CCI_SUCCESS)
		rc = page_create(sep);
	if (rc == CCI_SUCCESS)
		rc = bell_create(sep);
	if (rc == CCI_SUCCESS)
		rc = sm_pool_init(sep, ep->send_buf_count);
	if (rc != CCI_SUCCESS)
		goto err_release;
	ulen = strlen(sep->sock_path) + 6;
	ep->uri = malloc(ulen);
	if (!ep->uri) {
		rc = CCI_ENOMEM;
		goto err_release;
	}
	snprintf(ep->uri, ulen, "sm://%s", sep->sock_path);
	rc = sm_ctl_start(sep);
	if (rc != CCI_SUCCESS)
		goto err_free_uri;
	SM_LOG(CCI_LOG_EP, "sm: endpoint %s (mss %u, rma %s)", ep->uri, sep->mss,
	       sep->rma_copy ? "copy" : "cma");
	return CCI_SUCCESS;

err_free_uri:
	free(ep->uri);
	ep->uri = NULL;
err_release:
	ep_release(sep);
	return rc;
}

static void sm_ep_destroy(cci__ep_t *ep)
{
	struct sm_ep *sep = sm_ep_of(ep);

	sm_ctl_stop(sep);
	/* No other thread runs on this endpoint any more (API contract). */
	while (sep->conns) {
		struct sm_conn *sc = sep->conns;
		sep->conns = sc->next;
		sm_conn_destroy(sc);
	}
	while (sep->zombies) {
		struct sm_conn *sc = sep->zombies;
		sep->zombies = sc->next;
		sm_conn_destroy(sc);
	}
	while (sep->reqs) {
		struct sm_req *req = sep->reqs;
		sep->reqs = req->next;
		sm_req_free(req);
	}
	ep_release(sep);
}

static int sm_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value)
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
 * then look again so that a record published before the flag was visible
 * is not slept through.
 */
static int sm_arm(cci__ep_t *ep)
{
	struct sm_ep *sep = sm_ep_of(ep);
	uint64_t v;

	if (read(sep->bell_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		SM_LOG(CCI_LOG_EP, "sm: doorbell read: %s", strerror(errno));
	atomic_store_explicit(&sep->page->armed, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return sm_rx_pending(sep) ? CCI_EAGAIN : CCI_SUCCESS;
}

static void sm_conn_timeouts_changed(cci__conn_t *conn)
{
	struct sm_conn *sc = sm_conn_of(conn);
	struct sm_ep *sep = sc->sep;

	pthread_mutex_lock(&sep->lock);
	cci__ct_arm(&sc->timers, conn->keepalive_us, cci__now_ns());
	pthread_mutex_unlock(&sep->lock);
}

static const char *const sm_transports[] = { "sm", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_sm_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "sm",
	.transports = sm_transports,
	.priority = 50,
	.ep_priv_size = sizeof(struct sm_ep),
	.conn_priv_size = sizeof(struct sm_conn *),
	.init = sm_init,
	.discover = sm_discover,
	.dev_configure = sm_dev_configure,
	.dev_free = sm_dev_free,
	.ep_create = sm_ep_create,
	.ep_destroy = sm_ep_destroy,
	.progress = sm_progress,
	.arm = sm_arm,
	.ep_set_buf_count = sm_ep_set_buf_count,
	.conn_timeouts_changed = sm_conn_timeouts_changed,
	.connect = sm_connect,
	.accept = sm_accept,
	.reject = sm_reject,
	.request_done = sm_request_done,
	.disconnect = sm_disconnect,
	.send = sm_send,
	.rma_register = sm_rma_register,
	.rma_deregister = sm_rma_deregister,
	.rma = sm_rma,
	.recv_returned = sm_recv_returned,
	.conf_keys = sm_conf_keys,
};
