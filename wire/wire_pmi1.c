/*
 * wire_pmi1.c - the PMI-1 backend: the "simple" PMI wire protocol spoken
 * over the descriptor PMI_FD that MPICH's mpiexec.hydra (and Slurm's
 * pmi plugin) hands each rank, so no PMI library is needed.
 *
 * Every request and answer is one line of space-separated key=value
 * words: "cmd=put kvsname=K key=k value=v" answered by "cmd=put_result
 * rc=0".  A fence is "cmd=barrier_in", answered by "cmd=barrier_out" once
 * every rank has sent it; after that every put of every rank is readable
 * by "cmd=get".  One key space serves the job, so a rank's key k is
 * stored as "<rank>.k".
 *
 * mpiexec.hydra -disable-auto-cleanup tells the surviving ranks of a rank's
 * death by SIGUSR1, whose default action would end them without a word.
 * From open to finalize, a SIGUSR1 left at its default is caught here
 * instead: the fence waiting then gives the dead rank's name (the caller's
 * watch of this host's ranks), or says what the launcher signalled.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "wire_int.h"

#define LINE_MAX_PMI 2048
#define SIGNAL_GRACE_S 2.0      /* longer than the caller's grace for a dead peer */

static volatile sig_atomic_t rank_failed;  /* hydra's SIGUSR1 came */

struct pmi1_state {
	int fd;
	char kvs[256];
	char buf[LINE_MAX_PMI];
	size_t have;               /* bytes in buf */
	int in_fence;
	int closed;                /* the launcher closed PMI_FD */
	int caught_usr1;           /* old_usr1 is to be restored */
	struct sigaction old_usr1;
	double failed_seen;        /* when the fence first saw rank_failed, or 0 */
};

static void on_usr1(int sig)
{
	(void)sig;
	rank_failed = 1;
}

static void usr1_catch(struct pmi1_state *s)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	if (sigaction(SIGUSR1, NULL, &s->old_usr1) != 0 || s->old_usr1.sa_handler != SIG_DFL)
		return;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	s->caught_usr1 = sigaction(SIGUSR1, &sa, NULL) == 0;
}

/* The value of word "name=" in line, copied into out; 0 if absent. */
static int word_value(const char *line, const char *name, char *out, size_t len)
{
	size_t n = strlen(name);

	for (const char *p = line; p && *p; p = strchr(p, ' ')) {
		while (*p == ' ')
			p++;
		if (strncmp(p, name, n) == 0 && p[n] == '=') {
			size_t v = strcspn(p + n + 1, " ");

			if (v >= len)
				return 0;
			memcpy(out, p + n + 1, v);
			out[v] = '\0';
			return 1;
		}
	}
	return 0;
}

static int pmi1_send(struct cci_wire *w, const char *line)
{
	struct pmi1_state *s = w->state;
	size_t n = strlen(line), off = 0;

	while (off < n) {
		/* No SIGPIPE when the launcher is gone: that is an error to report. */
		ssize_t k = send(s->fd, line + off, n - off, MSG_NOSIGNAL);

		if (k < 0 && errno == ENOTSOCK)
			k = write(s->fd, line + off, n - off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-1: write to PMI_FD=%d: %s",
			                 s->fd, k < 0 ? strerror(errno) : "closed");
		off += (size_t)k;
	}
	return CCI_WIRE_SUCCESS;
}

/*
 * One answer line into out (without its newline), waiting at most
 * timeout_ms (-1: the handle's timeout).  *got_p = 0 when none came in time.
 */
static int pmi1_recv(struct cci_wire *w, char *out, size_t len, int timeout_ms, int *got_p)
{
	struct pmi1_state *s = w->state;
	double end = wire_now() + (timeout_ms < 0 ? w->timeout_s : timeout_ms / 1000.0);

	*got_p = 0;
	for (;;) {
		char *nl = memchr(s->buf, '\n', s->have);
		struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
		double left = end - wire_now();
		ssize_t k;

		if (nl) {
			size_t n = (size_t)(nl - s->buf);

			snprintf(out, len, "%.*s", (int)n, s->buf);
			memmove(s->buf, nl + 1, s->have - n - 1);
			s->have -= n + 1;
			*got_p = 1;
			return CCI_WIRE_SUCCESS;
		}
		if (s->have == sizeof(s->buf))
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
			                 "PMI-1: an answer on PMI_FD=%d longer than %d bytes", s->fd,
			                 LINE_MAX_PMI);
		if (left <= 0)
			return CCI_WIRE_SUCCESS;
		if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-1: poll PMI_FD=%d: %s",
			                 s->fd, strerror(errno));
		if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		k = read(s->fd, s->buf + s->have, sizeof(s->buf) - s->have);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			s->closed = 1;
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
			                 "PMI-1: the launcher closed PMI_FD=%d%s", s->fd,
			                 s->in_fence ? " during a fence (a rank may have died)" : "");
		}
		s->have += (size_t)k;
	}
}

/* Send request, then read the answer, which must be cmd=expect. */
static int pmi1_call(struct cci_wire *w, const char *request, const char *expect, char *answer,
                     size_t len)
{
	char cmd[64];
	int got, rc = pmi1_send(w, request);

	if (rc == CCI_WIRE_SUCCESS)
		rc = pmi1_recv(w, answer, len, -1, &got);
	if (rc != CCI_WIRE_SUCCESS)
		return rc;
	if (!got)
		return wire_fail(w, CCI_WIRE_ETIMEDOUT, -1, "PMI-1: no answer to '%.*s' in %.0f s",
		                 (int)strcspn(request, "\n"), request, w->timeout_s);
	if (!word_value(answer, "cmd", cmd, sizeof(cmd)) || strcmp(cmd, expect) != 0)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-1: '%.*s' answered by '%s'",
		                 (int)strcspn(request, "\n"), request, answer);
	return CCI_WIRE_SUCCESS;
}

/* The rc= of an answer is 0. */
static int answer_ok(const char *answer)
{
	char rc[16];

	return word_value(answer, "rc", rc, sizeof(rc)) && strcmp(rc, "0") == 0;
}

static int pmi1_put(struct cci_wire *w, const char *key, const char *value)
{
	struct pmi1_state *s = w->state;
	char req[LINE_MAX_PMI], ans[LINE_MAX_PMI];
	int rc;

	snprintf(req, sizeof(req), "cmd=put kvsname=%s key=%d.%s value=%s\n", s->kvs, w->rank, key,
	         value);
	rc = pmi1_call(w, req, "put_result", ans, sizeof(ans));
	if (rc == CCI_WIRE_SUCCESS && !answer_ok(ans))
		rc = wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-1: put of key '%s' refused: %s",
		               key, ans);
	return rc;
}

static int pmi1_fence_start(struct cci_wire *w)
{
	struct pmi1_state *s = w->state;

	s->in_fence = 1;
	s->failed_seen = 0;
	return pmi1_send(w, "cmd=barrier_in\n");
}

static int pmi1_fence_test(struct cci_wire *w, int *done_p)
{
	struct pmi1_state *s = w->state;
	const struct timespec nap = { .tv_nsec = 10000000L };
	char ans[LINE_MAX_PMI], cmd[64];
	int got = 0, rc = CCI_WIRE_SUCCESS;

	*done_p = 0;
	if (!s->closed)
		rc = pmi1_recv(w, ans, sizeof(ans), 10, &got);
	else
		nanosleep(&nap, NULL);
	/* A launcher that lost a rank signals or hangs up: first give the
	 * caller's watch of this host's ranks its chance to name the dead one. */
	if (!got && (rank_failed || s->closed)) {
		if (s->failed_seen == 0)
			s->failed_seen = wire_now();
		if (wire_now() - s->failed_seen < SIGNAL_GRACE_S)
			return CCI_WIRE_SUCCESS;
		if (s->closed)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
			                 "PMI-1: the launcher closed PMI_FD=%d during a fence (a "
			                 "rank may have died); no rank of this host is gone", s->fd);
		return wire_fail(w, CCI_WIRE_EPEERDEAD, -1,
		                 "PMI-1: mpiexec.hydra signalled (SIGUSR1) that a rank "
		                 "failed; no rank of this host is gone");
	}
	if (rc != CCI_WIRE_SUCCESS || !got)
		return rc;
	if (!word_value(ans, "cmd", cmd, sizeof(cmd)) || strcmp(cmd, "barrier_out") != 0)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-1: barrier_in answered by '%s'",
		                 ans);
	s->in_fence = 0;
	*done_p = 1;
	return CCI_WIRE_SUCCESS;
}

static int pmi1_get(struct cci_wire *w, int rank, const char *key, char **value_p)
{
	struct pmi1_state *s = w->state;
	char req[LINE_MAX_PMI], ans[LINE_MAX_PMI], value[LINE_MAX_PMI];
	int rc;

	snprintf(req, sizeof(req), "cmd=get kvsname=%s key=%d.%s\n", s->kvs, rank, key);
	rc = pmi1_call(w, req, "get_result", ans, sizeof(ans));
	if (rc != CCI_WIRE_SUCCESS)
		return rc;
	if (!answer_ok(ans) || !word_value(ans, "value", value, sizeof(value)))
		return wire_fail(w, CCI_WIRE_ENOTFOUND, rank,
		                 "rank %d put no key '%s' before the last fence (PMI-1: %s)", rank,
		                 key, ans);
	*value_p = strdup(value);
	return *value_p ? CCI_WIRE_SUCCESS
	                : wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for key '%s'", key);
}

static void pmi1_finalize(struct cci_wire *w)
{
	struct pmi1_state *s = w->state;
	char ans[LINE_MAX_PMI];

	/* A launcher that is gone cannot be told: nothing more to do. */
	if (!s->in_fence && !s->closed)
		pmi1_call(w, "cmd=finalize\n", "finalize_ack", ans, sizeof(ans));
	close(s->fd);
	if (s->caught_usr1)
		sigaction(SIGUSR1, &s->old_usr1, NULL);
	free(s);
	w->state = NULL;
}

static const struct wire_backend pmi1_ops = {
	.name = "pmi1",
	.put = pmi1_put,
	.fence_start = pmi1_fence_start,
	.fence_test = pmi1_fence_test,
	.get = pmi1_get,
	.finalize = pmi1_finalize,
};

/* init, then the name of the job's key space. */
static int pmi1_handshake(struct cci_wire *w)
{
	struct pmi1_state *s = w->state;
	char ans[LINE_MAX_PMI];
	int rc;

	rc = pmi1_call(w, "cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init", ans,
	               sizeof(ans));
	if (rc == CCI_WIRE_SUCCESS && !answer_ok(ans))
		rc = wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-1: init refused: %s", ans);
	if (rc == CCI_WIRE_SUCCESS)
		rc = pmi1_call(w, "cmd=get_my_kvsname\n", "my_kvsname", ans, sizeof(ans));
	if (rc == CCI_WIRE_SUCCESS && !word_value(ans, "kvsname", s->kvs, sizeof(s->kvs)))
		rc = wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-1: no kvsname in '%s'", ans);
	return rc;
}

int wire_pmi1_open(struct cci_wire *w)
{
	const char *fd = getenv("PMI_FD"), *rank = getenv("PMI_RANK"), *size = getenv("PMI_SIZE");
	struct pmi1_state *s;
	char *end;
	long v;
	int rc;

	if (!fd || !*fd)
		return CCI_WIRE_ENOLAUNCHER;
	if (!rank || !size)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1,
		                 "PMI-1: PMI_FD=%s is set, but PMI_RANK or PMI_SIZE is not", fd);
	w->rank = atoi(rank);
	w->size = atoi(size);
	v = strtol(fd, &end, 10);
	if (*end || v < 0 || v > INT_MAX || w->size < 1 || w->rank < 0 || w->rank >= w->size)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1,
		                 "PMI-1: PMI_FD=%s, PMI_RANK=%s, PMI_SIZE=%s: not a descriptor and "
		                 "0 <= rank < size", fd, rank, size);
	s = calloc(1, sizeof(*s));
	if (!s)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory");
	s->fd = (int)v;
	w->state = s;
	w->ops = &pmi1_ops;
	rc = pmi1_handshake(w);
	if (rc == CCI_WIRE_SUCCESS)
		usr1_catch(s);
	else {
		close(s->fd);
		free(s);
		w->state = NULL;
	}
	return rc;
}
