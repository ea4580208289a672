/*
 * sm_hostile_test.c - an sm endpoint's listening socket facing a local
 * process that sends malformed connection requests.  Each request is
 * dropped: the endpoint closes that socket and posts no CONNECT_REQUEST;
 * afterwards a well-formed connect from another endpoint is still
 * requested, accepted and connected.  The records are built with the
 * transport's own encoder (plugins/sm/sm_ctl_wire.c), then spoiled.
 * A request with more descriptors than any message carries is a protocol
 * error, dropped the same way (not answered as a shortage).  The other
 * way round, a client facing a fake server that answers with an empty
 * record carrying descriptors, or with too many descriptors, is refused
 * (CCI_ECONNREFUSED) and keeps none of them; one that answers BUSY is
 * asked again; and connects waiting for room in its backlog are served
 * in order.
 */
#include <CUnit/Basic.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cci.h"
#include "harness.h" /* h_count_fds */
#include "../../plugins/common/netorder.h"
#include "sm_ctl_wire.h"

#define WAIT_MS 5000 /* bound of every wait; far above what the loop needs */
#define MAX_FDS 8    /* descriptors a record here carries at most */

static cci_endpoint_t *server;
static char *server_uri;

/* Pass nfds (at most MAX_FDS) descriptors (of /dev/null) with a record of
 * len bytes on s. */
static int send_with_fds(int s, const void *rec, size_t len, int nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { (void *)rec, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[MAX_FDS];
	ssize_t rc;

	for (int i = 0; i < nfds; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nfds > 0) {
		struct cmsghdr *c;
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	rc = sendmsg(s, &mh, MSG_NOSIGNAL);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return rc == (ssize_t)len ? 0 : -1;
}

/* Send one record with nfds descriptors (of /dev/null) to the server's
 * socket; the connected socket, or -1. */
static int send_raw(const void *rec, size_t len, int nfds)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s;

	if (strncmp(server_uri, "sm://", 5) != 0 || strlen(server_uri + 5) >= sizeof(sa.sun_path))
		return -1;
	strcpy(sa.sun_path, server_uri + 5);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    send_with_fds(s, rec, len, nfds) != 0) {
		if (s >= 0)
			close(s);
		return -1;
	}
	return s;
}

/* The server closed s (EOF) within WAIT_MS, without answering. */
static int closed_by_server(int s)
{
	struct pollfd p = { .fd = s, .events = POLLIN };
	char b[64];

	if (poll(&p, 1, WAIT_MS) != 1)
		return 0;
	return recv(s, b, sizeof(b), MSG_DONTWAIT) == 0;
}

/* The next event of ep within WAIT_MS (NULL if none); returned at once
 * unless keep. */
static const cci_event_t *next_event(cci_endpoint_t *ep, int keep)
{
	const cci_event_t *ev = NULL;

	for (int i = 0; i < WAIT_MS; i++) {
		if (cci_get_event(ep, &ev) == CCI_SUCCESS) {
			if (!keep) {
				cci_return_event(ev);
				ev = (const cci_event_t *)(uintptr_t)1;
			}
			return ev;
		}
		usleep(1000);
	}
	return NULL;
}

static struct sm_ctl_hello good_hello(void)
{
	struct sm_ctl_hello h;

	memset(&h, 0, sizeof(h));
	h.core.attr = CCI_CONN_ATTR_RO;
	h.core.mss = 8192;
	h.pid = (uint32_t)getpid();
	h.ring_size = 65536;
	h.core.data_len = 10;
	memcpy(h.data, "0123456789", 10);
	return h;
}

/* Send the record, expect the socket closed and no event. */
static void expect_dropped(const void *rec, size_t len, int nfds)
{
	const cci_event_t *ev;
	int s = send_raw(rec, len, nfds);

	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT(closed_by_server(s));
	close(s);
	CU_ASSERT_EQUAL(cci_get_event(server, &ev), CCI_EAGAIN);
}

static void test_malformed_requests_dropped(void)
{
	uint8_t rec[sizeof(struct sm_ctl_hello) + 8];
	struct sm_ctl_hello h = good_hello();
	size_t n = sm_ctl_encode(SM_CTL_REQ, &h, rec, sizeof(rec));
	uint32_t lie;

	CU_ASSERT_FATAL(n == SM_CTL_HELLO_HEAD + 10);
	expect_dropped(rec, 3, 0);                         /* shorter than a header */
	expect_dropped(rec, n - 1, SM_HELLO_FDS);          /* payload cut short */
	expect_dropped(rec, n, 0);                         /* no descriptors */
	lie = CCI_CONN_REQ_LEN + 1;
	cci__put32(rec + sizeof(struct sm_ctl_hdr) + 12, lie); /* the hello core's data_len */
	expect_dropped(rec, n, SM_HELLO_FDS);              /* payload length over the limit */
	h.ring_size = 3;
	n = sm_ctl_encode(SM_CTL_REQ, &h, rec, sizeof(rec));
	expect_dropped(rec, n, SM_HELLO_FDS);              /* a ring no ring code attaches */
	h = good_hello();
	n = sm_ctl_encode(SM_CTL_REQ, &h, rec, sizeof(rec));
	((struct sm_ctl_hdr *)rec)->version = SM_CTL_VERSION + 1;
	expect_dropped(rec, n, SM_HELLO_FDS);              /* another version */
	n = sm_ctl_encode(SM_CTL_PING, NULL, rec, sizeof(rec));
	expect_dropped(rec, n, 0);                         /* not a request */
}

/* A request with more descriptors than any message carries: a protocol
 * error, dropped without an answer (before, it was answered NORES as if
 * the server lacked descriptors). */
static void test_too_many_descriptors_dropped(void)
{
	uint8_t rec[sizeof(struct sm_ctl_hello)];
	struct sm_ctl_hello h = good_hello();
	size_t n = sm_ctl_encode(SM_CTL_REQ, &h, rec, sizeof(rec));

	CU_ASSERT_FATAL(n > 0);
	expect_dropped(rec, n, SM_HELLO_FDS + 1);  /* one more than a request's */
	expect_dropped(rec, n, MAX_FDS);           /* past what the server's buffer holds */
}

/* The garbage left the endpoint able to serve a real client. */
static void test_good_connect_after_garbage(void)
{
	cci_endpoint_t *client = NULL;
	const cci_event_t *ev;
	int rc;

	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &client, NULL) == CCI_SUCCESS);
	CU_ASSERT_FATAL(cci_connect(client, server_uri, "hello", 5, CCI_CONN_ATTR_RO, NULL, 0,
	                            NULL) == CCI_SUCCESS);
	ev = next_event(server, 1);
	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_EQUAL_FATAL(ev->type, CCI_EVENT_CONNECT_REQUEST);
	CU_ASSERT_EQUAL(ev->request.data_len, 5);
	CU_ASSERT_EQUAL(memcmp(ev->request.data_ptr, "hello", 5), 0);
	CU_ASSERT_EQUAL(cci_accept(ev, NULL), CCI_SUCCESS);
	cci_return_event(ev);
	ev = next_event(server, 1);
	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_EQUAL(ev->type, CCI_EVENT_ACCEPT);
	CU_ASSERT_EQUAL(ev->accept.status, CCI_SUCCESS);
	cci_return_event(ev);
	ev = next_event(client, 1);
	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_EQUAL(ev->type, CCI_EVENT_CONNECT);
	rc = ev->connect.status;
	CU_ASSERT_EQUAL(rc, CCI_SUCCESS);
	cci_return_event(ev);
	cci_destroy_endpoint(client);
}

/* Read one record from s into rec (sizeof(struct sm_ctl_hello) bytes),
 * closing the descriptors it carries: its length, or -1. */
static ssize_t recv_closing_fds(int s, void *rec)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { rec, sizeof(struct sm_ctl_hello) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
	                     .msg_controllen = sizeof(cm.buf) };
	ssize_t n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c)) {
		int fd;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			close(fd);
		}
	}
	return n;
}

/* A fake server: a listening socket at an sm-shaped path,
 * <dir>/<pid>/<id>, and a client endpoint to face it. */
struct fake {
	char dir[32], pdir[64], path[96], uri[112];
	int lsock, fds0;
	cci_endpoint_t *client;
};

static void fake_open(struct fake *f, int backlog)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	strcpy(f->dir, "/tmp/cci-sm-hostile-XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(f->dir) != NULL);
	snprintf(f->pdir, sizeof(f->pdir), "%s/%d", f->dir, (int)getpid());
	snprintf(f->path, sizeof(f->path), "%s/1", f->pdir);
	snprintf(f->uri, sizeof(f->uri), "sm://%s", f->path);
	CU_ASSERT_FATAL(mkdir(f->pdir, 0700) == 0);
	strcpy(sa.sun_path, f->path);
	f->lsock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CU_ASSERT_FATAL(f->lsock >= 0 && bind(f->lsock, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	                listen(f->lsock, backlog) == 0);
	CU_ASSERT_FATAL(cci_create_endpoint(NULL, 0, &f->client, NULL) == CCI_SUCCESS);
	/* The server endpoint's thread may still be closing what the tests
	 * before left: count once the number holds still. */
	f->fds0 = h_count_fds();
	for (int i = 0, same = 0; i < WAIT_MS && same < 20; i++) {
		int now = h_count_fds();
		same = now == f->fds0 ? same + 1 : 0;
		f->fds0 = now;
		usleep(1000);
	}
}

/* The client's connect arrives within WAIT_MS: its socket, its request
 * read; *first (if not NULL) the first byte of its payload. */
static int fake_take(struct fake *f, char *first)
{
	struct pollfd p = { .fd = f->lsock, .events = POLLIN };
	struct sm_ctl_hello req;
	int s;

	CU_ASSERT_FATAL(poll(&p, 1, WAIT_MS) == 1);
	s = accept(f->lsock, NULL, NULL);
	CU_ASSERT_FATAL(s >= 0);
	CU_ASSERT_FATAL(recv_closing_fds(s, &req) > (ssize_t)SM_CTL_HELLO_HEAD); /* the request */
	if (first)
		*first = (char)req.data[0];
	return s;
}

/* The client's CONNECT event is status, and once the fake server closed
 * s it keeps no descriptor of the attempt. */
static void fake_close(struct fake *f, int s, int status)
{
	const cci_event_t *ev = next_event(f->client, 1);

	CU_ASSERT_FATAL(ev != NULL);
	CU_ASSERT_EQUAL(ev->type, CCI_EVENT_CONNECT);
	CU_ASSERT_EQUAL(ev->connect.status, status);
	cci_return_event(ev);
	close(s);
	/* The event is posted before the loop thread closes the
	 * connection's own descriptors: wait for them, boundedly. */
	for (int i = 0; i < WAIT_MS && h_count_fds() != f->fds0; i++)
		usleep(1000);
	CU_ASSERT_EQUAL(h_count_fds(), f->fds0);
	cci_destroy_endpoint(f->client);
	close(f->lsock);
	unlink(f->path);
	rmdir(f->pdir);
	rmdir(f->dir);
}

/*
 * The fake server answers a connect with an empty record carrying three
 * descriptors.  The client reads it as the server closing: its connect
 * fails with ECONNREFUSED and it closes the descriptors that came with the
 * record (which, before the fix, stayed open for good: the wait in
 * fake_close then runs out).
 */
static void test_empty_answer_with_fds_refused(void)
{
	struct fake f;
	int s;

	fake_open(&f, 4);
	CU_ASSERT_FATAL(cci_connect(f.client, f.uri, "x", 1, CCI_CONN_ATTR_RO, NULL, 0, NULL) ==
	                CCI_SUCCESS);
	s = fake_take(&f, NULL);
	CU_ASSERT_FATAL(send_with_fds(s, "", 0, SM_HELLO_FDS) == 0);
	fake_close(&f, s, CCI_ECONNREFUSED);
}

/* An answer with more descriptors than any message carries is a bad
 * answer (CCI_ECONNREFUSED), not this process lacking descriptors
 * (before: CCI_ENOMEM). */
static void test_too_many_descriptors_refused(void)
{
	uint8_t rec[sizeof(struct sm_ctl_hello)];
	struct sm_ctl_hello h = good_hello();
	size_t n;
	struct fake f;
	int s;

	h.core.data_len = 0;
	n = sm_ctl_encode(SM_CTL_ACCEPT, &h, rec, sizeof(rec));
	CU_ASSERT_FATAL(n > 0);
	fake_open(&f, 4);
	CU_ASSERT_FATAL(cci_connect(f.client, f.uri, "x", 1, CCI_CONN_ATTR_RO, NULL, 0, NULL) ==
	                CCI_SUCCESS);
	s = fake_take(&f, NULL);
	CU_ASSERT_FATAL(send_with_fds(s, rec, n, MAX_FDS) == 0);
	fake_close(&f, s, CCI_ECONNREFUSED);
}

/* A server that answers BUSY (it had no descriptor for the request's) is
 * asked again on a new socket, with the same payload; no event comes
 * until the real answer, here REJECT. */
static void test_busy_answer_asked_again(void)
{
	uint8_t rec[sizeof(struct sm_ctl_hello)];
	size_t n = sm_ctl_encode(SM_CTL_BUSY, NULL, rec, sizeof(rec));
	const cci_event_t *ev;
	struct fake f;
	int s, again;

	CU_ASSERT_FATAL(n > 0);
	fake_open(&f, 4);
	CU_ASSERT_FATAL(cci_connect(f.client, f.uri, "x", 1, CCI_CONN_ATTR_RO, NULL, 0, NULL) ==
	                CCI_SUCCESS);
	s = fake_take(&f, NULL);
	CU_ASSERT_FATAL(send_with_fds(s, rec, n, 0) == 0);
	close(s);
	again = fake_take(&f, NULL); /* at a tick of the client */
	CU_ASSERT_EQUAL(cci_get_event(f.client, &ev), CCI_EAGAIN);
	n = sm_ctl_encode(SM_CTL_REJECT, NULL, rec, sizeof(rec));
	CU_ASSERT_FATAL(send_with_fds(again, rec, n, 0) == 0);
	fake_close(&f, again, CCI_ECONNREFUSED);
}

/*
 * Connects wait in order: with A in the server's backlog (one place) and
 * B waiting for room, a connect C made the moment A is taken goes behind
 * B, not into the room ahead of it (as it did before, trying at once).
 * Only the client's tick could let B in first; C comes at once here.
 */
static void test_waiting_connects_keep_their_order(void)
{
	uint8_t rec[sizeof(struct sm_ctl_hello)];
	size_t n = sm_ctl_encode(SM_CTL_REJECT, NULL, rec, sizeof(rec));
	const cci_event_t *ev;
	struct fake f;
	int s[3], refused = 0;
	char first = 0;

	fake_open(&f, 0); /* one connect waits in the backlog, no more */
	CU_ASSERT_FATAL(cci_connect(f.client, f.uri, "A", 1, CCI_CONN_ATTR_RO, NULL, 0, NULL) ==
	                CCI_SUCCESS);
	CU_ASSERT_FATAL(cci_connect(f.client, f.uri, "B", 1, CCI_CONN_ATTR_RO, NULL, 0, NULL) ==
	                CCI_SUCCESS);
	s[0] = fake_take(&f, &first);
	CU_ASSERT_EQUAL(first, 'A');
	CU_ASSERT_FATAL(cci_connect(f.client, f.uri, "C", 1, CCI_CONN_ATTR_RO, NULL, 0, NULL) ==
	                CCI_SUCCESS);
	s[1] = fake_take(&f, &first);
	CU_ASSERT_EQUAL(first, 'B');
	s[2] = fake_take(&f, &first);
	CU_ASSERT_EQUAL(first, 'C');
	for (int i = 0; i < 3; i++)
		CU_ASSERT(send_with_fds(s[i], rec, n, 0) == 0);
	for (int i = 0; i < 3 && (ev = next_event(f.client, 1)) != NULL; i++) {
		refused += ev->type == CCI_EVENT_CONNECT && ev->connect.status == CCI_ECONNREFUSED;
		cci_return_event(ev);
	}
	CU_ASSERT_EQUAL(refused, 3);
	for (int i = 0; i < 3; i++)
		close(s[i]);
	cci_destroy_endpoint(f.client);
	close(f.lsock);
	unlink(f.path);
	rmdir(f.pdir);
	rmdir(f.dir);
}

int main(void)
{
	CU_pSuite s;
	int failed;

	if (cci_init(CCI_ABI_VERSION, 0, &(uint32_t){ 0 }) != CCI_SUCCESS ||
	    cci_create_endpoint(NULL, 0, &server, NULL) != CCI_SUCCESS ||
	    cci_get_opt(server, CCI_OPT_ENDPT_URI, &server_uri) != CCI_SUCCESS)
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("sm hostile requests", NULL, NULL);
	CU_add_test(s, "malformed requests: socket closed, no CONNECT_REQUEST",
	            test_malformed_requests_dropped);
	CU_add_test(s, "too many descriptors with a request: dropped, no answer",
	            test_too_many_descriptors_dropped);
	CU_add_test(s, "a good connect is served after them", test_good_connect_after_garbage);
	CU_add_test(s, "an empty answer with descriptors: connect refused, none kept",
	            test_empty_answer_with_fds_refused);
	CU_add_test(s, "an answer with too many descriptors: connect refused, none kept",
	            test_too_many_descriptors_refused);
	CU_add_test(s, "a BUSY answer: the client asks again", test_busy_answer_asked_again);
	CU_add_test(s, "a connect made while others wait for room goes behind them",
	            test_waiting_connects_keep_their_order);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = (int)(CU_get_number_of_failures() + CU_get_number_of_tests_failed());
	CU_cleanup_registry();
	free(server_uri);
	cci_destroy_endpoint(server);
	cci_finalize();
	return failed ? 1 : 0;
}
