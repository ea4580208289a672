/*
 * t_limits.c - tcp past its limits: a server out of descriptors stops
 * watching its listening socket (no spinning, one warning) and accepts the
 * waiting clients once descriptors free; a client without a descriptor
 * gets CCI_ENOMEM from cci_connect at once, with a warning naming the URI;
 * a server that drops handshakes is tried again until the connect
 * timeout.  The processes that lower RLIMIT_NOFILE are children.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_test.h"

#define LIM_CLIENTS 40     /* connects waiting for a server out of descriptors */
#define LIM_SPARE 12       /* descriptors the server may open past those in use */
#define LIM_SHORT_MS 1500  /* how long the server stays short of them */

/* The descriptor number below which exactly spare numbers are free (new
 * descriptors take the lowest free number; inherited ones leave holes). */
static int fd_limit_for(int spare)
{
	static unsigned char used[65536];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	memset(used, 0, sizeof(used));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) < (int)sizeof(used))
			used[atoi(e->d_name)] = 1;
	used[dirfd(d)] = 0; /* free again below */
	closedir(d);
	for (int fd = 0; fd < (int)sizeof(used); fd++)
		if (!used[fd] && n++ == spare)
			return fd;
	return -1;
}

/* From now on this process may open only spare more descriptors. */
static int nofile_cap(int spare)
{
	struct rlimit rl;
	int lim = fd_limit_for(spare);

	if (lim < 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	rl.rlim_cur = (rlim_t)lim;
	return setrlimit(RLIMIT_NOFILE, &rl);
}

/* stderr into an anonymous file, so the library's log lines can be
 * counted; the file or NULL. */
static FILE *stderr_capture(void)
{
	FILE *f = tmpfile();

	if (!f || dup2(fileno(f), 2) < 0)
		return NULL;
	return f;
}

/* Lines of f containing what. */
static int log_count(FILE *f, const char *what)
{
	char line[1024];
	int n = 0;

	fflush(stderr);
	if (fseek(f, 0, SEEK_SET) != 0)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	return n;
}

static uint64_t cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000u;
}

/* The server: accept and keep what it can with LIM_SPARE descriptors to
 * spare, asleep on its OS handle, for LIM_SHORT_MS; report the CPU time
 * of its last second ("cpu MS kept N"); then close those connections
 * and, from then on, each one as it is accepted, until told "done";
 * report its warnings ("log SHORT AGAIN"). */
static cci_connection_t *kept[LIM_CLIENTS];

static void srv_events(cci_endpoint_t *ep, int keep, int *nkept)
{
	cci_event_t *ev;

	while (cci_get_event(ep, &ev) == CCI_SUCCESS) {
		if (ev->type == CCI_EVENT_CONNECT_REQUEST)
			cci_accept(ev, NULL);
		if (ev->type == CCI_EVENT_ACCEPT && ev->accept.status == CCI_SUCCESS) {
			if (keep && *nkept < LIM_CLIENTS)
				kept[(*nkept)++] = ev->accept.connection;
			else
				cci_disconnect(ev->accept.connection);
		}
		cci_return_event(ev);
	}
}

static int nofd_srv(int rfd, int wfd, void *arg)
{
	FILE *log = stderr_capture();
	cci_device_t *dev = st_init("127.0.0.1");
	cci_endpoint_t *ep = NULL;
	cci_os_handle_t fd = -1;
	uint64_t t0, c0 = 0, c1;
	int nkept = 0;
	char *uri, line[64];

	(void)arg;
	if (!log || !dev || cci_create_endpoint(dev, 0, &ep, &fd) != CCI_SUCCESS ||
	    !(uri = st_uri(ep)) || nofile_cap(LIM_SPARE) != 0)
		return 11;
	st_write_line(wfd, uri);
	t0 = st_now_ms();
	for (int marked = 0; st_now_ms() < t0 + LIM_SHORT_MS;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (!marked && st_now_ms() >= t0 + LIM_SHORT_MS - 1000) {
			c0 = cpu_ms();
			marked = 1;
		}
		poll(&p, 1, 50);
		srv_events(ep, 1, &nkept);
	}
	c1 = cpu_ms();
	snprintf(line, sizeof(line), "cpu %llu kept %d", (unsigned long long)(c1 - c0), nkept);
	st_write_line(wfd, line);
	for (int i = 0; i < nkept; i++)
		cci_disconnect(kept[i]);
	for (uint64_t stop = st_now_ms() + 10000; st_now_ms() < stop;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = rfd, .events = POLLIN } };
		poll(p, 2, 50);
		srv_events(ep, 0, &nkept);
		if (p[1].revents)
			break;
	}
	snprintf(line, sizeof(line), "log %d %d", log_count(log, "cannot accept connections"),
	         log_count(log, "accepting connections again"));
	st_write_line(wfd, line);
	cci_destroy_endpoint(ep);
	cci_finalize();
	return 0;
}

/* Connects wait while the server has no descriptor, and all complete once
 * it has; meanwhile the server neither spins nor floods its log. */
static void server_without_descriptors_backs_off(void)
{
	struct timeval tmo = { 10, 0 };
	struct st_child ch;
	cci_endpoint_t *ep;
	char uri[128], line[64];
	unsigned long long cpu = 0;
	int kept = 0, shorts = -1, agains = -1, ok = 0, done = 0;

	st_spawn(&ch, nofd_srv, NULL);
	CU_ASSERT_EQUAL_FATAL(st_read_line(ch.rfd, uri, sizeof(uri), 10000), 0);
	ep = st_endpoint(st_init("127.0.0.1"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(ep);
	for (int i = 0; i < LIM_CLIENTS; i++)
		CU_ASSERT_EQUAL(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &tmo),
		                CCI_SUCCESS);
	for (uint64_t stop = st_now_ms() + 12000; done < LIM_CLIENTS && st_now_ms() < stop;) {
		cci_event_t *ev = st_wait(ep, CCI_EVENT_CONNECT, 100, NULL);
		if (!ev)
			continue;
		done++;
		ok += ev->connect.status == CCI_SUCCESS;
		cci_return_event(ev);
	}
	CU_ASSERT_EQUAL(st_read_line(ch.rfd, line, sizeof(line), 1000), 0);
	CU_ASSERT_EQUAL(sscanf(line, "cpu %llu kept %d", &cpu, &kept), 2);
	st_write_line(ch.wfd, "done");
	CU_ASSERT_EQUAL(st_read_line(ch.rfd, line, sizeof(line), 5000), 0);
	CU_ASSERT_EQUAL(sscanf(line, "log %d %d", &shorts, &agains), 2);
	printf("[%d of %d connected; short server: %d kept, %llu ms CPU in 1 s, %d+%d warnings] ",
	       ok, LIM_CLIENTS, kept, cpu, shorts, agains);
	CU_ASSERT_EQUAL(ok, LIM_CLIENTS);
	CU_ASSERT(kept > 0 && kept < LIM_CLIENTS);
	CU_ASSERT(cpu < 200); /* a spinning accept loop takes most of a core */
	CU_ASSERT_EQUAL(shorts, 1);
	CU_ASSERT_EQUAL(agains, 1);
	CU_ASSERT_EQUAL(st_reap(&ch, 5000), 0);
	st_fini(ep);
}

/* A client without a descriptor: cci_connect fails at once with
 * CCI_ENOMEM, five times, with one warning naming the URI. */
static int nofd_client(int rfd, int wfd, void *arg)
{
	const char *uri = "tcp://127.0.0.1:9";
	FILE *log = stderr_capture();
	cci_device_t *dev = st_init("127.0.0.1");
	cci_endpoint_t *ep = dev ? st_endpoint(dev) : NULL;
	char line[64];
	int bad = 0;

	(void)rfd;
	(void)arg;
	if (!log || !ep || nofile_cap(0) != 0)
		return 11;
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = st_now_ms();
		int rc = cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, NULL);
		/* "At once": refused, not held until a descriptor frees.  Not
		 * a speed: a loaded machine may keep this process off its
		 * core for a while. */
		bad += rc != CCI_ENOMEM || st_now_ms() - t0 > 1000;
	}
	nofile_cap(1024);
	snprintf(line, sizeof(line), "bad %d log %d", bad, log_count(log, "cannot connect to tcp://127.0.0.1:9"));
	st_write_line(wfd, line);
	cci_destroy_endpoint(ep);
	cci_finalize();
	return 0;
}

static void connect_without_descriptor_fails_at_once(void)
{
	struct st_child ch;
	char line[64];

	st_spawn(&ch, nofd_client, NULL);
	CU_ASSERT_EQUAL(st_read_line(ch.rfd, line, sizeof(line), 10000), 0);
	CU_ASSERT_STRING_EQUAL(line, "bad 0 log 1");
	CU_ASSERT_EQUAL(st_reap(&ch, 5000), 0);
}

/* A listener that accepts every connection and closes it at once, as a
 * server shedding load does: the client tries again after 50 ms, doubling
 * up to 1 s, and its connect ends with CCI_ETIMEDOUT at its timeout, not
 * with a refusal. */
static void dropped_handshakes_are_tried_again(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct timeval tmo = { 4, 0 };
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), tries = 0, status = -1;
	cci_endpoint_t *ep;
	char uri[64];
	uint64_t t0, took = 0, last = 0, gap_max = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CU_ASSERT_FATAL(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	                listen(lfd, 16) == 0 && getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(uri, sizeof(uri), "tcp://127.0.0.1:%u", ntohs(sa.sin_port));
	ep = st_endpoint(st_init("127.0.0.1"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(ep);
	t0 = st_now_ms();
	CU_ASSERT_EQUAL(cci_connect(ep, uri, NULL, 0, CCI_CONN_ATTR_RO, NULL, 0, &tmo), CCI_SUCCESS);
	while (status < 0 && st_now_ms() < t0 + 8000) {
		cci_event_t *ev;
		int fd = accept(lfd, NULL, NULL);
		if (fd >= 0) {
			uint64_t now = st_now_ms();
			if (tries++ && now - last > gap_max)
				gap_max = now - last;
			last = now;
			close(fd);
		}
		if (cci_get_event(ep, &ev) != CCI_SUCCESS)
			continue;
		if (ev->type == CCI_EVENT_CONNECT) {
			status = ev->connect.status;
			took = st_now_ms() - t0;
		}
		cci_return_event(ev);
	}
	printf("[%d attempts, at most %llu ms apart, %s after %llu ms] ", tries,
	       (unsigned long long)gap_max, cci_strerror(ep, status), (unsigned long long)took);
	CU_ASSERT_EQUAL(status, CCI_ETIMEDOUT);
	/* 0, 50, 150, 350, 750, 1550, 2550, 3550 ms: waits double to 1 s
	 * (never 1.6 s), with room for a loaded machine. */
	CU_ASSERT(tries >= 7);
	CU_ASSERT(gap_max >= 900 && gap_max < 1400);
	CU_ASSERT(took >= 3900 && took < 5000);
	close(lfd);
	st_fini(ep);
}

int st_add_limits_tests(void)
{
	CU_pSuite s = CU_add_suite_with_setup_and_teardown("limits", NULL, NULL, NULL, st_teardown);

	return !s ||
	       !CU_add_test(s, "a server out of descriptors stops watching its listening socket, "
	                       "warns once, and accepts every waiting client when they free",
	                    server_without_descriptors_backs_off) ||
	       !CU_add_test(s, "a connect without a descriptor fails at once with CCI_ENOMEM, "
	                       "logged with the URI once",
	                    connect_without_descriptor_fails_at_once) ||
	       !CU_add_test(s, "a server that drops the handshake is tried again, waits doubling "
	                       "up to 1 s, until the connect timeout (CCI_ETIMEDOUT)",
	                    dropped_handshakes_are_tried_again);
}
