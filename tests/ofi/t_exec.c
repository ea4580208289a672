/*
 * t_exec.c - a program exec'd by a child of the application inherits no
 * descriptor libfabric opened for an endpoint (its epoll sets, socket
 * pairs, listening socket, and the TCP sockets rxm connects and accepts
 * later, during progress), and every descriptor the application left
 * inheritable on purpose (TCP sockets of its own, a pipe) is still
 * inherited (plugins/ofi/ofi_fd.c).  Both ends of an rxm connection are
 * in this process: two endpoints connected to each other.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ofi_test.h"
#include "proc_probe.h"

#define MAX_FDS 512

static int fd_in(int fd, const int *set, int n)
{
	for (int i = 0; i < n; i++)
		if (set[i] == fd)
			return 1;
	return 0;
}

/* A TCP connection of the application's own on loopback, inheritable:
 * fd[0] listens, fd[1] connected to it, fd[2] accepted. */
static int app_tcp(int fd[3])
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	fd[0] = socket(AF_INET, SOCK_STREAM, 0);
	fd[1] = socket(AF_INET, SOCK_STREAM, 0);
	if (fd[0] < 0 || fd[1] < 0 || bind(fd[0], (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd[0], 1) != 0 || getsockname(fd[0], (struct sockaddr *)&sa, &len) != 0 ||
	    connect(fd[1], (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	fd[2] = accept(fd[0], NULL, NULL);
	return fd[2] < 0 ? -1 : 0;
}

static void library_descriptors_close_on_exec(void)
{
	int before[MAX_FDS], after[MAX_FDS], mine[5], nb, na;
	cci_endpoint_t *a, *b;
	cci_connection_t *ca = NULL, *cb = NULL;
	cci_device_t *dev;

	nb = proc_fds_after_exec(before, MAX_FDS);
	CU_ASSERT_FATAL(nb >= 0);
	dev = ot_init();
	CU_ASSERT_FATAL(dev != NULL);
	a = ot_endpoint(dev);
	b = ot_endpoint(dev);
	CU_ASSERT_FATAL(a && b && ot_pair(a, b, &ca, &cb) == 0);
	CU_ASSERT_EQUAL(cci_send(ca, "ping", 4, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	CU_ASSERT_EQUAL(cci_send(cb, "pong", 4, NULL, CCI_FLAG_BLOCKING), CCI_SUCCESS);
	CU_ASSERT_FATAL(app_tcp(mine) == 0 && pipe(mine + 3) == 0);
	na = proc_fds_after_exec(after, MAX_FDS);
	CU_ASSERT(na >= 0);
	for (int i = 0; i < na; i++) {
		if (fd_in(after[i], before, nb) || fd_in(after[i], mine, 5))
			continue;
		printf("\n    descriptor %d reached the exec'd program\n", after[i]);
		CU_FAIL("a descriptor of the library reached a program exec'd by a child");
	}
	for (int i = 0; i < 5; i++) {
		if (!fd_in(mine[i], after, na))
			printf("\n    the application's descriptor %d did not\n", mine[i]);
		CU_ASSERT(fd_in(mine[i], after, na));
		close(mine[i]);
	}
	CU_ASSERT_EQUAL(cci_destroy_endpoint(b), CCI_SUCCESS);
	ot_fini(a);
}

int ot_add_exec_suite(void)
{
	CU_pSuite s = CU_add_suite("close-on-exec", NULL, NULL);

	return !s ||
	       !CU_add_test(s, "a program exec'd by a child inherits no descriptor of the library, "
	                       "and every one the application left inheritable",
	                    library_descriptors_close_on_exec);
}
