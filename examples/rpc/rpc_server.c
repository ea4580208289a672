/*
 * rpc_server.c - the server's endpoint: creation, the procedure table,
 * accepting clients, the progress loop and teardown.  Requests are served
 * in rpc_serve.c.
 */
#include <stdlib.h>
#include <string.h>

#include "ex_util.h"
#include "rpc_log.h"
#include "rpc_server_int.h"

#define RPC_DEFAULT_MAX (16u << 20)
#define RPC_DRAIN_MAX 64          /* events handled per wake-up */
#define RPC_QUEUE_POLL_MS 1       /* how soon to retry queued sends */

static int server_endpoint(struct rpc_server *s)
{
	cci_device_t *dev = ex_find_device(s->o.device);
	int rc;

	if (s->o.device && !dev) {
		rpc_log("no device %s", s->o.device);
		return RPC_EINVAL;
	}
	rc = cci_create_endpoint_at(dev, s->o.service, 0, &s->ep, &s->fd);
	if (rc != CCI_SUCCESS)
		return rpc_cci_fail(rc, "cci_create_endpoint_at");
	rc = cci_get_opt(s->ep, CCI_OPT_ENDPT_URI, &s->uri);
	if (rc != CCI_SUCCESS) {
		cci_destroy_endpoint(s->ep);
		return rpc_cci_fail(rc, "cci_get_opt(URI)");
	}
	return RPC_OK;
}

int rpc_server_create(const struct rpc_server_opts *opts,
		      struct rpc_server **server_p)
{
	struct rpc_server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return RPC_ENOMEM;
	if (opts)
		s->o = *opts;
	if (!s->o.max_arg)
		s->o.max_arg = RPC_DEFAULT_MAX;
	if (!s->o.max_result)
		s->o.max_result = RPC_DEFAULT_MAX;
	s->scratch = malloc(RPC_INLINE_MAX);
	rc = s->scratch ? RPC_OK : RPC_ENOMEM;
	if (rc == RPC_OK)
		rc = rpc_cci_fail(cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }),
				  "cci_init");
	if (rc != RPC_OK)
		goto err_free;
	rc = server_endpoint(s);
	if (rc != RPC_OK)
		goto err_finalize;
	*server_p = s;
	return RPC_OK;

err_finalize:
	cci_finalize();
err_free:
	free(s->scratch);
	free(s);
	return rc;
}

const char *rpc_server_uri(const struct rpc_server *s)
{
	return s->uri;
}

int rpc_register(struct rpc_server *s, const char *name, rpc_proc_t fn)
{
	size_t len = name ? strnlen(name, RPC_NAME_MAX + 1) : 0;

	if (!fn || len == 0 || len > RPC_NAME_MAX || s->nprocs == RPC_MAX_PROCS)
		return RPC_EINVAL;
	for (unsigned i = 0; i < s->nprocs; i++)
		if (!strcmp(s->procs[i].name, name))
			return RPC_EINVAL;
	memcpy(s->procs[s->nprocs].name, name, len + 1);
	s->procs[s->nprocs].fn = fn;
	s->nprocs++;
	return RPC_OK;
}

void rpc_sconn_maybe_close(struct rpc_sconn *sc)
{
	struct rpc_server *s = sc->srv;

	if (!(sc->bye || sc->broken) || sc->busy)
		return;
	/* nothing of ours is in flight: no event can name it any more */
	cci_disconnect(sc->conn);
	if (sc->prev)
		sc->prev->next = sc->next;
	else
		s->conns = sc->next;
	if (sc->next)
		sc->next->prev = sc->prev;
	s->stats.open--;
	free(sc);
}

static void server_on_request(struct rpc_server *s, cci_event_t *ev)
{
	struct rpc_sconn *sc = NULL;
	bool ok = rpc_hello_check(ev->request.data_ptr, ev->request.data_len) &&
		  ev->request.attribute == CCI_CONN_ATTR_RO;

	if (ok)
		sc = calloc(1, sizeof(*sc));
	if (!sc) {
		rpc_log("rejected a connection request (%s)",
			ok ? "out of memory" : "not an RPC client");
		cci_reject(ev);
		return;
	}
	sc->srv = s;
	if (cci_accept(ev, sc) != CCI_SUCCESS) {
		rpc_log("cci_accept failed");
		free(sc);
	}
}

static void server_on_accept(struct rpc_server *s, cci_event_t *ev)
{
	struct rpc_sconn *sc = ev->accept.context;

	if (ev->accept.status != CCI_SUCCESS) {
		rpc_cci_fail(ev->accept.status, "accept");
		free(sc);
		return;
	}
	sc->conn = ev->accept.connection;
	sc->inline_max = sc->conn->max_send_size > RPC_REP_HDR + RPC_INLINE_MAX
			 ? RPC_INLINE_MAX : sc->conn->max_send_size - RPC_REP_HDR;
	sc->next = s->conns;
	if (s->conns)
		s->conns->prev = sc;
	s->conns = sc;
	s->stats.clients++;
	s->stats.open++;
}

static void server_handle(struct rpc_server *s, cci_event_t *ev)
{
	switch (ev->type) {
	case CCI_EVENT_CONNECT_REQUEST:
		server_on_request(s, ev);
		break;
	case CCI_EVENT_ACCEPT:
		server_on_accept(s, ev);
		break;
	case CCI_EVENT_RECV:
		rpc_serve_request(ev->recv.connection->context, ev->recv.ptr,
				  ev->recv.len);
		break;
	case CCI_EVENT_SEND:
		rpc_serve_completion(ev->send.connection->context,
				     ev->send.context, ev->send.status);
		break;
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		break; /* we set none: clients that vanish are found by sends */
	default:
		rpc_log("unexpected %s", cci_event_type_str(ev->type));
		break;
	}
	cci_return_event(ev);
}

int rpc_server_progress(struct rpc_server *s, uint32_t timeout_ms)
{
	uint64_t deadline = ex_deadline_ms(timeout_ms);

	do {
		uint64_t until = deadline;
		cci_event_t *ev;
		int rc;

		rpc_serve_flush(s);
		if (s->queue && until > ex_deadline_ms(RPC_QUEUE_POLL_MS))
			until = ex_deadline_ms(RPC_QUEUE_POLL_MS);
		rc = ex_event_wait(s->ep, s->fd, until, &ev);
		for (int n = 0; rc == CCI_SUCCESS && n < RPC_DRAIN_MAX; n++) {
			server_handle(s, ev);
			rc = cci_get_event(s->ep, &ev);
		}
		if (rc == CCI_SUCCESS)
			server_handle(s, ev);
		else if (rc != CCI_EAGAIN && rc != CCI_ETIMEDOUT && rc != CCI_ENOBUFS)
			return rpc_cci_fail(rc, "cci_get_event");
	} while (ex_now_ns() < deadline);
	rpc_serve_flush(s);
	return RPC_OK;
}

void rpc_server_stats(const struct rpc_server *s, struct rpc_server_stats *st)
{
	*st = s->stats;
}

void rpc_server_destroy(struct rpc_server *s)
{
	while (s->conns) {
		struct rpc_sconn *sc = s->conns;

		s->conns = sc->next;
		cci_disconnect(sc->conn);
		free(sc);
	}
	/* the disconnects dropped every event that could name a job */
	rpc_serve_fini(s);
	cci_destroy_endpoint(s->ep);
	cci_finalize();
	free(s->uri);
	free(s->scratch);
	free(s);
}
