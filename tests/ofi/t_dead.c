/*
 * t_dead.c - connects to servers that are gone: exited, killed, never
 * there, or restarted under the same name.  The providers do not say
 * that nobody is at an address (plugins/ofi/ofi_reach.c); shm even
 * crashed on an address removed from the AV and inserted again after its
 * owner had left, so each case is tried while the address is still in
 * the client's AV and again after it left (OFI_PEER_IDLE_NS, 2 s).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ofi_test.h"
#include "shm_sweep.h"

#define REFUSE_MS 1000u     /* a refusal comes within this, with no connect timeout */
#define AV_IDLE_MS 2600u    /* an unused AV entry is gone after this */

/* A server in a child forked before this process uses CCI: it waits for
 * a byte on go (if >= 0), opens an endpoint (at service, if any), writes
 * its URI to out, accepts one connection, lets it be for a moment and
 * exits cleanly. */
static void server_child(const char *service, int go, int out)
{
	cci_device_t *dev;
	cci_endpoint_t *ep = NULL;
	char *uri = NULL, c;
	int accepted = 0;

	if (go >= 0 && read(go, &c, 1) != 1)
		_exit(2);
	dev = ot_init();
	if (!dev || (service ? cci_create_endpoint_at(dev, service, 0, &ep, NULL)
	                     : cci_create_endpoint(dev, 0, &ep, NULL)) != CCI_SUCCESS ||
	    cci_get_opt(ep, CCI_OPT_ENDPT_URI, &uri) != CCI_SUCCESS ||
	    write(out, uri, strlen(uri) + 1) != (ssize_t)strlen(uri) + 1)
		_exit(3);
	for (uint64_t stop = ot_now_ms() + 10000; !accepted && ot_now_ms() < stop;) {
		cci_event_t *ev;
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			cci_accept(ev, NULL);
		accepted = ev->type == CCI_EVENT_ACCEPT;
		cci_return_event(ev);
	}
	ot_sleep_ms(100);
	cci_destroy_endpoint(ep);
	cci_finalize();
	_exit(accepted ? 0 : 4);
}

static pid_t fork_server(const char *service, int go, int *out_fd)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds) != 0)
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		server_child(service, go, fds[1]);
	}
	close(fds[1]);
	*out_fd = fds[0];
	return pid;
}

/* The status of a connect to uri (no timeout when ms_timeout is 0), and
 * how long it took to come, in *ms (CCI_ERROR when nothing came within
 * wait_ms). */
static int connect_status(cci_endpoint_t *ep, const char *uri, unsigned ms_timeout,
                          unsigned wait_ms, uint64_t *ms)
{
	struct timeval tv = { ms_timeout / 1000, (ms_timeout % 1000) * 1000 };
	uint64_t t0 = ot_now_ms();
	cci_event_t *ev;
	int rc;

	rc = cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, ms_timeout ? &tv : NULL);
	if (rc != CCI_SUCCESS)
		return rc;
	ev = ot_wait(ep, CCI_EVENT_CONNECT, wait_ms);
	*ms = ot_now_ms() - t0;
	if (!ev)
		return CCI_ERROR;
	rc = ev->connect.status;
	if (rc == CCI_SUCCESS)
		CU_ASSERT_EQUAL(cci_disconnect(ev->connect.connection), CCI_SUCCESS);
	cci_return_event(ev);
	return rc;
}

/* n connects without timeout to uri are each refused within REFUSE_MS. */
static void refused_n(cci_endpoint_t *ep, const char *uri, int n, const char *when)
{
	for (int i = 0; i < n; i++) {
		uint64_t ms = 0;
		int rc = connect_status(ep, uri, 0, 5000, &ms);

		if (rc != CCI_ECONNREFUSED || ms > REFUSE_MS) {
			printf("\n    connect %d to %s %s: status %d after %llu ms\n", i, uri, when, rc,
			       (unsigned long long)ms);
			CU_FAIL("a connect to a server that is gone was not refused at once");
			return;
		}
	}
}

/* One server's life: connected once, then gone (exited or killed);
 * connects to it are refused at once, with its address in the AV and
 * after it left. */
static void gone_server(int kill_it)
{
	cci_endpoint_t *ep;
	char uri[512] = "";
	uint64_t ms;
	int out = -1, status = 0;
	pid_t pid = fork_server(NULL, -1, &out);

	CU_ASSERT_FATAL(pid > 0);
	ep = ot_endpoint(ot_init());
	CU_ASSERT_FATAL(ep != NULL && read(out, uri, sizeof(uri) - 1) > 0);
	CU_ASSERT_EQUAL(connect_status(ep, uri, 5000, 6000, &ms), CCI_SUCCESS);
	if (kill_it)
		kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	CU_ASSERT(kill_it || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
	refused_n(ep, uri, 5, "its address in the AV");
	ot_sleep_ms(AV_IDLE_MS);
	refused_n(ep, uri, 5, "its address out of the AV");
	ot_fini(ep);
	close(out);
	test_shm_sweep(); /* the killed one's shm region */
}

static void exited_server_refused(void)
{
	gone_server(0);
}

static void killed_server_refused(void)
{
	gone_server(1);
}

/* An address nobody has: a closed port, an shm name without a region. */
static void nobody_refused(void)
{
	cci_endpoint_t *ep = ot_endpoint(ot_init());
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	char uri[128];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CU_ASSERT_FATAL(ep != NULL && fd >= 0);
	CU_ASSERT_FATAL(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	                getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	close(fd); /* nothing listens there now */
	if (strcmp(ot_provider, "shm") == 0)
		snprintf(uri, sizeof(uri), "ofi://shm/fi_ns://ofitest-nobody-%d", (int)getpid());
	else
		snprintf(uri, sizeof(uri), "ofi://%s/127.0.0.1:%u", ot_provider, ntohs(sa.sin_port));
	refused_n(ep, uri, 3, "where nobody is");
	ot_fini(ep);
}

/* A service for cci_create_endpoint_at: a free port, or an shm name. */
static void free_service(char *buf, size_t cap)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (strcmp(ot_provider, "shm") == 0 || fd < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
		snprintf(buf, cap, "ofitest-%d", (int)getpid());
	else
		snprintf(buf, cap, "%u", ntohs(sa.sin_port));
	if (fd >= 0)
		close(fd);
}

static void restarted_server_reached(void)
{
	char service[64], uri1[512] = "", uri2[512] = "";
	cci_endpoint_t *ep;
	int out1 = -1, out2 = -1, go[2];
	uint64_t ms;
	pid_t p1, p2;

	free_service(service, sizeof(service));
	CU_ASSERT_FATAL(pipe(go) == 0);
	p1 = fork_server(service, -1, &out1);
	p2 = fork_server(service, go[0], &out2);
	CU_ASSERT_FATAL(p1 > 0 && p2 > 0);
	ep = ot_endpoint(ot_init());
	CU_ASSERT_FATAL(ep != NULL && read(out1, uri1, sizeof(uri1) - 1) > 0);
	CU_ASSERT_EQUAL(connect_status(ep, uri1, 5000, 6000, &ms), CCI_SUCCESS);
	waitpid(p1, NULL, 0);
	refused_n(ep, uri1, 1, "before the restart");
	CU_ASSERT_FATAL(write(go[1], "g", 1) == 1);
	CU_ASSERT_FATAL(read(out2, uri2, sizeof(uri2) - 1) > 0);
	CU_ASSERT_STRING_EQUAL(uri1, uri2);
	CU_ASSERT_EQUAL(connect_status(ep, uri2, 5000, 6000, &ms), CCI_SUCCESS);
	waitpid(p2, NULL, 0);
	ot_fini(ep);
	close(out1);
	close(out2);
	close(go[0]);
	close(go[1]);
}

int ot_add_dead_suite(void)
{
	CU_pSuite s = CU_add_suite("servers that are gone", NULL, NULL);

	return !s ||
	       !CU_add_test(s, "connects without timeout to a server that exited are refused at "
	                       "once, its address in the AV and out of it", exited_server_refused) ||
	       !CU_add_test(s, "connects without timeout to a server that was killed are refused "
	                       "at once, its address in the AV and out of it", killed_server_refused) ||
	       !CU_add_test(s, "a connect without timeout to an address nobody has is refused at "
	                       "once", nobody_refused) ||
	       !CU_add_test(s, "a server restarted under the same service is reached, not its "
	                       "dead predecessor", restarted_server_reached);
}
