/*
 * tcp_ep.c - a tcp endpoint: its listening socket, the set of readable
 * connections, its progress engine (tcp_loop.c) and buffer counts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "spin.h"
#include "tcp.h"
#include "uri.h"

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
	tcp_sock_opts(fd, sep->dev->bufsize);
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
	sep->listen_fd = sep->rx_epfd = -1;
	pthread_mutex_init(&sep->lock, NULL);
	ep->recv_buf_count = TCP_RECV_COUNT_DEFAULT;
	cci__lender_init(&sep->lend, TCP_RECV_COUNT_DEFAULT);
	ep->send_buf_count = TCP_SEND_COUNT_DEFAULT;
	tcp_pool_init(sep);
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
	tcp_pool_fini(sep);
	free(sep->stage);
	free(sep->stage_spare);
	free(sep->open);
	cci__due_heap_fini(&sep->due);
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

int tcp_ep_create(cci__ep_t *ep, const char *service)
{
	struct tcp_ep *sep = tcp_ep_of(ep);
	uint16_t port;
	int rc;

	ep_fields_init(sep, ep);
	port = sep->dev->port;
	rc = service ? uri_parse_port(service, &port) : CCI_SUCCESS; /* CCI_EINVAL if bad */
	if (rc == CCI_SUCCESS)
		rc = cci__random64(&sep->id);
	if (rc == CCI_SUCCESS && !(sep->stage = malloc(TCP_STAGE_LEN)))
		rc = CCI_ENOMEM;
	if (rc == CCI_SUCCESS)
		rc = tcp_ops_prealloc(sep, TCP_OPS_PREALLOC);
	if (rc == CCI_SUCCESS)
		rc = listen_open(sep, port);
	if (rc == CCI_SUCCESS)
		rc = rx_set_open(sep);
	if (rc == CCI_SUCCESS && !(ep->uri = net_uri_make("tcp", sep->dev, sep->port)))
		rc = CCI_ENOMEM;
	if (rc == CCI_SUCCESS)
		rc = tcp_loop_start(sep);
	if (rc != CCI_SUCCESS) {
		free(ep->uri);
		ep->uri = NULL;
		ep_release(sep);
		return rc;
	}
	TCP_LOG(CCI_LOG_EP, "tcp: endpoint %s (mss %u)", ep->uri, sep->mss);
	return CCI_SUCCESS;
}

void tcp_ep_stop(cci__ep_t *ep)
{
	cci__engine_stop(&tcp_ep_of(ep)->eng);
}

void tcp_ep_free(cci__ep_t *ep)
{
	struct tcp_ep *sep = tcp_ep_of(ep);

	TCP_LOG(CCI_LOG_EP, "tcp: endpoint %s closing: %u receive buffers, %u ops in use",
	        ep->uri, sep->rb_count, cci__op_pool_out(&sep->ops));
	/* No other thread runs on this endpoint any more (API contract). */
	while (sep->conns)
		tcp_conn_destroy(sep->conns);
	for (struct tcp_req *req;
	     CCI__SLIST_POP(&sep->reqs, req, next) || CCI__SLIST_POP(&sep->posted, req, next);)
		tcp_req_free(req);
	ep_release(sep);
}

int tcp_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value)
{
	struct tcp_ep *sep = tcp_ep_of(ep);

	if (value == 0 || value > TCP_BUF_COUNT_MAX)
		return CCI_ERANGE;
	if (name == CCI_OPT_ENDPT_RECV_BUF_COUNT) {
		cci__lender_set_limit(&sep->lend, value);
		if (atomic_load(&sep->rx_starved))
			tcp_loop_cmd(sep, TCP_CMD_RX);
	} else {
		cci__op_pool_set_limit(&sep->ops, value);
	}
	return CCI_SUCCESS;
}
