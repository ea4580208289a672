/*
 * conf_keys.c - the plugins' tables of ini keys: checked when a plugin is
 * loaded, applied to a config section for the plugin (core->conf_parse),
 * and copied for cci_get_plugin_keys(); and the one line that reports a
 * mistake in a section (core->conf_error), for config.c, the parse here
 * and the plugins alike.
 *
 * Parsing lives here rather than in each plugin so that every transport
 * refuses a bad value with the same words, and so that the keys a plugin
 * reads are data that cci_info can show.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* ---------------------------------------------------------------- errors */

static const char *conf_path; /* the file being read, for messages */

void cci__conf_file_set(const char *path)
{
	conf_path = path;
}

void cci__conf_error(cci__dev_t *dev, int kv, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (kv >= 0 && kv < dev->conf_count)
		LOG_ERR("%s:%d: [%s] %s: %s", conf_path ? conf_path : "(no file)",
		        dev->conf[kv].line, dev->pub.name, dev->conf[kv].key, msg);
	else if (core_dev(dev)->line > 0)
		LOG_ERR("%s:%d: [%s]: %s", conf_path ? conf_path : "(no file)", core_dev(dev)->line,
		        dev->pub.name, msg);
	else
		LOG_ERR("%s: [%s]: %s", conf_path ? conf_path : "(no file)", dev->pub.name, msg);
}

/* ------------------------------------------------------- the core's keys */

static const char *const core_keys[] = { "transport", "priority", "default", NULL };

int cci__conf_is_core_key(const char *key)
{
	for (const char *const *k = core_keys; *k; k++)
		if (strcmp(*k, key) == 0)
			return 1;
	return 0;
}

/* ------------------------------------------------------------ conversion */

/* Decimal digits only: no sign, no space, no base prefix. */
static int uint_parse(const char *v, uint64_t max, uint64_t *out)
{
	uint64_t n = 0;

	if (*v == '\0')
		return CCI_EINVAL;
	for (; *v; v++) {
		unsigned d = (unsigned)(*v - '0');
		if (*v < '0' || *v > '9' || d > max || n > (max - d) / 10)
			return CCI_EINVAL;
		n = n * 10 + d;
	}
	*out = n;
	return CCI_SUCCESS;
}

static void uint_store(void *field, size_t size, uint64_t n)
{
	if (size == sizeof(uint16_t))
		*(uint16_t *)field = (uint16_t)n;
	else if (size == sizeof(uint32_t))
		*(uint32_t *)field = (uint32_t)n;
	else
		*(uint64_t *)field = n;
}

static void choices_text(const char *const *choices, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (int i = 0; choices[i] && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", choices[i]);
}

static int choice_index(const char *const *choices, const char *v)
{
	for (int i = 0; choices[i]; i++)
		if (strcmp(choices[i], v) == 0)
			return i;
	return -1;
}

/* The core's conversion of v by k->type into field; why says what is wrong. */
static int key_convert_type(const struct cci_conf_key *k, const char *v, void *field,
                            char *why, size_t len)
{
	uint64_t n;
	int idx;

	switch (k->type) {
	case CCI_CONF_UINT:
		if (uint_parse(v, k->max, &n) != CCI_SUCCESS || n < k->min) {
			snprintf(why, len, "\"%s\" is not an integer in %llu..%llu", v,
			         (unsigned long long)k->min, (unsigned long long)k->max);
			return CCI_EINVAL;
		}
		uint_store(field, k->size, n);
		return CCI_SUCCESS;
	case CCI_CONF_CHOICE:
		idx = choice_index(k->choices, v);
		if (idx < 0) {
			char words[256];
			choices_text(k->choices, words, sizeof(words));
			snprintf(why, len, "\"%s\" is not one of %s", v, words);
			return CCI_EINVAL;
		}
		*(int *)field = idx;
		return CCI_SUCCESS;
	case CCI_CONF_STRING:
	case CCI_CONF_CUSTOM:
		break;
	}
	if (*v == '\0') {
		snprintf(why, len, "needs a value");
		return CCI_EINVAL;
	}
	if (k->type == CCI_CONF_STRING) {
		if (strlen(v) >= k->size) {
			snprintf(why, len, "\"%s\" is longer than %zu bytes", v, k->size - 1);
			return CCI_EINVAL;
		}
		memcpy(field, v, strlen(v) + 1);
	}
	return CCI_SUCCESS;
}

/* v into its field of out: the type's conversion, then the plugin's rule. */
static int key_convert(const struct cci_conf_key *k, const char *v, void *out, char *why,
                       size_t len)
{
	void *field = (char *)out + k->offset;
	char rule[256] = "";

	if (key_convert_type(k, v, field, why, len) != CCI_SUCCESS)
		return CCI_EINVAL;
	if (k->check && k->check(v, field, rule, sizeof(rule)) != CCI_SUCCESS) {
		snprintf(why, len, "\"%s\" %s", v, rule[0] ? rule : "is refused by the transport");
		return CCI_EINVAL;
	}
	return CCI_SUCCESS;
}

/* ---------------------------------------------------------- conf_parse */

static const struct cci_conf_key *key_find(const struct cci_conf_key *keys, const char *name)
{
	for (const struct cci_conf_key *k = keys; k && k->name; k++)
		if (strcmp(k->name, name) == 0)
			return k;
	return NULL;
}

static void key_names(const struct cci_conf_key *keys, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (const struct cci_conf_key *k = keys; k && k->name && off < len; k++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", k == keys ? "" : ", ", k->name);
}

static void unknown_key(cci__dev_t *dev, int kv, const struct cci_conf_key *keys)
{
	char names[400];

	key_names(keys, names, sizeof(names));
	if (names[0])
		cci__conf_error(dev, kv, "unknown key for transport %s (known: %s)",
		                dev->pub.transport, names);
	else
		cci__conf_error(dev, kv, "unknown key for transport %s (it takes no keys)",
		                dev->pub.transport);
}

/* Every default of keys into out.  The tables were checked at load, so a
 * failure here is a plugin that changed its table since. */
static int defaults_apply(cci__dev_t *dev, const struct cci_conf_key *keys, void *out, int *kv_p)
{
	char why[512];

	for (const struct cci_conf_key *k = keys; k && k->name; k++) {
		if (kv_p)
			kv_p[k - keys] = -1;
		if (k->def && key_convert(k, k->def, out, why, sizeof(why)) != CCI_SUCCESS) {
			cci__conf_error(dev, -1, "plugin %s: default of %s: %s", dev->plugin->name,
			                k->name, why);
			return CCI_EINVAL;
		}
	}
	return CCI_SUCCESS;
}

int cci__conf_parse(cci__dev_t *dev, const struct cci_conf_key *keys, void *out, int *kv_p)
{
	char why[512];
	int rc = defaults_apply(dev, keys, out, kv_p);

	for (int i = 0; i < dev->conf_count && rc == CCI_SUCCESS; i++) {
		const struct cci__conf_kv *kv = &dev->conf[i];
		const struct cci_conf_key *k;

		if (cci__conf_is_core_key(kv->key))
			continue;
		k = key_find(keys, kv->key);
		if (!k) {
			unknown_key(dev, i, keys);
			return CCI_EINVAL;
		}
		rc = key_convert(k, kv->value, out, why, sizeof(why));
		if (rc != CCI_SUCCESS)
			cci__conf_error(dev, i, "%s", why);
		else if (kv_p)
			kv_p[k - keys] = i; /* a later entry of the same key wins */
	}
	return rc;
}

/* ------------------------------------------------------- the load check */

/* Why the shape of k (type, size, hooks) is wrong, or NULL. */
static const char *key_shape_wrong(const struct cci_conf_key *k)
{
	switch (k->type) {
	case CCI_CONF_UINT:
		if (k->size != sizeof(uint16_t) && k->size != sizeof(uint32_t) &&
		    k->size != sizeof(uint64_t))
			return "an integer field is 2, 4 or 8 bytes";
		if (k->min > k->max || (k->size < 8 && k->max >> (8 * k->size) != 0))
			return "its range is empty or does not fit its field";
		return NULL;
	case CCI_CONF_STRING:
		return k->size < 2 ? "a string field needs room for a byte and its NUL" : NULL;
	case CCI_CONF_CHOICE:
		if (k->size != sizeof(int))
			return "a choice field is an int";
		return !k->choices || !k->choices[0] ? "no choices" : NULL;
	case CCI_CONF_CUSTOM:
		return !k->check || k->size == 0 ? "a custom key needs check and a field" : NULL;
	}
	return "unknown type";
}

/* Why k is wrong, or NULL; first is the table, for duplicates. */
static const char *key_wrong(const struct cci_conf_key *first, const struct cci_conf_key *k,
                             char *buf, size_t len)
{
	char problem[400];
	const char *shape;
	void *scratch;
	int rc;

	if (!k->name[0] || cci__conf_is_core_key(k->name))
		return "empty, or a key the core reads";
	if (key_find(first, k->name) != k)
		return "listed twice";
	if (!k->help)
		return "no help";
	shape = key_shape_wrong(k);
	if (shape || !k->def)
		return shape;
	scratch = calloc(1, k->offset + k->size);
	if (!scratch)
		return "out of memory checking its default";
	rc = key_convert(k, k->def, scratch, problem, sizeof(problem));
	free(scratch);
	if (rc == CCI_SUCCESS)
		return NULL;
	snprintf(buf, len, "default %s", problem);
	return buf;
}

int cci__conf_keys_check(const struct cci_conf_key *keys, char *why, size_t len)
{
	char buf[512];

	for (const struct cci_conf_key *k = keys; k && k->name; k++) {
		const char *wrong = key_wrong(keys, k, buf, sizeof(buf));
		if (wrong) {
			snprintf(why, len, "conf_keys: key \"%s\": %s", k->name, wrong);
			return CCI_EINVAL;
		}
	}
	return CCI_SUCCESS;
}

/* ---------------------------------------------- copies for cci_info */

static void key_record_free(struct cci__key_record *r)
{
	if (!r)
		return;
	free(r->name);
	free(r->def);
	free(r->help);
	for (size_t i = 0; r->choices && r->choices[i]; i++)
		free(r->choices[i]);
	free(r->choices);
	free(r);
}

void cci__conf_keys_free(struct cci__key_record **list)
{
	for (size_t i = 0; list && list[i]; i++)
		key_record_free(list[i]);
	free(list);
}

static int choices_copy(struct cci__key_record *r, const char *const *choices)
{
	size_t n = 0;

	while (choices && choices[n])
		n++;
	r->choices = calloc(n + 1, sizeof(*r->choices));
	if (!r->choices)
		return CCI_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(r->choices[i] = strdup(choices[i])))
			return CCI_ENOMEM;
	return CCI_SUCCESS;
}

/* The public view of k: string lengths as the range of a string key. */
static struct cci__key_record *key_record_new(const struct cci_conf_key *k)
{
	struct cci__key_record *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->name = strdup(k->name);
	r->help = strdup(k->help);
	r->def = k->def ? strdup(k->def) : NULL;
	if (!r->name || !r->help || (k->def && !r->def) ||
	    choices_copy(r, k->type == CCI_CONF_CHOICE ? k->choices : NULL) != CCI_SUCCESS) {
		key_record_free(r);
		return NULL;
	}
	r->pub.name = r->name;
	r->pub.type = k->type;
	if (k->type == CCI_CONF_UINT) {
		r->pub.min = k->min;
		r->pub.max = k->max;
	} else if (k->type == CCI_CONF_STRING) {
		r->pub.min = 1;
		r->pub.max = k->size - 1;
	}
	r->pub.choices = (const char *const *)r->choices;
	r->pub.def = r->def;
	r->pub.help = r->help;
	return r;
}

struct cci__key_record **cci__conf_keys_copy(const struct cci_conf_key *keys)
{
	size_t n = 0;
	struct cci__key_record **list;

	while (keys && keys[n].name)
		n++;
	list = calloc(n + 1, sizeof(*list));
	for (size_t i = 0; list && i < n; i++) {
		list[i] = key_record_new(&keys[i]);
		if (!list[i]) {
			cci__conf_keys_free(list);
			return NULL;
		}
	}
	return list;
}
