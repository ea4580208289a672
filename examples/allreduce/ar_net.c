/*
 * ar_net.c - one rank's network: its endpoints and their URIs (a file, or
 * through the launcher with libcci_wire), connections to its partners (the
 * lower rank of a pair connects, the higher accepts), event dispatch and
 * the stash of values that arrived early.  Waits sleep on the endpoints'
 * OS handles and end at r->deadline_ns.
 *
 * Which endpoint reaches a partner: started by a launcher, the rank knows
 * every rank's host (cci_wire_host).  A partner on this host is reached
 * through an endpoint on the first sm device, one on another host through
 * an endpoint on the -x device (by default the first up device that is not
 * sm: tcp, sock, ofi or verbs as CCI_CONFIG lists them).  A rank opens
 * only the endpoints its partners need and publishes each URI under its
 * own key; both ends of a pair make the same choice, as both see the same
 * hosts.  Without sm among the devices, every partner goes through the
 * other endpoint; without a launcher (a directory of URI files) the ranks'
 * hosts are unknown and one endpoint on the default device (or -x) serves
 * all.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ar.h"
#include "ex_util.h"

void ar_log(const struct ar_rank *r, const char *fmt, ...)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "allreduce[%d]: ", r->rank);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* one write: a launcher merging the ranks' stderr keeps lines whole */
	fprintf(stderr, "%s\n", line);
}

int ar_check(const struct ar_rank *r, int rc, const char *what)
{
	if (rc != CCI_SUCCESS)
		ar_log(r, "%s: %s", what, cci_strerror(NULL, (enum cci_status)rc));
	return rc;
}

static void uri_path(const struct ar_rank *r, int rank, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%d.uri", r->cfg->dir, rank);
}

/* The device called name, else the first up device of transport name
 * (name NULL: the first up device that is not sm); NULL when none. */
static cci_device_t *find_device(const char *name, bool sm)
{
	cci_device_t *const *devs;

	if (cci_get_devices(&devs) != CCI_SUCCESS)
		return NULL;
	for (int i = 0; name && devs[i]; i++)
		if (!strcmp(devs[i]->name, name))
			return devs[i];
	for (int i = 0; devs[i]; i++) {
		bool is_sm = !strcmp(devs[i]->transport, "sm");

		if (!devs[i]->up)
			continue;
		if (sm ? is_sm : name ? !strcmp(devs[i]->transport, name) : !is_sm)
			return devs[i];
	}
	return NULL;
}

/* Point every partner at the endpoint that reaches it (not yet opened). */
static int choose_links(struct ar_rank *r)
{
	cci_wire_t *w = r->cfg->wire;
	cci_device_t *sm = w ? find_device(NULL, true) : NULL;
	cci_device_t *net = NULL;
	bool need_net = false;

	for (int i = 0; i < r->cfg->n; i++) {
		struct ar_peer *p = &r->peers[i];

		if (!p->partner)
			continue;
		if (sm && !strcmp(cci_wire_host(w, i), cci_wire_host(w, r->rank))) {
			p->link = &r->links[AR_LINK_HOST];
		} else {
			p->link = &r->links[AR_LINK_NET];
			need_net = true;
		}
	}
	r->links[AR_LINK_HOST].dev = sm;
	r->links[AR_LINK_HOST].key = "uri_host";
	r->links[AR_LINK_NET].key = "uri";
	if (!need_net)
		return CCI_SUCCESS;
	/* Without a launcher, the default device as before, unless -x. */
	if (w || r->cfg->net_device) {
		net = find_device(r->cfg->net_device, false);
		if (!net) {
			ar_log(r, "no device %s%s for ranks of other hosts",
			       r->cfg->net_device ? "or transport " : "that is up and not sm",
			       r->cfg->net_device ? r->cfg->net_device : "");
			return CCI_ENODEV;
		}
	}
	r->links[AR_LINK_NET].dev = net;
	return CCI_SUCCESS;
}

/* Open l's endpoint; its URI into *uri_p (malloc'd). */
static int open_link(struct ar_rank *r, struct ar_link *l, char **uri_p)
{
	int rc = cci_create_endpoint(l->dev, 0, &l->ep, &l->fd);

	if (ar_check(r, rc, "cci_create_endpoint") != CCI_SUCCESS) {
		l->ep = NULL;
		return rc;
	}
	if (!l->dev)
		l->dev = l->ep->device;
	return ar_check(r, cci_get_opt(l->ep, CCI_OPT_ENDPT_URI, uri_p), "cci_get_opt(URI)");
}

/* Started by a launcher: every rank puts its URIs, then all fence. */
static int publish_wired(struct ar_rank *r, const char *key, const char *uri)
{
	int rc = cci_wire_put(r->cfg->wire, key, uri);

	if (rc != CCI_WIRE_SUCCESS) {
		ar_log(r, "publishing the URI: %s", cci_wire_error(r->cfg->wire));
		return CCI_ERROR;
	}
	return CCI_SUCCESS;
}

/* Partner i's URI for link l, from the launcher or its file; malloc'd. */
static int uri_of(struct ar_rank *r, int i, const struct ar_link *l, char **uri_p)
{
	char path[512];

	if (r->cfg->wire) {
		if (cci_wire_get(r->cfg->wire, i, l->key, uri_p) == CCI_WIRE_SUCCESS)
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
	char path[512];
	bool need[AR_LINKS] = { false };
	int rc = choose_links(r);

	for (int i = 0; i < r->cfg->n; i++)
		if (r->peers[i].partner)
			need[r->peers[i].link - r->links] = true;
	for (int k = 0; rc == CCI_SUCCESS && k < AR_LINKS; k++) {
		char *uri = NULL;

		if (!need[k])
			continue;
		rc = open_link(r, &r->links[k], &uri);
		if (rc == CCI_SUCCESS && r->cfg->wire) {
			rc = publish_wired(r, r->links[k].key, uri);
		} else if (rc == CCI_SUCCESS) {
			/* one endpoint only (choose_links) */
			uri_path(r, r->rank, path, sizeof(path));
			if (ex_uri_write(path, uri) != 0) {
				ar_log(r, "cannot write %s", path);
				rc = CCI_ERROR;
			}
		}
		free(uri);
	}
	/* every rank fences, also one that failed, so the others are not
	 * left waiting for it until the timeout */
	if (r->cfg->wire && cci_wire_fence(r->cfg->wire) != CCI_WIRE_SUCCESS) {
		ar_log(r, "publishing the URIs: %s", cci_wire_error(r->cfg->wire));
		rc = CCI_ERROR;
	}
	return rc;
}

/* A request from a lower partner that has not connected yet, on the
 * endpoint l that reaches it. */
static void on_request(struct ar_rank *r, const struct ar_link *l, cci_event_t *ev)
{
	struct ar_hello h;
	bool ok = ev->request.data_len == sizeof(h);

	if (ok)
		memcpy(&h, ev->request.data_ptr, sizeof(h));
	ok = ok && h.magic == AR_HELLO_MAGIC && h.n == (uint32_t)r->cfg->n &&
	     h.rank < (uint32_t)r->rank && r->peers[h.rank].partner &&
	     !r->peers[h.rank].conn && r->peers[h.rank].link == l;
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

static int dispatch(struct ar_rank *r, const struct ar_link *l, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		on_request(r, l, ev);
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

/*
 * Each endpoint in turn, starting after the one that gave the last event so
 * that a busy one does not starve the other; when none has an event, sleep
 * on all their OS handles (cci_get_event armed each when it found its queue
 * empty, so an event that comes meanwhile wakes the poll).
 */
int ar_net_progress(struct ar_rank *r)
{
	for (;;) {
		struct pollfd pfd[AR_LINKS];
		nfds_t nfd = 0;
		uint64_t now, ms;
		int rc;

		for (unsigned k = 0; k < AR_LINKS; k++) {
			struct ar_link *l = &r->links[(r->next_link + k) % AR_LINKS];
			cci_event_t *ev;

			if (!l->ep)
				continue;
			rc = cci_get_event(l->ep, &ev);
			if (rc == CCI_SUCCESS) {
				r->next_link = (unsigned)(l - r->links) + 1;
				rc = dispatch(r, l, ev);
				cci_return_event(ev);
				return rc;
			}
			if (rc != CCI_EAGAIN)
				return ar_check(r, rc, "cci_get_event");
			pfd[nfd++] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
		}
		now = ex_now_ns();
		if (now >= r->deadline_ns) {
			ar_log(r, "time limit reached while waiting for peers");
			return CCI_ETIMEDOUT;
		}
		/* at most 100 ms at a time: the deadline is looked at again */
		ms = (r->deadline_ns - now) / 1000000u + 1;
		if (poll(pfd, nfd, ms > 100 ? 100 : (int)ms) < 0 && errno != EINTR)
			return ar_check(r, CCI_ERROR, "poll");
	}
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
		rc = uri_of(r, i, r->peers[i].link, &uri);
		if (rc != CCI_SUCCESS)
			return rc;
		rc = ar_check(r, cci_connect(r->peers[i].link->ep, uri, &h, sizeof(h),
					     CCI_CONN_ATTR_RO,
					     &r->peers[i], 0, NULL), "cci_connect");
		free(uri);
	}
	return rc;
}

/* -V: one line per partner on stdout, saying which transport reaches it. */
static void show_links(const struct ar_rank *r)
{
	cci_wire_t *w = r->cfg->wire;

	for (int i = 0; i < r->cfg->n; i++) {
		const struct ar_peer *p = &r->peers[i];

		if (!p->partner)
			continue;
		printf("allreduce[%d] on %s: partner %d on %s via %s (device %s)\n", r->rank,
		       w ? cci_wire_host(w, r->rank) : "?", i, w ? cci_wire_host(w, i) : "?",
		       p->link->dev->transport, p->link->dev->name);
	}
	fflush(stdout);
}

int ar_net_connect(struct ar_rank *r)
{
	int rc = connect_up(r);

	while (rc == CCI_SUCCESS && r->connected < r->partners)
		rc = ar_net_progress(r);
	if (rc != CCI_SUCCESS)
		ar_log(r, "%u of %u partners connected", r->connected, r->partners);
	else if (r->cfg->show_links)
		show_links(r);
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
	for (int k = 0; k < AR_LINKS; k++) {
		if (r->links[k].ep)
			cci_destroy_endpoint(r->links[k].ep);
		r->links[k].ep = NULL;
	}
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
