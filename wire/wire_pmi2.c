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
 * PMI_FD itself, and mpiexec.hydra's SIGUSR1 telling of a dead rank (as it
 * does for PMI-1), are wire_pmi_chan.c's.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire_pmi_chan.h"

#define MSG_MAX_PMI2 PMI_CHAN_BUF /* a message, its six-character length included */
#define HEADER_PMI2 6

struct pending_put {
	struct pending_put *next;
	char *key, *value;         /* value encoded */
};

/* ch.in_fence is 1 once kvs-fence is sent, 2 once its closing kvs-get is. */
struct pmi2_state {
	struct pmi_chan ch;        /* first: w->state is the channel too */
	struct pending_put *puts;  /* not yet sent, oldest first */
	char jobid[256];
};

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

/* A PMI-2 request: body ("cmd=...;k=v;") behind its length. */
static int pmi2_send(struct cci_wire *w, const char *body)
{
	char msg[MSG_MAX_PMI2 + 1];
	size_t n = strlen(body);

	if (n > MSG_MAX_PMI2 - HEADER_PMI2)
		return wire_fail(w, CCI_WIRE_EINVAL, -1, "PMI-2: a request of %zu bytes", n);
	snprintf(msg, sizeof(msg), "%-6zu%s", n, body);
	return pmi_chan_write(w, msg, n + HEADER_PMI2);
}

/* A message behind its length (see the top of this file). */
static int pmi2_frame(struct cci_wire *w, const struct pmi_chan *c, struct pmi_msg *m)
{
	char head[HEADER_PMI2 + 1], *end;
	long n;

	m->len = 0;
	if (c->have < HEADER_PMI2)
		return CCI_WIRE_SUCCESS;
	memcpy(head, c->buf, HEADER_PMI2);
	head[HEADER_PMI2] = '\0';
	n = strtol(head, &end, 10);
	while (*end == ' ')
		end++;
	if (*end || end == head || n < 0 || n > MSG_MAX_PMI2 - HEADER_PMI2)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
		                 "PMI-2: a message on PMI_FD=%d begins with '%s', not its length "
		                 "(does the launcher speak PMI-2?)", c->fd, head);
	if (c->have >= (size_t)n + HEADER_PMI2) {
		m->start = HEADER_PMI2;
		m->body = (size_t)n;
		m->len = (size_t)n + HEADER_PMI2;
	}
	return CCI_WIRE_SUCCESS;
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
		rc = pmi_chan_recv(w, pmi2_frame, answer, len, -1, &got);
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
	s->ch.in_fence = 1;
	s->ch.failed_seen = 0;
	return pmi2_send(w, "cmd=kvs-fence;");
}

static int pmi2_fence_test(struct cci_wire *w, int *done_p)
{
	struct pmi2_state *s = w->state;
	char ans[MSG_MAX_PMI2], req[sizeof(s->jobid) + 64];
	int got, rc = pmi_chan_fence_wait(w, pmi2_frame, ans, sizeof(ans), &got);

	*done_p = 0;
	if (rc != CCI_WIRE_SUCCESS || !got)
		return rc;
	if (s->ch.in_fence == 1) {
		rc = answer_check(w, "the fence", ans, "kvs-fence-response");
		if (rc == CCI_WIRE_SUCCESS) {
			snprintf(req, sizeof(req), "cmd=kvs-get;jobid=%s;srcid=-1;key=cci_wire.sync;",
			         s->jobid);
			rc = pmi2_send(w, req);
		}
		s->ch.in_fence = rc == CCI_WIRE_SUCCESS ? 2 : 0;
		return rc;
	}
	s->ch.in_fence = 0;
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
	if (!s->ch.in_fence && !s->ch.closed)
		pmi2_call(w, "cmd=finalize;", "finalize", ans, sizeof(ans));
	puts_free(s);
	pmi_chan_close(w);
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

	rc = pmi_chan_write(w, init, sizeof(init) - 1);
	if (rc == CCI_WIRE_SUCCESS)
		rc = pmi_chan_recv(w, pmi_chan_line, ans, sizeof(ans), -1, &got);
	if (rc != CCI_WIRE_SUCCESS)
		return rc;
	if (!got)
		return wire_fail(w, CCI_WIRE_ETIMEDOUT, -1,
		                 "PMI-2: no answer to init on PMI_FD=%d in %.0f s", s->ch.fd,
		                 w->timeout_s);
	if (!field(ans, ' ', "cmd", v, sizeof(v)) || strcmp(v, "response_to_init") != 0 ||
	    !field(ans, ' ', "rc", rc_s, sizeof(rc_s)) || strcmp(rc_s, "0") != 0 ||
	    !field(ans, ' ', "pmi_version", v, sizeof(v)) || strcmp(v, "2") != 0)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1,
		                 "PMI-2: the launcher on PMI_FD=%d does not speak PMI-2: init "
		                 "answered by '%s' (CCI_WIRE_BACKEND=pmi1 speaks PMI-1)", s->ch.fd,
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

	if (!fd || !*fd || !pmi2_wanted())
		return CCI_WIRE_ENOLAUNCHER;
	return pmi_chan_open(w, "PMI-2", MSG_MAX_PMI2, fd, sizeof(struct pmi2_state), &pmi2_ops,
	                     pmi2_handshake);
}
