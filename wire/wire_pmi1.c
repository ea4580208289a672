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
 * PMI_FD itself, and mpiexec.hydra's SIGUSR1 telling of a dead rank, are
 * wire_pmi_chan.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire_pmi_chan.h"

#define LINE_MAX_PMI 2048

struct pmi1_state {
	struct pmi_chan ch;        /* first: w->state is the channel too */
	char kvs[256];
};

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
	return pmi_chan_write(w, line, strlen(line));
}

/* Send request, then read the answer, which must be cmd=expect. */
static int pmi1_call(struct cci_wire *w, const char *request, const char *expect, char *answer,
                     size_t len)
{
	char cmd[64];
	int got, rc = pmi1_send(w, request);

	if (rc == CCI_WIRE_SUCCESS)
		rc = pmi_chan_recv(w, pmi_chan_line, answer, len, -1, &got);
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

	s->ch.in_fence = 1;
	s->ch.failed_seen = 0;
	return pmi1_send(w, "cmd=barrier_in\n");
}

static int pmi1_fence_test(struct cci_wire *w, int *done_p)
{
	struct pmi1_state *s = w->state;
	char ans[LINE_MAX_PMI], cmd[64];
	int got, rc = pmi_chan_fence_wait(w, pmi_chan_line, ans, sizeof(ans), &got);

	*done_p = 0;
	if (rc != CCI_WIRE_SUCCESS || !got)
		return rc;
	if (!word_value(ans, "cmd", cmd, sizeof(cmd)) || strcmp(cmd, "barrier_out") != 0)
		return wire_fail(w, CCI_WIRE_ELAUNCHER, -1, "PMI-1: barrier_in answered by '%s'",
		                 ans);
	s->ch.in_fence = 0;
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
	if (!s->ch.in_fence && !s->ch.closed)
		pmi1_call(w, "cmd=finalize\n", "finalize_ack", ans, sizeof(ans));
	pmi_chan_close(w);
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

	if (!fd || !*fd)
		return CCI_WIRE_ENOLAUNCHER;
	if (!rank || !size)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1,
		                 "PMI-1: PMI_FD=%s is set, but PMI_RANK or PMI_SIZE is not", fd);
	w->rank = atoi(rank);
	w->size = atoi(size);
	if (w->size < 1 || w->rank < 0 || w->rank >= w->size)
		return wire_fail(w, CCI_WIRE_ENOLAUNCHER, -1,
		                 "PMI-1: PMI_FD=%s, PMI_RANK=%s, PMI_SIZE=%s: not 0 <= rank < size",
		                 fd, rank, size);
	return pmi_chan_open(w, "PMI-1", LINE_MAX_PMI, fd, sizeof(struct pmi1_state), &pmi1_ops,
	                     pmi1_handshake);
}
