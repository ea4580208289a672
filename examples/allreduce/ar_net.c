/*
 * ar_net.c - one rank's network: its endpoint and URI (a file, or through
 * the launcher with libcci_wire), connections
 * to its partners (the lower rank of a pair connects, the higher
 * accepts), event dispatch and the stash of values that arrived early.
 * Waits sleep on the endpoint's OS handle and end at r->deadline_ns.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ar.h"
#include "ex_util.h"

void ar_log(const struct ar_rank *r, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "allreduce[%d]: ", r->rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int ar_check(const struct ar_rank *r, int rc, const char *what)
{
	if (rc != CCI_SUCCESS)
		ar_log(r, "%s: %s", what, cci_strerror(r->ep, (enum cci_status)rc));
	return rc;
}

static void uri_path(const struct ar_rank *r, int rank, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%d.uri", r->cfg->dir, rank);
}

/* Started by a launcher: every rank puts its URI, then all fence. */
static int publish_wired(struct ar_rank *r, const char *uri)
{
	int rc = cci_wire_put(r->cfg->wire, "uri", uri);

	if (rc == CCI_WIRE_SUCCESS)
		rc = cci_wire_fence(r->cfg->wire);
	if (rc != CCI_WIRE_SUCCESS) {
		ar_log(r, "publishing the URI: %s", cci_wire_error(r->cfg->wire));
		return CCI_ERROR;
	}
	return CCI_SUCCESS;
}

/* Partner i's URI, from the launcher or its file; malloc'd. */
static int uri_of(struct ar_rank *r, int i, char **uri_p)
{
	char path[512];

	if (r->cfg->wire) {
		if (cci_wire_get(r->cfg->wire, i, "uri", uri_p) == CCI_WIRE_SUCCESS)
			return CCI_SUCCESS;
		ar_log(r, "no URI from rank %d: %s", i, cci_wire_error(r->cfg->wire));
		return CCI_ERROR;
	}
	uri_path(r, i, path, sizeof(path));
	if (ex_uri_read(path, r->deadline_ns, uri_p) != 0) {
		ar_log(r, "no URI from rank %d", i);
		return CCI_ETIMEDOUT;
	}
	return CCI_SUCCESS;
}

int ar_net_open(struct ar_rank *r)
{
	char path[512], *uri = NULL;
	int rc = cci_create_endpoint(NULL, 0, &r->ep, &r->fd);

	if (ar_check(r, rc, "cci_create_endpoint") != CCI_SUCCESS)
		return rc;
	rc = cci_get_opt(r->ep, CCI_OPT_ENDPT_URI, &uri);
	if (ar_check(r, rc, "cci_get_opt(URI)") != CCI_SUCCESS)
		return rc;
	if (r->cfg->wire) {
		rc = publish_wired(r, uri);
		free(uri);
		return rc;
	}
	uri_path(r, r->rank, path, sizeof(path));
	if (ex_uri_write(path, uri) != 0) {
		ar_log(r, "cannot write %s", path);
		rc = CCI_ERROR;
	}
	free(uri);
	return rc;
}

/* A request from a lower partner that has not connected yet. */
static void on_request(struct ar_rank *r, cci_event_t *ev)
{
	struct ar_hello h;
	bool ok = ev->request.data_len == sizeof(h);

	if (ok)
		memcpy(&h, ev->request.data_ptr, sizeof(h));
	ok = ok && h.magic == AR_HELLO_MAGIC && h.n == (uint32_t)r->cfg->n &&
	     h.rank < (uint32_t)r->rank && r->peers[h.rank].partner &&
	     !r->peers[h.rank].conn;
	if (!ok) {
		ar_log(r, "rejected an unexpected connection request");
		cci_reject(ev);
		return;
	}
	ar_check(r, cci_accept(ev, &r->peers[h.rank]), "cci_accept");
}

/* The outcome of a connect or accept: context is the peer. */
static int on_connected(struct ar_rank *r, struct ar_peer *p, int status,
			cci_connection_t *conn)
{
	if (ar_check(r, status, "connection") != CCI_SUCCESS)
		return status;
	p->conn = conn;
	r->connected++;
	return CCI_SUCCESS;
}

static int on_recv(struct ar_rank *r, cci_event_t *ev)
{
	struct ar_peer *src = ev->recv.connection->context;
	struct ar_msg m;

	if (ev->recv.len != sizeof(m)) {
		ar_log(r, "dropped a %u-byte message", ev->recv.len);
		return CCI_ERROR;
	}
	memcpy(&m, ev->recv.ptr, sizeof(m));
	return r->cfg->ex->on_recv(r, src, &m);
}

/* A send (context NULL) or an RMA (context: its outbox slot) completed. */
static int on_send(struct ar_rank *r, cci_event_t *ev)
{
	bool *busy = ev->send.context;

	r->inflight--;
	if (busy)
		*busy = false;
	return ar_check(r, ev->send.status, "send completion");
}

static int dispatch(struct ar_rank *r, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		on_request(r, ev);
		return CCI_SUCCESS;
	case CCI_EVENT_CONNECT:
		return on_connected(r, ev->connect.context, ev->connect.status,
				    ev->connect.connection);
	case CCI_EVENT_ACCEPT:
		return on_connected(r, ev->accept.context, ev->accept.status,
				    ev->accept.connection);
	case CCI_EVENT_RECV:
		return on_recv(r, ev);
	case CCI_EVENT_SEND:
		return on_send(r, ev);
	default:
		ar_log(r, "unexpected %s", cci_event_type_str(ev->type));
		return CCI_ERROR;
	}
}

int ar_net_progress(struct ar_rank *r)
{
	cci_event_t *ev;
	int rc = ex_event_wait(r->ep, r->fd, r->deadline_ns, &ev);

	if (rc == CCI_ETIMEDOUT)
		ar_log(r, "time limit reached while waiting for peers");
	if (rc != CCI_SUCCESS)
		return ar_check(r, rc, "cci_get_event");
	rc = dispatch(r, ev);
	cci_return_event(ev);
	return rc;
}

/* Connect to every partner above us. */
static int connect_up(struct ar_rank *r)
{
	struct ar_hello h = { .magic = AR_HELLO_MAGIC, .rank = (uint32_t)r->rank,
			      .n = (uint32_t)r->cfg->n };
	char *uri;
	int rc = CCI_SUCCESS;

	for (int i = r->rank + 1; rc == CCI_SUCCESS && i < r->cfg->n; i++) {
		if (!r->peers[i].partner)
			continue;
		rc = uri_of(r, i, &uri);
		if (rc != CCI_SUCCESS)
			return rc;
		rc = ar_check(r, cci_connect(r->ep, uri, &h, sizeof(h), CCI_CONN_ATTR_RO,
					     &r->peers[i], 0, NULL), "cci_connect");
		free(uri);
	}
	return rc;
}

int ar_net_connect(struct ar_rank *r)
{
	int rc = connect_up(r);

	while (rc == CCI_SUCCESS && r->connected < r->partners)
		rc = ar_net_progress(r);
	if (rc != CCI_SUCCESS)
		ar_log(r, "%u of %u partners connected", r->connected, r->partners);
	return rc;
}

int ar_net_send(struct ar_rank *r, struct ar_peer *peer, const struct ar_msg *m)
{
	for (;;) {
		int rc = cci_send(peer->conn, m, sizeof(*m), NULL, 0);

		if (rc == CCI_SUCCESS) {
			r->inflight++;
			return rc;
		}
		if (rc != CCI_ENOBUFS || !r->inflight)
			return ar_check(r, rc, "cci_send");
		/* a completion frees a send buffer */
		rc = ar_net_progress(r);
		if (rc != CCI_SUCCESS)
			return rc;
	}
}

int ar_net_drain(struct ar_rank *r)
{
	int rc = CCI_SUCCESS;

	while (rc == CCI_SUCCESS && r->inflight)
		rc = ar_net_progress(r);
	return rc;
}

void ar_net_close(struct ar_rank *r)
{
	for (int i = 0; i < r->cfg->n; i++)
		if (r->peers[i].conn)
			cci_disconnect(r->peers[i].conn);
	if (r->ep)
		cci_destroy_endpoint(r->ep);
	r->ep = NULL;
}

int ar_stash_put(struct ar_rank *r, int src, uint32_t iter, uint32_t step, double v)
{
	for (int i = 0; i < AR_STASH; i++) {
		struct ar_value *s = &r->stash[i];

		if (!s->used) {
			*s = (struct ar_value){ true, src, iter, step, v };
			return CCI_SUCCESS;
		}
	}
	ar_log(r, "more than %d values arrived early", AR_STASH);
	return CCI_ERROR;
}

static bool stash_take(struct ar_rank *r, int src, uint32_t iter, uint32_t step,
		       double *v)
{
	for (int i = 0; i < AR_STASH; i++) {
		struct ar_value *s = &r->stash[i];

		if (s->used && s->src == src && s->iter == iter && s->step == step) {
			*v = s->v;
			s->used = false;
			return true;
		}
	}
	return false;
}

int ar_stash_wait(struct ar_rank *r, int src, uint32_t iter, uint32_t step, double *v)
{
	int rc = CCI_SUCCESS;

	while (rc == CCI_SUCCESS && !stash_take(r, src, iter, step, v))
		rc = ar_net_progress(r);
	if (rc != CCI_SUCCESS)
		ar_log(r, "no value from rank %d for allreduce %u step %u", src, iter, step);
	return rc;
}
