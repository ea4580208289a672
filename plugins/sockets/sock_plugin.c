/*
 * sock_plugin.c - the sockets plugin: its ops table, devices, and tcp
 * endpoint creation and destruction.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "spin.h"
#include "tcp.h"

const struct cci_core *tcp_core;

extern const struct cci_plugin cci_ctp_sockets_plugin;

static const char *const progress_modes[] = { "auto", "manual", NULL };

/* The ini keys of a tcp section, as plugins/sockets/README.md lists them. */
static const struct cci_conf_key tcp_conf_keys[] = {
	[SOCK_KEY_IP] = {
		.name = "ip", .type = CCI_CONF_CUSTOM, .check = sock_conf_ip,
		.offset = offsetof(struct sock_dev, addr), .size = sizeof(struct sockaddr_storage),
		.help = "numeric IPv4 or IPv6 address to bind and advertise (default: all IPv4 "
		        "addresses; the URI shows the first non-loopback one, else 127.0.0.1)" },
	[SOCK_KEY_INTERFACE] = {
		.name = "interface", .type = CCI_CONF_STRING,
		.offset = offsetof(struct sock_dev, ifname), .size = IF_NAMESIZE,
		.help = "bind the first address of this interface (IPv4 first; with ip, the "
		        "family of ip); an interface without an address makes the device down" },
	[SOCK_KEY_PORT] = {
		.name = "port", .type = CCI_CONF_UINT, .min = 0, .max = 65535, .def = "0",
		.offset = offsetof(struct sock_dev, port), .size = sizeof(uint16_t),
		.help = "port of endpoints created without a service; 0 picks a free one" },
	[SOCK_KEY_MSS] = {
		.name = "mss", .type = CCI_CONF_UINT, .min = TCP_AM_MSS_MIN, .max = TCP_AM_MSS_MAX,
		.def = CCI_CONF_NUM(TCP_AM_MSS_DEFAULT),
		.offset = offsetof(struct sock_dev, mss), .size = sizeof(uint32_t),
		.help = "largest message, in bytes" },
	[SOCK_KEY_BUFSIZE] = {
		.name = "bufsize", .type = CCI_CONF_UINT, .min = 0, .max = TCP_BUFSIZE_MAX,
		.def = "0", .offset = offsetof(struct sock_dev, bufsize), .size = sizeof(uint32_t),
		.help = "SO_SNDBUF and SO_RCVBUF of every socket, in bytes; 0 leaves the "
		        "kernel's autotuning" },
	[SOCK_KEY_PROGRESS] = {
		.name = "progress", .type = CCI_CONF_CHOICE, .choices = progress_modes,
		.def = "auto", .offset = offsetof(struct sock_dev, manual_progress),
		.size = sizeof(int),
		.help = "auto: a progress thread per endpoint; manual: none, only the "
		        "application's calls move the endpoint" },
	[SOCK_KEY_COUNT] = { .name = NULL },
};

static int sock_init(const struct cci_core *core)
{
	if (!core || core->size < sizeof(struct cci_core))
		return CCI_EINVAL;
	tcp_core = core;
	return CCI_SUCCESS;
}

static void dev_publish(cci__dev_t *dev, struct sock_dev *d, uint64_t rate)
{
	dev->priv = d;
	dev->pub.up = (unsigned)d->up;
	dev->pub.max_send_size = d->mss;
	dev->pub.rate = rate;
	dev->pub.info = d->info;
}

static int discover_add(void *arg, const char *name, const struct sock_dev *d, uint64_t rate)
{
	struct sock_dev *copy = malloc(sizeof(*copy));
	cci__dev_t *dev;

	(void)arg;
	if (!copy)
		return CCI_ENOMEM;
	*copy = *d;
	dev = tcp_core->dev_add(&cci_ctp_sockets_plugin, name);
	if (!dev) {
		free(copy);
		return CCI_ENOMEM;
	}
	dev_publish(dev, copy, rate);
	return CCI_SUCCESS;
}

static int sock_discover_devs(void)
{
	return sock_discover("tcp", TCP_AM_MSS_DEFAULT, discover_add, NULL);
}

static int sock_dev_configure_one(cci__dev_t *dev)
{
	struct sock_dev *d = malloc(sizeof(*d));
	int rc;

	if (!d)
		return CCI_ENOMEM;
	rc = sock_dev_configure(tcp_core, dev, tcp_conf_keys, d);
	if (rc != CCI_SUCCESS) {
		free(d);
		return rc;
	}
	dev_publish(dev, d, 0);
	return CCI_SUCCESS;
}

static void sock_dev_free(cci__dev_t *dev)
{
	free(dev->priv);
	dev->priv = NULL;
}

/* ---- endpoints ---------------------------------------------------------- */

static int listen_open(struct tcp_ep *sep, uint16_t port)
{
	struct sockaddr_storage ss = sep->dev->addr;
	socklen_t sl = sep->dev->addrlen;
	int one = 1, fd;

	((struct sockaddr_in *)&ss)->sin_port = htons(port); /* same place in sin6 */
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return cci__errno_status(errno);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sep->dev->bufsize) {
		int sz = (int)sep->dev->bufsize;
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, SOMAXCONN) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
		int rc = cci__errno_status(errno);
		TCP_LOG(CCI_LOG_EP, "tcp: cannot listen on %s port %u: %s", sep->dev->host, port,
		        strerror(errno));
		close(fd);
		return rc;
	}
	sep->listen_fd = fd;
	sep->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return CCI_SUCCESS;
}

static void ep_fields_init(struct tcp_ep *sep, cci__ep_t *ep)
{
	memset(sep, 0, sizeof(*sep));
	sep->ep = ep;
	sep->dev = ep->dev->priv;
	sep->mss = sep->dev->mss;
	sep->manual = sep->dev->manual_progress;
	sep->listen_fd = sep->rx_epfd = sep->manual_tfd = -1;
	pthread_mutex_init(&sep->lock, NULL);
	atomic_store(&sep->now_ns, cci__now_ns());
	ep->recv_buf_count = TCP_RECV_COUNT_DEFAULT;
	atomic_store(&sep->rb_limit, TCP_RECV_COUNT_DEFAULT);
	ep->send_buf_count = TCP_SEND_COUNT_DEFAULT;
	atomic_store(&sep->pool_limit, TCP_SEND_COUNT_DEFAULT);
	memset(&ep->rma_align, 0, sizeof(ep->rma_align));
}

/* Free what ep_create built; no thread runs on the endpoint. */
static void ep_release(struct tcp_ep *sep)
{
	cci__engine_fini(&sep->eng);
	if (sep->listen_fd >= 0)
		close(sep->listen_fd);
	if (sep->rx_epfd >= 0)
		close(sep->rx_epfd);
	if (sep->manual_tfd >= 0)
		close(sep->manual_tfd);
	tcp_ops_free(sep);
	tcp_rb_fini(sep);
	free(sep->open);
	pthread_mutex_destroy(&sep->lock);
}

/* The readable-connection set joins the OS handle: it turns readable as
 * soon as a socket has bytes for cci_get_event. */
static int rx_set_open(struct tcp_ep *sep)
{
	struct epoll_event ev = { .events = EPOLLIN };

	sep->rx_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (sep->rx_epfd < 0)
		return cci__errno_status(errno);
	if (sep->ep->os_epfd >= 0 &&
	    epoll_ctl(sep->ep->os_epfd, EPOLL_CTL_ADD, sep->rx_epfd, &ev) != 0)
		return cci__errno_status(errno);
	return CCI_SUCCESS;
}

static int sock_ep_create(cci__ep_t *ep, const char *service)
{
	struct tcp_ep *sep = tcp_ep_of(ep);
	uint16_t port;
	int rc;

	ep_fields_init(sep, ep);
	port = sep->dev->port;
	if (service && sock_parse_port(service, &port) != CCI_SUCCESS) {
		rc = CCI_EINVAL;
	} else {
		rc = cci__random64(&sep->id);
	}
	if (rc == CCI_SUCCESS)
		rc = tcp_ops_prealloc(sep, TCP_OPS_PREALLOC);
	if (rc == CCI_SUCCESS)
		rc = listen_open(sep, port);
	if (rc == CCI_SUCCESS)
		rc = rx_set_open(sep);
	if (rc == CCI_SUCCESS && !(ep->uri = sock_uri_make("tcp", sep->dev, sep->port)))
		rc = CCI_ENOMEM;
	if (rc == CCI_SUCCESS)
		rc = tcp_loop_start(sep);
	if (rc == CCI_SUCCESS && sep->manual && ep->os_epfd >= 0)
		rc = tcp_loop_manual_handle(sep);
	if (rc != CCI_SUCCESS) {
		free(ep->uri);
		ep->uri = NULL;
		ep_release(sep);
		return rc;
	}
	TCP_LOG(CCI_LOG_EP, "tcp: endpoint %s (mss %u)", ep->uri, sep->mss);
	return CCI_SUCCESS;
}

static void sock_ep_destroy(cci__ep_t *ep)
{
	struct tcp_ep *sep = tcp_ep_of(ep);

	tcp_loop_stop(sep);
	TCP_LOG(CCI_LOG_EP, "tcp: endpoint %s closing: %u receive buffers, %u ops in use",
	        ep->uri, sep->rb_count, atomic_load(&sep->pool_out));
	/* No other thread runs on this endpoint any more (API contract). */
	while (sep->conns) {
		struct tcp_conn *tc = sep->conns;
		cci__conn_t *conn = tc->conn;
		tcp_conn_destroy(tc);
		/* Drop the plugin's reference; lent events keep theirs. */
		tcp_core->conn_release(conn);
	}
	while (sep->reqs) {
		struct tcp_req *req = sep->reqs;
		sep->reqs = req->next;
		tcp_req_free(req);
	}
	while (sep->posted) {
		struct tcp_req *req = sep->posted;
		sep->posted = req->next;
		tcp_req_free(req);
	}
	ep_release(sep);
}

static int sock_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value)
{
	struct tcp_ep *sep = tcp_ep_of(ep);

	if (value == 0 || value > TCP_BUF_COUNT_MAX)
		return CCI_ERANGE;
	if (name == CCI_OPT_ENDPT_RECV_BUF_COUNT) {
		atomic_store(&sep->rb_limit, value);
		if (atomic_load(&sep->rx_starved))
			tcp_loop_cmd(sep, TCP_CMD_RX);
	} else {
		cci__spin_lock(&sep->pool_lock);
		atomic_store(&sep->pool_limit, value);
		cci__spin_unlock(&sep->pool_lock);
	}
	return CCI_SUCCESS;
}

/* About to sleep on the OS handle: socket bytes wake it by themselves
 * (the readable set is in it); queued bytes need the thread, or with
 * progress=manual the handle's timerfd (tcp_loop_manual_arm).  Acks read
 * but not applied yet (tcp_rx_conn leaves them to the next pass) and a
 * receive buffer returned while starved are work for cci_get_event now. */
static int sock_arm(cci__ep_t *ep)
{
	struct tcp_ep *sep = tcp_ep_of(ep);
	int pending;

	if (sep->manual)
		tcp_loop_manual_arm(sep);
	else if (atomic_load(&sep->tx_busy) && !atomic_load(&sep->thread_mode))
		tcp_loop_cmd(sep, TCP_CMD_WAKE);
	pthread_mutex_lock(&sep->lock);
	pending = sep->acks_pending ||
	          (atomic_load(&sep->rx_starved) && tcp_rb_available(sep));
	pthread_mutex_unlock(&sep->lock);
	return pending ? CCI_EAGAIN : CCI_SUCCESS;
}

static const char *const sock_transports[] = { "tcp", NULL };

__attribute__((visibility("default"))) const struct cci_plugin cci_ctp_sockets_plugin = {
	.size = sizeof(struct cci_plugin),
	.abi_version = CCI_PLUGIN_ABI_VERSION,
	.name = "sockets",
	.transports = sock_transports,
	.priority = 30,
	.ep_priv_size = sizeof(struct tcp_ep),
	.conn_priv_size = sizeof(struct tcp_conn),
	.init = sock_init,
	.discover = sock_discover_devs,
	.dev_configure = sock_dev_configure_one,
	.dev_free = sock_dev_free,
	.ep_create = sock_ep_create,
	.ep_destroy = sock_ep_destroy,
	.progress = tcp_progress,
	.arm = sock_arm,
	.ep_set_buf_count = sock_ep_set_buf_count,
	.conn_timeouts_changed = tcp_conn_timeouts_changed,
	.connect = tcp_connect,
	.accept = tcp_accept,
	.reject = tcp_reject,
	.request_done = tcp_request_done,
	.disconnect = tcp_disconnect,
	.send = tcp_send,
	.rma = tcp_rma,
	.recv_returned = tcp_recv_returned,
	.conf_keys = tcp_conf_keys,
};
