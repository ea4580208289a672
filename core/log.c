/*
 * log.c - CCI_DEBUG categories and the log line writer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

unsigned cci__log_mask = CCI_LOG_ERR | CCI_LOG_WARN;

static const struct {
	const char *name;
	unsigned bit;
} log_names[] = {
	{ "err", CCI_LOG_ERR },     { "warn", CCI_LOG_WARN },
	{ "init", CCI_LOG_INIT },   { "config", CCI_LOG_CONFIG },
	{ "ep", CCI_LOG_EP },       { "conn", CCI_LOG_CONN },
	{ "msg", CCI_LOG_MSG },     { "rma", CCI_LOG_RMA },
	{ "event", CCI_LOG_EVENT }, { "ctp", CCI_LOG_CTP },
};
#define N_LOG_NAMES (sizeof(log_names) / sizeof(log_names[0]))

static const char *cat_name(unsigned cat)
{
	for (size_t i = 0; i < N_LOG_NAMES; i++)
		if (cat & log_names[i].bit)
			return log_names[i].name;
	return "log";
}

/* Parse CCI_DEBUG: "all", or names separated by commas. */
void cci__log_init(void)
{
	const char *env = getenv("CCI_DEBUG");
	unsigned mask = CCI_LOG_ERR | CCI_LOG_WARN;

	if (env != NULL && *env != '\0') {
		char *copy = strdup(env), *save = NULL;
		for (char *tok = copy ? strtok_r(copy, ", ", &save) : NULL; tok;
		     tok = strtok_r(NULL, ", ", &save)) {
			size_t i;
			if (strcmp(tok, "all") == 0 || strcmp(tok, "1") == 0) {
				mask = ~0u;
				continue;
			}
			for (i = 0; i < N_LOG_NAMES; i++)
				if (strcmp(tok, log_names[i].name) == 0)
					break;
			if (i < N_LOG_NAMES)
				mask |= log_names[i].bit;
			else
				fprintf(stderr, "cci: warn: CCI_DEBUG: unknown category \"%s\"\n", tok);
		}
		free(copy);
	}
	cci__log_mask = mask;
}

/* See cci__flags_keep (core.h). */
void cci__flags_ignored(int ignored, _Atomic int *logged, unsigned cat, const char *call)
{
	if ((cci__log_mask & cat) && !atomic_exchange_explicit(logged, 1, memory_order_relaxed))
		cci__log(cat, "%s: flags 0x%x mean nothing to this call and are ignored, as CCI 2 "
		         "did (said once)", call, (unsigned)ignored);
}

void cci__log(unsigned cat, const char *fmt, ...)
{
	char line[1024];
	int n;
	va_list ap;

	if ((cci__log_mask & cat) == 0)
		return;
	n = snprintf(line, sizeof(line), "cci[%d]: %s: ", (int)getpid(), cat_name(cat));
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write per line, so lines of concurrent threads do not interleave. */
	fprintf(stderr, "%s\n", line);
}
