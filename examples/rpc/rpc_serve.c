/*
 * rpc_serve.c - the server's calls: look the procedure up, pull a remote
 * argument with an RMA READ, run the procedure, reply inline or push a
 * large result with an RMA WRITE whose completion message is the reply.
 *
 * Nothing here waits.  A send or RMA that finds no send buffer
 * (CCI_ENOBUFS) is queued and posted by rpc_serve_flush() from the
 * progress loop, once completions have freed buffers.
 */
#include <stdlib.h>
#include <string.h>

#include "rpc_log.h"
#include "rpc_server_int.h"

static bool status_breaks(int rc)
{
	return rc == CCI_ERR_DISCONNECTED || rc == CCI_ETIMEDOUT ||
	       rc == CCI_ERR_DEVICE_DEAD;
}

static void sconn_break(struct rpc_sconn *sc, int rc, const char *what)
{
	if (!sc->broken)
		rpc_log("client connection broken (%s: %s)", what,
			cci_strerror(sc->srv->ep, (enum cci_status)rc));
	sc->broken = true;
}

static void job_free(struct rpc_job *job)
{
	struct rpc_server *s = job->sc->srv;

	if (job->h)
		rpc_cci_fail(cci_rma_deregister(s->ep, job->h), "cci_rma_deregister");
	if (job->prev)
		job->prev->next = job->next;
	else
		s->jobs = job->next;
	if (job->next)
		job->next->prev = job->prev;
	free(job->buf);
	free(job);
}

static void queue_push(struct rpc_sconn *sc, struct rpc_job *job,
		       const void *msg, uint32_t len)
{
	struct rpc_server *s = sc->srv;
	struct rpc_action *a = malloc(sizeof(*a) + len);

	if (!a) {
		rpc_log("out of memory queueing a reply");
		sc->broken = true; /* a lost reply would leave the client hanging */
		if (job)
			job_free(job);
		return;
	}
	*a = (struct rpc_action){ .sc = sc, .job = job, .len = len };
	if (len)
		memcpy(a->msg, msg, len);
	if (s->queue_tail)
		s->queue_tail->next = a;
	else
		s->queue = a;
	s->queue_tail = a;
	sc->busy++;
}

/* Post a job's next RMA. */
static int job_post(struct rpc_job *job)
{
	cci_connection_t *conn = job->sc->conn;

	if (job->stage == JOB_READ)
		return cci_rma(conn, NULL, 0, job->h, 0, &job->req.arg_handle,
			       job->req.arg_offset, job->arg_len, job,
			       CCI_FLAG_READ);
	return cci_rma(conn, job->rep, RPC_REP_HDR, job->h, job->arg_len,
		       &job->req.res_handle, job->req.res_offset, job->res_len,
		       job, CCI_FLAG_WRITE);
}

static void job_refused(struct rpc_job *job, int rc);

/* Post a message (job NULL) or a job's RMA now, or queue it behind
 * others that wait for a send buffer. */
static void post_or_queue(struct rpc_sconn *sc, struct rpc_job *job,
			  const void *msg, uint32_t len)
{
	int rc = CCI_ENOBUFS;

	if (sc->broken) {
		if (job)
			job_free(job);
		return;
	}
	if (!sc->srv->queue)
		rc = job ? job_post(job) : cci_send(sc->conn, msg, len, NULL, 0);
	if (rc == CCI_SUCCESS) {
		sc->busy++;
	} else if (rc == CCI_ENOBUFS) {
		queue_push(sc, job, msg, len);
	} else if (job && !status_breaks(rc)) {
		job_refused(job, rc);
	} else {
		sconn_break(sc, rc, job ? "cci_rma" : "cci_send");
		if (job)
			job_free(job);
	}
}

static void reply_send(struct rpc_sconn *sc, uint64_t id, int status,
		       int proc_rc, const void *result, size_t len)
{
	unsigned char msg[RPC_REP_HDR + RPC_INLINE_MAX];
	struct rpc_rep rep = {
		.call_id = id, .status = (uint32_t)status, .proc_rc = proc_rc,
		.result_len = status == RPC_OK ? (uint32_t)len : 0,
	};

	rpc_rep_encode(&rep, msg);
	if (rep.result_len)
		memcpy(msg + RPC_REP_HDR, result, rep.result_len);
	sc->srv->stats.calls++;
	post_or_queue(sc, NULL, msg, RPC_REP_HDR + rep.result_len);
}

/* The RMA of a job failed, but not its connection (a stale or forged
 * handle, say): the call fails, the client goes on. */
static void job_refused(struct rpc_job *job, int rc)
{
	struct rpc_sconn *sc = job->sc;

	rpc_log("RMA %s failed: %s", job->stage == JOB_READ ?
		"read of an argument" : "write of a result",
		cci_strerror(sc->srv->ep, (enum cci_status)rc));
	reply_send(sc, job->req.call_id, RPC_ERMA, 0, NULL, 0);
	job_free(job);
}

/* Run a procedure; RPC_OK or RPC_EPROC (then *proc_rc_p says why). */
static int proc_run(rpc_proc_t fn, const void *arg, size_t arg_len,
		    void *result, size_t cap, size_t *len_p, int *proc_rc_p)
{
	size_t len = 0;
	int rc = fn(arg, arg_len, result, cap, &len);

	*len_p = 0;
	*proc_rc_p = rc;
	if (rc != 0)
		return RPC_EPROC;
	if (len > cap) {
		rpc_log("a procedure claimed %zu result bytes in a %zu-byte buffer",
			len, cap);
		*proc_rc_p = -1;
		return RPC_EPROC;
	}
	*len_p = len;
	return RPC_OK;
}

/* The procedure ran: reply inline, or push the result and reply with it. */
static void job_finish(struct rpc_job *job, int status, int proc_rc)
{
	struct rpc_sconn *sc = job->sc;
	struct rpc_rep rep = {
		.flags = RPC_F_RES_RMA, .call_id = job->req.call_id,
		.status = RPC_OK, .result_len = (uint32_t)job->res_len,
	};

	if (status != RPC_OK || job->res_len <= sc->inline_max ||
	    !(job->req.flags & RPC_F_RES_RMA)) {
		reply_send(sc, job->req.call_id, status, proc_rc,
			   job->buf + job->arg_len, job->res_len);
		job_free(job);
		return;
	}
	rpc_rep_encode(&rep, job->rep);
	job->stage = JOB_WRITE;
	sc->srv->stats.calls++;
	post_or_queue(sc, job, NULL, 0);
}

static struct rpc_job *job_new(struct rpc_sconn *sc, const struct rpc_req *req,
			       rpc_proc_t fn, uint64_t cap)
{
	struct rpc_job *job = calloc(1, sizeof(*job));
	struct rpc_server *s = sc->srv;
	uint64_t size;

	if (!job)
		return NULL;
	*job = (struct rpc_job){ .sc = sc, .fn = fn, .req = *req, .res_cap = cap };
	job->req.arg = NULL;
	job->arg_len = req->flags & RPC_F_ARG_RMA ? req->arg_len : 0;
	size = job->arg_len + cap ? job->arg_len + cap : 1;
	job->buf = malloc(size);
	/* registered for local use only: the client never names it */
	if (!job->buf ||
	    cci_rma_register(s->ep, job->buf, size, 0, &job->h) != CCI_SUCCESS) {
		free(job->buf);
		free(job);
		return NULL;
	}
	job->next = s->jobs;
	if (s->jobs)
		s->jobs->prev = job;
	s->jobs = job;
	return job;
}

static rpc_proc_t proc_find(const struct rpc_server *s, const char *name)
{
	for (unsigned i = 0; i < s->nprocs; i++)
		if (!strcmp(s->procs[i].name, name))
			return s->procs[i].fn;
	return NULL;
}

/* A call whose argument or result goes by RMA. */
static void serve_job(struct rpc_sconn *sc, const struct rpc_req *req,
		      rpc_proc_t fn, uint64_t cap)
{
	struct rpc_job *job = job_new(sc, req, fn, cap);
	size_t len;
	int status, proc_rc;

	if (!job) {
		reply_send(sc, req->call_id, RPC_ENOMEM, 0, NULL, 0);
		return;
	}
	if (req->flags & RPC_F_ARG_RMA) {
		job->stage = JOB_READ;
		post_or_queue(sc, job, NULL, 0);
		return;
	}
	status = proc_run(fn, req->arg, req->arg_len, job->buf, cap, &len, &proc_rc);
	job->res_len = len;
	job_finish(job, status, proc_rc);
}

static void serve_call(struct rpc_sconn *sc, const struct rpc_req *req)
{
	struct rpc_server *s = sc->srv;
	rpc_proc_t fn = proc_find(s, req->proc);
	uint64_t cap = req->result_cap;
	size_t len;
	int status, proc_rc;

	if (!fn) {
		reply_send(sc, req->call_id, RPC_ENOPROC, 0, NULL, 0);
		return;
	}
	if (req->arg_len > s->o.max_arg) {
		reply_send(sc, req->call_id, RPC_E2BIG, 0, NULL, 0);
		return;
	}
	if (cap > s->o.max_result)
		cap = s->o.max_result;
	if (!(req->flags & RPC_F_RES_RMA) && cap > sc->inline_max)
		cap = sc->inline_max; /* it must come back inline */
	if (req->flags) {
		serve_job(sc, req, fn, cap);
		return;
	}
	status = proc_run(fn, req->arg, req->arg_len, s->scratch, cap, &len, &proc_rc);
	reply_send(sc, req->call_id, status, proc_rc, s->scratch, len);
}

void rpc_serve_request(struct rpc_sconn *sc, const void *msg, uint32_t len)
{
	struct rpc_req req;

	if (!rpc_req_decode(msg, len, &req)) {
		rpc_log("dropped a malformed request (%u bytes)", len);
		return;
	}
	if (req.kind == RPC_KIND_PING)
		return;
	if (req.kind == RPC_KIND_BYE) {
		sc->bye = true;
		rpc_sconn_maybe_close(sc);
		return;
	}
	serve_call(sc, &req);
	rpc_sconn_maybe_close(sc); /* in case a failed send broke it */
}

/* An RMA of a job completed. */
static void job_completed(struct rpc_job *job, int status)
{
	struct rpc_sconn *sc = job->sc;
	size_t len;
	int rc, proc_rc;

	if (status != CCI_SUCCESS && !status_breaks(status)) {
		job_refused(job, status);
		return;
	}
	if (status != CCI_SUCCESS) {
		sconn_break(sc, status, "RMA");
		job_free(job);
		return;
	}
	if (job->stage == JOB_WRITE) {
		job_free(job); /* the reply rode on the write */
		return;
	}
	rc = proc_run(job->fn, job->buf, job->arg_len, job->buf + job->arg_len,
		      job->res_cap, &len, &proc_rc);
	job->res_len = len;
	job_finish(job, rc, proc_rc);
}

void rpc_serve_completion(struct rpc_sconn *sc, struct rpc_job *job, int status)
{
	sc->busy--;
	if (job)
		job_completed(job, status);
	else if (status != CCI_SUCCESS)
		sconn_break(sc, status, "reply");
	rpc_sconn_maybe_close(sc);
}

/* A queued operation could not be posted (rc): fail its call, or its
 * connection when that is what broke. */
static void queued_failed(struct rpc_action *a, int rc)
{
	struct rpc_sconn *sc = a->sc;

	sc->busy--;
	if (a->job && !sc->broken && !status_breaks(rc)) {
		job_refused(a->job, rc);
	} else {
		sconn_break(sc, rc, "queued send");
		if (a->job)
			job_free(a->job);
	}
	rpc_sconn_maybe_close(sc);
}

void rpc_serve_flush(struct rpc_server *s)
{
	while (s->queue) {
		struct rpc_action *a = s->queue;
		int rc = CCI_ERR_DISCONNECTED;

		if (!a->sc->broken)
			rc = a->job ? job_post(a->job)
				    : cci_send(a->sc->conn, a->msg, a->len, NULL, 0);
		if (rc == CCI_ENOBUFS)
			return;
		s->queue = a->next;
		if (!s->queue)
			s->queue_tail = NULL;
		/* posted: its busy count now waits for the SEND event */
		if (rc != CCI_SUCCESS)
			queued_failed(a, rc);
		free(a);
	}
}

void rpc_serve_fini(struct rpc_server *s)
{
	while (s->queue) {
		struct rpc_action *a = s->queue;

		s->queue = a->next;
		free(a);
	}
	s->queue_tail = NULL;
	while (s->jobs)
		job_free(s->jobs);
}
