/*
 * cci_info.c - what the library offers on this host: every device with its
 * settings, and every transport plugin found or skipped, with the reason.
 * The counterpart of fi_info and ucx_info: the first thing to run when a
 * program does not get the device or transport it expected.
 *
 * It uses the public API only, plus the plugin-info extension of cci.h
 * (cci_get_plugins, cci_get_plugin_keys, cci_get_plugin_dirs,
 * cci_get_device_priority).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cci.h"
#include "cci_info.h"

#define EXIT_USAGE 2

struct info_opts {
	int verbose;
	int json;
	int leftovers; /* 1: list them; 2: and remove those of dead processes */
};

/* Everything shown, gathered before printing so that text and JSON agree. */
struct info {
	const char *config;                 /* CCI_CONFIG, or NULL */
	cci_device_t *const *devices;
	int ndevices;
	int *priority, *is_default;         /* per device */
	cci_plugin_info_t *const *plugins;
	cci_conf_key_info_t *const **keys;  /* per plugin: the ini keys it reads */
	const char *const *dirs;
};

static const char *const env_names[] = { "CCI_CONFIG", "CCI_CTP", "CCI_PLUGIN_PATH",
                                         "CCI_DEBUG", NULL };

/* The enum name of a status: scripts and bug reports quote these. */
static const char *status_name(int status)
{
	static const struct {
		int status;
		const char *name;
	} names[] = {
		{ CCI_SUCCESS, "CCI_SUCCESS" }, { CCI_ERROR, "CCI_ERROR" },
		{ CCI_ERR_DISCONNECTED, "CCI_ERR_DISCONNECTED" }, { CCI_ERR_RNR, "CCI_ERR_RNR" },
		{ CCI_ERR_DEVICE_DEAD, "CCI_ERR_DEVICE_DEAD" },
		{ CCI_ERR_RMA_HANDLE, "CCI_ERR_RMA_HANDLE" }, { CCI_ERR_RMA_OP, "CCI_ERR_RMA_OP" },
		{ CCI_ERR_NOT_IMPLEMENTED, "CCI_ERR_NOT_IMPLEMENTED" },
		{ CCI_ERR_NOT_FOUND, "CCI_ERR_NOT_FOUND" }, { CCI_EINVAL, "CCI_EINVAL" },
		{ CCI_ETIMEDOUT, "CCI_ETIMEDOUT" }, { CCI_ENOMEM, "CCI_ENOMEM" },
		{ CCI_ENODEV, "CCI_ENODEV" }, { CCI_ENETDOWN, "CCI_ENETDOWN" },
		{ CCI_EBUSY, "CCI_EBUSY" }, { CCI_ERANGE, "CCI_ERANGE" },
		{ CCI_EAGAIN, "CCI_EAGAIN" }, { CCI_ENOBUFS, "CCI_ENOBUFS" },
		{ CCI_EMSGSIZE, "CCI_EMSGSIZE" }, { CCI_ENOMSG, "CCI_ENOMSG" },
		{ CCI_EADDRNOTAVAIL, "CCI_EADDRNOTAVAIL" },
		{ CCI_ECONNREFUSED, "CCI_ECONNREFUSED" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].status == status)
			return names[i].name;
	return "unknown status";
}

/* ------------------------------------------------------------------ JSON */

/* Length of the UTF-8 sequence at p: 1 for ASCII, 2..4, 0 if malformed. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned cp;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		n = 2;
		cp = p[0] & 0x1fu;
	} else if ((p[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = p[0] & 0x0fu;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		cp = p[0] & 0x07u;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80) /* a NUL ends up here too */
			return 0;
		cp = cp << 6 | (p[i] & 0x3fu);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static void json_char(unsigned char c)
{
	switch (c) {
	case '"': fputs("\\\"", stdout); break;
	case '\\': fputs("\\\\", stdout); break;
	case '\n': fputs("\\n", stdout); break;
	case '\r': fputs("\\r", stdout); break;
	case '\t': fputs("\\t", stdout); break;
	default:
		if (c < 0x20 || c == 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
}

/* A JSON string, or null.  Paths and config values are bytes, not
 * necessarily UTF-8: a malformed byte becomes U+FFFD so the document
 * always parses. */
void info_json_str(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	if (!s) {
		fputs("null", stdout);
		return;
	}
	putchar('"');
	while (*p) {
		size_t n = utf8_len(p);
		if (n == 1)
			json_char(*p);
		else if (n == 0)
			fputs("\\ufffd", stdout);
		else
			fwrite(p, 1, n, stdout);
		p += n ? n : 1;
	}
	putchar('"');
}

/* "key": and a string value, with the separator of a list member. */
static void json_kv_str(const char *indent, const char *key, const char *val, int last)
{
	printf("%s\"%s\": ", indent, key);
	info_json_str(val);
	fputs(last ? "\n" : ",\n", stdout);
}

static void json_str_array(const char *const *v)
{
	putchar('[');
	for (int i = 0; v && v[i]; i++) {
		if (i)
			fputs(", ", stdout);
		info_json_str(v[i]);
	}
	putchar(']');
}

static int dev_has_pci(cci_device_t *d)
{
	return !(d->pci.domain == UINT32_MAX && d->pci.bus == UINT32_MAX &&
	         d->pci.dev == UINT32_MAX && d->pci.func == UINT32_MAX);
}

/* domain:bus:device.function, as lspci -D prints it. */
static void pci_address(cci_device_t *d, char *buf, size_t len)
{
	snprintf(buf, len, "%04x:%02x:%02x.%x", d->pci.domain, d->pci.bus, d->pci.dev,
	         d->pci.func);
}

static void json_device(const struct info *in, int i, int last)
{
	cci_device_t *d = in->devices[i];
	const char *ind = "      ";
	char pci[64];

	printf("    {\n");
	json_kv_str(ind, "name", d->name, 0);
	json_kv_str(ind, "transport", d->transport, 0);
	printf("%s\"up\": %s,\n", ind, d->up ? "true" : "false");
	printf("%s\"default\": %s,\n", ind, in->is_default[i] ? "true" : "false");
	printf("%s\"priority\": %d,\n", ind, in->priority[i]);
	printf("%s\"rate\": %llu,\n", ind, (unsigned long long)d->rate);
	printf("%s\"max_send_size\": %u,\n", ind, (unsigned)d->max_send_size);
	json_kv_str(ind, "info", d->info, 0);
	if (dev_has_pci(d)) {
		pci_address(d, pci, sizeof(pci));
		printf("%s\"pci\": {\"address\": \"%s\", \"domain\": %u, \"bus\": %u, "
		       "\"dev\": %u, \"func\": %u},\n", ind, pci, (unsigned)d->pci.domain,
		       (unsigned)d->pci.bus, (unsigned)d->pci.dev, (unsigned)d->pci.func);
	} else {
		printf("%s\"pci\": null,\n", ind);
	}
	printf("%s\"conf_argv\": ", ind);
	json_str_array(d->conf_argv);
	printf("\n    }%s\n", last ? "" : ",");
}

static const char *key_type_name(cci_conf_type_t type)
{
	switch (type) {
	case CCI_CONF_UINT: return "integer";
	case CCI_CONF_STRING: return "string";
	case CCI_CONF_CHOICE: return "choice";
	case CCI_CONF_CUSTOM: return "custom";
	}
	return "unknown";
}

/* min and max mean something for integers (the value) and strings (its length). */
static int key_has_range(cci_conf_key_info_t *k)
{
	return k->type == CCI_CONF_UINT || k->type == CCI_CONF_STRING;
}

static void json_key(cci_conf_key_info_t *k, int last)
{
	const char *ind = "          ";

	printf("        {\n");
	json_kv_str(ind, "name", k->name, 0);
	json_kv_str(ind, "type", key_type_name(k->type), 0);
	if (key_has_range(k))
		printf("%s\"min\": %llu,\n%s\"max\": %llu,\n", ind, (unsigned long long)k->min, ind,
		       (unsigned long long)k->max);
	else
		printf("%s\"min\": null,\n%s\"max\": null,\n", ind, ind);
	printf("%s\"choices\": ", ind);
	json_str_array(k->choices);
	printf(",\n");
	json_kv_str(ind, "default", k->def, 0);
	json_kv_str(ind, "help", k->help, 1);
	printf("        }%s\n", last ? "" : ",");
}

static void json_plugin(cci_plugin_info_t *p, cci_conf_key_info_t *const *keys, int last)
{
	const char *ind = "      ";

	printf("    {\n");
	json_kv_str(ind, "name", p->name, 0);
	json_kv_str(ind, "status", p->status == CCI_PLUGIN_LOADED ? "loaded" : "skipped", 0);
	json_kv_str(ind, "reason", p->reason, 0);
	json_kv_str(ind, "note", p->note, 0);
	json_kv_str(ind, "path", p->path, 0);
	printf("%s\"transports\": ", ind);
	json_str_array(p->transports);
	printf(",\n%s\"keys\": [%s", ind, keys[0] ? "\n" : "");
	for (int i = 0; keys[i]; i++)
		json_key(keys[i], !keys[i + 1]);
	printf("%s]\n    }%s\n", keys[0] ? ind : "", last ? "" : ",");
}

static void json_environment(void)
{
	printf("  \"environment\": {\n");
	for (int i = 0; env_names[i]; i++)
		json_kv_str("    ", env_names[i], getenv(env_names[i]), !env_names[i + 1]);
	printf("  }");
}

static void json_print(const struct info *in)
{
	printf("{\n  \"abi_version\": %d,\n", CCI_ABI_VERSION);
	json_kv_str("  ", "config", in->config, 0);
	printf("  \"devices\": [\n");
	for (int i = 0; i < in->ndevices; i++)
		json_device(in, i, i + 1 == in->ndevices);
	printf("  ],\n  \"plugins\": [\n");
	for (int i = 0; in->plugins[i]; i++)
		json_plugin(in->plugins[i], in->keys[i], in->plugins[i + 1] == NULL);
	printf("  ],\n  \"plugin_dirs\": ");
	json_str_array(in->dirs);
	printf(",\n");
	json_environment();
	printf("\n}\n");
}

/* ------------------------------------------------------------------ text */

/* bits per second, in the largest unit that keeps a digit before the point. */
static void rate_text(uint64_t rate, char *buf, size_t len)
{
	static const char *const units[] = { "bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s" };
	double r = (double)rate;
	size_t u = 0;

	if (rate == 0) {
		snprintf(buf, len, "unknown");
		return;
	}
	while (r >= 1000.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		r /= 1000.0;
		u++;
	}
	snprintf(buf, len, "%.4g %s", r, units[u]);
}

static void text_device(const struct info *in, int i)
{
	cci_device_t *d = in->devices[i];
	char buf[64];

	printf("  %s\n", d->name);
	printf("    transport:     %s\n", d->transport);
	printf("    up:            %s\n", d->up ? "yes" : "no");
	printf("    default:       %s\n", in->is_default[i] ? "yes" : "no");
	printf("    priority:      %d\n", in->priority[i]);
	rate_text(d->rate, buf, sizeof(buf));
	printf("    rate:          %s\n", buf);
	printf("    max_send_size: %u\n", (unsigned)d->max_send_size);
	printf("    info:          %s\n", d->info && *d->info ? d->info : "(none)");
	if (dev_has_pci(d))
		pci_address(d, buf, sizeof(buf));
	printf("    pci:           %s\n", dev_has_pci(d) ? buf : "none");
	if (!d->conf_argv[0])
		printf("    conf_argv:     (none: a discovered device)\n");
	for (int k = 0; d->conf_argv[k]; k++)
		printf("    %-15s%s\n", k == 0 ? "conf_argv:" : "", d->conf_argv[k]);
}

/* text in lines of at most width columns (a longer word stands alone). */
static void text_wrapped(const char *indent, const char *text, size_t width)
{
	size_t room = width - strlen(indent), col = 0;
	const char *p = text;

	while (*p) {
		size_t n = strcspn(p, " ");
		if (col > 0 && col + 1 + n > room) {
			putchar('\n');
			col = 0;
		}
		printf("%s%s%.*s", col ? "" : indent, col ? " " : "", (int)n, p);
		col += n + (col ? 1 : 0);
		p += n;
		p += strspn(p, " ");
	}
	putchar('\n');
}

/* "integer 64..1048576; default 8192": what a config file may write. */
static void text_key(cci_conf_key_info_t *k)
{
	printf("    key %s: ", k->name);
	switch (k->type) {
	case CCI_CONF_UINT:
		printf("integer %llu..%llu", (unsigned long long)k->min, (unsigned long long)k->max);
		break;
	case CCI_CONF_STRING:
		printf("string of %llu..%llu bytes", (unsigned long long)k->min,
		       (unsigned long long)k->max);
		break;
	case CCI_CONF_CHOICE:
		printf("one of");
		for (int c = 0; k->choices[c]; c++)
			printf("%s %s", c ? "," : "", k->choices[c]);
		break;
	case CCI_CONF_CUSTOM:
		printf("string the plugin checks");
		break;
	}
	if (k->def) /* else the help says what happens */
		printf("; default %s", k->def);
	putchar('\n');
	text_wrapped("      ", k->help, 78);
}

static void text_plugin(cci_plugin_info_t *p, cci_conf_key_info_t *const *keys, int verbose)
{
	if (p->status == CCI_PLUGIN_LOADED) {
		printf("  %s: loaded (transports:", p->name);
		for (int t = 0; p->transports[t]; t++)
			printf("%s %s", t ? "," : "", p->transports[t]);
		printf(")%s%s\n", p->note[0] ? ": " : "", p->note);
	} else {
		printf("  %s: skipped: %s\n", p->name, p->reason);
	}
	if (!verbose)
		return;
	printf("    path: %s\n", p->path);
	for (int i = 0; keys[i]; i++)
		text_key(keys[i]);
}

static void text_print(const struct info *in, const struct info_opts *o)
{
	int nplugins = 0, nloaded = 0;

	for (int i = 0; in->plugins[i]; i++) {
		nplugins++;
		nloaded += in->plugins[i]->status == CCI_PLUGIN_LOADED;
	}
	printf("CCI ABI version %d\n", CCI_ABI_VERSION);
	if (in->config)
		printf("config: %s (CCI_CONFIG)\n", in->config);
	else
		printf("config: none (CCI_CONFIG unset: each plugin discovers its devices)\n");
	printf("devices: %d\n", in->ndevices);
	for (int i = 0; i < in->ndevices; i++)
		text_device(in, i);
	printf("plugins: %d tried, %d loaded, %d skipped\n", nplugins, nloaded,
	       nplugins - nloaded);
	for (int i = 0; in->plugins[i]; i++)
		text_plugin(in->plugins[i], in->keys[i], o->verbose);
	if (!o->verbose)
		return;
	printf("plugin search directories, in order:\n");
	for (int i = 0; in->dirs[i]; i++)
		printf("  %s\n", in->dirs[i]);
	printf("environment:\n");
	for (int i = 0; env_names[i]; i++)
		printf("  %s=%s\n", env_names[i],
		       getenv(env_names[i]) ? getenv(env_names[i]) : "(unset)");
}

/* ---------------------------------------------------------------- driver */

/* cci_init failed: say so, with what to look at.  The library has already
 * printed the file, line and problem on stderr. */
static void report_init_failure(int rc, const struct info *in, const struct info_opts *o)
{
	fprintf(stderr, "cci_info: cci_init failed: %s (%s)\n", status_name(rc),
	        cci_strerror(NULL, (enum cci_status)rc));
	if (!in->config)
		fprintf(stderr, "cci_info: no configuration file (CCI_CONFIG is unset)\n");
	else if (rc == CCI_EINVAL)
		fprintf(stderr, "cci_info: configuration file %s (CCI_CONFIG) is wrong: the "
		        "library's message above gives the line and the problem\n", in->config);
	else if (rc == CCI_ERR_NOT_FOUND)
		fprintf(stderr, "cci_info: configuration file %s (CCI_CONFIG) cannot be read: "
		        "the library's message above says why\n", in->config);
	else
		fprintf(stderr, "cci_info: configuration file %s (CCI_CONFIG)\n", in->config);
	if (rc == CCI_ENODEV)
		fprintf(stderr, "cci_info: no transport plugin could be used: run with "
		        "CCI_DEBUG=init to see each one tried\n");
	if (!o->json)
		return;
	printf("{\n  \"abi_version\": %d,\n", CCI_ABI_VERSION);
	json_kv_str("  ", "config", in->config, 0);
	printf("  \"error\": {\n    \"call\": \"cci_init\",\n    \"status\": \"%s\",\n"
	       "    \"code\": %d,\n", status_name(rc), rc);
	json_kv_str("    ", "message", cci_strerror(NULL, (enum cci_status)rc), 1);
	printf("  }\n}\n");
}

static int call_failed(const char *call, int rc)
{
	fprintf(stderr, "cci_info: %s failed: %s (%s)\n", call, status_name(rc),
	        cci_strerror(NULL, (enum cci_status)rc));
	return rc;
}

/* Fill in from the initialised library; a failure is reported here. */
static int info_collect(struct info *in)
{
	int nplugins = 0, rc;

	if ((rc = cci_get_devices(&in->devices)) != CCI_SUCCESS)
		return call_failed("cci_get_devices", rc);
	if ((rc = cci_get_plugins(&in->plugins)) != CCI_SUCCESS)
		return call_failed("cci_get_plugins", rc);
	if ((rc = cci_get_plugin_dirs(&in->dirs)) != CCI_SUCCESS)
		return call_failed("cci_get_plugin_dirs", rc);
	while (in->devices[in->ndevices])
		in->ndevices++;
	while (in->plugins[nplugins])
		nplugins++;
	in->priority = calloc((size_t)in->ndevices + 1, sizeof(int));
	in->is_default = calloc((size_t)in->ndevices + 1, sizeof(int));
	in->keys = calloc((size_t)nplugins + 1, sizeof(*in->keys));
	if (!in->priority || !in->is_default || !in->keys)
		return call_failed("calloc", CCI_ENOMEM);
	for (int i = 0; i < nplugins; i++)
		if ((rc = cci_get_plugin_keys(in->plugins[i], &in->keys[i])) != CCI_SUCCESS)
			return call_failed("cci_get_plugin_keys", rc);
	for (int i = 0; i < in->ndevices; i++) {
		rc = cci_get_device_priority(in->devices[i], &in->priority[i], &in->is_default[i]);
		if (rc != CCI_SUCCESS)
			return call_failed("cci_get_device_priority", rc);
	}
	return CCI_SUCCESS;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cci_info [-v] [--json] [--leftovers | --remove-leftovers]\n"
		"List the CCI devices of this host and the transport plugins found or skipped.\n"
		"  -v, --verbose  also each plugin's path and ini keys, the plugin search\n"
		"                 directories and the environment\n"
		"  -j, --json     one JSON document on stdout instead of text\n"
		"  -l, --leftovers\n"
		"                 instead, list what processes of the library left on this\n"
		"                 host (shm regions, sm directories of this uid): path,\n"
		"                 size, pid, and whether that process is gone\n"
		"  -R, --remove-leftovers\n"
		"                 list them and remove those of processes that are gone\n"
		"  -h, --help     this help\n"
		"Environment: CCI_CONFIG (device file), CCI_CTP (plugin filter),\n"
		"CCI_PLUGIN_PATH (extra plugin directories), CCI_DEBUG (log categories).\n"
		"Exit status: 0, 1 if the library fails to start (with --leftovers: if a\n"
		"leftover could not be removed or a directory read), 2 for a usage error.\n");
}

static void parse_opts(struct info_opts *o, int argc, char **argv)
{
	static const struct option longs[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ "leftovers", no_argument, NULL, 'l' },
		{ "remove-leftovers", no_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "vjlRh", longs, NULL)) != -1) {
		switch (c) {
		case 'v': o->verbose = 1; break;
		case 'j': o->json = 1; break;
		case 'l': o->leftovers = o->leftovers ? o->leftovers : 1; break;
		case 'R': o->leftovers = 2; break;
		case 'h': usage(stdout); exit(EXIT_SUCCESS);
		default: usage(stderr); exit(EXIT_USAGE);
		}
	}
	if (optind != argc) {
		fprintf(stderr, "cci_info: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		exit(EXIT_USAGE);
	}
}

/* --leftovers: the library is only asked for the sm devices' path=; when
 * it does not start, the default places are still looked at. */
static int leftovers_main(const struct info_opts *o, int init_rc)
{
	cci_device_t *const *devices = NULL;
	int rc;

	if (init_rc != CCI_SUCCESS)
		fprintf(stderr, "cci_info: cci_init failed: %s (%s): only the default places are "
		        "looked at\n", status_name(init_rc),
		        cci_strerror(NULL, (enum cci_status)init_rc));
	else if (cci_get_devices(&devices) != CCI_SUCCESS)
		devices = NULL;
	rc = info_leftovers(devices, o->leftovers == 2, o->json);
	if (init_rc == CCI_SUCCESS)
		cci_finalize();
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "cci_info: cannot write the output\n");
		rc = 1;
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct info_opts o = { 0 };
	struct info in = { 0 };
	uint32_t caps = 0;
	int rc;

	parse_opts(&o, argc, argv);
	in.config = getenv("CCI_CONFIG");
	if (in.config && !*in.config)
		in.config = NULL; /* the library ignores an empty CCI_CONFIG too */
	rc = cci_init(CCI_ABI_VERSION, 0, &caps);
	if (o.leftovers)
		return leftovers_main(&o, rc);
	if (rc != CCI_SUCCESS) {
		report_init_failure(rc, &in, &o);
		return EXIT_FAILURE;
	}
	rc = info_collect(&in);
	if (rc == CCI_SUCCESS) {
		if (o.json)
			json_print(&in);
		else
			text_print(&in, &o);
	}
	free(in.priority);
	free(in.is_default);
	free(in.keys);
	if (cci_finalize() != CCI_SUCCESS && rc == CCI_SUCCESS)
		rc = call_failed("cci_finalize", CCI_ERROR);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "cci_info: cannot write the output\n");
		rc = CCI_ERROR;
	}
	return rc == CCI_SUCCESS ? EXIT_SUCCESS : EXIT_FAILURE;
}
