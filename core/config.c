/*
 * config.c - turning the CCI_CONFIG ini file into devices.
 *
 * Every section is a device.  The core reads its own keys (transport,
 * priority, default) and hands the section to the plugin serving the
 * transport, which has the rest read against its table of keys
 * (conf_keys.c).  Every mistake fails cci_init() with one line naming the
 * file, the line and the problem (cci__conf_error, conf_keys.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "ini.h"

/* Transports a config file may name, whether or not their plugin is here. */
static const char *const known_transports[] = { "sm", "tcp", "sock", "verbs", "ofi", NULL };

static int is_known_transport(const char *t)
{
	for (const char *const *k = known_transports; *k; k++)
		if (strcmp(*k, t) == 0)
			return 1;
	return 0;
}

/* Copy the section's keys into dev->conf and dev->pub.conf_argv. */
static int dev_copy_conf(cci__dev_t *dev, const struct ini_section *s)
{
	char **argv = calloc((size_t)s->nkv + 1, sizeof(*argv));

	dev->conf = calloc((size_t)s->nkv + 1, sizeof(*dev->conf));
	if (!argv || !dev->conf) {
		free(argv);
		return CCI_ENOMEM;
	}
	dev->pub.conf_argv = (const char *const *)argv;
	for (int i = 0; i < s->nkv; i++) {
		const struct ini_kv *kv = &s->kv[i];
		dev->conf[i].key = strdup(kv->key);
		dev->conf[i].value = strdup(kv->value);
		dev->conf[i].line = kv->line;
		dev->conf_count = i + 1;
		if (asprintf(&argv[i], "%s=%s", kv->key, kv->value) < 0)
			argv[i] = NULL;
		if (!dev->conf[i].key || !dev->conf[i].value || !argv[i])
			return CCI_ENOMEM;
	}
	return CCI_SUCCESS;
}

static int parse_int(const char *v, long min, long max, long *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end != '\0' || n < min || n > max)
		return CCI_EINVAL;
	*out = n;
	return CCI_SUCCESS;
}

/* Read priority= and default=; the first default wins nothing: two is an error. */
static int dev_core_keys(cci__dev_t *dev, const cci__dev_t **first_default)
{
	for (int i = 0; i < dev->conf_count; i++) {
		const char *k = dev->conf[i].key, *v = dev->conf[i].value;
		long n;
		if (strcmp(k, "priority") == 0) {
			if (parse_int(v, 0, 100, &n) != CCI_SUCCESS) {
				cci__conf_error(dev, i, "\"%s\" is not a priority (an integer 0..100)", v);
				return CCI_EINVAL;
			}
			core_dev(dev)->priority = (int)n;
		} else if (strcmp(k, "default") == 0) {
			if (parse_int(v, 0, 1, &n) != CCI_SUCCESS) {
				cci__conf_error(dev, i, "\"%s\" is not 0 or 1", v);
				return CCI_EINVAL;
			}
			if (n && *first_default) {
				cci__conf_error(dev, i, "a second default device (the first is [%s])",
				                (*first_default)->pub.name);
				return CCI_EINVAL;
			}
			core_dev(dev)->is_default = (int)n;
			if (n)
				*first_default = dev;
		}
	}
	return CCI_SUCCESS;
}

/* One section of the file at conf_path: a device, or a skip (its
 * transport's plugin is filtered out). */
static int config_section(const char *conf_path, const struct ini_section *s,
                          const cci__dev_t **first_default)
{
	const char *transport = ini_section_get(s, "transport");
	const struct cci_plugin *plugin;
	cci__dev_t *dev;
	int rc;

	if (!transport) {
		LOG_ERR("%s:%d: [%s]: missing \"transport =\" (one of sm, tcp, sock, verbs, ofi)",
		        conf_path, s->line, s->name);
		return CCI_EINVAL;
	}
	plugin = cci__plugin_for_transport(transport);
	if (!plugin) {
		if (!is_known_transport(transport)) {
			LOG_ERR("%s:%d: [%s]: unknown transport \"%s\" (one of sm, tcp, sock, verbs, ofi)",
			        conf_path, s->line, s->name, transport);
			return CCI_EINVAL;
		}
		LOG_WARN("%s:%d: [%s]: transport \"%s\" is not available here (plugin not built, "
		         "failed to load, or excluded by CCI_CTP): device skipped",
		         conf_path, s->line, s->name, transport);
		return CCI_SUCCESS;
	}
	dev = cci__dev_new(plugin, s->name);
	if (!dev)
		return CCI_ENOMEM;
	core_dev(dev)->line = s->line;
	dev->pub.transport = plugin->transports[0];
	for (const char *const *t = plugin->transports; *t; t++)
		if (strcmp(*t, transport) == 0)
			dev->pub.transport = *t; /* the plugin's own static string */
	rc = dev_copy_conf(dev, s);
	if (rc == CCI_SUCCESS)
		rc = dev_core_keys(dev, first_default);
	if (rc == CCI_SUCCESS)
		rc = plugin->dev_configure(dev);
	return rc;
}

int cci__config_load(const char *path)
{
	struct ini_file ini;
	char err[512];
	const cci__dev_t *first_default = NULL;
	int rc;

	rc = ini_parse_file(path, &ini, err, sizeof(err));
	if (rc != CCI_SUCCESS) {
		LOG_ERR("CCI_CONFIG: %s", err);
		return rc;
	}
	cci__conf_file_set(path);
	LOG(CCI_LOG_CONFIG, "reading %s: %d section(s)", path, ini.nsections);
	for (int i = 0; i < ini.nsections && rc == CCI_SUCCESS; i++)
		rc = config_section(path, &ini.sections[i], &first_default);
	if (rc == CCI_ENOMEM)
		LOG_ERR("%s: out of memory while reading it", path);
	ini_free(&ini);
	cci__conf_file_set(NULL);
	return rc;
}
