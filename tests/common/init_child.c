/*
 * init_child.c - see init_child.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "init_child.h"

static void read_all(int fd, char *buf, size_t len)
{
	size_t off = 0;
	ssize_t n;

	while (off + 1 < len && (n = read(fd, buf + off, len - 1 - off)) > 0)
		off += (size_t)n;
	buf[off] = '\0';
}

static void set_or_unset(const char *name, const char *value)
{
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

void init_child_run(const char *path, const char *text, const char *ctp,
                    void (*body)(int out_fd), struct child_result *r)
{
	int out[2], err[2], status;
	pid_t pid;

	if (text) {
		FILE *f = fopen(path, "w");
		CU_ASSERT_FATAL(f != NULL);
		fputs(text, f);
		fclose(f);
	}
	CU_ASSERT_FATAL(pipe(out) == 0 && pipe(err) == 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		dup2(err[1], 2);
		close(out[0]);
		close(err[0]);
		set_or_unset("CCI_CONFIG", path);
		set_or_unset("CCI_CTP", ctp);
		body(out[1]);
		_exit(127); /* the body must exit */
	}
	close(out[1]);
	close(err[1]);
	read_all(out[0], r->out, sizeof(r->out));
	read_all(err[0], r->err, sizeof(r->err));
	close(out[0]);
	close(err[0]);
	waitpid(pid, &status, 0);
	r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
