/*
 * cci_plugin.h - the contract between the core library and a transport
 * plugin.  Not part of the application API.
 *
 * A plugin is a shared module cci_ctp_<name>.so exporting one symbol,
 * cci_ctp_<name>_plugin, a struct cci_plugin.  The core checks its size
 * and abi_version, that every mandatory op is set, then calls init() with
 * the table of core services.  A plugin that fails any of this is logged
 * and skipped.
 *
 * Division of work.  The core checks every argument of every public call
 * before a plugin sees it, owns the device list and the configuration,
 * allocates endpoints, connections and events (with room for the plugin's
 * private part, ep_priv_size / conn_priv_size bytes), keeps the event
 * queue, the OS handle, option values and the RMA registration table, and
 * implements CCI_FLAG_BLOCKING and CCI_FLAG_SILENT.  A plugin moves bytes,
 * runs its connection handshake and its timers, and reports what happened
 * through the core services below.
 *
 * Threads.  Ops may be called concurrently from any application thread,
 * on the same endpoint too; a plugin protects its own state.  Core
 * services may be called from any thread, including a plugin's own
 * progress thread, except where noted.
 */
#ifndef CCI_PLUGIN_H
#define CCI_PLUGIN_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "cci.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Bumped whenever a struct below changes layout or meaning.  A member
 * added at the end of struct cci_plugin or struct cci_core does not bump
 * it: both start with their size, so each side sees what the other has.
 */
#define CCI_PLUGIN_ABI_VERSION 4

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Log categories, enabled by CCI_DEBUG (comma list of the names in
 * brackets, or "all").  CCI_LOG_WARN and CCI_LOG_ERR are always printed.
 */
enum cci_log_cat {
	CCI_LOG_ERR = 1u << 0,    /* [err]    always on */
	CCI_LOG_WARN = 1u << 1,   /* [warn]   always on */
	CCI_LOG_INIT = 1u << 2,   /* [init]   startup, devices, plugins */
	CCI_LOG_CONFIG = 1u << 3, /* [config] the ini file */
	CCI_LOG_EP = 1u << 4,     /* [ep]     endpoints */
	CCI_LOG_CONN = 1u << 5,   /* [conn]   connection set-up and teardown */
	CCI_LOG_MSG = 1u << 6,    /* [msg]    messages (verbose) */
	CCI_LOG_RMA = 1u << 7,    /* [rma]    registrations and RMA */
	CCI_LOG_EVENT = 1u << 8,  /* [event]  events handed out and returned */
	CCI_LOG_CTP = 1u << 9     /* [ctp]    transport internals */
};

/* ------------------------------------------------------------------------ */
/* Core objects shared with plugins                                          */
/* ------------------------------------------------------------------------ */

/*
 * Each struct below is the plugins' view of a core object: every field a
 * plugin may read or write, and nothing else.  The core's own bookkeeping
 * (event queues, reference counts, hash links) lies past the end of the
 * view, declared in the core alone, so a plugin never allocates, copies
 * or takes the size of one of these.
 */

struct cci_plugin;
typedef struct cci__dev cci__dev_t;
typedef struct cci__ep cci__ep_t;
typedef struct cci__conn cci__conn_t;
typedef struct cci__evt cci__evt_t;
typedef struct cci__rma_reg cci__rma_reg_t;

/* One "key = value" line of a device's config section. */
struct cci__conf_kv {
	char *key;
	char *value;
	int line; /* line number in the config file, 0 for discovered devices */
};

/*
 * A device.  Created by the core from a config section or by a plugin's
 * discover() through core->dev_add(); freed by the core at the last
 * cci_finalize() (after plugin->dev_free()).  The plugin fills the public
 * fields max_send_size, rate, info and up (dev_configure or discover) and
 * may hang its own data on priv.
 */
struct cci__dev {
	struct cci_device pub; /* first: the application's view */
	const struct cci_plugin *plugin;
	struct cci__conf_kv *conf; /* conf_count entries, all keys of the section */
	int conf_count;
	void *priv;                /* the plugin's; freed in dev_free() */
	/* The core's own fields follow, out of the plugins' sight. */
};

/*
 * An event.  Built and queued by the core's post_* services; the core owns
 * it from then on: it is lent to the application and, when returned, a
 * RECV goes to plugin->recv_returned() and a CONNECT_REQUEST to
 * plugin->request_done() before the event goes back to the pool.  Plugins
 * read rx_buf and req_state there, and touch nothing else.
 */
struct cci__evt {
	union cci_event ev; /* first: the application's view, filled by the plugin */
	cci__ep_t *ep;
	cci__conn_t *conn;  /* the connection it belongs to, or NULL */
	void *rx_buf;       /* plugin: the receive buffer behind a RECV event */
	void *req_state;    /* plugin: the pending request behind CONNECT_REQUEST */
	/* The core's own fields follow, out of the plugins' sight. */
};

/*
 * An endpoint.  Allocated by the core with ep_priv_size zeroed bytes for
 * the plugin at priv (aligned to 64 bytes, not inside the endpoint: never
 * derive one from the other); freed by the core after
 * plugin->ep_free().
 */
struct cci__ep {
	struct cci_endpoint pub; /* first */
	cci__dev_t *dev;
	const struct cci_plugin *plugin;

	/* Option values; the plugin reads them, the core writes them.  The
	 * timeouts are set by cci_set_opt() from any thread and read by a
	 * progress thread (a connection accepted there copies them), hence
	 * atomic; same size and alignment as uint32_t. */
	_Atomic uint32_t send_timeout_us; /* default for new connections, 0 = none */
	_Atomic uint32_t keepalive_us;    /* default for new connections, 0 = none */
	uint32_t recv_buf_count;     /* the plugin sets the initial value in ep_create */
	uint32_t send_buf_count;     /* idem */
	char *uri;                   /* malloc'd by the plugin in ep_create; freed by the core */
	cci_alignment_t rma_align;   /* the plugin sets it in ep_create */

	int os_epfd;                 /* the OS handle (epoll), -1 if none: see ep_create */
	void *priv;                  /* an allocation of its own, freed by the core */
	/* The core's own fields follow, out of the plugins' sight. */
};

/*
 * A connection.  Allocated by the plugin through core->conn_alloc(), with
 * conn_priv_size bytes for the plugin at priv; freed through
 * core->conn_release() once the plugin is done with it and no event that
 * names it is still lent to the application.
 */
struct cci__conn {
	struct cci_connection pub; /* first */
	cci__ep_t *ep;
	/* Copied from the endpoint at creation; cci_set_opt() changes them
	 * from any thread while the progress thread reads them (its tick's
	 * send timeout and keepalive checks), hence atomic. */
	_Atomic uint32_t send_timeout_us;
	_Atomic uint32_t keepalive_us;
	void *priv;
	/* The core's own fields follow, out of the plugins' sight. */
};

/*
 * A registration.  Owned by the core's table from cci_rma_register() to
 * cci_rma_deregister().  handle is what the application sees and copies to
 * peers; its layout is fixed so that every transport can decode a remote
 * handle with the helpers below.
 */
struct cci__rma_reg {
	struct cci_rma_handle handle; /* first */
	cci__ep_t *ep;
	void *start;
	uint64_t length;
	int flags;                    /* CCI_FLAG_READ | CCI_FLAG_WRITE */
	void *_Atomic priv;           /* the plugin's (e.g. a memory region); atomic: one thread
	                               * of the plugin may publish it to another */
	/* The core's own fields follow, out of the plugins' sight. */
};

/* Serialised handle: stuff[0] key, stuff[1] address, stuff[2] length,
 * stuff[3] access flags in the low 32 bits and, in the high 32, a hint
 * the plugin may set in rma_register (0 if it does not) to find the
 * registration fast at the target: sm's table slot.  A hint comes from
 * the wire like the rest: it is checked, never trusted. */
static inline uint64_t cci__handle_key(const struct cci_rma_handle *h) { return h->stuff[0]; }
static inline uint64_t cci__handle_addr(const struct cci_rma_handle *h) { return h->stuff[1]; }
static inline uint64_t cci__handle_len(const struct cci_rma_handle *h) { return h->stuff[2]; }
static inline int cci__handle_flags(const struct cci_rma_handle *h) { return (int)(h->stuff[3] & 0xffffffffu); }
static inline uint32_t cci__handle_hint(const struct cci_rma_handle *h) { return (uint32_t)(h->stuff[3] >> 32); }
static inline void cci__handle_set_hint(struct cci_rma_handle *h, uint32_t hint)
{
	h->stuff[3] = (h->stuff[3] & 0xffffffffu) | (uint64_t)hint << 32;
}

/* ------------------------------------------------------------------------ */
/* Config keys                                                               */
/* ------------------------------------------------------------------------ */

/*
 * One ini key of a plugin's config sections.  A plugin describes all its
 * keys in one static table, in the order of its README, ended by an entry
 * whose name is NULL, and names it in its ops table (conf_keys).  The
 * table belongs to the plugin and must stay unchanged while the module is
 * loaded; the core copies what cci_info shows.  The core checks the table
 * when it loads the plugin (names unique and not a core key, sizes that
 * fit the type, each default accepted by its own key) and skips a plugin
 * whose table is wrong, saying which key and why.
 *
 * core->conf_parse() reads a section against the table into a struct of
 * the plugin's (out): the value of each key goes to the size bytes at
 * out + offset ("the field"), converted by type:
 *   CCI_CONF_UINT    decimal digits only, min..max; the field is a
 *                    uint16_t, uint32_t or uint64_t, by size.
 *   CCI_CONF_STRING  1..size-1 bytes, copied with its NUL into a char
 *                    array of size bytes.
 *   CCI_CONF_CHOICE  one of choices (NULL-terminated); the field is an
 *                    int, the index of the word.
 *   CCI_CONF_CUSTOM  any non-empty string; check converts it into the
 *                    field and is mandatory.
 * check, when set, then gets the value as written and the field as
 * converted; it may refuse the value, or finish converting it, for a
 * rule only the plugin knows (an address family, an absolute path).
 * On refusal it returns CCI_EINVAL and writes to why the end of the
 * sentence that begins with the quoted value: "is not an absolute path".
 * It must not keep value, which dies with the device's conf.
 */
struct cci_conf_key {
	const char *name;            /* NULL ends the table */
	cci_conf_type_t type;
	uint64_t min, max;           /* CCI_CONF_UINT: the range */
	/* Written into the field before the section is read, as a value of
	 * the section would be; NULL leaves the field as the plugin set it
	 * (a default found on the host, or off): help then says what. */
	const char *def;
	const char *const *choices;  /* CCI_CONF_CHOICE: the words, NULL-terminated */
	const char *help;            /* one sentence for cci_info, from the README */
	size_t offset, size;         /* the field in out */
	int (*check)(const char *value, void *field, char *why, size_t whylen);
};

/* .def of a CCI_CONF_UINT key from a macro that is a plain decimal literal
 * (no suffix, no expression): .def = CCI_CONF_NUM(SM_MSS_DEFAULT).  The
 * load-time check refuses anything else. */
#define CCI_CONF_NUM(x) CCI__CONF_STR(x)
#define CCI__CONF_STR(x) #x

/* ------------------------------------------------------------------------ */
/* Services the core offers to plugins                                       */
/* ------------------------------------------------------------------------ */

struct cci_core {
	size_t size;                   /* sizeof(struct cci_core) */
	const unsigned *log_mask;      /* enabled CCI_LOG_* bits */

	/* Print one line to stderr, prefixed with the category, when enabled. */
	void (*log)(unsigned cat, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

	/* discover() only: add a device served by plugin; NULL on ENOMEM. */
	cci__dev_t *(*dev_add)(const struct cci_plugin *plugin, const char *name);

	/*
	 * dev_configure() only: log "file:line: [section] key: message" for
	 * the conf entry at index kv (or the section when kv < 0).  The plugin
	 * then returns CCI_EINVAL.
	 */
	void (*conf_error)(cci__dev_t *dev, int kv, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

	/* A new connection on ep, with the endpoint's option defaults; NULL on ENOMEM. */
	cci__conn_t *(*conn_alloc)(cci__ep_t *ep, cci_conn_attribute_t attr, void *context);
	/* The plugin is done with conn; freed once no lent event names it. */
	void (*conn_release)(cci__conn_t *conn);

	/*
	 * Events.  Each call builds one event and queues it for the
	 * application (ringing the OS handle); the event holds a reference on
	 * the connection it names.  They return CCI_SUCCESS, or CCI_ENOMEM when
	 * no event could be had (the core has logged the loss): the plugin then
	 * takes back what stood behind it.
	 */
	/* A message arrived on conn: len bytes at ptr, which stay valid until
	 * the application returns the event and the core hands rx_buf back
	 * through plugin->recv_returned(). */
	int (*post_recv)(cci__conn_t *conn, void *ptr, uint32_t len, void *rx_buf);
	/* The outcome of connect() or accept(); conn is the new connection on
	 * success and is ignored otherwise. */
	int (*post_connect)(cci__ep_t *ep, void *context, int status, cci__conn_t *conn);
	int (*post_accept)(cci__ep_t *ep, void *context, int status, cci__conn_t *conn);
	/* A connection request with len <= CCI_CONN_REQ_LEN bytes of data
	 * (copied; CCI_EINVAL beyond); req_state is what the plugin needs to
	 * answer it (see accept(), reject(), request_done()). */
	int (*post_request)(cci__ep_t *ep, cci_conn_attribute_t attr, const void *data,
	                    uint32_t len, void *req_state);
	/* conn's keepalive timeout passed with nothing heard from the peer. */
	int (*post_keepalive_timedout)(cci__conn_t *conn);
	/* The device under ep failed: the endpoint can do nothing more. */
	int (*post_dev_failed)(cci__ep_t *ep);

	/*
	 * A send or RMA finished.  context and flags are those the plugin got
	 * in send()/rma().  The core posts the SEND event, or wakes a
	 * CCI_FLAG_BLOCKING caller, or drops it for CCI_FLAG_SILENT.
	 */
	void (*send_done)(cci__conn_t *conn, void *context, int flags, int status);

	/*
	 * Target-side check of an incoming RMA: find the registration of key
	 * on ep, check [offset, offset+len) lies inside it and that it grants
	 * access (CCI_FLAG_READ or CCI_FLAG_WRITE).  On success *addr is where
	 * the bytes live.  Returns CCI_ERR_RMA_HANDLE or CCI_EINVAL otherwise.
	 */
	int (*rma_lookup)(cci__ep_t *ep, uint64_t key, uint64_t offset,
	                  uint64_t len, int access, void **addr);

	/*
	 * The core's sentence for a status (what cci_strerror(NULL, status)
	 * gives), static.  Plugins use this, never the public cci_* calls:
	 * a plugin module must import no cci_* symbol, or it fails to load
	 * when libcci was opened with dlopen(RTLD_LOCAL), as FFIs do.
	 */
	const char *(*status_text)(int status);

	/*
	 * dev_configure() only: read dev->conf against keys (the plugin's
	 * conf_keys table) into out.  The core keys (transport, priority,
	 * default) are skipped; every default of the table is written first;
	 * then each entry of the section, in file order, is found in keys,
	 * converted and checked into its field.  A key the table lacks, or a
	 * value it refuses, is logged through conf_error with the same words
	 * for every plugin, and gives CCI_EINVAL; out is then partly written
	 * and the plugin discards it.  kv_p, if not NULL, has one int per key
	 * of keys, in table order: each gets the index in dev->conf of the
	 * entry that set the key (for conf_error on a rule that spans keys),
	 * or -1 when the section omits it.
	 */
	int (*conf_parse)(cci__dev_t *dev, const struct cci_conf_key *keys, void *out, int *kv_p);

	/*
	 * discover() only: say why plugin offers no device (text is copied),
	 * for cci_get_plugins() and cci_info.  Added after the first plugins
	 * of this ABI version: a plugin checks size covers it before use.
	 */
	void (*plugin_note)(const struct cci_plugin *plugin, const char *text);

	/*
	 * Call fn(reg, arg) with ep's live registration of key, found in the
	 * core's table (constant time whatever the count), and return what fn
	 * returns; CCI_ERR_RMA_HANDLE if there is none.  fn runs under the
	 * core's registration lock, so reg is not deregistered meanwhile:
	 * reg->priv is what the plugin's rma_register stored (NULL while that
	 * call is still running: treat it as absent).  fn must be short and
	 * call back into no core service; it may take a lock of the plugin
	 * that is taken last.
	 */
	int (*rma_with_reg)(cci__ep_t *ep, uint64_t key,
	                    int (*fn)(cci__rma_reg_t *reg, void *arg), void *arg);
};

#define CCI__LOG(core, cat, ...)                                   \
	do {                                                           \
		if ((*(core)->log_mask & (unsigned)(cat)) != 0)            \
			(core)->log((cat), __VA_ARGS__);                       \
	} while (0)

/* ------------------------------------------------------------------------ */
/* The plugin's ops table                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Mandatory ops are marked (M); optional ones may be NULL.  Ops return a
 * cci_status_t value.  Arguments have been checked by the core.
 */
struct cci_plugin {
	size_t size;                   /* sizeof(struct cci_plugin) as built */
	uint32_t abi_version;          /* CCI_PLUGIN_ABI_VERSION */
	const char *name;              /* folder and module name, e.g. "sm" */
	const char *const *transports; /* ini transport= values and URI schemes it serves */
	int priority;                  /* default device priority, 0..100 */
	size_t ep_priv_size;           /* bytes of ep->priv */
	size_t conn_priv_size;         /* bytes of conn->priv */

	/* (M) Once after loading.  Failing skips the plugin (it logs why). */
	int (*init)(const struct cci_core *core);
	/* Once before unloading, after every endpoint is destroyed. */
	void (*finalize)(void);

	/* (M) No config file: add the devices found with core->dev_add(). */
	int (*discover)(void);
	/* (M) A config section names this plugin: read dev->conf (with
	 * core->conf_parse() and conf_keys), fill dev->pub. */
	int (*dev_configure)(cci__dev_t *dev);
	/* Free dev->priv. */
	void (*dev_free)(cci__dev_t *dev);

	/* (M) Open the transport side of ep; set ep->uri, recv/send_buf_count,
	 * rma_align.  service is NULL or the string of cci_create_endpoint_at.
	 * If ep->os_epfd >= 0, add the plugin's wake-up descriptors to it. */
	int (*ep_create)(cci__ep_t *ep, const char *service);
	/*
	 * Endpoint teardown, in three steps.  The core calls ep_close, then
	 * ep_stop, then ep_free; at cci_finalize every endpoint is closed
	 * before any is stopped, and stopped before any is freed, so that no
	 * endpoint's thread still runs while another's memory goes.  The
	 * application makes no more calls on ep from the first step on.
	 * Close: no new work.  The core refuses from then on every connection
	 * request the plugin posts (post_request fails with
	 * CCI_ERR_DISCONNECTED, and the plugin refuses the peer as it does
	 * when it cannot post one); ep_close, if set, stops what more the
	 * plugin would start (listening, say).  The plugin's threads may
	 * still run.
	 * (M) ep_stop: the plugin's threads for ep are joined; none of its
	 * callbacks runs for ep after it returns.
	 * (M) ep_free: close every connection (in-flight work ends without
	 * events; peers are told where the wire can say it) and free every
	 * resource; the core frees ep after.
	 */
	void (*ep_close)(cci__ep_t *ep);
	void (*ep_stop)(cci__ep_t *ep);
	void (*ep_free)(cci__ep_t *ep);
	/* (M) Make progress without blocking; post what arrived.  Returns
	 * CCI_ENOBUFS when nothing can arrive because the application holds
	 * every receive buffer, CCI_SUCCESS otherwise. */
	int (*progress)(cci__ep_t *ep);
	/* The OS handle may be waited on from now: arrange for it to turn
	 * readable when something arrives.  CCI_EAGAIN if something already
	 * has (the core then makes the handle readable).  Called, on
	 * endpoints with an OS handle only, whenever cci_get_event leaves the
	 * event queue empty, and by cci_arm_os_handle; progress() may undo
	 * the arming, since the next empty queue arms again. */
	int (*arm)(cci__ep_t *ep);
	/* Buffer counts changed (core stored the value); CCI_ERANGE refuses. */
	int (*ep_set_buf_count)(cci__ep_t *ep, cci_opt_name_t name, uint32_t value);
	/* A connection's timeouts changed (core stored them). */
	void (*conn_timeouts_changed)(cci__conn_t *conn);

	/* (M) Start connecting; the outcome is posted as a CONNECT event.
	 * timeout is NULL for none.  attr is RO, RU or UU (the core refuses
	 * the multicast ones).  A URI it cannot parse: CCI_EINVAL. */
	int (*connect)(cci__ep_t *ep, const char *uri, const void *data,
	               uint32_t data_len, cci_conn_attribute_t attr,
	               void *context, const struct timeval *timeout);
	/* (M) Answer the request behind evt (evt->req_state); the outcome of
	 * accept is posted as an ACCEPT event.  The core calls each at most
	 * once per request, and calls reject() itself for a request the
	 * application returned unanswered. */
	int (*accept)(cci__evt_t *evt, void *context);
	int (*reject)(cci__evt_t *evt);
	/* (M) The request's event came back, answered: free evt->req_state. */
	void (*request_done)(cci__evt_t *evt);
	/* (M) Close conn, tell the peer, drop its in-flight work, then
	 * core->conn_release(). */
	int (*disconnect)(cci__conn_t *conn);

	/* (M) Send one message gathered from iov (total len bytes).  Report
	 * completion with core->send_done(conn, context, flags, status). */
	int (*send)(cci__conn_t *conn, const struct iovec *iov, uint32_t iovcnt,
	            uint32_t len, void *context, int flags);

	/* Called after the core registered / before it drops a registration. */
	int (*rma_register)(cci__ep_t *ep, cci__rma_reg_t *reg);
	void (*rma_deregister)(cci__ep_t *ep, cci__rma_reg_t *reg);
	/* (M) One RMA; checks done by the core on the local side: attribute is
	 * reliable, exactly one of READ/WRITE, local range inside local, the
	 * remote handle's own length and flags allow the access. */
	int (*rma)(cci__conn_t *conn, const void *msg_ptr, uint32_t msg_len,
	           cci__rma_reg_t *local, uint64_t local_offset,
	           const struct cci_rma_handle *remote, uint64_t remote_offset,
	           uint64_t data_len, void *context, int flags);

	/* A RECV event posted with an rx_buf came back (returned, or dropped
	 * with its connection): take the buffer back.  Required if the plugin
	 * ever posts a non-NULL rx_buf. */
	void (*recv_returned)(cci__evt_t *evt);

	/* A transport-specific sentence for status, or NULL for the core's. */
	const char *(*strerror)(cci__ep_t *ep, int status);

	/* The ini keys of its config sections (see struct cci_conf_key), or
	 * NULL if it takes none.  Added after the first plugins of this ABI
	 * version: the core reads it only when size covers it. */
	const struct cci_conf_key *conf_keys;
};

#ifdef __cplusplus
}
#endif

#endif /* CCI_PLUGIN_H */
