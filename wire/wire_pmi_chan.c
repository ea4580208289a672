/*
 * wire_pmi_chan.c - PMI_FD as the PMI-1 and PMI-2 backends use it (see
 * wire_pmi_chan.h).
 *
 * mpiexec.hydra -disable-auto-cleanup tells the surviving ranks of a rank's
 * death by SIGUSR1, whose default action would end them without a word.
 * From open to close, a SIGUSR1 left at its default is caught here
 * instead: the fence waiting then gives the dead rank's name (the caller's
 * watch of this host's ranks), or says what the launcher signalled.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "wire_pmi_chan.h"

#define SIGNAL_GRACE_S 2.0      /* longer than the caller's grace for a dead peer */

static volatile sig_atomic_t rank_failed;  /* hydra's SIGUSR1 came */

static void on_usr1(int sig)
{
	(void)sig;
	rank_failed = 1;
}

static void usr1_catch(struct pmi_chan *c)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	if (sigaction(SIGUSR1, NULL, &c->old_usr1) != 0 || c->old_usr1.sa_handler != SIG_DFL)
		return;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	c->caught_usr1 = sigaction(SIGUSR1, &sa, NULL) == 0;
}

int pmi_chan_open(struct cci_wire *w, const char *proto, size_t cap, const char *fd,
                  size_t state_size, const struct wire_backend *ops,
                  int (*handshake)(struct cci_wire *w))
{
	struct pmi_chan *c;
	char *end;
	long v = strtol(fd, &end, 10);
	int rc;

	if (*end || end == fd || v < 0 || v > INT_MAX)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1, "%s: PMI_FD=%s: not a descriptor",
		                 proto, fd);
	c = calloc(1, state_size);
	if (!c)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory");
	c->fd = (int)v;
	c->proto = proto;
	c->cap = cap;
	w->state = c;
	w->ops = ops;
	rc = handshake(w);
	if (rc == CCI_WIRE_SUCCESS)
		usr1_catch(c);
	else
		pmi_chan_close(w);
	return rc;
}

int pmi_chan_write(struct cci_wire *w, const char *data, size_t n)
{
	struct pmi_chan *c = w->state;
	size_t off = 0;

	while (off < n) {
		/* No SIGPIPE when the launcher is gone: that is an error to report. */
		ssize_t k = send(c->fd, data + off, n - off, MSG_NOSIGNAL);

		if (k < 0 && errno == ENOTSOCK)
			k = write(c->fd, data + off, n - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "%s: write to PMI_FD=%d: %s",
			                 c->proto, c->fd, k < 0 ? strerror(errno) : "closed");
		off += (size_t)k;
	}
	return CCI_WIRE_SUCCESS;
}

int pmi_chan_line(struct cci_wire *w, const struct pmi_chan *c, struct pmi_msg *m)
{
	const char *nl = memchr(c->buf, '\n', c->have);

	(void)w;
	m->start = 0;
	m->body = nl ? (size_t)(nl - c->buf) : 0;
	m->len = nl ? m->body + 1 : 0;
	return CCI_WIRE_SUCCESS;
}

int pmi_chan_recv(struct cci_wire *w, pmi_frame_fn *frame, char *out, size_t len,
                  int timeout_ms, int *got_p)
{
	struct pmi_chan *c = w->state;
	double end = wire_now() + (timeout_ms < 0 ? w->timeout_s : timeout_ms / 1000.0);

	*got_p = 0;
	for (;;) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		double left = end - wire_now();
		struct pmi_msg m;
		int rc = frame(w, c, &m);
		ssize_t k;

		if (rc != CCI_WIRE_SUCCESS)
			return rc;
		if (m.len > 0) {
			snprintf(out, len, "%.*s", (int)m.body, c->buf + m.start);
			memmove(c->buf, c->buf + m.len, c->have - m.len);
			c->have -= m.len;
			*got_p = 1;
			return CCI_WIRE_SUCCESS;
		}
		if (c->have == c->cap)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
			                 "%s: an answer on PMI_FD=%d longer than %zu bytes", c->proto,
			                 c->fd, c->cap);
		if (left <= 0)
			return CCI_WIRE_SUCCESS;
		if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "%s: poll PMI_FD=%d: %s",
			                 c->proto, c->fd, strerror(errno));
		if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		k = read(c->fd, c->buf + c->have, c->cap - c->have);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			c->closed = 1;
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
			                 "%s: the launcher closed PMI_FD=%d%s", c->proto, c->fd,
			                 c->in_fence ? " during a fence (a rank may have died)" : "");
		}
		c->have += (size_t)k;
	}
}

int pmi_chan_fence_wait(struct cci_wire *w, pmi_frame_fn *frame, char *out, size_t len,
                        int *got_p)
{
	struct pmi_chan *c = w->state;
	const struct timespec nap = { .tv_nsec = 10000000L };
	int rc = CCI_WIRE_SUCCESS;

	*got_p = 0;
	if (!c->closed)
		rc = pmi_chan_recv(w, frame, out, len, 10, got_p);
	else
		nanosleep(&nap, NULL);
	if (*got_p || !(rank_failed || c->closed))
		return rc;
	if (c->failed_seen == 0)
		c->failed_seen = wire_now();
	if (wire_now() - c->failed_seen < SIGNAL_GRACE_S)
		return CCI_WIRE_SUCCESS;
	if (c->closed)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
		                 "%s: the launcher closed PMI_FD=%d during a fence (a rank may "
		                 "have died); no rank of this host is gone", c->proto, c->fd);
	return wire_fail(w, CCI_WIRE_EPEERDEAD, -1,
	                 "%s: mpiexec.hydra signalled (SIGUSR1) that a rank failed; no rank "
	                 "of this host is gone", c->proto);
}

void pmi_chan_close(struct cci_wire *w)
{
	struct pmi_chan *c = w->state;

	close(c->fd);
	if (c->caught_usr1)
		sigaction(SIGUSR1, &c->old_usr1, NULL);
	free(c);
	w->state = NULL;
}
