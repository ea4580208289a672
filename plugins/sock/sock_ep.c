/*
 * sock_ep.c - a UDP endpoint: its socket, its progress (the shared
 * engine's thread, or progress() alone with progress = manual), buffer
 * counts and the OS handle.
 *
 * Modes (with the thread).  While the application polls, progress() reads
 * the socket with recvmmsg and runs the reliability timers itself, to the
 * microsecond; the thread only ticks (connect deadlines, send timeouts,
 * keepalive, HELLOs again).  When a whole tick passes without a poll, the
 * thread watches the socket too, so acks, retransmissions and requests
 * keep moving while the application computes.
 *
 * progress = manual: the engine has no thread and progress() runs its
 * loop (cci__engine_poll: the tick); an OS handle holds the socket and
 * the engine's timer (cci__engine_handle_join), which sock_arm sets for
 * the next reliability timer, the next connection due in sep->due, or the
 * next tick while a connect waits for its answer.
 *
 * Timers.  The tick visits only what is due: the connections in sep->due
 * (connect deadlines, keepalive, send timeouts, ICMP suspicion), those on
 * sep->timed (reliability timers), the connects whose HELLO is to go
 * again, and the expired memories of answered requests and closed
 * connections.  Idle connections cost it nothing.
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "sock.h"
#include "uri.h"

#define SOCK_CMD_WAKE 2u /* the application is about to sleep: watch the socket */

/* ---- the engine's callbacks -------------------------------------------- */

/* The tick's work, and the timers; sep->lock held. */
static void tick_run(struct sock_ep *sep, uint64_t now)
{
	assert(cci__mutex_held(&sep->lock));
	if (sep->touched) /* kept acks first: what they complete does not time out */
		sock_tx_finish(sep, now);
	sock_rx_back(sep);
	sock_conn_tick(sep, now);
	sock_hs_tick(sep, now);
	sock_conn_timers(sep, now);
	sock_tx_finish(sep, now);
}

/* The engine's switch of who polls (engine.h): the thread reads the
 * socket while the application does not poll. */
static void on_mode(void *owner, int thread)
{
	struct sock_ep *sep = owner;

	if (thread)
		ev_io_start(sep->eng.loop, &sep->rx_w);
	else
		ev_io_stop(sep->eng.loop, &sep->rx_w);
}

static void rx_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct sock_ep *sep = w->data;
	uint64_t now = 0;

	(void)loop;
	(void)revents;
	/* The application holds the lock: it polls again, and reads the
	 * socket itself.  Leave it the socket until the next idle tick,
	 * rather than fight for the lock at every datagram. */
	if (pthread_mutex_trylock(&sep->lock) != 0) {
		cci__engine_mode_set(&sep->eng, 0);
		return;
	}
	sock_rx_back(sep);
	sep->rx_bulk = 1; /* woken because bytes wait: take them all */
	if (sock_rx_poll(sep, &now) == 0)
		sock_rx_errqueue(sep); /* woken by an error queue alone */
	if (!now)
		now = cci__now_ns();
	if (sep->timer_ns <= now)
		sock_conn_timers(sep, now);
	sock_tx_finish(sep, now);
	pthread_mutex_unlock(&sep->lock);
}

static void on_cmd(void *owner, unsigned cmd)
{
	struct sock_ep *sep = owner;

	if (cmd & SOCK_CMD_WAKE)
		cci__engine_mode_set(&sep->eng, 1);
	pthread_mutex_lock(&sep->lock);
	sock_rx_back(sep);
	sock_tx_finish(sep, cci__now_ns());
	pthread_mutex_unlock(&sep->lock);
}

static void on_tick(void *owner, uint64_t now, int app_polled)
{
	struct sock_ep *sep = owner;

	(void)app_polled; /* the engine decided who polls (on_mode) */
	/* A polling application holds the lock nearly all the time, and a
	 * mutex is not fair: waiting for it could take long.  Leave the tick
	 * to its next progress() instead. */
	if (pthread_mutex_trylock(&sep->lock) != 0) {
		cci__engine_tick_defer(&sep->eng);
		return;
	}
	tick_run(sep, now);
	pthread_mutex_unlock(&sep->lock);
}

/* ---- progress ------------------------------------------------------------ */

/* The clock is read when datagrams came, and otherwise every
 * SOCK_CLOCK_EVERY empty polls (timers then run up to that many polls
 * late, a microsecond or so): an empty poll costs one recvmmsg only. */
#define SOCK_CLOCK_EVERY 8u

int sock_progress(cci__ep_t *ep)
{
	struct sock_ep *sep = sock_ep_of(ep);
	uint64_t now = 0;
	int starved, due;

	cci__engine_poll(&sep->eng); /* progress = manual: the tick */
	cci__engine_app_active(&sep->eng);
	pthread_mutex_lock(&sep->lock);
	if (cci__lender_returned(&sep->lend))
		sock_rx_back(sep);
	if (sep->touched || sep->ntx) /* what the last poll's datagram left */
		sock_tx_finish(sep, cci__now_ns());
	due = cci__engine_tick_due(&sep->eng);
	if (sock_rx_poll(sep, &now) == 0 && !due && ++sep->idle_polls % SOCK_CLOCK_EVERY != 0)
		goto out;
	if (!now)
		now = cci__now_ns();
	if (due) {
		cci__engine_tick_done(&sep->eng);
		tick_run(sep, now);
	} else if (sep->timer_ns <= now || cci__due_first(&sep->due) <= now) {
		/* Due before the tick: a woken application (manual_wait_ns)
		 * must not sleep again on work only the tick would do. */
		sock_conn_due_run(sep, now);
		if (sep->timer_ns <= now)
			sock_conn_timers(sep, now);
		sock_tx_finish(sep, now);
	}
out:
	starved = !cci__lender_can_take(&sep->lend);
	pthread_mutex_unlock(&sep->lock);
	return starved ? CCI_ENOBUFS : CCI_SUCCESS;
}

/* progress = manual: nanoseconds until the loop's work is due, 0 when
 * nothing waits: the earliest reliability timer (sep->timer_ns, exact once
 * the touched connections are noted), the first connection due in
 * sep->due (which progress() runs itself), or the next tick while a
 * client waits for an answer (its HELLO goes again from the tick).  No
 * connection is looked at.  sep->lock held. */
static uint64_t manual_wait_ns(struct sock_ep *sep, uint64_t now)
{
	uint64_t due = cci__due_first(&sep->due);

	assert(cci__mutex_held(&sep->lock));
	assert(!sep->touched);
	if (sep->timer_ns < due)
		due = sep->timer_ns;
	if (!TAILQ_EMPTY(&sep->connecting) && now + SOCK_TICK_NS < due)
		due = now + SOCK_TICK_NS;
	if (due == CCI__DUE_NEVER)
		return 0;
	return due > now ? due - now : 1;
}

/* About to sleep on the OS handle.  The socket is in it, so datagrams
 * wake the application; timers need the thread (woken into thread mode
 * now) or, with progress = manual, the engine's timer in the handle, set
 * for when the next one is due. */
int sock_arm(cci__ep_t *ep)
{
	struct sock_ep *sep = sock_ep_of(ep);
	int pending;

	pthread_mutex_lock(&sep->lock);
	if (sep->touched || sep->ntx) /* what the last poll's datagram left */
		sock_tx_finish(sep, cci__now_ns());
	if (sep->manual)
		cci__engine_handle_arm(&sep->eng, manual_wait_ns(sep, cci__now_ns()));
	pending = cci__lender_returned(&sep->lend) ||
	          (sep->pend && cci__lender_can_take(&sep->lend));
	pthread_mutex_unlock(&sep->lock);
	if (!sep->manual && !cci__engine_thread_polls(&sep->eng))
		cci__engine_cmd(&sep->eng, SOCK_CMD_WAKE);
	return pending ? CCI_EAGAIN : CCI_SUCCESS;
}

int sock_ep_set_buf_count(cci__ep_t *ep, cci_opt_name_t name, uint32_t value)
{
	struct sock_ep *sep = sock_ep_of(ep);

	if (value == 0 || value > SOCK_BUF_COUNT_MAX)
		return CCI_ERANGE;
	if (name == CCI_OPT_ENDPT_RECV_BUF_COUNT)
		cci__lender_set_limit(&sep->lend, value);
	else
		cci__op_pool_set_limit(&sep->ops, value);
	return CCI_SUCCESS;
}

/* ---- the socket ---------------------------------------------------------- */

static int is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	return ss->ss_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* The largest datagram: the interface's MTU less the IP and UDP headers
 * (1500 when it cannot be known), within what UDP carries. */
static uint32_t dgram_size(const struct net_dev *dev, int family, const char *host)
{
	uint32_t mtu = 1500, hdr = family == AF_INET6 ? 48 : 28, dg;
	struct ifreq ifr;
	int fd;

	if (dev->ifname[0] && (fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) >= 0) {
		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev->ifname);
		if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0)
			mtu = (uint32_t)ifr.ifr_mtu;
		close(fd);
	} else if (is_loopback(&dev->addr) || strncmp(host, "127.", 4) == 0 ||
	           strcmp(host, "[::1]") == 0) {
		mtu = 65536;
	}
	dg = mtu > hdr ? mtu - hdr : 0;
	if (dg > SOCK_DG_PAYLOAD_MAX)
		dg = SOCK_DG_PAYLOAD_MAX;
	return dg < SOCK_DG_DGRAM_MIN ? SOCK_DG_DGRAM_MIN : dg;
}

static void sock_opts(struct sock_ep *sep)
{
	int one = 1, sz = (int)(sep->dev->bufsize ? sep->dev->bufsize : SOCK_BUFSIZE_DEFAULT);

	setsockopt(sep->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(sep->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (sep->family == AF_INET)
		setsockopt(sep->fd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one));
	else
		setsockopt(sep->fd, IPPROTO_IPV6, IPV6_RECVERR, &one, sizeof(one));
}

static int socket_open(struct sock_ep *sep, uint16_t port)
{
	struct sockaddr_storage ss = sep->dev->addr;
	socklen_t sl = sep->dev->addrlen;

	((struct sockaddr_in *)&ss)->sin_port = htons(port); /* same place in sin6 */
	sep->family = ss.ss_family;
	sep->fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sep->fd < 0)
		return cci__errno_status(errno);
	sock_opts(sep);
	if (bind(sep->fd, (struct sockaddr *)&ss, sl) != 0 ||
	    getsockname(sep->fd, (struct sockaddr *)&ss, &sl) != 0) {
		int rc = errno == EADDRINUSE ? CCI_EBUSY : cci__errno_status(errno);
		SOCK_LOG(CCI_LOG_EP, "sock: cannot bind %s port %u: %s", sep->dev->host, port,
		         strerror(errno));
		return rc;
	}
	sep->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return CCI_SUCCESS;
}

static int batches_init(struct sock_ep *sep)
{
	sep->rx_mem = malloc((size_t)SOCK_RX_BATCH * sep->dgram);
	if (!sep->rx_mem)
		return CCI_ENOMEM;
	for (uint32_t i = 0; i < SOCK_RX_BATCH; i++) {
		sep->rx_iov[i].iov_base = sep->rx_mem + (size_t)i * sep->dgram;
		sep->rx_iov[i].iov_len = sep->dgram;
	}
	sock_rx_batch_init(sep);
	return CCI_SUCCESS;
}

/* The window granted to each peer: what the socket's receive buffer
 * holds of full datagrams (the kernel counts about twice the payload of
 * each), so that one sender at full speed does not overflow it. */
static void window_size(struct sock_ep *sep)
{
	int rcvbuf = 0;
	socklen_t len = sizeof(rcvbuf);
	uint32_t w = SOCK_WINDOW_MAX;

	if (getsockopt(sep->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) == 0 && rcvbuf > 0)
		w = (uint32_t)rcvbuf / (sep->dgram + 512u);
	sep->window = w < SOCK_WINDOW_MIN ? SOCK_WINDOW_MIN : w > SOCK_WINDOW_MAX ? SOCK_WINDOW_MAX : w;
}

/* The socket in the OS handle; with progress = manual the engine's loop
 * and timer too (after engine_start). */
static int handle_join(struct sock_ep *sep)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int rc;

	if (sep->ep->os_epfd < 0)
		return CCI_SUCCESS;
	if (epoll_ctl(sep->ep->os_epfd, EPOLL_CTL_ADD, sep->fd, &ev) != 0)
		return cci__errno_status(errno);
	rc = cci__engine_handle_join(&sep->eng, sep->ep->os_epfd);
	if (rc != CCI_SUCCESS)
		SOCK_ERR("sock: %s: cannot build the OS handle: %s", sep->ep->uri,
		         sock_core->status_text(rc));
	return rc;
}

/* The engine: with a thread, which reads the socket while the application
 * does not poll; with progress = manual, run by progress() alone. */
static int engine_start(struct sock_ep *sep)
{
	if (cci__engine_init(&sep->eng, sep, SOCK_TICK_S, !sep->manual, on_cmd, on_tick) !=
	    CCI_SUCCESS) {
		SOCK_ERR("sock: cannot create the event loop (libev)");
		return CCI_ENOMEM;
	}
	sep->eng_on = 1;
	if (!sep->manual) {
		ev_io_init(&sep->rx_w, rx_cb, sep->fd, EV_READ);
		sep->rx_w.data = sep;
		/* Until the application polls, the thread reads. */
		cci__engine_mode_init(&sep->eng, on_mode, 1);
		ev_io_start(sep->eng.loop, &sep->rx_w);
	}
	if (cci__engine_start(&sep->eng) != CCI_SUCCESS) {
		SOCK_ERR("sock: cannot start the progress thread of %s", sep->ep->uri);
		return CCI_ENOMEM;
	}
	return CCI_SUCCESS;
}

static void ep_fields_init(struct sock_ep *sep, cci__ep_t *ep)
{
	memset(sep, 0, sizeof(*sep));
	sep->ep = ep;
	sep->dev = ep->dev->priv;
	sep->mss = sep->dev->mss;
	sep->manual = sep->dev->manual_progress;
	sep->fd = -1;
	sep->timer_ns = SOCK_REL_NEVER;
	LIST_INIT(&sep->timed);
	LIST_INIT(&sep->conns);
	TAILQ_INIT(&sep->connecting);
	sep->hs_budget = SOCK_HS_BURST;
	LIST_INIT(&sep->reqs);
	TAILQ_INIT(&sep->decided);
	TAILQ_INIT(&sep->gone);
	pthread_mutex_init(&sep->lock, NULL);
	ep->recv_buf_count = SOCK_RECV_COUNT_DEFAULT;
	cci__lender_init(&sep->lend, SOCK_RECV_COUNT_DEFAULT);
	ep->send_buf_count = SOCK_SEND_COUNT_DEFAULT;
	sock_op_pool_init(sep);
	memset(&ep->rma_align, 0, sizeof(ep->rma_align));
}

static void ep_release(struct sock_ep *sep)
{
	if (sep->eng_on) {
		cci__engine_stop(&sep->eng);
		cci__engine_fini(&sep->eng);
		sep->eng_on = 0;
	}
	if (sep->fd >= 0)
		close(sep->fd);
	sock_tx_ops_free(sep);
	sock_rb_free_all(sep);
	free(sep->rx_mem);
	free(sep->slots);
	free(sep->slot_free);
	cci__due_heap_fini(&sep->due);
	pthread_mutex_destroy(&sep->lock);
}

int sock_ep_create(cci__ep_t *ep, const char *service)
{
	struct sock_ep *sep = sock_ep_of(ep);
	uint16_t port;
	int rc = CCI_SUCCESS;

	ep_fields_init(sep, ep);
	port = sep->dev->port;
	if (service && uri_parse_port(service, &port) != CCI_SUCCESS)
		rc = CCI_EINVAL;
	if (rc == CCI_SUCCESS)
		rc = cci__random64(&sep->rng);
	sep->rng |= 1; /* xorshift never leaves 0 */
	if (rc == CCI_SUCCESS)
		rc = socket_open(sep, port);
	if (rc == CCI_SUCCESS) {
		sep->dgram = dgram_size(sep->dev, sep->family, sep->dev->host);
		window_size(sep);
	}
	if (rc == CCI_SUCCESS)
		rc = batches_init(sep);
	if (rc == CCI_SUCCESS && !(ep->uri = net_uri_make("sock", sep->dev, sep->port)))
		rc = CCI_ENOMEM;
	if (rc == CCI_SUCCESS)
		rc = engine_start(sep);
	if (rc == CCI_SUCCESS)
		rc = handle_join(sep);
	if (rc != CCI_SUCCESS) {
		free(ep->uri);
		ep->uri = NULL;
		ep_release(sep);
		return rc;
	}
	SOCK_LOG(CCI_LOG_EP, "sock: endpoint %s (mss %u, datagrams of %u bytes, window %u)",
	         ep->uri, sep->mss, sep->dgram, sep->window);
	return CCI_SUCCESS;
}

void sock_ep_stop(cci__ep_t *ep)
{
	struct sock_ep *sep = sock_ep_of(ep);

	if (sep->eng_on)
		cci__engine_stop(&sep->eng);
}

void sock_ep_free(cci__ep_t *ep)
{
	struct sock_ep *sep = sock_ep_of(ep);

	SOCK_LOG(CCI_LOG_EP, "sock: endpoint %s closing: %llu datagrams in, %llu out, %llu "
	         "refused, %llu foreign, %llu HELLOs dropped (too many requests), %llu for "
	         "connections closed, %llu ICMP errors ignored", ep->uri,
	         (unsigned long long)sep->stats.rx_dgrams, (unsigned long long)sep->stats.tx_dgrams,
	         (unsigned long long)sep->stats.bad, (unsigned long long)sep->stats.foreign,
	         (unsigned long long)sep->stats.hello_dropped,
	         (unsigned long long)sep->stats.hello_gone,
	         (unsigned long long)sep->stats.icmp_ignored);
	pthread_mutex_lock(&sep->lock);
	sep->closing = 1; /* closed connections need no memory of their clients */
	while (!LIST_EMPTY(&sep->conns)) {
		struct sock_conn *sc = LIST_FIRST(&sep->conns);
		cci__conn_t *conn = sc->conn;
		int open = cci__conn_is_open(&sc->base);

		if (open)
			sock_tx_ctl(sc, SOCK_DG_BYE, 0);
		sock_conn_destroy(sc); /* flushes the BYE first */
		sock_core->conn_release(conn);
	}
	sock_tx_flush(sep);
	sock_hs_free_all(sep);
	sock_conn_gone_free_all(sep);
	pthread_mutex_unlock(&sep->lock);
	ep_release(sep);
}
