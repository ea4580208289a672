/*
 * ini.h - the configuration file parser (CCI_CONFIG).
 *
 * Format: "[section]" headers, "key = value" lines, '#' or ';' comments
 * (whole lines, or after whitespace at the end of a line), blank lines.
 * Whitespace around names, keys and values is trimmed.  Every key belongs
 * to a section.  A section name appears once; a key appears once per
 * section.
 *
 * Ownership: ini_parse_*() fills *out with memory it allocates; the caller
 * frees it with ini_free().  On failure *out is left empty (nothing to
 * free) and err holds one line "path:line: problem".
 */
#ifndef CCI_CONFIG_INI_H
#define CCI_CONFIG_INI_H

#include <stddef.h>

struct ini_kv {
	char *key;
	char *value;
	int line;              /* 1-based line of the key in the file */
};

struct ini_section {
	char *name;
	int line;              /* line of the "[name]" header */
	struct ini_kv *kv;     /* nkv entries in file order */
	int nkv;
};

struct ini_file {
	char *path;            /* as given to the parser */
	struct ini_section *sections; /* nsections entries in file order */
	int nsections;
};

/*
 * Parse the file at path.  Returns 0 (CCI_SUCCESS), CCI_ERR_NOT_FOUND when
 * the file cannot be opened or read, CCI_EINVAL for a syntax error, a key
 * outside any section, an empty name, a duplicate section or key, or a
 * line longer than 4096 bytes, CCI_ENOMEM when out of memory.
 */
int ini_parse_file(const char *path, struct ini_file *out, char *err, size_t errlen);

/* As ini_parse_file(), from len bytes at buf (need not be NUL-terminated);
 * name stands for the path in messages.  A NUL byte in buf is an error. */
int ini_parse_buffer(const char *name, const char *buf, size_t len,
                     struct ini_file *out, char *err, size_t errlen);

/* Free what a successful parse filled in; *f is emptied. */
void ini_free(struct ini_file *f);

/* The value of key in section s, or NULL. */
const char *ini_section_get(const struct ini_section *s, const char *key);

#endif /* CCI_CONFIG_INI_H */
