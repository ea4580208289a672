/*
 * core.h - internal declarations shared by the files of the core library.
 * Nothing here is visible to applications or plugins.
 *
 * The files call down, never up, so that each can be read knowing only
 * those below it (tests/core/core_layers.py checks the objects for a
 * circle).  From the bottom:
 *   log, strerror, shell, globals, options   nothing of the core's
 *   conf_keys        ini keys of a config section, and its errors
 *   devices, plugins the lists of cci__g
 *   config           the CCI_CONFIG file into devices
 *   conn             connection objects and their references
 *   event            the event pool and queue (events hold connections)
 *   post, msg        the event services; sends and their completions
 *   rma              registrations and cci_rma (msg's blocking wait)
 *   connect          cci_connect, cci_accept, cci_reject, cci_disconnect
 *   endpoint, fork   endpoints (events, registrations); fork() handlers
 *   services         the table of core services handed to plugins
 *   init             cci_init and cci_finalize, on top
 * A lower file that needs something of a higher one gets it as an
 * argument (cci__plugins_load takes the services table).
 */
#ifndef CCI_CORE_H
#define CCI_CORE_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cci.h"
#include "cci_plugin.h"
#include "lock_held.h" /* assert(cci__mutex_held(&m)) where a comment says m is held */
#include "spin.h"

/*
 * The core's side of the objects it shares with plugins.  cci_plugin.h
 * shows plugins only the first member of each, their view; what follows
 * it is the core's alone, so no plugin can read or break it.  The core
 * allocates every one of these whole, so a pointer to the view is a
 * pointer to the whole (C11 6.7.2.1p15) and core_ep() and the others
 * convert back.
 */
struct cci__dev_core {
	cci__dev_t dev;
	int line;                  /* of its config section, 0 for discovered devices */
	int priority;              /* 0..100 */
	int is_default;
};

/*
 * Magic words: the first core field of each object says what it is and
 * whether it is alive, so that a call given a closed, foreign or wrong
 * kind of object returns a status instead of following it (shell.c
 * keeps closed objects' memory mapped).  Random 64-bit values: no field
 * of another kind holds one by chance.
 */
#define CCI__MAGIC_EP 0x8c3f1e5a7d2b9e01ull
#define CCI__MAGIC_CONN 0x4e9a2c7b15f3d802ull
#define CCI__MAGIC_REG 0x2d7e94b1c6a3f503ull
#define CCI__MAGIC_EVT 0xb15c3a8e4f7d2604ull
#define CCI__MAGIC_DEAD_EP 0x7a1d5e3c9b2f4e11ull
#define CCI__MAGIC_DEAD_CONN 0x1f6b8d2a4c9e3a12ull
#define CCI__MAGIC_DEAD_REG 0x93c2e7d15b8a4f13ull
#define CCI__MAGIC_DEAD_EVT 0x5e8b1c4d2a7f6914ull
/* In a child of fork(), an endpoint the parent opened (fork.c). */
#define CCI__MAGIC_PARENT_EP 0x3c9d6a1e8f2b5715ull

struct cci__evt_core {
	cci__evt_t evt;
	uint64_t magic;            /* CCI__MAGIC_EVT, _DEAD_EVT once its endpoint is gone */
	cci__evt_t *next;          /* queue / pool link */
	int answered;              /* a CONNECT_REQUEST was accepted or rejected */
	int lent;                  /* handed to the application */
	char req_data[CCI_CONN_REQ_LEN]; /* backing store for a request's payload */
};

struct cci__ep_core {
	cci__ep_t ep;
	uint64_t magic;              /* CCI__MAGIC_EP, or _DEAD_EP once destroyed */
	cci__spinlock_t lock;        /* event queue, pool, connection refs */
	cci__evt_t *_Atomic evq_head; /* written under lock; peeked without it */
	cci__evt_t *evq_tail;
	cci__evt_t *evt_pool;
	void *evt_chunks;            /* list of allocated event chunks */
	uint32_t evq_len;
	int os_evfd;                 /* eventfd readable while events are queued, -1 if none */
	int rung;                    /* os_evfd was rung and not drained yet */
	int work_rung;               /* ... for plugin work, not for queued events (event.c) */
	int pollers;                 /* threads in cci_get_event's progress: they ring for it */
	_Atomic int starved;         /* cci_get_event said CCI_ENOBUFS: a return rings */
	_Atomic uint32_t returns;    /* events returned, ever (event.c: starved) */
	_Atomic int closing;         /* teardown began: no new connection requests */
	pthread_mutex_t rma_lock;
	cci__rma_reg_t **rma_table;  /* hash of registrations by key */
	uint32_t rma_buckets;        /* of rma_table: a power of two, 0 before the first */
	uint32_t rma_count;          /* registrations in rma_table */
	cci__ep_t *next_ep;          /* cci__g.eps */
};

struct cci__conn_core {
	cci__conn_t conn;
	uint64_t magic;            /* CCI__MAGIC_CONN, or _DEAD_CONN once freed */
	int refs;                  /* events lent + 1 while the plugin holds it */
	int disconnected;          /* cci_disconnect() was called */
};

struct cci__rma_reg_core {
	cci__rma_reg_t reg;
	uint64_t magic;            /* CCI__MAGIC_REG, or _DEAD_REG once deregistered */
	cci__rma_reg_t *hnext;     /* hash chain by key */
};

static inline struct cci__dev_core *core_dev(cci__dev_t *d) { return (struct cci__dev_core *)d; }
static inline struct cci__evt_core *core_evt(cci__evt_t *e) { return (struct cci__evt_core *)e; }
static inline struct cci__ep_core *core_ep(cci__ep_t *ep) { return (struct cci__ep_core *)ep; }
static inline struct cci__conn_core *core_conn(cci__conn_t *c) { return (struct cci__conn_core *)c; }
static inline struct cci__rma_reg_core *core_reg(cci__rma_reg_t *r) { return (struct cci__rma_reg_core *)r; }

/* Public entry points are exported; everything else stays hidden. */
#define CCI_API __attribute__((visibility("default")))

/* One key of a plugin's table, for cci_get_plugin_keys(); the public
 * part first, so that an array of these reads as the public array. */
struct cci__key_record {
	struct cci_conf_key_info pub;
	char *name, *def, *help;     /* backing store of the public strings */
	char **choices;              /* NULL-terminated, never NULL */
};

/* What became of one plugin module, for cci_get_plugins(); the public
 * part first, so that an array of these reads as the public array. */
struct cci__plugin_record {
	struct cci_plugin_info pub;
	char *name, *path, *reason, *note; /* backing store of the public strings */
	char **transports;           /* NULL-terminated copy: outlives dlclose() */
	struct cci__key_record **keys; /* NULL-terminated copy of its conf_keys */
};

/* A loaded plugin module. */
struct cci__plugin_mod {
	const struct cci_plugin *ops;
	void *dl;                  /* dlopen handle */
	char *path;
	int initialized;           /* init() succeeded */
	struct cci__plugin_record *record; /* its entry in cci__g.plugin_records */
	struct cci__plugin_mod *next;
};

/* Library-wide state; guarded by lock. */
struct cci__globals {
	pthread_mutex_t lock;
	int refcount;
	struct cci__plugin_mod *plugins;
	struct cci__plugin_record **plugin_records; /* NULL-terminated, in the order tried */
	int nplugin_records;
	char **plugin_dirs;        /* NULL-terminated, in search order */
	int nplugin_dirs;
	cci__dev_t **devs;         /* NULL-terminated, sorted; the public list */
	int ndevs;
	cci__ep_t *eps;            /* open endpoints */
};

/* globals.c */
extern struct cci__globals cci__g;

/* log.c */
extern unsigned cci__log_mask;
void cci__log_init(void);
void cci__log(unsigned cat, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cci__flags_ignored(int ignored, _Atomic int *logged, unsigned cat, const char *call);

/*
 * CCI 2 let calls ignore flags that mean nothing to them (a CCI 2 program
 * passes CCI_FLAG_WRITE to cci_send, say): so do we, saying so once per
 * call under its debug category.  Returns the flags that count.  Inline:
 * cci_send pays one test when nothing is to be ignored.
 */
static inline int cci__flags_keep(int flags, int meaningful, _Atomic int *logged, unsigned cat,
                                  const char *call)
{
	if (__builtin_expect((flags & ~meaningful) != 0, 0))
		cci__flags_ignored(flags & ~meaningful, logged, cat, call);
	return flags & meaningful;
}
/* CCI__LOG (cci_plugin.h) for the core's own files: straight to log.c,
 * not through the services table, which names functions of every file. */
#define LOG(cat, ...)                                          \
	do {                                                       \
		if ((cci__log_mask & (unsigned)(cat)) != 0)            \
			cci__log((cat), __VA_ARGS__);                      \
	} while (0)
#define LOG_ERR(...) cci__log(CCI_LOG_ERR, __VA_ARGS__)
#define LOG_WARN(...) cci__log(CCI_LOG_WARN, __VA_ARGS__)

/* plugins.c */
/* Load the plugins and call each one's init() with core, the services
 * table (services.c, which names functions of every layer: only init.c,
 * above them all, passes it down). */
int cci__plugins_load(const struct cci_core *core);
void cci__plugins_unload(void);
const struct cci_plugin *cci__plugin_for_transport(const char *transport);
int cci__plugin_serves(const struct cci_plugin *p, const char *transport);
const struct cci_conf_key *cci__plugin_conf_keys(const struct cci_plugin *p);
void cci__plugin_note(const struct cci_plugin *plugin, const char *text);

/* devices.c */
cci__dev_t *cci__dev_new(const struct cci_plugin *plugin, const char *name);
int cci__devices_discover(void);
void cci__devices_sort(void);
void cci__devices_free(void);
cci__dev_t *cci__dev_from_pub(cci_device_t *pub);

/* config.c */
int cci__config_load(const char *path);

/* conf_keys.c */
/* One error line about dev's config section, naming the file being read
 * (set by cci__conf_file_set, "(no file)" outside cci__config_load), the
 * line and key kv (dev->conf[kv]; -1: the section itself), and fmt. */
void cci__conf_error(cci__dev_t *dev, int kv, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void cci__conf_file_set(const char *path);
int cci__conf_is_core_key(const char *key);
int cci__conf_parse(cci__dev_t *dev, const struct cci_conf_key *keys, void *out, int *kv_p);
/* CCI_EINVAL, with why naming the key, if a plugin's table is unusable. */
int cci__conf_keys_check(const struct cci_conf_key *keys, char *why, size_t len);
/* A NULL-terminated deep copy of keys (an empty one for NULL); NULL on ENOMEM. */
struct cci__key_record **cci__conf_keys_copy(const struct cci_conf_key *keys);
void cci__conf_keys_free(struct cci__key_record **list);

/* event.c */
cci__evt_t *cci__evt_get(cci__ep_t *ep);
void cci__evt_post(cci__ep_t *ep, cci__evt_t *evt);

/* post.c: the event services of struct cci_core (see cci_plugin.h) */
int cci__post_recv(cci__conn_t *conn, void *ptr, uint32_t len, void *rx_buf);
int cci__post_connect(cci__ep_t *ep, void *context, int status, cci__conn_t *conn);
int cci__post_accept(cci__ep_t *ep, void *context, int status, cci__conn_t *conn);
int cci__post_request(cci__ep_t *ep, cci_conn_attribute_t attr, const void *data,
                      uint32_t len, void *req_state);
int cci__post_keepalive_timedout(cci__conn_t *conn);
int cci__post_dev_failed(cci__ep_t *ep);
void cci__evt_pool_free(cci__ep_t *ep);
void cci__evt_purge_conn(cci__ep_t *ep, cci__conn_t *conn);
int cci__ep_arm(cci__ep_t *ep);
int cci__evq_settle(cci__ep_t *ep);
void cci__evt_drop_conn_refs(cci__ep_t *ep);
/* Around fork() (fork.c): the lock of the orphaned events' list. */
void cci__evt_orphans_lock(void);
void cci__evt_orphans_unlock(void);

/* endpoint.c */
cci__ep_t *cci__ep_from_pub(cci_endpoint_t *pub);
int cci__ep_is_open(cci__ep_t *ep);
void cci__ep_destroy_locked(cci__ep_t *ep);
void cci__eps_destroy_all_locked(void);

/* conn.c */
cci__conn_t *cci__conn_alloc(cci__ep_t *ep, cci_conn_attribute_t attr, void *context);
void cci__conn_release(cci__conn_t *conn);
void cci__conn_free(cci__conn_t *conn);

/* shell.c: memory of endpoints, connections and registrations, zeroed;
 * a freed shell keeps its contents (the caller wrote a dead magic) and
 * stays mapped for good. */
#define CCI__QUARANTINE 256u
void *cci__shell_alloc(void);
void cci__shell_free(void *shell);
/* Around fork() (fork.c): the shells' lock, so that the child's is free. */
void cci__shell_lock_all(void);
void cci__shell_unlock_all(void);

/* The live object behind an application's pointer, or NULL: a load and a
 * compare (the pointer must be one the library handed out, or NULL).
 * A connection or an event is live while its endpoint is: in a child of
 * fork() the parent's endpoints are not, and neither is what they hold. */
static inline cci__ep_t *cci__ep_live(const void *p)
{
	cci__ep_t *ep = (cci__ep_t *)p;

	return ep && __builtin_expect(core_ep(ep)->magic == CCI__MAGIC_EP, 1) ? ep : NULL;
}
static inline cci__conn_t *cci__conn_live(const void *p)
{
	cci__conn_t *c = (cci__conn_t *)p;

	return c && __builtin_expect(core_conn(c)->magic == CCI__MAGIC_CONN &&
	                             core_ep(c->ep)->magic == CCI__MAGIC_EP, 1) ? c : NULL;
}
static inline int cci__conn_is_dead(const void *p)
{
	return p && core_conn((cci__conn_t *)p)->magic == CCI__MAGIC_DEAD_CONN;
}
static inline cci__evt_t *cci__evt_live(const void *p)
{
	cci__evt_t *e = (cci__evt_t *)p;

	return e && __builtin_expect(core_evt(e)->magic == CCI__MAGIC_EVT &&
	                             core_ep(e->ep)->magic == CCI__MAGIC_EP, 1) ? e : NULL;
}

/* strerror.c */
const char *cci__status_text(int status);

/* msg.c */
void cci__send_done(cci__conn_t *conn, void *context, int flags, int status);

/* rma.c */
int cci__rma_lookup(cci__ep_t *ep, uint64_t key, uint64_t offset, uint64_t len,
                    int access, void **addr);
void cci__rma_table_free(cci__ep_t *ep);
int cci__rma_with_reg(cci__ep_t *ep, uint64_t key, int (*fn)(cci__rma_reg_t *reg, void *arg),
                      void *arg);

/* A lock-free peek: is an event queued?  (A hint; the queue lock decides.) */
static inline int cci__evq_nonempty(cci__ep_t *ep)
{
	return atomic_load_explicit(&core_ep(ep)->evq_head, memory_order_relaxed) != NULL;
}

/* globals.c: hand out the library-owned NULL-terminated list *list_p of
 * *n_p entries (an empty one when there are none), both read under the
 * global lock: CCI_EINVAL for a NULL out, CCI_ERROR before cci_init(). */
int cci__list_handout(void *const *list_p, const int *n_p, const void *const **out);

/* globals.c: a library call needs cci_init(): CCI_SUCCESS or CCI_ERROR. */
int cci__check_initialized(void);

/* services.c: the table every plugin's init() is given.  It names
 * functions of every layer of the core, so only init.c, on top, uses it. */
extern const struct cci_core cci__core_services;

#endif /* CCI_CORE_H */
