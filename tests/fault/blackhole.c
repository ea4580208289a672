/*
 * blackhole.c - the dropping peer of blackhole.h, built with the ip and
 * nft commands (iproute2, nftables) in namespaces of this process's own.
 */
#include "blackhole.h"

#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CMD_LIMIT_MS 10000u
#define PROBE_PORT 9   /* discard: nothing listens in the peer namespace */

static char reason[512];

/*
 * Run argv (a command of the search path) and wait for it, up to
 * CMD_LIMIT_MS.  Returns its exit status, 127 when it cannot be run, -1
 * when it had to be killed; out gets what it printed.
 */
static int run(const char *const argv[], char *out, size_t cap)
{
	int p[2], st = 0;
	size_t n = 0;
	uint64_t end = h_now_ms() + CMD_LIMIT_MS;
	pid_t pid;

	out[0] = '\0';
	if (pipe2(p, O_CLOEXEC) != 0)
		return 127;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return 127;
	}
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		uint64_t now = h_now_ms();
		ssize_t r;

		if (now >= end || poll(&pfd, 1, (int)(end - now)) <= 0)
			break;
		r = read(p[0], out + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == cap - 1)
			break;
	}
	out[n] = '\0';
	close(p[0]);
	while (h_now_ms() < end) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		h_sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* Run a command; on failure set reason (naming the command) and return -1. */
static int cmd(const char *const argv[])
{
	char out[400], line[200] = "";
	int rc = run(argv, out, sizeof(out));

	if (rc == 0)
		return 0;
	for (int i = 0; argv[i] && strlen(line) < sizeof(line) - 40; i++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s", i ? " " : "",
		         argv[i]);
	out[strcspn(out, "\n")] = '\0';
	if (rc == 127)
		snprintf(reason, sizeof(reason), "cannot run `%s` (is %s installed?)", line,
		         argv[0]);
	else
		snprintf(reason, sizeof(reason), "`%s` failed (status %d): %s", line, rc, out);
	return -1;
}

/* Run a command in the peer namespace, then come back. */
static int cmd_peer(struct f_blackhole *bh, const char *const argv[])
{
	int rc;

	if (setns(bh->ns_peer, CLONE_NEWNET) != 0) {
		snprintf(reason, sizeof(reason), "setns into the peer namespace: %s",
		         strerror(errno));
		return -1;
	}
	rc = cmd(argv);
	REQUIRE(setns(bh->ns_self, CLONE_NEWNET) == 0);
	return rc;
}

/* The holder: its own namespace, then wait until the test closes fd or dies. */
static pid_t start_holder(int *keep_fd)
{
	int ready[2], keep[2];
	char c = 0;
	pid_t pid;

	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(keep, O_CLOEXEC) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(keep[1]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		c = unshare(CLONE_NEWNET) == 0 ? 1 : 0;
		if (write(ready[1], &c, 1) != 1 || !c)
			_exit(1);
		while (read(keep[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(ready[1]);
	close(keep[0]);
	if (pid < 0 || read(ready[0], &c, 1) != 1 || !c) {
		close(ready[0]);
		close(keep[1]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		return -1;
	}
	close(ready[0]);
	*keep_fd = keep[1];
	return pid;
}

/*
 * A non-blocking connect from F_BH_LOCAL to the peer, watched for ms:
 * returns 0 if still pending (nothing came back), else the error it met
 * (ECONNREFUSED when the peer answered with a reset).
 */
static int tcp_probe(unsigned ms)
{
	struct sockaddr_in me = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0;
	struct pollfd pfd = { .fd = s, .events = POLLOUT };
	socklen_t len = sizeof(err);

	REQUIRE(s >= 0);
	inet_pton(AF_INET, F_BH_LOCAL, &me.sin_addr);
	inet_pton(AF_INET, F_BH_PEER, &to.sin_addr);
	to.sin_port = htons(PROBE_PORT);
	REQUIRE(bind(s, (struct sockaddr *)&me, sizeof(me)) == 0);
	if (connect(s, (struct sockaddr *)&to, sizeof(to)) == 0) {
		close(s);
		return EISCONN;
	}
	if (errno != EINPROGRESS) {
		err = errno;
		close(s);
		return err;
	}
	if (poll(&pfd, 1, (int)ms) == 1)
		getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
	close(s);
	return pfd.revents ? (err ? err : EISCONN) : 0;
}

/* A datagram to the peer: 0 if no error came back within ms. */
static int udp_probe(unsigned ms)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(PROBE_PORT) };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), err = 0;
	struct pollfd pfd = { .fd = s, .events = POLLIN };
	char b;

	REQUIRE(s >= 0);
	inet_pton(AF_INET, F_BH_PEER, &to.sin_addr);
	REQUIRE(connect(s, (struct sockaddr *)&to, sizeof(to)) == 0);
	REQUIRE(send(s, "x", 1, 0) == 1);
	/* A port unreachable would show as ECONNREFUSED on this connected socket. */
	if (poll(&pfd, 1, (int)ms) == 1 && recv(s, &b, 1, MSG_DONTWAIT) < 0)
		err = errno;
	close(s);
	return err;
}

long long f_blackhole_drops(struct f_blackhole *bh)
{
	const char *const list[] = { "nft", "list", "chain", "inet", "cci_bh", "input", NULL };
	char out[2048];
	const char *p;
	int rc;

	REQUIRE(setns(bh->ns_peer, CLONE_NEWNET) == 0);
	rc = run(list, out, sizeof(out));
	REQUIRE(setns(bh->ns_self, CLONE_NEWNET) == 0);
	p = rc == 0 ? strstr(out, "counter packets ") : NULL;
	return p ? strtoll(p + strlen("counter packets "), NULL, 10) : -1;
}

const char *f_blackhole_make(struct f_blackhole *bh)
{
	char pid[32];
	int err = 0;

	memset(bh, 0, sizeof(*bh));
	bh->holder = -1;
	bh->holder_fd = bh->ns_self = bh->ns_peer = -1;
	if (unshare(CLONE_NEWNET) != 0) {
		snprintf(reason, sizeof(reason), "cannot create a network namespace (unshare: %s; "
		         "needs root)", strerror(errno));
		return reason;
	}
	bh->ns_self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (bh->ns_self < 0)
		return "no /proc/self/ns/net";
	if (cmd((const char *const[]){ "ip", "link", "set", "lo", "up", NULL }) ||
	    cmd((const char *const[]){ "ip", "link", "add", F_BH_IFACE, "type", "veth", "peer",
	                               "name", "cci-bh1", NULL }))
		return reason;
	bh->holder = start_holder(&bh->holder_fd);
	if (bh->holder < 0)
		return "cannot start a process in a second network namespace";
	snprintf(pid, sizeof(pid), "/proc/%d/ns/net", (int)bh->holder);
	bh->ns_peer = open(pid, O_RDONLY | O_CLOEXEC);
	snprintf(pid, sizeof(pid), "%d", (int)bh->holder);
	if (bh->ns_peer < 0)
		return "cannot open the peer namespace";
	if (cmd((const char *const[]){ "ip", "link", "set", "cci-bh1", "netns", pid, NULL }) ||
	    cmd((const char *const[]){ "ip", "addr", "add", F_BH_LOCAL "/30", "dev", F_BH_IFACE,
	                               NULL }) ||
	    cmd((const char *const[]){ "ip", "link", "set", F_BH_IFACE, "up", NULL }) ||
	    cmd_peer(bh, (const char *const[]){ "ip", "addr", "add", F_BH_PEER "/30", "dev",
	                                        "cci-bh1", NULL }) ||
	    cmd_peer(bh, (const char *const[]){ "ip", "link", "set", "cci-bh1", "up", NULL }))
		return reason;

	/* Before the drop the peer answers: a reset refuses the probe (the
	 * link may take a moment to come up). */
	for (int i = 0; i < 40; i++) {
		err = tcp_probe(100);
		if (err == ECONNREFUSED)
			break;
		h_sleep_ms(50);
	}
	REQUIRE(CHECKF(err == ECONNREFUSED, "before its drop rule the peer namespace does not "
	               "refuse a connect to " F_BH_PEER ":%d (%s): the veth path is broken",
	               PROBE_PORT, err ? strerror(err) : "pending"));

	if (cmd_peer(bh, (const char *const[]){ "nft", "add", "table", "inet", "cci_bh", NULL }) ||
	    cmd_peer(bh, (const char *const[]){ "nft", "add chain inet cci_bh input { type filter "
	                                        "hook input priority 0; policy drop; }", NULL }) ||
	    cmd_peer(bh, (const char *const[]){ "nft", "add", "rule", "inet", "cci_bh", "input",
	                                        "counter", "drop", NULL }))
		return reason;

	/* Now nothing comes back, and the packets did reach the rule. */
	err = tcp_probe(500);
	REQUIRE(CHECKF(err == 0, "a TCP connect to the blackholed " F_BH_PEER " ended with %s",
	               strerror(err)));
	err = udp_probe(300);
	REQUIRE(CHECKF(err == 0, "a datagram to the blackholed " F_BH_PEER " met %s",
	               strerror(err)));
	bh->dropped = (uint64_t)f_blackhole_drops(bh);
	REQUIRE(CHECKF((long long)bh->dropped >= 2, "the drop rule counted %lld packets of the "
	               "probes", (long long)bh->dropped));
	return NULL;
}

void f_blackhole_end(struct f_blackhole *bh)
{
	if (bh->holder_fd >= 0)
		close(bh->holder_fd);
	if (bh->holder > 0) {
		kill(bh->holder, SIGKILL);
		waitpid(bh->holder, NULL, 0);
	}
	if (bh->ns_peer >= 0)
		close(bh->ns_peer);
	if (bh->ns_self >= 0)
		close(bh->ns_self);
	bh->holder = bh->holder_fd = bh->ns_peer = bh->ns_self = -1;
}
