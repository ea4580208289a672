/*
 * plugins.c - finding, loading, checking and unloading transport plugins.
 *
 * A plugin is cci_ctp_<name>.so exporting cci_ctp_<name>_plugin.  Search
 * order: the build tree (when this library itself runs from the build
 * tree, so tests and benchmarks need no install), each directory of
 * CCI_PLUGIN_PATH, then the install directory.  The first module of a name
 * wins.  CCI_CTP keeps ("sm,tcp") or drops ("^tcp") plugins by name or by
 * transport.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define PREFIX "cci_ctp_"
#define SUFFIX ".so"

/* Is name (a plugin or transport name) selected by the CCI_CTP filter? */
static int ctp_filter_match(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		p += len + (end ? 1 : 0);
	}
	return 0;
}

static int plugin_selected(const struct cci_plugin *ops)
{
	const char *env = getenv("CCI_CTP");
	int exclude, hit;

	if (env == NULL || *env == '\0')
		return 1;
	exclude = (env[0] == '^');
	if (exclude)
		env++;
	hit = ctp_filter_match(env, ops->name);
	for (const char *const *t = ops->transports; !hit && t && *t; t++)
		hit = ctp_filter_match(env, *t);
	return exclude ? !hit : hit;
}

int cci__plugin_serves(const struct cci_plugin *p, const char *transport)
{
	for (const char *const *t = p->transports; t && *t; t++)
		if (strcmp(*t, transport) == 0)
			return 1;
	return 0;
}

const struct cci_plugin *cci__plugin_for_transport(const char *transport)
{
	for (struct cci__plugin_mod *m = cci__g.plugins; m; m = m->next)
		if (m->initialized && cci__plugin_serves(m->ops, transport))
			return m->ops;
	return NULL;
}

static int plugin_loaded(const char *name)
{
	for (struct cci__plugin_mod *m = cci__g.plugins; m; m = m->next)
		if (strcmp(m->ops->name, name) == 0)
			return 1;
	return 0;
}

/* Reject a table we cannot use, saying why. */
static int plugin_check(const struct cci_plugin *p, const char *path)
{
	const char *missing = NULL;

	if (p->abi_version != CCI_PLUGIN_ABI_VERSION || p->size < sizeof(struct cci_plugin)) {
		LOG_WARN("plugin %s: ABI version %u, size %zu; expected %u, %zu: skipped",
		         path, p->abi_version, p->size, CCI_PLUGIN_ABI_VERSION,
		         sizeof(struct cci_plugin));
		return CCI_EINVAL;
	}
	if (!p->name || !p->transports || !p->transports[0])
		missing = "name/transports";
	else if (!p->init || !p->discover || !p->dev_configure)
		missing = "init/discover/dev_configure";
	else if (!p->ep_create || !p->ep_destroy || !p->progress)
		missing = "ep_create/ep_destroy/progress";
	else if (!p->connect || !p->accept || !p->reject || !p->disconnect)
		missing = "connect/accept/reject/disconnect";
	else if (!p->send || !p->rma)
		missing = "send/rma";
	if (missing) {
		LOG_WARN("plugin %s: mandatory op missing (%s): skipped", path, missing);
		return CCI_EINVAL;
	}
	return CCI_SUCCESS;
}

/* Load path if it is a plugin not loaded yet; failures are logged, not fatal. */
static void plugin_try(const char *dir, const char *file)
{
	char path[PATH_MAX], sym[128];
	size_t flen = strlen(file), plen = strlen(PREFIX), slen = strlen(SUFFIX);
	const struct cci_plugin *ops;
	struct cci__plugin_mod *mod;
	void *dl;

	if (flen <= plen + slen || strncmp(file, PREFIX, plen) != 0 ||
	    strcmp(file + flen - slen, SUFFIX) != 0 || flen - plen - slen > 64)
		return;
	snprintf(sym, sizeof(sym), "%.*s_plugin", (int)(flen - slen), file);
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return;
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		LOG_WARN("plugin %s: cannot load: %s: skipped", path, dlerror());
		return;
	}
	ops = dlsym(dl, sym);
	if (!ops || plugin_check(ops, path) != CCI_SUCCESS || plugin_loaded(ops->name) ||
	    !plugin_selected(ops)) {
		if (!ops)
			LOG_WARN("plugin %s: no symbol %s: skipped", path, sym);
		dlclose(dl);
		return;
	}
	mod = calloc(1, sizeof(*mod));
	if (!mod || !(mod->path = strdup(path))) {
		free(mod);
		dlclose(dl);
		return;
	}
	mod->ops = ops;
	mod->dl = dl;
	mod->next = cci__g.plugins;
	cci__g.plugins = mod;
	LOG(CCI_LOG_INIT, "plugin %s loaded from %s", ops->name, path);
}

static void plugins_scan_dir(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (depth > 0 && de->d_type == DT_DIR) {
			char sub[PATH_MAX];
			if (snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) < (int)sizeof(sub))
				plugins_scan_dir(sub, depth - 1);
		} else {
			plugin_try(dir, de->d_name);
		}
	}
	closedir(d);
}

/* The build tree's plugins, if this very library was loaded from it. */
static void plugins_scan_build_tree(void)
{
	Dl_info info;
	char self[PATH_MAX], *slash;

	if (!dladdr((void *)&cci__g, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, self))
		return;
	slash = strrchr(self, '/');
	if (!slash)
		return;
	*slash = '\0';
	if (strcmp(self, CCI_BUILD_ROOT "/core") == 0)
		plugins_scan_dir(CCI_BUILD_ROOT "/plugins", 1);
}

static void plugins_scan_env(void)
{
	const char *env = getenv("CCI_PLUGIN_PATH");
	char *copy, *save = NULL;

	if (!env || !*env || !(copy = strdup(env)))
		return;
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
		plugins_scan_dir(dir, 0);
	free(copy);
}

/* Load every plugin and initialise it; at least one must work. */
int cci__plugins_load(void)
{
	int usable = 0;

	plugins_scan_build_tree();
	plugins_scan_env();
	plugins_scan_dir(CCI_PLUGIN_DIR, 0);
	for (struct cci__plugin_mod *m = cci__g.plugins; m; m = m->next) {
		int rc = m->ops->init(&cci__core_services);
		if (rc != CCI_SUCCESS) {
			LOG(CCI_LOG_INIT, "plugin %s: init failed (%s): skipped", m->ops->name,
			    cci_strerror(NULL, rc));
			continue;
		}
		m->initialized = 1;
		usable++;
	}
	if (usable == 0) {
		LOG_ERR("no usable transport plugin (searched the build tree, CCI_PLUGIN_PATH and %s%s)",
		        CCI_PLUGIN_DIR, getenv("CCI_CTP") ? "; CCI_CTP filters them" : "");
		return CCI_ENODEV;
	}
	return CCI_SUCCESS;
}

void cci__plugins_unload(void)
{
	struct cci__plugin_mod *m = cci__g.plugins, *next;

	for (; m; m = next) {
		next = m->next;
		if (m->initialized && m->ops->finalize)
			m->ops->finalize();
		dlclose(m->dl);
		free(m->path);
		free(m);
	}
	cci__g.plugins = NULL;
}
