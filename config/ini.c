/*
 * ini.c - the configuration file parser (see ini.h for the format).
 *
 * The input is untrusted: every line is handled as a (pointer, length)
 * pair over the caller's buffer, so no fixed-size copy can overflow, and
 * anything unexpected is an error with the file name and line number.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "ini.h"

#define INI_MAX_LINE 4096
/* A config file is a few hundred bytes; the cap keeps a mistaken
 * CCI_CONFIG=/dev/zero from eating all memory. */
#define INI_MAX_FILE (16u << 20)
/* Names quoted in messages are cut so the message stays one short line. */
#define INI_QUOTE_MAX 48

struct ini_parser {
	const char *name;        /* stands for the path in messages */
	struct ini_file *f;
	int seccap;              /* allocated entries of f->sections */
	int kvcap;               /* allocated entries of the last section's kv */
	int line;                /* current line, 1-based */
	char *err;
	size_t errlen;
};

/* A view of part of a line: not NUL-terminated. */
struct span {
	const char *p;
	size_t len;
};

static void ini_error(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ini_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

static struct span span_trim(struct span s)
{
	while (s.len > 0 && is_blank(s.p[0])) {
		s.p++;
		s.len--;
	}
	while (s.len > 0 && is_blank(s.p[s.len - 1]))
		s.len--;
	return s;
}

/* A comment starts a line or follows whitespace; elsewhere '#' and ';'
 * are data, so values such as "a#b" survive. */
static struct span span_strip_comment(struct span s)
{
	size_t i;

	for (i = 0; i < s.len; i++) {
		if ((s.p[i] == '#' || s.p[i] == ';') &&
		    (i == 0 || is_blank(s.p[i - 1]))) {
			s.len = i;
			break;
		}
	}
	return s;
}

static int span_eq(struct span s, const char *str)
{
	return strlen(str) == s.len && memcmp(s.p, str, s.len) == 0;
}

/* Quote bytes for a message: printable ASCII as is, the rest as \xNN, so
 * a message stays one printable line whatever the file holds. */
static const char *quote(struct span s, char *buf, size_t buflen)
{
	size_t i, o = 0;

	for (i = 0; i < s.len && o + 8 < buflen; i++) {
		unsigned char c = (unsigned char)s.p[i];

		if (i == INI_QUOTE_MAX) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, buflen - o, "\\x%02x", c);
	}
	buf[o] = '\0';
	return buf;
}

static void parse_error(struct ini_parser *ps, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void parse_error(struct ini_parser *ps, const char *fmt, ...)
{
	char problem[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(problem, sizeof(problem), fmt, ap);
	va_end(ap);
	ini_error(ps->err, ps->errlen, "%s:%d: %s", ps->name, ps->line, problem);
}

static int oom(struct ini_parser *ps)
{
	ini_error(ps->err, ps->errlen, "%s: out of memory", ps->name);
	return CCI_ENOMEM;
}

static char *span_dup(struct span s)
{
	char *str = malloc(s.len + 1);

	if (str != NULL) {
		memcpy(str, s.p, s.len);
		str[s.len] = '\0';
	}
	return str;
}

/* Make room for entry n of an array of *cap elements of size elem.
 * Returns the (possibly moved) array, or NULL when out of memory. */
static void *grow(void *array, int *cap, int n, size_t elem)
{
	void *bigger;
	int newcap;

	if (n < *cap)
		return array;
	if (*cap > INT_MAX / 2)
		return NULL;
	newcap = *cap ? *cap * 2 : 4;
	bigger = realloc(array, (size_t)newcap * elem);
	if (bigger != NULL)
		*cap = newcap;
	return bigger;
}

static int add_section(struct ini_parser *ps, struct span name)
{
	struct ini_file *f = ps->f;
	struct ini_section *s;
	char q[INI_QUOTE_MAX * 4 + 8];
	int i;

	for (i = 0; i < f->nsections; i++) {
		if (span_eq(name, f->sections[i].name)) {
			parse_error(ps, "duplicate section [%s] (first at line %d)",
			            quote(name, q, sizeof(q)), f->sections[i].line);
			return CCI_EINVAL;
		}
	}
	s = grow(f->sections, &ps->seccap, f->nsections, sizeof(*s));
	if (s == NULL)
		return oom(ps);
	f->sections = s;
	s = &f->sections[f->nsections];
	memset(s, 0, sizeof(*s));
	s->name = span_dup(name);
	if (s->name == NULL)
		return oom(ps);
	s->line = ps->line;
	f->nsections++;
	ps->kvcap = 0;
	return 0;
}

/* "[name]" possibly followed by blanks (comments are already gone). */
static int parse_section(struct ini_parser *ps, struct span s)
{
	const char *close = memchr(s.p, ']', s.len);
	struct span name, rest;
	char q[INI_QUOTE_MAX * 4 + 8];

	if (close == NULL) {
		parse_error(ps, "unterminated section header (missing ']')");
		return CCI_EINVAL;
	}
	name.p = s.p + 1;
	name.len = (size_t)(close - name.p);
	rest.p = close + 1;
	rest.len = s.len - (size_t)(rest.p - s.p);
	if (span_trim(rest).len > 0) {
		parse_error(ps, "unexpected text \"%s\" after ']'",
		            quote(span_trim(rest), q, sizeof(q)));
		return CCI_EINVAL;
	}
	if (memchr(name.p, '[', name.len) != NULL) {
		parse_error(ps, "'[' inside section name");
		return CCI_EINVAL;
	}
	name = span_trim(name);
	if (name.len == 0) {
		parse_error(ps, "empty section name");
		return CCI_EINVAL;
	}
	return add_section(ps, name);
}

static int add_kv(struct ini_parser *ps, struct span key, struct span value)
{
	struct ini_section *sec = &ps->f->sections[ps->f->nsections - 1];
	struct ini_kv *kv;
	char q[INI_QUOTE_MAX * 4 + 8], qs[INI_QUOTE_MAX * 4 + 8];
	struct span secname = { sec->name, strlen(sec->name) };
	int i;

	for (i = 0; i < sec->nkv; i++) {
		if (span_eq(key, sec->kv[i].key)) {
			parse_error(ps, "duplicate key \"%s\" in [%s] (first at line %d)",
			            quote(key, q, sizeof(q)),
			            quote(secname, qs, sizeof(qs)), sec->kv[i].line);
			return CCI_EINVAL;
		}
	}
	kv = grow(sec->kv, &ps->kvcap, sec->nkv, sizeof(*kv));
	if (kv == NULL)
		return oom(ps);
	sec->kv = kv;
	kv = &sec->kv[sec->nkv];
	kv->key = span_dup(key);
	kv->value = span_dup(value);
	kv->line = ps->line;
	if (kv->key == NULL || kv->value == NULL) {
		free(kv->key);
		free(kv->value);
		return oom(ps);
	}
	sec->nkv++;
	return 0;
}

/* "key = value"; the value may be empty and may itself contain '='. */
static int parse_kv(struct ini_parser *ps, struct span s)
{
	const char *eq = memchr(s.p, '=', s.len);
	struct span key, value;
	char q[INI_QUOTE_MAX * 4 + 8];

	if (eq == NULL) {
		parse_error(ps, "expected \"key = value\", got \"%s\"",
		            quote(s, q, sizeof(q)));
		return CCI_EINVAL;
	}
	key.p = s.p;
	key.len = (size_t)(eq - s.p);
	key = span_trim(key);
	value.p = eq + 1;
	value.len = s.len - (size_t)(value.p - s.p);
	value = span_trim(value);
	if (key.len == 0) {
		parse_error(ps, "expected \"key = value\", the key is missing");
		return CCI_EINVAL;
	}
	if (ps->f->nsections == 0) {
		parse_error(ps, "key \"%s\" outside any section",
		            quote(key, q, sizeof(q)));
		return CCI_EINVAL;
	}
	return add_kv(ps, key, value);
}

static int parse_line(struct ini_parser *ps, struct span s)
{
	const char *nul;

	/* The length limit is on the text; the terminator does not count. */
	if (s.len > 0 && s.p[s.len - 1] == '\r')
		s.len--;
	if (s.len > INI_MAX_LINE) {
		parse_error(ps, "line longer than %d bytes", INI_MAX_LINE);
		return CCI_EINVAL;
	}
	nul = memchr(s.p, '\0', s.len);
	if (nul != NULL) {
		parse_error(ps, "NUL byte at column %d (binary file?)",
		            (int)(nul - s.p) + 1);
		return CCI_EINVAL;
	}
	s = span_trim(span_strip_comment(s));
	if (s.len == 0)
		return 0;
	if (s.p[0] == '[')
		return parse_section(ps, s);
	return parse_kv(ps, s);
}

/* Split the input into lines and parse each until the first error. */
static int parse_lines(struct ini_parser *ps, const char *buf, size_t len)
{
	const char *end = buf + len;
	int rc = 0;

	/* Editors on some systems start UTF-8 files with a byte order mark. */
	if (len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
		buf += 3;
	while (rc == 0 && buf < end) {
		const char *nl = memchr(buf, '\n', (size_t)(end - buf));
		struct span line = { buf, (size_t)((nl ? nl : end) - buf) };

		if (ps->line == INT_MAX) {
			parse_error(ps, "too many lines");
			return CCI_EINVAL;
		}
		ps->line++;
		rc = parse_line(ps, line);
		buf = nl ? nl + 1 : end;
	}
	return rc;
}

int ini_parse_buffer(const char *name, const char *buf, size_t len,
                     struct ini_file *out, char *err, size_t errlen)
{
	struct ini_file f = { 0 };
	struct ini_parser ps = {
		.name = name ? name : "(buffer)", .f = &f,
		.err = err, .errlen = errlen,
	};
	int rc = 0;

	if (out == NULL || (buf == NULL && len > 0)) {
		ini_error(err, errlen, "%s: invalid arguments", ps.name);
		return CCI_EINVAL;
	}
	if (len > 0)
		rc = parse_lines(&ps, buf, len);
	if (rc == 0) {
		f.path = strdup(ps.name);
		if (f.path == NULL)
			rc = oom(&ps);
	}
	if (rc != 0) {
		ini_free(&f);
		memset(out, 0, sizeof(*out));
		return rc;
	}
	*out = f;
	return 0;
}

/* Read all of fp into *bufp (malloc'ed).  Stops past INI_MAX_FILE bytes,
 * which the caller reports. */
static int read_all(FILE *fp, char **bufp, size_t *lenp)
{
	char *buf = NULL, *bigger;
	size_t len = 0, cap = 0;

	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			if (cap > INI_MAX_FILE + 1)
				cap = INI_MAX_FILE + 1;
			bigger = realloc(buf, cap);
			if (bigger == NULL) {
				free(buf);
				return CCI_ENOMEM;
			}
			buf = bigger;
		}
		len += fread(buf + len, 1, cap - len, fp);
		if (len > INI_MAX_FILE || ferror(fp) || feof(fp))
			break;
	}
	if (ferror(fp)) {
		free(buf);
		return CCI_ERR_NOT_FOUND;
	}
	*bufp = buf;
	*lenp = len;
	return 0;
}

/* Read a whole file into memory; on success *bufp is malloc'ed. */
static int read_file(const char *path, char **bufp, size_t *lenp,
                     char *err, size_t errlen)
{
	FILE *fp = fopen(path, "rb");
	int rc;

	if (fp == NULL) {
		ini_error(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return CCI_ERR_NOT_FOUND;
	}
	errno = 0;
	rc = read_all(fp, bufp, lenp);
	if (rc == CCI_ERR_NOT_FOUND)
		ini_error(err, errlen, "%s: cannot read: %s", path,
		          strerror(errno ? errno : EIO));
	else if (rc == CCI_ENOMEM)
		ini_error(err, errlen, "%s: out of memory", path);
	fclose(fp);
	if (rc == 0 && *lenp > INI_MAX_FILE) {
		free(*bufp);
		ini_error(err, errlen, "%s: larger than %u bytes, not a config file",
		          path, INI_MAX_FILE);
		return CCI_EINVAL;
	}
	return rc;
}

int ini_parse_file(const char *path, struct ini_file *out, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	if (out == NULL || path == NULL) {
		ini_error(err, errlen, "%s: invalid arguments", path ? path : "(null)");
		return CCI_EINVAL;
	}
	memset(out, 0, sizeof(*out));
	rc = read_file(path, &buf, &len, err, errlen);
	if (rc != 0)
		return rc;
	rc = ini_parse_buffer(path, buf, len, out, err, errlen);
	free(buf);
	return rc;
}

void ini_free(struct ini_file *f)
{
	int i, j;

	if (f == NULL)
		return;
	for (i = 0; i < f->nsections; i++) {
		struct ini_section *s = &f->sections[i];

		for (j = 0; j < s->nkv; j++) {
			free(s->kv[j].key);
			free(s->kv[j].value);
		}
		free(s->kv);
		free(s->name);
	}
	free(f->sections);
	free(f->path);
	memset(f, 0, sizeof(*f));
}

const char *ini_section_get(const struct ini_section *s, const char *key)
{
	int i;

	if (s == NULL || key == NULL)
		return NULL;
	for (i = 0; i < s->nkv; i++) {
		if (strcmp(s->kv[i].key, key) == 0)
			return s->kv[i].value;
	}
	return NULL;
}
