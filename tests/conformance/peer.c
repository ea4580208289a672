/*
 * peer.c - peer processes of a test and the framed pipe messages between
 * them.  A peer is forked before the test process initialises the library,
 * so it starts from a clean, single-threaded image.
 */
#include "harness.h"
#include "proc_probe.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void h_spawn(struct h_peer *p, h_role_t role, const void *arg)
{
	int down[2], up[2];
	pid_t pid;

	REQUIRE(pipe(down) == 0);
	REQUIRE(pipe(up) == 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(down[1]);
		close(up[0]);
		h_role_prefix = "[server] ";
		role(down[0], up[1], arg);
		h_exit();
	}
	close(down[0]);
	close(up[1]);
	*p = (struct h_peer){ .pid = pid, .rfd = up[0], .wfd = down[1] };
}

static void peer_close(struct h_peer *p)
{
	if (p->rfd >= 0)
		close(p->rfd);
	if (p->wfd >= 0)
		close(p->wfd);
	p->rfd = p->wfd = -1;
	p->pid = 0;
}

void h_peer_finish(struct h_peer *p, unsigned timeout_ms)
{
	uint64_t deadline = h_now_ms() + timeout_ms;
	int status = 0;
	pid_t r = 0;

	if (p->pid <= 0)
		return;
	while ((r = waitpid(p->pid, &status, WNOHANG)) == 0 && h_now_ms() < deadline)
		h_sleep_ms(5);
	if (r == 0) {
		CHECKF(0, "server %d did not exit within %u ms", (int)p->pid, timeout_ms);
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &status, 0);
	} else if (WIFSIGNALED(status)) {
		CHECKF(0, "server killed by signal %d (%s)", WTERMSIG(status),
		       strsignal(WTERMSIG(status)));
	} else {
		CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		       "server exited with status %d", WEXITSTATUS(status));
	}
	peer_close(p);
}

void h_wait_stopped(pid_t pid)
{
	char st;

	if (proc_wait_stopped(pid, 5000) == 0)
		return;
	st = proc_state(pid);
	CHECKF(0, "process %d did not stop within 5 s (state %c)", (int)pid, st ? st : '?');
}

void h_peer_kill(struct h_peer *p)
{
	if (p->pid <= 0)
		return;
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	peer_close(p);
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *b = buf;

	while (len) {
		ssize_t n = write(fd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t len, uint64_t deadline)
{
	char *b = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = h_now_ms();
		ssize_t n;

		if (now >= deadline)
			return -1;
		if (poll(&pfd, 1, (int)(deadline - now)) <= 0)
			continue;
		n = read(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

void h_msg_send(int fd, const void *buf, uint32_t len)
{
	CHECKF(write_all(fd, &len, sizeof(len)) == 0 && write_all(fd, buf, len) == 0,
	       "pipe write failed: %s", strerror(errno));
}

int h_msg_recv(int fd, void *buf, uint32_t cap, unsigned timeout_ms)
{
	uint64_t deadline = h_now_ms() + timeout_ms;
	uint32_t len;

	if (read_all(fd, &len, sizeof(len), deadline) < 0)
		return -1;
	if (len > cap)
		return -1;
	if (read_all(fd, buf, len, deadline) < 0)
		return -1;
	return (int)len;
}

int h_msg_ready(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0;
}
