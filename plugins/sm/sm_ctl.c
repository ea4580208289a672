/*
 * sm_ctl.c - the per-endpoint control thread.
 *
 * It sleeps in epoll on the listening socket, every control socket, a
 * timer and a wake-up eventfd.  It accepts connection requests, answers
 * PINGs (so a peer that computes without calling the library still looks
 * alive, while a stopped one does not), notices peers that die (their
 * control socket hangs up), and on each timer tick runs connect timeouts,
 * keepalives, send timeouts and flushes queued sends.  It never touches
 * the data path of messages in flight.
 *
 * Everything it does happens under sep->lock.  Objects registered in its
 * epoll set are freed (by it or by application threads) only after being
 * removed from the set and with sep->gen bumped; a batch of events is
 * abandoned when gen moved, since the registrations are level-triggered
 * the events still valid come back at the next epoll_wait().
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "sm.h"

static void ctl_on_listen(struct sm_ep *sep)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct sm_req *req;
	int fd;

	while ((fd = accept4(sep->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		pid_t pid = 0;
		if (sm_peer_pid(fd, &pid) != CCI_SUCCESS) {
			SM_WARN("sm: %s: connection from another user refused", sep->sock_path);
			close(fd);
			continue;
		}
		req = calloc(1, sizeof(*req));
		if (!req) {
			close(fd);
			continue;
		}
		req->tag.kind = SM_TAG_REQ;
		req->sock = fd;
		req->peer_pid = pid;
		req->since_ns = cci__now_ns();
		for (int i = 0; i < SM_HELLO_FDS; i++)
			req->fds[i] = -1;
		req->next = sep->reqs;
		sep->reqs = req;
		ev.data.ptr = &req->tag;
		epoll_ctl(sep->epfd, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* Records arriving or any control message count as signs of life. */
static void conn_keepalive(struct sm_conn *sc, uint64_t now)
{
	uint64_t head;

	if (sc->timers.ka_us == 0 || sc->sock < 0)
		return;
	head = atomic_load_explicit(&sc->rx.ctl->head, memory_order_relaxed);
	if (head != sc->seen_head) {
		sc->seen_head = head;
		cci__ct_heard(&sc->timers, now);
	}
	if (cci__ct_keepalive(&sc->timers, sm_core, sc->conn, now) == CCI__KA_PING)
		sm_ctl_send(sc->sock, SM_CTL_PING, NULL, 0, NULL, 0);
}

/* Queued sends: flush, and break the connection when the oldest is too old
 * (a read waiting for its answer is the peer's to time). */
static void conn_tx_timers(struct sm_conn *sc, uint64_t now)
{
	uint64_t oldest;

	sm_txq_flush(sc);
	pthread_mutex_lock(&sc->tx_lock);
	oldest = sc->txq && sc->txq->kind != SM_PEND_READ ? sc->txq->queued_ns : UINT64_MAX;
	pthread_mutex_unlock(&sc->tx_lock);
	if (cci__ct_send_expired(sc->conn->send_timeout_us, oldest, now))
		sm_conn_break(sc, CCI_ETIMEDOUT);
}

static void ctl_tick(struct sm_ep *sep)
{
	uint64_t now = cci__now_ns();
	struct sm_conn *sc, *next;
	struct sm_req *req, *rnext;

	for (sc = sep->conns; sc; sc = next) {
		int fault;
		next = sc->next;
		if (sc->state == SM_CONN_CONNECTING) {
			if (cci__ct_connect_expired(&sc->timers, now))
				sm_connect_failed(sc, CCI_ETIMEDOUT, 1);
			continue;
		}
		if (sc->state != SM_CONN_OPEN)
			continue;
		fault = atomic_exchange(&sc->fault, 0);
		if (fault) {
			sm_conn_break(sc, fault);
			continue;
		}
		conn_keepalive(sc, now);
		conn_tx_timers(sc, now);
	}
	for (req = sep->reqs; req; req = rnext) {
		rnext = req->next;
		if (req->state == SM_REQ_WAIT && now - req->since_ns > SM_REQ_WAIT_NS) {
			SM_WARN("sm: %s: pid %d connected but never asked; dropped", sep->sock_path,
			        (int)req->peer_pid);
			sm_req_drop(sep, req);
		}
	}
}

/* Run the timer only while there is something to time. */
static void ctl_tick_arm(struct sm_ep *sep)
{
	int want = sep->conns != NULL || sep->reqs != NULL;
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };

	if (want == sep->tick_on)
		return;
	if (want)
		its.it_interval.tv_nsec = its.it_value.tv_nsec = (long)SM_TICK_NS;
	if (timerfd_settime(sep->timer_fd, 0, &its, NULL) == 0)
		sep->tick_on = want;
}

static void ctl_dispatch(struct sm_ep *sep, struct sm_tag *tag)
{
	uint64_t v;

	switch (tag->kind) {
	case SM_TAG_LISTEN:
		ctl_on_listen(sep);
		break;
	case SM_TAG_WAKE:
		if (read(sep->wake_fd, &v, sizeof(v)) < 0)
			break;
		break;
	case SM_TAG_TIMER:
		if (read(sep->timer_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
			ctl_tick(sep);
		break;
	case SM_TAG_REQ:
		sm_req_on_readable(sep, (struct sm_req *)tag);
		break;
	case SM_TAG_CONN:
		sm_conn_on_ctl((struct sm_conn *)tag);
		break;
	}
}

static void *ctl_main(void *arg)
{
	struct sm_ep *sep = arg;
	struct epoll_event evs[32];

	for (;;) {
		uint64_t gen;
		int n;

		pthread_mutex_lock(&sep->lock);
		if (sep->stopping) {
			pthread_mutex_unlock(&sep->lock);
			break;
		}
		ctl_tick_arm(sep);
		gen = sep->gen;
		pthread_mutex_unlock(&sep->lock);
		n = epoll_wait(sep->epfd, evs, 32, -1);
		if (n < 0 && errno != EINTR) {
			SM_ERR("sm: control thread of %s: epoll_wait: %s", sep->sock_path,
			       strerror(errno));
			break;
		}
		pthread_mutex_lock(&sep->lock);
		for (int i = 0; i < n && sep->gen == gen && !sep->stopping; i++)
			ctl_dispatch(sep, evs[i].data.ptr);
		pthread_mutex_unlock(&sep->lock);
	}
	return NULL;
}

static int ctl_watch(struct sm_ep *sep, int fd, struct sm_tag *tag, int kind)
{
	struct epoll_event ev = { .events = EPOLLIN };

	tag->kind = kind;
	ev.data.ptr = tag;
	return epoll_ctl(sep->epfd, EPOLL_CTL_ADD, fd, &ev);
}

int sm_ctl_start(struct sm_ep *sep)
{
	sigset_t all, old;
	int rc;

	sep->epfd = epoll_create1(EPOLL_CLOEXEC);
	sep->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	sep->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (sep->epfd < 0 || sep->wake_fd < 0 || sep->timer_fd < 0 ||
	    ctl_watch(sep, sep->listen_fd, &sep->listen_tag, SM_TAG_LISTEN) != 0 ||
	    ctl_watch(sep, sep->wake_fd, &sep->wake_tag, SM_TAG_WAKE) != 0 ||
	    ctl_watch(sep, sep->timer_fd, &sep->timer_tag, SM_TAG_TIMER) != 0) {
		SM_ERR("sm: cannot set up the control thread of %s: %s", sep->sock_path,
		       strerror(errno));
		rc = cci__errno_status(errno);
		goto err_close;
	}
	/* The thread takes no signals: they belong to the application's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&sep->thread, NULL, ctl_main, sep);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		SM_ERR("sm: cannot start the control thread of %s: %s", sep->sock_path,
		       strerror(rc));
		rc = CCI_ENOMEM;
		goto err_close;
	}
	sep->thread_started = 1;
	return CCI_SUCCESS;

err_close:
	sm_ctl_stop(sep);
	return rc;
}

void sm_ctl_stop(struct sm_ep *sep)
{
	if (sep->thread_started) {
		pthread_mutex_lock(&sep->lock);
		sep->stopping = 1;
		pthread_mutex_unlock(&sep->lock);
		sm_wake(sep);
		pthread_join(sep->thread, NULL);
		sep->thread_started = 0;
	}
	if (sep->epfd >= 0)
		close(sep->epfd);
	if (sep->wake_fd >= 0)
		close(sep->wake_fd);
	if (sep->timer_fd >= 0)
		close(sep->timer_fd);
	sep->epfd = sep->wake_fd = sep->timer_fd = -1;
}
