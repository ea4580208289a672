/*
 * plugins.c - finding, loading, checking and unloading transport plugins.
 *
 * A plugin is cci_ctp_<name>.so exporting cci_ctp_<name>_plugin.  Search
 * order: the build tree (when this library itself runs from the build
 * tree, so tests and benchmarks need no install), each directory of
 * CCI_PLUGIN_PATH, then the install directory, $libdir/cci beside the
 * library.  The first module of a name
 * wins; a directory is read in name order, so which module wins never
 * depends on the file system.  CCI_CTP keeps ("sm,tcp") or drops ("^tcp")
 * plugins by name or by transport.
 *
 * Every module tried is recorded, used or skipped with the reason that was
 * logged, and so is every directory searched: cci_info shows why a
 * transport is missing without CCI_DEBUG.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define PREFIX "cci_ctp_"
#define SUFFIX ".so"
#define PLUGIN_NAME_MAX 64

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

/* The size of the first tables of this ABI version, before conf_keys. */
#define PLUGIN_SIZE_MIN offsetof(struct cci_plugin, conf_keys)

const struct cci_conf_key *cci__plugin_conf_keys(const struct cci_plugin *p)
{
	if (p->size < PLUGIN_SIZE_MIN + sizeof(p->conf_keys))
		return NULL;
	return p->conf_keys;
}

const struct cci_plugin *cci__plugin_for_transport(const char *transport)
{
	for (struct cci__plugin_mod *m = cci__g.plugins; m; m = m->next)
		if (m->initialized && cci__plugin_serves(m->ops, transport))
			return m->ops;
	return NULL;
}

static const struct cci__plugin_mod *plugin_find(const char *name)
{
	for (struct cci__plugin_mod *m = cci__g.plugins; m; m = m->next)
		if (strcmp(m->ops->name, name) == 0)
			return m;
	return NULL;
}

/* ------------------------------------------------ the record of attempts */

static void strings_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* A deep copy: the record must outlive the module's dlclose(). */
static char **strings_copy(const char *const *v)
{
	size_t n = 0;
	char **copy;

	while (v && v[n])
		n++;
	copy = calloc(n + 1, sizeof(*copy));
	for (size_t i = 0; copy && i < n; i++) {
		copy[i] = strdup(v[i]);
		if (!copy[i]) {
			strings_free(copy);
			return NULL;
		}
	}
	return copy;
}

static void record_free(struct cci__plugin_record *r)
{
	free(r->name);
	free(r->path);
	free(r->reason);
	free(r->note);
	strings_free(r->transports);
	cci__conf_keys_free(r->keys);
	free(r);
}

/*
 * Record one attempt.  ops, when its table passed the checks, gives the
 * name and transports; else name is the one in the file name.  A NULL
 * reason means loaded.
 */
static int record_add(const char *name, const char *path, const struct cci_plugin *ops,
                      const char *reason, struct cci__plugin_record **record_p)
{
	struct cci__plugin_record *r, **grown;
	int n = cci__g.nplugin_records;

	grown = realloc(cci__g.plugin_records, sizeof(*grown) * (size_t)(n + 2));
	if (!grown)
		return CCI_ENOMEM;
	cci__g.plugin_records = grown;
	grown[n] = NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return CCI_ENOMEM;
	r->name = strdup(ops ? ops->name : name);
	r->path = strdup(path);
	r->reason = strdup(reason ? reason : "");
	r->note = strdup("");
	r->transports = strings_copy(ops ? ops->transports : NULL);
	r->keys = cci__conf_keys_copy(ops ? cci__plugin_conf_keys(ops) : NULL);
	if (!r->name || !r->path || !r->reason || !r->note || !r->transports || !r->keys) {
		record_free(r);
		return CCI_ENOMEM;
	}
	r->pub.name = r->name;
	r->pub.path = r->path;
	r->pub.reason = r->reason;
	r->pub.note = r->note;
	r->pub.transports = (const char *const *)r->transports;
	r->pub.status = reason ? CCI_PLUGIN_SKIPPED : CCI_PLUGIN_LOADED;
	grown[n] = r;
	grown[n + 1] = NULL;
	cci__g.nplugin_records = n + 1;
	if (record_p)
		*record_p = r;
	return CCI_SUCCESS;
}

/* Log why a module goes unused and record it; CCI_ENOMEM is the only failure. */
static int plugin_skip(unsigned cat, const char *name, const char *path,
                       const struct cci_plugin *ops, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int plugin_skip(unsigned cat, const char *name, const char *path,
                       const struct cci_plugin *ops, const char *fmt, ...)
{
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	cci__log(cat, "plugin %s: %s: skipped", path, why);
	return record_add(name, path, ops, why, NULL);
}

static void plugins_forget(void)
{
	for (int i = 0; i < cci__g.nplugin_records; i++)
		record_free(cci__g.plugin_records[i]);
	free(cci__g.plugin_records);
	cci__g.plugin_records = NULL;
	cci__g.nplugin_records = 0;
	for (int i = 0; i < cci__g.nplugin_dirs; i++)
		free(cci__g.plugin_dirs[i]);
	free(cci__g.plugin_dirs);
	cci__g.plugin_dirs = NULL;
	cci__g.nplugin_dirs = 0;
}

/* ------------------------------------------------------------- loading */

/* Why a table cannot be used, written to why; CCI_SUCCESS if it can. */
static int plugin_check(const struct cci_plugin *p, char *why, size_t len)
{
	const char *missing = NULL;

	if (p->abi_version != CCI_PLUGIN_ABI_VERSION || p->size < PLUGIN_SIZE_MIN) {
		snprintf(why, len, "ABI version %u, size %zu; expected %u, at least %zu",
		         p->abi_version, p->size, CCI_PLUGIN_ABI_VERSION, PLUGIN_SIZE_MIN);
		return CCI_EINVAL;
	}
	if (!p->name || !p->transports || !p->transports[0])
		missing = "name/transports";
	else if (!p->init || !p->discover || !p->dev_configure)
		missing = "init/discover/dev_configure";
	else if (!p->ep_create || !p->ep_stop || !p->ep_free || !p->progress)
		missing = "ep_create/ep_stop/ep_free/progress";
	else if (!p->connect || !p->accept || !p->reject || !p->request_done || !p->disconnect)
		missing = "connect/accept/reject/request_done/disconnect";
	else if (!p->send || !p->rma)
		missing = "send/rma";
	if (missing) {
		snprintf(why, len, "mandatory op missing (%s)", missing);
		return CCI_EINVAL;
	}
	return cci__conf_keys_check(cci__plugin_conf_keys(p), why, len);
}

/* The <name> of cci_ctp_<name>.so; 0 if file is not named like a plugin. */
static int plugin_file_name(const char *file, char name[PLUGIN_NAME_MAX + 1])
{
	size_t flen = strlen(file), plen = strlen(PREFIX), slen = strlen(SUFFIX);

	if (flen <= plen + slen || strncmp(file, PREFIX, plen) != 0 ||
	    strcmp(file + flen - slen, SUFFIX) != 0 || flen - plen - slen > PLUGIN_NAME_MAX)
		return 0;
	memcpy(name, file + plen, flen - plen - slen);
	name[flen - plen - slen] = '\0';
	return 1;
}

/* dlerror() text without the "path: " it starts with: the log names the path already. */
static const char *dl_reason(const char *err, const char *path)
{
	size_t n = strlen(path);

	if (!err)
		return "unknown error";
	if (strncmp(err, path, n) == 0 && strncmp(err + n, ": ", 2) == 0)
		return err + n + 2;
	return err;
}

/* The module passed every check: it joins the list, to be initialised. */
static int plugin_keep(void *dl, const struct cci_plugin *ops, const char *path)
{
	struct cci__plugin_mod *mod = calloc(1, sizeof(*mod));

	if (!mod || !(mod->path = strdup(path)) ||
	    record_add(NULL, path, ops, NULL, &mod->record) != CCI_SUCCESS) {
		if (mod)
			free(mod->path);
		free(mod);
		dlclose(dl);
		return CCI_ENOMEM;
	}
	mod->ops = ops;
	mod->dl = dl;
	mod->next = cci__g.plugins;
	cci__g.plugins = mod;
	LOG(CCI_LOG_INIT, "plugin %s loaded from %s", ops->name, path);
	return CCI_SUCCESS;
}

/* Load dir/file if it is a plugin; one that cannot be used is logged and
 * recorded, not fatal.  Fails only with CCI_ENOMEM. */
static int plugin_try(const char *dir, const char *file)
{
	char path[PATH_MAX], sym[128], name[PLUGIN_NAME_MAX + 1], why[512];
	const struct cci__plugin_mod *prev;
	const struct cci_plugin *ops;
	void *dl;
	int rc;

	if (!plugin_file_name(file, name))
		return CCI_SUCCESS;
	snprintf(sym, sizeof(sym), PREFIX "%s_plugin", name);
	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return plugin_skip(CCI_LOG_WARN, name, path, NULL, "path longer than %d bytes",
		                   PATH_MAX - 1);
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!dl)
		return plugin_skip(CCI_LOG_WARN, name, path, NULL, "cannot load: %s",
		                   dl_reason(dlerror(), path));
	ops = dlsym(dl, sym);
	if (!ops)
		rc = plugin_skip(CCI_LOG_WARN, name, path, NULL, "no symbol %s", sym);
	else if (plugin_check(ops, why, sizeof(why)) != CCI_SUCCESS)
		rc = plugin_skip(CCI_LOG_WARN, name, path, NULL, "%s", why);
	else if ((prev = plugin_find(ops->name)) != NULL)
		rc = plugin_skip(CCI_LOG_INIT, name, path, ops,
		                 "a plugin named %s was already loaded from %s", ops->name,
		                 prev->path);
	else if (!plugin_selected(ops))
		rc = plugin_skip(CCI_LOG_INIT, name, path, ops, "excluded by CCI_CTP=%s",
		                 getenv("CCI_CTP"));
	else
		return plugin_keep(dl, ops, path);
	dlclose(dl);
	return rc;
}

static int plugins_scan_dir(const char *dir, int depth);

static int plugins_scan_entry(const char *dir, const struct dirent *de, int depth)
{
	char sub[PATH_MAX];

	if (de->d_name[0] == '.')
		return CCI_SUCCESS;
	if (depth == 0 || de->d_type != DT_DIR)
		return plugin_try(dir, de->d_name);
	if (snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >= (int)sizeof(sub))
		return CCI_SUCCESS;
	return plugins_scan_dir(sub, depth - 1);
}

static int plugins_scan_dir(const char *dir, int depth)
{
	struct dirent **list;
	int n = scandir(dir, &list, NULL, alphasort), rc = CCI_SUCCESS;

	for (int i = 0; i < n; i++) {
		if (rc == CCI_SUCCESS)
			rc = plugins_scan_entry(dir, list[i], depth);
		free(list[i]);
	}
	if (n >= 0)
		free(list);
	return rc;
}

/* Note dir in the search list (existing or not), then load what it holds. */
static int plugins_search(const char *dir, int depth)
{
	int n = cci__g.nplugin_dirs;
	char **grown = realloc(cci__g.plugin_dirs, sizeof(*grown) * (size_t)(n + 2));

	if (!grown)
		return CCI_ENOMEM;
	cci__g.plugin_dirs = grown;
	grown[n] = strdup(dir);
	if (!grown[n])
		return CCI_ENOMEM;
	grown[n + 1] = NULL;
	cci__g.nplugin_dirs = n + 1;
	return plugins_scan_dir(dir, depth);
}

/* The directory this very library was loaded from, symbolic links resolved;
 * 0 when the dynamic linker cannot say. */
static int library_dir(char self[PATH_MAX])
{
	Dl_info info;
	char *slash;

	if (!dladdr((void *)&cci__g, &info) || !info.dli_fname || !realpath(info.dli_fname, self))
		return 0;
	slash = strrchr(self, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	return 1;
}

static int library_in_build_tree(const char *self)
{
	return strcmp(self, CCI_BUILD_ROOT "/core") == 0;
}

/* The build tree's plugins, if this very library was loaded from it. */
static int plugins_scan_build_tree(void)
{
	char self[PATH_MAX];

	if (!library_dir(self) || !library_in_build_tree(self))
		return CCI_SUCCESS;
	return plugins_search(CCI_BUILD_ROOT "/plugins", 1);
}

/*
 * The installed plugins: $libdir/cci, found beside the library itself, so
 * that a prefix works wherever it was unpacked or moved (/opt/cci/<version>,
 * a DESTDIR staging tree).  The configured directory serves a library of the
 * build tree, or one whose own path the dynamic linker cannot tell.
 */
static int plugins_scan_install_dir(void)
{
	char self[PATH_MAX], dir[PATH_MAX];

	if (!library_dir(self) || library_in_build_tree(self) ||
	    snprintf(dir, sizeof(dir), "%s/" CCI_PLUGIN_SUBDIR, self) >= (int)sizeof(dir))
		return plugins_search(CCI_PLUGIN_DIR, 0);
	return plugins_search(dir, 0);
}

static int plugins_scan_env(void)
{
	const char *env = getenv("CCI_PLUGIN_PATH");
	char *copy, *save = NULL;
	int rc = CCI_SUCCESS;

	if (!env || !*env)
		return CCI_SUCCESS;
	copy = strdup(env);
	if (!copy)
		return CCI_ENOMEM;
	for (char *dir = strtok_r(copy, ":", &save); dir && rc == CCI_SUCCESS;
	     dir = strtok_r(NULL, ":", &save))
		rc = plugins_search(dir, 0);
	free(copy);
	return rc;
}

/* Initialise one module; a failure skips it.  Fails only with CCI_ENOMEM. */
static int plugin_init(struct cci__plugin_mod *m, const struct cci_core *core)
{
	char why[256], *reason;
	int rc = m->ops->init(core);

	if (rc == CCI_SUCCESS) {
		m->initialized = 1;
		return CCI_SUCCESS;
	}
	snprintf(why, sizeof(why), "init failed (%s)", cci_strerror(NULL, rc));
	LOG(CCI_LOG_INIT, "plugin %s: %s: skipped", m->ops->name, why);
	reason = strdup(why);
	if (!reason)
		return CCI_ENOMEM;
	free(m->record->reason);
	m->record->reason = reason;
	m->record->pub.reason = reason;
	m->record->pub.status = CCI_PLUGIN_SKIPPED;
	return CCI_SUCCESS;
}

/* Load every plugin and initialise it with core; at least one must work. */
int cci__plugins_load(const struct cci_core *core)
{
	int usable = 0, rc;

	rc = plugins_scan_build_tree();
	if (rc == CCI_SUCCESS)
		rc = plugins_scan_env();
	if (rc == CCI_SUCCESS)
		rc = plugins_scan_install_dir();
	for (struct cci__plugin_mod *m = cci__g.plugins; m && rc == CCI_SUCCESS; m = m->next) {
		rc = plugin_init(m, core);
		usable += m->initialized;
	}
	if (rc != CCI_SUCCESS) {
		LOG_ERR("out of memory while loading the transport plugins");
		return rc;
	}
	if (usable == 0) {
		LOG_ERR("no usable transport plugin (searched the build tree, CCI_PLUGIN_PATH and %s%s)",
		        cci__g.plugin_dirs[cci__g.nplugin_dirs - 1],
		        getenv("CCI_CTP") ? "; CCI_CTP filters them" : "");
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
	plugins_forget();
}

/* The plugin_note service: replace the note of plugin's record (kept as
 * it was when out of memory). */
void cci__plugin_note(const struct cci_plugin *plugin, const char *text)
{
	for (struct cci__plugin_mod *m = cci__g.plugins; m; m = m->next) {
		char *note;

		if (m->ops != plugin || !m->record)
			continue;
		note = strdup(text ? text : "");
		if (!note)
			return;
		free(m->record->note);
		m->record->note = note;
		m->record->pub.note = note;
		return;
	}
}

/* ---------------------------------------------- the extension's entry points */

CCI_API int cci_get_plugins(cci_plugin_info_t *const **plugins)
{
	/* A record starts with its public part, so the arrays alias. */
	return cci__list_handout((void *const *)&cci__g.plugin_records, &cci__g.nplugin_records,
	                         (const void *const **)(void *)plugins);
}

CCI_API int cci_get_plugin_keys(cci_plugin_info_t *plugin, cci_conf_key_info_t *const **keys)
{
	int rc = CCI_EINVAL;

	if (!plugin || !keys)
		return CCI_EINVAL;
	pthread_mutex_lock(&cci__g.lock);
	if (cci__g.refcount == 0)
		rc = CCI_ERROR;
	for (int i = 0; rc == CCI_EINVAL && i < cci__g.nplugin_records; i++) {
		if (&cci__g.plugin_records[i]->pub != plugin)
			continue;
		/* A key record starts with its public part, so the arrays alias. */
		*keys = (cci_conf_key_info_t *const *)(void *)cci__g.plugin_records[i]->keys;
		rc = CCI_SUCCESS;
	}
	pthread_mutex_unlock(&cci__g.lock);
	return rc;
}

CCI_API int cci_get_plugin_dirs(const char *const **dirs)
{
	return cci__list_handout((void *const *)&cci__g.plugin_dirs, &cci__g.nplugin_dirs,
	                         (const void *const **)(void *)dirs);
}
