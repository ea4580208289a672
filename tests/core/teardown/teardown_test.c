/*
 * teardown_test.c - the core tears an endpoint down in the plugin's three
 * steps (cci_plugin.h): close, stop, free, in that order; at cci_finalize
 * every endpoint is closed before any is stopped and stopped before any
 * is freed; and from close on, a connection request the plugin posts is
 * refused (CCI_ERR_DISCONNECTED) and raises no event.  The plugin
 * (teardown_plugin.c, alone in CCI_PLUGIN_PATH) writes each step to the
 * file named by CCI_TEARDOWN_LOG.
 */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cci.h"
#include "unit_run.h"

static char log_path[] = "/tmp/cci-teardown-XXXXXX";

/* The log's lines, joined by '|', into out; then the log is emptied. */
static void take_log(char *out, size_t len)
{
	FILE *f = fopen(log_path, "r");
	char line[128];

	out[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (out[0])
			strncat(out, "|", len - strlen(out) - 1);
		strncat(out, line, len - strlen(out) - 1);
	}
	if (f)
		fclose(f);
	f = fopen(log_path, "w");
	if (f)
		fclose(f);
}

static void expect(const char *got, const char *want)
{
	if (strcmp(got, want) != 0)
		fprintf(stderr, "\n  got  %s\n  want %s\n", got, want);
	CU_ASSERT_STRING_EQUAL(got, want);
}

static void t_destroy_one(void)
{
	uint32_t caps = 0;
	cci_endpoint_t *a = NULL, *b = NULL;
	char got[1024], want[1024];

	CU_ASSERT_EQUAL_FATAL(cci_init(CCI_ABI_VERSION, 0, &caps), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(NULL, 0, &a, NULL), CCI_SUCCESS);
	CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(NULL, 0, &b, NULL), CCI_SUCCESS);
	take_log(got, sizeof(got));
	CU_ASSERT_EQUAL(cci_destroy_endpoint(a), CCI_SUCCESS);
	take_log(got, sizeof(got));
	snprintf(want, sizeof(want), "close teardown://0 0|stop teardown://0 0|"
	         "request teardown://0 %d|free teardown://0 0", CCI_ERR_DISCONNECTED);
	expect(got, want);
	CU_ASSERT_EQUAL(cci_finalize(), CCI_SUCCESS);
	take_log(got, sizeof(got));
	snprintf(want, sizeof(want), "close teardown://1 0|stop teardown://1 0|"
	         "request teardown://1 %d|free teardown://1 0", CCI_ERR_DISCONNECTED);
	expect(got, want);
}

static void t_finalize_all(void)
{
	uint32_t caps = 0;
	cci_endpoint_t *ep[3];
	char got[1024], *save = NULL;
	int first[3] = { -1, -1, -1 }, last[3] = { -1, -1, -1 }, n = 0, refused = 0;

	CU_ASSERT_EQUAL_FATAL(cci_init(CCI_ABI_VERSION, 0, &caps), CCI_SUCCESS);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL_FATAL(cci_create_endpoint(NULL, 0, &ep[i], NULL), CCI_SUCCESS);
	take_log(got, sizeof(got));
	CU_ASSERT_EQUAL(cci_finalize(), CCI_SUCCESS);
	take_log(got, sizeof(got));
	/* Whatever the order of the endpoints within a step, each step is
	 * done on all three before the next begins: where each step's lines
	 * begin and end. */
	for (char *tok = strtok_r(got, "|", &save); tok; tok = strtok_r(NULL, "|", &save), n++) {
		int k = !strncmp(tok, "close ", 6) ? 0 : !strncmp(tok, "stop ", 5) ? 1
		        : !strncmp(tok, "free ", 5) ? 2 : -1;
		int rc = 0;

		if (!strncmp(tok, "request ", 8)) {
			refused += sscanf(strrchr(tok, ' ') + 1, "%d", &rc) == 1 &&
			           rc == CCI_ERR_DISCONNECTED;
			continue;
		}
		CU_ASSERT_FATAL(k >= 0);
		if (first[k] < 0)
			first[k] = n;
		last[k] = n;
	}
	CU_ASSERT_EQUAL(n, 12); /* 3 closes, 3 stops, 3 requests, 3 frees */
	CU_ASSERT_EQUAL(refused, 3);
	CU_ASSERT(first[0] >= 0 && first[1] >= 0 && first[2] >= 0);
	CU_ASSERT(last[0] < first[1]);
	CU_ASSERT(last[1] < first[2]);
}

static const struct unit_test tests[] = {
	{ "cci_destroy_endpoint closes, stops and frees, refusing a request from close on",
	  t_destroy_one },
	{ "cci_finalize closes every endpoint before stopping any, stops all before freeing any",
	  t_finalize_all },
};

int main(void)
{
	int fd = mkstemp(log_path);
	int rc;

	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	close(fd);
	setenv("CCI_TEARDOWN_LOG", log_path, 1);
	rc = UNIT_RUN("endpoint teardown", tests);
	unlink(log_path);
	return rc;
}
