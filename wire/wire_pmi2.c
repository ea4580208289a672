/*
 * wire_pmi2.c - the PMI-2 backend: the PMI-2 wire protocol spoken over the
 * descriptor PMI_FD that Slurm's srun --mpi=pmi2 and MPICH's mpiexec.hydra
 * hand each rank, so no PMI library is needed.
 *
 * The first exchange is a PMI-1 line, "cmd=init pmi_version=2
 * pmi_subversion=0", whose answer says whether the launcher speaks PMI-2.
 * After it every request and answer is a message of its own: six
 * characters giving the length of the rest in decimal (padded with spaces,
 * on either side), then "cmd=NAME;" and "key=value;" pairs, with no
 * newline.  An answer carries rc=0, or another rc and errmsg= naming what
 * the launcher refused.  fullinit gives rank and size, job-getid the job's
 * name, kvs-put stores, kvs-fence enters a fence, and kvs-get reads what
 * any rank put before the last fence.  One key space
 * serves the job, so a rank's key k is stored as "<rank>.k".
 *
 * mpiexec.hydra keeps the first value of a key put twice, and cci_wire
 * promises the last one of puts before a fence: puts wait here, the last
 * value of each key kept, and go to the launcher when the fence starts.
 *
 * ';' ends a value on the wire, with no escape that every launcher reads
 * the same way (hydra 4.0 takes a value verbatim up to the next ';'), so
 * values are sent with '%', ';' and '=' written as %25, %3B and %3D, and
 * decoded on get: only ranks of this backend read them.
 *
 * Chosen from the environment when PMI_FD is set and the launcher is
 * Slurm's mpi/pmi2 plugin: srun --mpi=pmi2 sets PMI_FD, PMI_JOBID,
 * PMI_RANK, PMI_SIZE and SLURM_MPI_TYPE=pmi2, and mpiexec.hydra sets no
 * PMI_JOBID.  hydra serves PMI-1 and PMI-2 on the same descriptor,
 * whichever the init asks for, and sets nothing that prefers one: under it
 * the pmi1 backend is used unless CCI_WIRE_BACKEND=pmi2 asks for this one.
 *
 * mpiexec.hydra -disable-auto-cleanup tells the surviving ranks of a rank's
 * death by SIGUSR1, as it does for PMI-1 (see wire_pmi1.c): from open to
 * finalize a SIGUSR1 left at its default is caught, and the fence waiting
 * gives the dead rank's name or says what the launcher signalled.
 *
 * hydra answers kvs-fence at once (its PMI-2 fence does not wait for the
 * other ranks); a kvs-get of a key that is not there waits instead, until
 * every rank has reached that fence.  So a fence here is kvs-fence, then a
 * kvs-get of a key no rank puts ("cci_wire.sync", outside the "<rank>."
 * keys), as MPICH's own barrier over PMI-2 does: the fence completes once
 * both are answered.  Slurm's kvs-fence waits for every rank, and its
 * answer to that get comes at once.  A rank that dies leaves that wait
 * unanswered, and the caller's watch of this host's ranks names it.
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

#define MSG_MAX_PMI2 8192       /* a message, its six-character length included */
#define HEADER_PMI2 6
#define SIGNAL_GRACE_S 2.0      /* longer than the caller's grace for a dead peer */

static volatile sig_atomic_t rank_failed;  /* hydra's SIGUSR1 came */

struct pending_put {
	struct pending_put *next;
	char *key, *value;         /* value encoded */
};

struct pmi2_state {
	int fd;
	struct pending_put *puts;  /* not yet sent, oldest first */
	char jobid[256];
	char buf[MSG_MAX_PMI2 + 1];
	size_t have;               /* bytes in buf */
	int in_fence;              /* 1: kvs-fence sent, 2: then its kvs-get */
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

static void usr1_catch(struct pmi2_state *s)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	if (sigaction(SIGUSR1, NULL, &s->old_usr1) != 0 || s->old_usr1.sa_handler != SIG_DFL)
		return;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	s->caught_usr1 = sigaction(SIGUSR1, &sa, NULL) == 0;
}

/*
 * The value of "name=" in msg, a PMI-2 message body ("cmd=x;a=1;b=2;") or,
 * with sep ' ', a PMI-1 line; copied into out.  0 if absent or too long.
 * ";;" inside a PMI-2 value is read as one ';' (the escape of MPICH's
 * older PMI-2 code): only a launcher's own words, an errmsg, may hold one.
 */
static int field(const char *msg, char sep, const char *name, char *out, size_t len)
{
	size_t n = strlen(name);
	const char *p = msg;

	while (*p) {
		if (strncmp(p, name, n) == 0 && p[n] == '=') {
			size_t o = 0;

			for (p += n + 1; *p && *p != sep && *p != '\n'; p++) {
				if (sep == ';' && p[0] == ';' && p[1] == ';')
					p++;
				if (o + 1 >= len)
					return 0;
				out[o++] = *p;
			}
			out[o] = '\0';
			return 1;
		}
		/* The next pair: past this one's separator (";;" is no separator). */
		while (*p && *p != sep)
			p++;
		while (*p == sep) {
			if (sep == ';' && p[1] == ';') {
				p += 2;
				while (*p && *p != sep)
					p++;
				continue;
			}
			p++;
			break;
		}
	}
	return 0;
}

/* value with '%', ';' and '=' as %25, %3B, %3D (out holds 3x + 1). */
static void value_encode(const char *value, char *out)
{
	for (; *value; value++) {
		if (*value == '%' || *value == ';' || *value == '=')
			out += sprintf(out, "%%%02X", (unsigned char)*value);
		else
			*out++ = *value;
	}
	*out = '\0';
}

/* The inverse, in place; 0 when a '%' is not followed by two hex digits. */
static int value_decode(char *value)
{
	char *in = value, *out = value;

	while (*in) {
		if (*in == '%') {
			unsigned v;

			if (sscanf(in + 1, "%2x", &v) != 1 || !in[1] || !in[2])
				return 0;
			*out++ = (char)v;
			in += 3;
		} else {
			*out++ = *in++;
		}
	}
	*out = '\0';
	return 1;
}

static int pmi2_write(struct cci_wire *w, const char *data, size_t n)
{
	struct pmi2_state *s = w->state;
	size_t off = 0;

	while (off < n) {
		/* No SIGPIPE when the launcher is gone: that is an error to report. */
		ssize_t k = send(s->fd, data + off, n - off, MSG_NOSIGNAL);

		if (k < 0 && errno == ENOTSOCK)
			k = write(s->fd, data + off, n - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-2: write to PMI_FD=%d: %s",
			                 s->fd, k < 0 ? strerror(errno) : "closed");
		off += (size_t)k;
	}
	return CCI_WIRE_SUCCESS;
}

/* A PMI-2 request: body ("cmd=...;k=v;") behind its length. */
static int pmi2_send(struct cci_wire *w, const char *body)
{
	char msg[MSG_MAX_PMI2 + 1];
	size_t n = strlen(body);

	if (n > MSG_MAX_PMI2 - HEADER_PMI2)
		return wire_fail(w, CCI_WIRE_EINVAL, -1, "PMI-2: a request of %zu bytes", n);
	snprintf(msg, sizeof(msg), "%-6zu%s", n, body);
	return pmi2_write(w, msg, n + HEADER_PMI2);
}

/*
 * Length of the first complete message in buf: 1 with *len_p set (header
 * included), 0 when more bytes are needed, -1 when the header is no length.
 * In line mode (the answer to init) a message ends with a newline.
 */
static int complete(struct pmi2_state *s, int line, size_t *len_p)
{
	char head[HEADER_PMI2 + 1], *end;
	long n;

	if (line) {
		char *nl = memchr(s->buf, '\n', s->have);

		*len_p = nl ? (size_t)(nl - s->buf) + 1 : 0;
		return nl != NULL;
	}
	if (s->have < HEADER_PMI2)
		return 0;
	memcpy(head, s->buf, HEADER_PMI2);
	head[HEADER_PMI2] = '\0';
	n = strtol(head, &end, 10);
	while (*end == ' ')
		end++;
	if (*end || end == head || n < 0 || n > MSG_MAX_PMI2 - HEADER_PMI2)
		return -1;
	*len_p = (size_t)n + HEADER_PMI2;
	return s->have >= *len_p;
}

/*
 * One message into out (its body, or in line mode the line without its
 * newline), waiting at most timeout_ms (-1: the handle's timeout).
 * *got_p = 0 when none came in time.
 */
static int pmi2_recv(struct cci_wire *w, int line, char *out, size_t len, int timeout_ms,
                     int *got_p)
{
	struct pmi2_state *s = w->state;
	double end = wire_now() + (timeout_ms < 0 ? w->timeout_s : timeout_ms / 1000.0);

	*got_p = 0;
	for (;;) {
		struct pollfd pfd = { .fd = s->fd, .events = POLLIN };
		double left = end - wire_now();
		size_t n = 0;
		int c = complete(s, line, &n);
		ssize_t k;

		if (c < 0)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
			                 "PMI-2: a message on PMI_FD=%d begins with '%.*s', not its "
			                 "length (does the launcher speak PMI-2?)", s->fd,
			                 HEADER_PMI2, s->buf);
		if (c > 0) {
			size_t skip = line ? 0 : HEADER_PMI2, body = n - skip - (line ? 1 : 0);

			snprintf(out, len, "%.*s", (int)body, s->buf + skip);
			memmove(s->buf, s->buf + n, s->have - n);
			s->have -= n;
			*got_p = 1;
			return CCI_WIRE_SUCCESS;
		}
		if (s->have == MSG_MAX_PMI2)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
			                 "PMI-2: an answer on PMI_FD=%d longer than %d bytes", s->fd,
			                 MSG_MAX_PMI2);
		if (left <= 0)
			return CCI_WIRE_SUCCESS;
		if (poll(&pfd, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-2: poll PMI_FD=%d: %s",
			                 s->fd, strerror(errno));
		if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		k = read(s->fd, s->buf + s->have, MSG_MAX_PMI2 - s->have);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			s->closed = 1;
			return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
			                 "PMI-2: the launcher closed PMI_FD=%d%s", s->fd,
			                 s->in_fence ? " during a fence (a rank may have died)" : "");
		}
		s->have += (size_t)k;
	}
}

/*
 * The answer's cmd is expect, and its rc is 0; otherwise the launcher's
 * errmsg (or the whole answer) becomes the message.
 */
static int answer_check(struct cci_wire *w, const char *what, const char *answer,
                        const char *expect)
{
	char cmd[64], rc[16], msg[256];

	if (!field(answer, ';', "cmd", cmd, sizeof(cmd)) || strcmp(cmd, expect) != 0)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-2: %s answered by '%s'", what,
		                 answer);
	if (field(answer, ';', "rc", rc, sizeof(rc)) && strcmp(rc, "0") != 0) {
		if (!field(answer, ';', "errmsg", msg, sizeof(msg)))
			snprintf(msg, sizeof(msg), "%s", answer);
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
		                 "PMI-2: the launcher refused %s (rc=%s): %s", what, rc, msg);
	}
	return CCI_WIRE_SUCCESS;
}

/* Send request, read its answer (cmd=<command>-response, rc=0). */
static int pmi2_call(struct cci_wire *w, const char *request, const char *what, char *answer,
                     size_t len)
{
	char expect[64];
	int got, rc = pmi2_send(w, request);

	if (rc == CCI_WIRE_SUCCESS)
		rc = pmi2_recv(w, 0, answer, len, -1, &got);
	if (rc != CCI_WIRE_SUCCESS)
		return rc;
	if (!got)
		return wire_fail(w, CCI_WIRE_ETIMEDOUT, -1, "PMI-2: no answer to %s in %.0f s",
		                 what, w->timeout_s);
	snprintf(expect, sizeof(expect), "%.*s-response", (int)strcspn(request + 4, ";"),
	         request + 4);
	return answer_check(w, what, answer, expect);
}

static void puts_free(struct pmi2_state *s)
{
	while (s->puts) {
		struct pending_put *p = s->puts;

		s->puts = p->next;
		free(p->key);
		free(p->value);
		free(p);
	}
}

/* Kept until the fence; a second put of the key replaces the value. */
static int pmi2_put(struct cci_wire *w, const char *key, const char *value)
{
	struct pmi2_state *s = w->state;
	struct pending_put **pp = &s->puts, *p;
	char enc[3 * CCI_WIRE_VALUE_MAX + 1], *v;

	value_encode(value, enc);
	while (*pp && strcmp((*pp)->key, key) != 0)
		pp = &(*pp)->next;
	v = strdup(enc);
	if (!v)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for key '%s'", key);
	if (*pp) {
		free((*pp)->value);
		(*pp)->value = v;
		return CCI_WIRE_SUCCESS;
	}
	p = calloc(1, sizeof(*p));
	if (!p || !(p->key = strdup(key))) {
		free(p);
		free(v);
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for key '%s'", key);
	}
	p->value = v;
	*pp = p;
	return CCI_WIRE_SUCCESS;
}

/* The waiting puts, then the fence request. */
static int pmi2_fence_start(struct cci_wire *w)
{
	struct pmi2_state *s = w->state;
	char req[MSG_MAX_PMI2], ans[MSG_MAX_PMI2], what[96];
	int rc = CCI_WIRE_SUCCESS;

	for (struct pending_put *p = s->puts; p && rc == CCI_WIRE_SUCCESS; p = p->next) {
		snprintf(req, sizeof(req), "cmd=kvs-put;key=%d.%s;value=%s;", w->rank, p->key,
		         p->value);
		snprintf(what, sizeof(what), "the put of key '%s'", p->key);
		rc = pmi2_call(w, req, what, ans, sizeof(ans));
	}
	puts_free(s);
	if (rc != CCI_WIRE_SUCCESS)
		return rc;
	s->in_fence = 1;
	s->failed_seen = 0;
	return pmi2_send(w, "cmd=kvs-fence;");
}

static int pmi2_fence_test(struct cci_wire *w, int *done_p)
{
	struct pmi2_state *s = w->state;
	const struct timespec nap = { .tv_nsec = 10000000L };
	char ans[MSG_MAX_PMI2], req[sizeof(s->jobid) + 64];
	int got = 0, rc = CCI_WIRE_SUCCESS;

	*done_p = 0;
	if (!s->closed)
		rc = pmi2_recv(w, 0, ans, sizeof(ans), 10, &got);
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
			                 "PMI-2: the launcher closed PMI_FD=%d during a fence (a "
			                 "rank may have died); no rank of this host is gone", s->fd);
		return wire_fail(w, CCI_WIRE_EPEERDEAD, -1,
		                 "PMI-2: mpiexec.hydra signalled (SIGUSR1) that a rank "
		                 "failed; no rank of this host is gone");
	}
	if (rc != CCI_WIRE_SUCCESS || !got)
		return rc;
	if (s->in_fence == 1) {
		rc = answer_check(w, "the fence", ans, "kvs-fence-response");
		if (rc == CCI_WIRE_SUCCESS) {
			snprintf(req, sizeof(req), "cmd=kvs-get;jobid=%s;srcid=-1;key=cci_wire.sync;",
			         s->jobid);
			rc = pmi2_send(w, req);
		}
		s->in_fence = rc == CCI_WIRE_SUCCESS ? 2 : 0;
		return rc;
	}
	s->in_fence = 0;
	rc = answer_check(w, "the fence's closing get", ans, "kvs-get-response");
	*done_p = rc == CCI_WIRE_SUCCESS;
	return rc;
}

static int pmi2_get(struct cci_wire *w, int rank, const char *key, char **value_p)
{
	struct pmi2_state *s = w->state;
	char req[MSG_MAX_PMI2], ans[MSG_MAX_PMI2], found[16], what[96];
	char value[3 * CCI_WIRE_VALUE_MAX + 1];
	int rc;

	snprintf(req, sizeof(req), "cmd=kvs-get;jobid=%s;srcid=%d;key=%d.%s;", s->jobid, rank,
	         rank, key);
	snprintf(what, sizeof(what), "the get of key '%s' of rank %d", key, rank);
	rc = pmi2_call(w, req, what, ans, sizeof(ans));
	if (rc != CCI_WIRE_SUCCESS)
		return rc;
	if (!field(ans, ';', "found", found, sizeof(found)) || strcmp(found, "TRUE") != 0 ||
	    !field(ans, ';', "value", value, sizeof(value)))
		return wire_fail(w, CCI_WIRE_ENOTFOUND, rank,
		                 "rank %d put no key '%s' before the last fence (PMI-2: %s)", rank,
		                 key, ans);
	if (!value_decode(value))
		return wire_fail(w, CCI_WIRE_ELAUNCHER, rank,
		                 "PMI-2: the value of key '%s' of rank %d is not this backend's "
		                 "encoding: '%s'", key, rank, value);
	*value_p = strdup(value);
	return *value_p ? CCI_WIRE_SUCCESS
	                : wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory for key '%s'", key);
}

static void pmi2_finalize(struct cci_wire *w)
{
	struct pmi2_state *s = w->state;
	char ans[MSG_MAX_PMI2];

	/* A launcher that is gone cannot be told: nothing more to do. */
	if (!s->in_fence && !s->closed)
		pmi2_call(w, "cmd=finalize;", "finalize", ans, sizeof(ans));
	close(s->fd);
	if (s->caught_usr1)
		sigaction(SIGUSR1, &s->old_usr1, NULL);
	puts_free(s);
	free(s);
	w->state = NULL;
}

static const struct wire_backend pmi2_ops = {
	.name = "pmi2",
	.put = pmi2_put,
	.fence_start = pmi2_fence_start,
	.fence_test = pmi2_fence_test,
	.get = pmi2_get,
	.finalize = pmi2_finalize,
};

/* init (a PMI-1 line), fullinit (rank and size), job-getid. */
static int pmi2_handshake(struct cci_wire *w)
{
	static const char init[] = "cmd=init pmi_version=2 pmi_subversion=0\n";
	struct pmi2_state *s = w->state;
	const char *id = getenv("PMI_ID") ? getenv("PMI_ID") : getenv("PMI_RANK");
	const char *jobid = getenv("PMI_JOBID");
	char ans[MSG_MAX_PMI2], req[300], v[32], rc_s[16];
	int got, rc;

	rc = pmi2_write(w, init, sizeof(init) - 1);
	if (rc == CCI_WIRE_SUCCESS)
		rc = pmi2_recv(w, 1, ans, sizeof(ans), -1, &got);
	if (rc != CCI_WIRE_SUCCESS)
		return rc;
	if (!got)
		return wire_fail(w, CCI_WIRE_ETIMEDOUT, -1,
		                 "PMI-2: no answer to init on PMI_FD=%d in %.0f s", s->fd,
		                 w->timeout_s);
	if (!field(ans, ' ', "cmd", v, sizeof(v)) || strcmp(v, "response_to_init") != 0 ||
	    !field(ans, ' ', "rc", rc_s, sizeof(rc_s)) || strcmp(rc_s, "0") != 0 ||
	    !field(ans, ' ', "pmi_version", v, sizeof(v)) || strcmp(v, "2") != 0)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
		                 "PMI-2: the launcher on PMI_FD=%d does not speak PMI-2: init "
		                 "answered by '%s' (CCI_WIRE_BACKEND=pmi1 speaks PMI-1)", s->fd,
		                 ans);

	/* Slurm refuses a fullinit without the job id it set in PMI_JOBID. */
	snprintf(req, sizeof(req), "cmd=fullinit;%s%.*s%spmirank=%d;threaded=FALSE;",
	         jobid ? "pmijobid=" : "", jobid ? 200 : 0, jobid ? jobid : "", jobid ? ";" : "",
	         id ? atoi(id) : -1);
	rc = pmi2_call(w, req, "fullinit", ans, sizeof(ans));
	if (rc != CCI_WIRE_SUCCESS)
		return rc;
	if (!field(ans, ';', "rank", v, sizeof(v)) || (w->rank = atoi(v)) < 0 ||
	    !field(ans, ';', "size", v, sizeof(v)) || (w->size = atoi(v)) < 1 ||
	    w->rank >= w->size)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
		                 "PMI-2: no rank and size (0 <= rank < size) in '%s'", ans);

	rc = pmi2_call(w, "cmd=job-getid;", "job-getid", ans, sizeof(ans));
	if (rc == CCI_WIRE_SUCCESS && !field(ans, ';', "jobid", s->jobid, sizeof(s->jobid)))
		rc = wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-2: no jobid in '%s'", ans);
	return rc;
}

/* Does the environment ask for PMI-2 (see the top of this file)? */
static int pmi2_wanted(void)
{
	const char *forced = getenv("CCI_WIRE_BACKEND"), *slurm = getenv("SLURM_MPI_TYPE");

	return (forced && strcmp(forced, "pmi2") == 0) || (slurm && strcmp(slurm, "pmi2") == 0) ||
	       getenv("PMI_JOBID");
}

int wire_pmi2_open(struct cci_wire *w)
{
	const char *fd = getenv("PMI_FD");
	struct pmi2_state *s;
	char *end;
	long v;
	int rc;

	if (!fd || !*fd || !pmi2_wanted())
		return CCI_WIRE_ENOLAUNCHER;
	v = strtol(fd, &end, 10);
	if (*end || end == fd || v < 0 || v > INT_MAX)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1, "PMI-2: PMI_FD=%s: not a descriptor",
		                 fd);
	s = calloc(1, sizeof(*s));
	if (!s)
		return wire_fail(w, CCI_WIRE_ENOMEM, -1, "out of memory");
	s->fd = (int)v;
	w->state = s;
	w->ops = &pmi2_ops;
	rc = pmi2_handshake(w);
	if (rc == CCI_WIRE_SUCCESS)
		usr1_catch(s);
	else {
		close(s->fd);
		free(s);
		w->state = NULL;
	}
	return rc;
}
