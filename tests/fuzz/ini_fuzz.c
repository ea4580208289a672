/*
 * ini_fuzz.c - libFuzzer harness for ini_parse_buffer().
 *
 * Any input must give either a parse whose every string is NUL-terminated
 * and findable, or an error that is one non-empty printable line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "ini.h"

static void check_error(const char *err)
{
	const char *p;

	if (err[0] == '\0')
		abort();
	for (p = err; *p != '\0'; p++) {
		if (*p == '\n')
			abort();
	}
}

static void check_file(const struct ini_file *f)
{
	int i, j;

	for (i = 0; i < f->nsections; i++) {
		const struct ini_section *s = &f->sections[i];

		if (s->name[0] == '\0' || s->line < 1)
			abort();
		for (j = 0; j < s->nkv; j++) {
			if (ini_section_get(s, s->kv[j].key) != s->kv[j].value)
				abort();
			if (s->kv[j].line <= s->line)
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ini_file f;
	char err[256];
	/* A copy of exactly size bytes, so reading past the end is caught. */
	char *buf = malloc(size ? size : 1);
	int rc;

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	err[0] = '\0';
	rc = ini_parse_buffer("fuzz.ini", buf, size, &f, err, sizeof(err));
	if (rc == 0) {
		check_file(&f);
		ini_free(&f);
	} else {
		if (rc != CCI_EINVAL || f.nsections != 0 || f.sections != NULL)
			abort();
		check_error(err);
	}
	free(buf);
	return 0;
}
