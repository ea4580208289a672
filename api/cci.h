/*
 * cci.h - the Common Communication Interface, ABI version 2.
 *
 * One small API for communication between processes: endpoints, connections
 * (reliable-ordered, reliable-unordered, unreliable), active messages and RMA
 * (remote memory access) into registered memory.  Transports are plugins
 * chosen at run time.
 *
 * Source-compatible with programs written against CCI 2.x.  Where this
 * header says "extension" the behaviour goes past what CCI 2 promised; no
 * extension changes what a CCI 2 program sees.
 *
 * Conventions used throughout:
 *  - Every function returns a cci_status_t value (CCI_SUCCESS or an error).
 *  - Output parameters are written only on success.
 *  - Every public struct is read-only to the application: the library owns
 *    and frees it.
 *  - Any function may be called from any thread at any time, on the same
 *    endpoint or on different ones (see "Threads" below).
 *
 * Differences from CCI 2 that a CCI 2 program can see, kept on purpose:
 *  - Access flags of a registration are enforced at both ends: an RMA into
 *    a region registered without CCI_FLAG_WRITE (or out of one without
 *    CCI_FLAG_READ) fails with CCI_ERR_RMA_HANDLE.  CCI 2's transports
 *    ignored them; enforcing them is what keeps a forged or careless
 *    handle from touching memory.
 *  - cci_strerror() gives a sentence ("invalid argument"), not the enum's
 *    name ("CCI_EINVAL"); compare statuses, never strings.
 *  - A configuration error fails cci_init() with CCI_EINVAL (a bad file)
 *    or CCI_ERR_NOT_FOUND (an unreadable one), naming the file and line,
 *    where CCI 2 gave CCI_ERROR.
 *  - Calls check their arguments where CCI 2 crashed or left it to the
 *    transport: NULL pointers, events returned twice, foreign, closed or
 *    wrong-kind objects, bad URIs and out-of-range values give CCI_EINVAL
 *    (or CCI_ERROR before cci_init()); cci_get_opt() and cci_set_opt()
 *    refuse unknown names.  See "Misuse" below for the exact rules.
 *  - cci_create_endpoint_at() with a NULL device opens the default
 *    device, as cci_create_endpoint() does (CCI 2: CCI_EINVAL).
 *  - CCI_EP_ROUTING is accepted and has no effect: no transport routes.
 */
#ifndef CCI_H
#define CCI_H

/* As in CCI 2: programs use errno names (EINTR, ENOMEM, EAGAIN), NULL
 * and the sys/types.h types with this header alone.  Never sys/socket.h:
 * CCI 2 programs have globals named send, recv and accept. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI a program was compiled against; pass it to cci_init(). */
#define CCI_ABI_VERSION 2

/* Visibility of the library's entry points (the library is built with
 * hidden visibility by default; only these names are exported). */
#ifndef CCI_DECLSPEC
#if defined(__GNUC__) && defined(CCI_BUILDING_LIBRARY)
#define CCI_DECLSPEC __attribute__((visibility("default")))
#else
#define CCI_DECLSPEC
#endif
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                              */
/* ------------------------------------------------------------------------ */

/*
 * Every call returns one of these.  The small values are CCI's own; the
 * others reuse the Linux errno numbers so that a program may print them with
 * strerror(), but callers must compare against these names, never against
 * errno.  cci_strerror() gives a sentence for each.
 */
typedef enum cci_status {
	CCI_SUCCESS = 0,           /* it worked */
	CCI_ERROR = 1,             /* generic failure, see the log (CCI_DEBUG) */
	CCI_ERR_DISCONNECTED = 2,  /* the connection is closed or broken */
	CCI_ERR_RNR = 3,           /* the receiver had no buffer (unreliable only) */
	CCI_ERR_DEVICE_DEAD = 4,   /* the device failed */
	CCI_ERR_RMA_HANDLE = 5,    /* an RMA handle is unknown, stale or lacks access */
	CCI_ERR_RMA_OP = 6,        /* an RMA operation failed at the target */
	CCI_ERR_NOT_IMPLEMENTED = 7,
	CCI_ERR_NOT_FOUND = 8,     /* no such device, plugin or entry */

	CCI_EINVAL = 22,           /* an argument is invalid */
	CCI_ETIMEDOUT = 110,       /* a timeout expired */
	CCI_ENOMEM = 12,           /* out of memory */
	CCI_ENODEV = 19,           /* no device to use */
	CCI_ENETDOWN = 100,        /* the network is down */
	CCI_EBUSY = 16,            /* resource busy (e.g. an RMA handle in use) */
	CCI_ERANGE = 34,           /* a value is out of range */
	CCI_EAGAIN = 11,           /* nothing now; try again later */
	CCI_ENOBUFS = 105,         /* no buffer available */
	CCI_EMSGSIZE = 90,         /* a message is larger than max_send_size */
	CCI_ENOMSG = 42,           /* no message of the wanted kind */
	CCI_EADDRNOTAVAIL = 99,    /* the address cannot be used */
	CCI_ECONNREFUSED = 111     /* the server rejected the connection */
} cci_status_t;

/* ------------------------------------------------------------------------ */
/* Initialisation                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Start the library.  abi_ver must be CCI_ABI_VERSION and caps not NULL,
 * else CCI_EINVAL (as in CCI 2).  *caps receives the capability bits (none
 * are defined; it is set to 0).  No flag is defined: flags are ignored.
 *
 * Calls are counted: each successful cci_init() needs one cci_finalize().
 * The first call reads the configuration (the file named by CCI_CONFIG, or
 * device discovery when it is unset) and loads the transport plugins; a
 * configuration error fails that call with CCI_EINVAL (or CCI_ERR_NOT_FOUND
 * for an unreadable file) and logs the file, line and problem to stderr.
 * Later calls only count.
 *
 * Environment: CCI_CONFIG (ini file), CCI_DEBUG (comma list of log
 * categories, or "all"), CCI_CTP (comma list of plugins to keep, or
 * "^list" to exclude), CCI_PLUGIN_PATH (extra plugin directory).
 */
CCI_DECLSPEC int cci_init(uint32_t abi_ver, uint32_t flags, uint32_t *caps);

/*
 * Undo one cci_init().  The last call destroys any endpoint still open
 * (as cci_destroy_endpoint() would: its connections, registrations, events
 * and OS handle go with it), unloads the plugins and frees the device list;
 * every pointer the library handed out becomes invalid, and calls given
 * one later return a status (see "Misuse").  Returns CCI_ERROR if the
 * library is not initialised (more cci_finalize() than cci_init() calls).
 */
CCI_DECLSPEC int cci_finalize(void);

/* ------------------------------------------------------------------------ */
/* Devices                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * A device: one way out of this process (a shared-memory domain, a network
 * interface, a fabric port).  Owned by the library from cci_init() to the
 * last cci_finalize(); never modify it.  Language bindings read the fields
 * by offset: the library allocates it zeroed, padding included.
 */
typedef const struct cci_device {
	const char *name;        /* the config section name, or a discovered name */
	const char *transport;   /* the transport serving it, e.g. "sm", "tcp" */
	unsigned up;             /* non-zero when usable */
	const char *info;        /* a human-readable description */
	/* NULL-terminated "key=value" strings of its config section; an empty
	 * list (never NULL) for a discovered device. */
	const char *const *conf_argv;
	uint32_t max_send_size;  /* largest active message on this device */
	uint64_t rate;           /* bits per second, 0 if unknown */
	struct {
		uint32_t domain, bus, dev, func; /* all (uint32_t)-1 when not PCI */
	} pci;
} cci_device_t;

/*
 * Get the NULL-terminated list of devices, sorted: devices that are up
 * first, then the default one, then by priority (high first), then by
 * rate.  The list is owned by the library and lives until the last
 * cci_finalize().
 */
CCI_DECLSPEC int cci_get_devices(cci_device_t *const **devices);

/* ------------------------------------------------------------------------ */
/* Endpoints                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Flags for cci_create_endpoint().  CCI_EP_ROUTING is CCI 2's request for
 * an endpoint that forwards for others; no transport of this release
 * routes, so it is accepted and has no effect (logged under
 * CCI_DEBUG=ep).  Other bits are ignored the same way.
 */
typedef enum cci_endpoint_flags {
	CCI_ENDPOINT_FLAG_NONE_DEFINED = 0,
	CCI_EP_ROUTING = (1 << 0)
} cci_endpoint_flags_t;

/*
 * An endpoint: the source and sink of connections, messages and events.
 * Owned by the library until cci_destroy_endpoint().
 */
typedef const struct cci_endpoint {
	cci_device_t *device;    /* the device it was opened on */
} cci_endpoint_t;

/* A pollable file descriptor: see cci_create_endpoint(). */
typedef int cci_os_handle_t;

/*
 * Open an endpoint on a device (NULL: the default device, else the first
 * of the list).  flags: see cci_endpoint_flags_t (none has an effect).
 *
 * If fd is not NULL it receives an OS handle: a descriptor that is
 * readable whenever cci_get_event() would hand out an event, whatever
 * produced it (the wire, a timer, or a call of this process such as
 * cci_accept() or a send that completes at once).  It is level-triggered:
 * it turns unreadable only once the event queue is empty, so the CCI 2
 * loop "select() on the handle, one cci_get_event(), select() again"
 * never sleeps past an event.  It may be readable with nothing to hand
 * out for a moment (cci_get_event() then returns CCI_EAGAIN).  The
 * application may poll/select/epoll it but never reads, writes or closes
 * it; it is closed by cci_destroy_endpoint().  Endpoints opened without an
 * OS handle pay no system call for it on the data path; with one, the
 * first event into an empty queue costs a write and the last one out a
 * read.
 *
 * The endpoint's address, to give to peers, is the CCI_OPT_ENDPT_URI option.
 * Returns CCI_ENODEV if there is no usable device, CCI_EINVAL for bad
 * arguments.
 */
CCI_DECLSPEC int cci_create_endpoint(cci_device_t *device, int flags,
                                     cci_endpoint_t **endpoint,
                                     cci_os_handle_t *fd);

/*
 * As cci_create_endpoint(), at a chosen service: the meaning is the
 * transport's (a port number for tcp/sock, an endpoint id for sm).  NULL
 * means "any", as in cci_create_endpoint().  A service in use gives
 * CCI_EBUSY (or CCI_EADDRNOTAVAIL); one that does not parse, CCI_EINVAL.
 */
CCI_DECLSPEC int cci_create_endpoint_at(cci_device_t *device,
                                        const char *service, int flags,
                                        cci_endpoint_t **endpoint,
                                        cci_os_handle_t *fd);

/*
 * Close an endpoint.  Its connections are closed (peers learn of it);
 * operations still in flight are dropped; events not yet returned, RMA
 * registrations and the OS handle are freed.  Every pointer derived from
 * the endpoint (connections, events, receive buffers, RMA handles) is
 * invalid afterwards: a second cci_destroy_endpoint() and every call on
 * the endpoint give CCI_EINVAL, sends and RMA on its connections
 * CCI_ERR_DISCONNECTED, cci_return_event() of its events CCI_EINVAL (see
 * "Misuse").  Must not race with other calls on the same endpoint from
 * other threads.
 */
CCI_DECLSPEC int cci_destroy_endpoint(cci_endpoint_t *endpoint);

/*
 * A sentence for a status.  endpoint may be NULL; when given, the
 * transport may describe its own failure more precisely.  The string is
 * static and must not be freed.
 */
CCI_DECLSPEC const char *cci_strerror(cci_endpoint_t *endpoint,
                                      enum cci_status status);

/* ------------------------------------------------------------------------ */
/* Connections                                                               */
/* ------------------------------------------------------------------------ */

/*
 * Connection attributes:
 *  RO  reliable and ordered: every message arrives once, in send order.
 *  RU  reliable and unordered: every message arrives once, in any order.
 *  UU  unreliable: each message arrives zero or one time (never twice,
 *      never corrupted).  No RMA.
 *  UU_MC_TX / UU_MC_RX  unreliable multicast send / receive; no transport
 *      of this release offers them (cci_connect gives CCI_EINVAL).
 */
typedef enum cci_conn_attribute {
	CCI_CONN_ATTR_RO = 0,
	CCI_CONN_ATTR_RU = 1,
	CCI_CONN_ATTR_UU = 2,
	CCI_CONN_ATTR_UU_MC_TX = 3,
	CCI_CONN_ATTR_UU_MC_RX = 4
} cci_conn_attribute_t;

/*
 * A connection.  Owned by the library: it exists from the CONNECT (client)
 * or ACCEPT (server) event until cci_disconnect() or the endpoint's
 * destruction.  context is the application's value given to cci_connect()
 * or cci_accept().
 *
 * When its peer is gone (it called cci_disconnect(), its endpoint or
 * process ended, or a send timed out), sends and RMAs on it fail with
 * CCI_ERR_DISCONNECTED, and the transport releases what it held for it
 * (descriptors, rings, buffers, windows, its connection id) at its next
 * tick (ofi: a second after), once the messages that came before are
 * delivered and their events returned.
 * What the application still holds is then the connection object alone,
 * a few KiB (each transport's README, "Limits"), until cci_disconnect():
 * a server that never disconnects the clients that left (CCI has no
 * event for it) keeps no descriptor for them.
 */
typedef const struct cci_connection {
	uint32_t max_send_size;        /* the smaller of the two sides' */
	cci_endpoint_t *endpoint;
	cci_conn_attribute_t attribute;
	void *context;
} cci_connection_t;

/* The most connect payload a request may carry. */
#define CCI_CONN_REQ_LEN (1024)

/*
 * Ask for a connection to server_uri (the server's CCI_OPT_ENDPT_URI).
 * Never blocks: the result comes as a CCI_EVENT_CONNECT event carrying
 * context, with status CCI_SUCCESS and the connection, CCI_ECONNREFUSED if
 * the server rejected it, CCI_ETIMEDOUT if timeout (NULL: no limit; an
 * extension, CCI ignored it) passed first, or another error.
 *
 * data_ptr/data_len: a payload of at most CCI_CONN_REQ_LEN bytes that the
 * server sees in its CONNECT_REQUEST event; copied before the call returns
 * (data_ptr may be NULL when data_len is 0).  No flag is defined: flags
 * are ignored.
 *
 * Returns CCI_EINVAL for a bad argument or an unparsable URI, or one that
 * names another transport than the endpoint's.
 */
CCI_DECLSPEC int cci_connect(cci_endpoint_t *endpoint, const char *server_uri,
                             const void *data_ptr, uint32_t data_len,
                             cci_conn_attribute_t attribute,
                             const void *context, int flags,
                             const struct timeval *timeout);

/*
 * Close a connection locally and tell the peer, whose later sends fail
 * with CCI_ERR_DISCONNECTED.  Operations still in flight on it are dropped
 * without events.  The connection pointer is invalid afterwards: calls
 * given it return CCI_ERR_DISCONNECTED (cci_send, cci_sendv, cci_rma) or
 * CCI_EINVAL (cci_disconnect again, its options), whether or not an event
 * naming it is still lent (see "Misuse").
 */
CCI_DECLSPEC int cci_disconnect(cci_connection_t *connection);

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum cci_event_type {
	CCI_EVENT_NONE = 0,
	/* A send or an RMA finished (successfully or not); see status. */
	CCI_EVENT_SEND = 1,
	/* An active message arrived. */
	CCI_EVENT_RECV = 2,
	/* The outcome of cci_connect(). */
	CCI_EVENT_CONNECT = 3,
	/* A client asks to connect: answer with cci_accept() or cci_reject(). */
	CCI_EVENT_CONNECT_REQUEST = 4,
	/* The outcome of cci_accept(). */
	CCI_EVENT_ACCEPT = 5,
	/* The peer stayed silent past the connection's keepalive timeout. */
	CCI_EVENT_KEEPALIVE_TIMEDOUT = 6,
	/* The endpoint's device failed; the endpoint is unusable. */
	CCI_EVENT_ENDPOINT_DEVICE_FAILED = 7
} cci_event_type_t;

/*
 * The event structs.  Each has a typedef of the same name with _t, as in
 * CCI 2 (bindings name them, e.g. offsetof(cci_event_recv_t, ptr)).
 */

/* A send or RMA completion.  context is the value given to the call. */
typedef struct cci_event_send {
	cci_event_type_t type;
	cci_status_t status;
	cci_connection_t *connection;
	void *context;
} cci_event_send_t;

/*
 * An active message.  ptr points at len bytes, 8-byte aligned, inside the
 * transport's receive buffer: valid until the event is returned, never
 * after.  The application may modify the bytes in place.
 */
typedef struct cci_event_recv {
	cci_event_type_t type;
	uint32_t len;
	const void *ptr;
	cci_connection_t *connection;
} cci_event_recv_t;

/* The outcome of cci_connect(); connection is NULL unless status is SUCCESS. */
typedef struct cci_event_connect {
	cci_event_type_t type;
	cci_status_t status;
	void *context;
	cci_connection_t *connection;
} cci_event_connect_t;

/* A connection request; data_ptr lives as long as the event. */
typedef struct cci_event_connect_request {
	cci_event_type_t type;
	uint32_t data_len;
	const void *data_ptr;
	cci_conn_attribute_t attribute;
} cci_event_connect_request_t;

/* The outcome of cci_accept(); connection is NULL unless status is SUCCESS. */
typedef struct cci_event_accept {
	cci_event_type_t type;
	cci_status_t status;
	void *context;
	cci_connection_t *connection;
} cci_event_accept_t;

/* The keepalive timer fired; it is disarmed, the connection stays open. */
typedef struct cci_event_keepalive_timedout {
	cci_event_type_t type;
	cci_connection_t *connection;
} cci_event_keepalive_timedout_t;

typedef struct cci_event_endpoint_device_failed {
	cci_event_type_t type;
	cci_endpoint_t *endpoint;
} cci_event_endpoint_device_failed_t;

/*
 * An event.  Read type, then the member of that name.  Lent to the
 * application by cci_get_event() and given back with cci_return_event();
 * every event must be returned, in any order, and nothing it points to may
 * be used afterwards.
 */
typedef const union cci_event {
	cci_event_type_t type;
	struct cci_event_send send;
	struct cci_event_recv recv;
	struct cci_event_connect connect;
	struct cci_event_connect_request request;
	struct cci_event_accept accept;
	struct cci_event_keepalive_timedout keepalive;
	struct cci_event_endpoint_device_failed dev_failed;
} cci_event_t;

/*
 * Accept a connection request.  context becomes the connection's context.
 * The result comes as a CCI_EVENT_ACCEPT event.  The request event must
 * still be returned.  Accepting or rejecting the same request twice gives
 * CCI_EINVAL.
 */
CCI_DECLSPEC int cci_accept(cci_event_t *conn_req, const void *context);

/* Reject a connection request: the client's CONNECT event carries
 * CCI_ECONNREFUSED.  The request event must still be returned. */
CCI_DECLSPEC int cci_reject(cci_event_t *conn_req);

/*
 * Make progress and hand out the next event, if any.  Never blocks.
 * Returns CCI_SUCCESS with *event set, CCI_EAGAIN when there is nothing,
 * or CCI_ENOBUFS when nothing can arrive because the application holds
 * every receive buffer (return some events).
 */
CCI_DECLSPEC int cci_get_event(cci_endpoint_t *endpoint, cci_event_t **event);

/* Give an event back; its receive buffer returns to the transport.
 * CCI_EINVAL for an event returned already, one whose endpoint is
 * destroyed, or a pointer that is not an event (see "Misuse"). */
CCI_DECLSPEC int cci_return_event(cci_event_t *event);

/*
 * Arm the endpoint's OS handle: returns CCI_SUCCESS when the handle will
 * turn readable at the next event, or CCI_EAGAIN when events are already
 * waiting (call cci_get_event() instead of blocking).  No flag is
 * defined: flags are ignored.  Never needed: every cci_get_event() that
 * leaves the queue empty arms the handle (see cci_create_endpoint()).
 * Returns CCI_EINVAL for an endpoint opened without an OS handle.
 */
CCI_DECLSPEC int cci_arm_os_handle(cci_endpoint_t *endpoint, int flags);

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* An endpoint or a connection, depending on the option. */
typedef const void cci_opt_handle_t;

/*
 * Options; timeouts are uint32_t microseconds, 0 meaning "none".
 *  ENDPT_SEND_TIMEOUT       default send timeout of new connections
 *                           (a reliable message not delivered in time
 *                           breaks the connection)
 *  ENDPT_RECV_BUF_COUNT     uint32_t, receive buffers of the endpoint
 *  ENDPT_SEND_BUF_COUNT     uint32_t, sends in flight before CCI_ENOBUFS
 *  ENDPT_KEEPALIVE_TIMEOUT  default keepalive of new connections
 *  ENDPT_URI                get only: char **, a malloc'd copy the caller
 *                           frees
 *  ENDPT_RMA_ALIGN          get only: cci_alignment_t
 *  CONN_SEND_TIMEOUT        this connection's send timeout
 *  CONN_KEEPALIVE_TIMEOUT   this connection's keepalive timeout
 */
typedef enum cci_opt_name {
	CCI_OPT_ENDPT_SEND_TIMEOUT = 0,
	CCI_OPT_ENDPT_RECV_BUF_COUNT = 1,
	CCI_OPT_ENDPT_SEND_BUF_COUNT = 2,
	CCI_OPT_ENDPT_KEEPALIVE_TIMEOUT = 3,
	CCI_OPT_ENDPT_URI = 4,
	CCI_OPT_ENDPT_RMA_ALIGN = 5,
	CCI_OPT_CONN_SEND_TIMEOUT = 6,
	CCI_OPT_CONN_KEEPALIVE_TIMEOUT = 7
} cci_opt_name_t;

/* RMA alignment needs of a transport; 0 means none. */
typedef struct cci_alignment {
	uint32_t rma_write_local_addr;
	uint32_t rma_write_remote_addr;
	uint32_t rma_write_length;
	uint32_t rma_read_local_addr;
	uint32_t rma_read_remote_addr;
	uint32_t rma_read_length;
} cci_alignment_t;

/* Set an option; val points at a value of the option's type.  Setting a
 * get-only option gives CCI_EINVAL; a buffer count the transport cannot
 * honour, CCI_ERANGE.  handle must be a live endpoint for ENDPT_ options
 * and a connection not disconnected for CONN_ ones, else CCI_EINVAL (for
 * cci_get_opt() too). */
CCI_DECLSPEC int cci_set_opt(cci_opt_handle_t *handle, cci_opt_name_t name,
                             const void *val);

/* Get an option into *val (of the option's type). */
CCI_DECLSPEC int cci_get_opt(cci_opt_handle_t *handle, cci_opt_name_t name,
                             void *val);

/* ------------------------------------------------------------------------ */
/* Active messages                                                           */
/* ------------------------------------------------------------------------ */

#define CCI_FLAG_BLOCKING (1 << 0) /* wait for completion, no event */
#define CCI_FLAG_NO_COPY (1 << 1)  /* the buffer stays untouched until completion */
#define CCI_FLAG_SILENT (1 << 3)   /* no completion event */
#define CCI_FLAG_READ (1 << 4)     /* RMA read, or a handle that allows reads */
#define CCI_FLAG_WRITE (1 << 5)    /* RMA write, or a handle that allows writes */
#define CCI_FLAG_FENCE (1 << 6)    /* earlier RMAs complete remotely first */

/*
 * Every call ignores the flags that mean nothing to it, as CCI 2 did (a
 * CCI 2 program may pass CCI_FLAG_WRITE to cci_send); CCI_DEBUG=msg (rma,
 * conn, ep or init, after the call) says so once.  Only what cannot be
 * honoured is refused: cci_rma with both or neither of READ and WRITE.
 */

/*
 * Send msg_len bytes (at most connection->max_send_size, else
 * CCI_EMSGSIZE; 0 is allowed).  The buffer may be reused when the call
 * returns, unless CCI_FLAG_NO_COPY is given: then the library may read it
 * until the SEND event.
 *
 * Completion: a SEND event carrying context, once the peer has the message
 * (reliable connections) or once it left (unreliable).  CCI_FLAG_BLOCKING
 * waits and returns the status instead, with no event.  CCI_FLAG_SILENT
 * gives no event; on RO, a later completion implies the earlier silent
 * ones.  A reliable message not delivered within the send timeout fails
 * with CCI_ETIMEDOUT and breaks the connection: that send and every later
 * one complete with CCI_ETIMEDOUT or CCI_ERR_DISCONNECTED.
 *
 * Returns CCI_ENOBUFS when the send buffers are all in flight (try again
 * after some complete), CCI_ERR_DISCONNECTED once the connection is closed.
 */
CCI_DECLSPEC int cci_send(cci_connection_t *connection, const void *msg_ptr,
                          uint32_t msg_len, const void *context, int flags);

/* As cci_send(), gathering iovcnt buffers into one message. */
CCI_DECLSPEC int cci_sendv(cci_connection_t *connection,
                           const struct iovec *data, uint32_t iovcnt,
                           const void *context, int flags);

/* ------------------------------------------------------------------------ */
/* RMA                                                                       */
/* ------------------------------------------------------------------------ */

/*
 * A registration, already serialised: copy its 32 bytes into a message to
 * give the peer access.  Opaque; its key is random, never a pointer.
 *
 * A handle is a value.  Any byte copy of it (memcpy'd into the
 * application's own structures, or sent to a peer and echoed back) is as
 * good as the pointer cci_rma_register() returned: as the local or the
 * remote handle of cci_rma(), and for cci_rma_deregister().  The members
 * are const: copy the whole struct (assignment or memcpy of
 * sizeof(struct cci_rma_handle) bytes), never change a byte of a copy.
 * After cci_rma_deregister(), through the original or any copy, every
 * copy fails: CCI_ERR_RMA_HANDLE from cci_rma(), CCI_EINVAL from a second
 * cci_rma_deregister(), and a peer's RMA naming it fails at the target.
 */
typedef const struct cci_rma_handle {
	uint64_t stuff[4];
} cci_rma_handle_t;

/*
 * Register [start, start+length) for RMA.  flags: CCI_FLAG_READ and/or
 * CCI_FLAG_WRITE, the access granted to peers (local use needs neither);
 * other bits are ignored.  Access is enforced, at the target too.
 * The memory must stay valid until cci_rma_deregister().
 */
CCI_DECLSPEC int cci_rma_register(cci_endpoint_t *endpoint, void *start,
                                  uint64_t length, int flags,
                                  cci_rma_handle_t **rma_handle);

/* Drop a registration, given its handle or any copy of it; later RMAs
 * naming it (through any copy) fail with CCI_ERR_RMA_HANDLE, at this side
 * (as the local or the remote handle) and at peers.  A handle deregistered
 * already, registered on another endpoint, or altered gives CCI_EINVAL. */
CCI_DECLSPEC int cci_rma_deregister(cci_endpoint_t *endpoint,
                                    cci_rma_handle_t *rma_handle);

/*
 * Move data_len (> 0) bytes between local_handle+local_offset and the
 * peer's remote_handle+remote_offset: CCI_FLAG_WRITE pushes, CCI_FLAG_READ
 * pulls (exactly one).  Only on reliable connections (UU: CCI_EINVAL).
 * Offsets and length must lie inside both registrations and the handles
 * must allow the access, else CCI_EINVAL or CCI_ERR_RMA_HANDLE; the target
 * checks too, so a forged or stale handle never touches memory.  A local
 * handle must be registered on the connection's endpoint, else
 * CCI_ERR_RMA_HANDLE.
 *
 * The initiator always gets a SEND event (unless SILENT or BLOCKING).  If
 * msg_ptr is given, msg_len bytes are delivered to the peer as a RECV
 * event after the data is in place; on RO it is ordered with the
 * connection's sends.  CCI_FLAG_FENCE: every earlier RMA on the connection
 * completes at the target before this one starts.
 */
CCI_DECLSPEC int cci_rma(cci_connection_t *connection, const void *msg_ptr,
                         uint32_t msg_len, cci_rma_handle_t *local_handle,
                         uint64_t local_offset,
                         cci_rma_handle_t *remote_handle,
                         uint64_t remote_offset, uint64_t data_len,
                         const void *context, int flags);

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */
/*
 * Every call may be made from any thread at any time, except that
 * cci_destroy_endpoint() and cci_finalize() must not race with other calls
 * on the objects they free.  Events are handed out once each, whichever
 * thread asks.
 */

/* ------------------------------------------------------------------------ */
/* Processes: fork() and exec                                               */
/* ------------------------------------------------------------------------ */
/*
 * A program may fork() at any time, from any thread, with endpoints open
 * and traffic in flight.  A fork() waits for a cci_init(), cci_finalize(),
 * cci_create_endpoint() or cci_destroy_endpoint() that another thread is
 * running to finish (the child must not inherit them half done).
 *
 *  - The parent is not affected: its endpoints and connections keep
 *    working while a child runs, execs or ends (by exit(), _exit() or a
 *    signal), and peers may still connect to it afterwards.
 *  - Every descriptor the library opens is close-on-exec: a program that
 *    a child execs inherits none of them (nor keeps a connection of the
 *    parent's open after the parent closed it).  One exception: over ofi,
 *    the sockets libfabric's tcp provider opens after an endpoint's
 *    creation are marked in the child of a fork(), which posix_spawn()
 *    and vfork() do not run; see plugins/ofi/README.md.
 *  - In the child, what the parent opened (endpoints, their connections,
 *    events and registrations) is the parent's: every call on it returns
 *    CCI_EINVAL and touches nothing (no message is sent, no file removed,
 *    no buffer released).  The child starts with the library
 *    uninitialised, whatever the parent's cci_init() count: cci_finalize()
 *    there returns CCI_ERROR, and calls that take no object return
 *    CCI_ERROR until the child calls cci_init().
 *  - The child may call cci_init() and open endpoints of its own, as a
 *    new process would (new URIs; its peers see a new process).  It must
 *    not use the parent's pointers for that: they stay the parent's.
 *
 * Memory registered by the parent stays registered in the parent only;
 * the child's copy of it is ordinary memory.
 *
 * A process that ends without cci_destroy_endpoint() or cci_finalize()
 * (SIGKILL, a crash, a signal's default action) can leave files behind:
 * over sm its directory <base>/<pid> with its socket files, over ofi with
 * libfabric's shm provider its regions /dev/shm/<pid>:<n>:<m>.  The next
 * cci_create_endpoint() of that transport on the host, in any process of
 * the same user, removes them once their process is gone (judged by pid
 * and start time, never removing what a running process uses); the
 * cci_info tool lists them (--leftovers) and removes them on demand
 * (--remove-leftovers).
 */

/* ------------------------------------------------------------------------ */
/* Processes: signals (beyond CCI 2)                                        */
/* ------------------------------------------------------------------------ */
/*
 * How a signal ends the process is the application's decision, at any
 * moment: in cci_init(), with traffic in flight, in teardown or in exit().
 *
 *  - The library installs no signal handler and changes no disposition.
 *    Its progress threads block every signal: a process-directed signal
 *    is not taken by them.  A signal with the default
 *    action ends the process at once, by that signal (a shell sees
 *    128 + N); a handler of the application's runs as it would without
 *    the library; an ignored signal stays ignored.  A handler may
 *    interrupt any call (installed without SA_RESTART, the library's
 *    system calls see EINTR and retry or go on): calls return as usual,
 *    and a handler that sets a flag sees the application get back to it.
 *  - What libraries loaded for a transport do to dispositions is undone.
 *    Over ofi, libfabric and the libraries it links are loaded at the
 *    first cci_init() that needs that transport (with no CCI_CONFIG, the
 *    first cci_init()).  On Debian, one of them (libinfinipath, for psm)
 *    replaces the handlers of SIGINT, SIGTERM, SIGILL, SIGABRT, SIGBUS
 *    and SIGSEGV with one that calls exit(1): the library sets
 *    IPATH_NO_BACKTRACE=1 in the environment for the time of that load
 *    only (when it was unset; another thread reading the environment then
 *    sees it), which keeps that library's handlers out, and puts back any
 *    disposition the load changed all the same.
 *  - Over ofi's shm provider, the first endpoint of a process has the
 *    provider set handlers for SIGINT, SIGTERM, SIGBUS and SIGSEGV.  They
 *    remove the process's shm regions from /dev/shm, put back the
 *    disposition found when they were set, and raise the signal again:
 *    the process still ends by the signal, or by the application's
 *    handler, which then runs with the regions' names already removed
 *    (peers connected keep their mappings; new ones cannot connect).  A
 *    signal ignored then stays ignored (the library keeps SIG_IGN), and
 *    nothing is removed.  A handler the application installs after that
 *    endpoint replaces the provider's: the regions then stay in /dev/shm
 *    until a later process of the library removes them.  At exit() (and
 *    at cci_finalize()), before libfabric's own teardown, the library
 *    puts back what those handlers replaced, and removes the names of
 *    the regions of endpoints still open: a signal during the rest of
 *    exit() acts as the application set it.
 *
 * The library cannot end a process faster than a signal's default action,
 * nor stop a handler of the application's from deadlocking: a handler that
 * calls exit() runs every atexit handler and destructor, the library's
 * included (they stop its progress threads), from wherever the signal
 * came; one that sets a flag or calls _exit() is safe.
 */

/* ------------------------------------------------------------------------ */
/* Misuse                                                                    */
/* ------------------------------------------------------------------------ */
/*
 * What a call does when given what it must not be given.  No misuse below
 * aborts the process or touches memory the library does not own.
 *
 *  - NULL for a pointer argument: CCI_EINVAL (cci_strerror(NULL, ...) is
 *    allowed and gives the core's text).
 *  - An object of the wrong kind (an endpoint given as a connection or an
 *    event, a connection as an endpoint, an option of the other kind of
 *    handle): CCI_EINVAL.  Endpoints, connections and events carry a
 *    mark that each call checks (a load or two and a compare, no
 *    lookup); a handle is found by its key in a table that grows with the
 *    registrations, and must match the registration in all its bytes.
 *  - A closed object: its memory is kept, marked dead, not given back.
 *    An endpoint destroyed (or closed by the last cci_finalize()):
 *    CCI_EINVAL.  A connection after cci_disconnect() or its endpoint's
 *    end: CCI_ERR_DISCONNECTED for cci_send, cci_sendv and cci_rma,
 *    CCI_EINVAL for the rest.  An RMA handle deregistered (through it or
 *    through any copy): CCI_EINVAL to cci_rma_deregister(),
 *    CCI_ERR_RMA_HANDLE to cci_rma() as the local handle; as the remote
 *    one, the original is refused by cci_rma() at once (its bytes then
 *    read as key 0, never issued) and a copy at the target, the RMA
 *    completing with CCI_ERR_RMA_HANDLE or CCI_ERR_RMA_OP, never
 *    applied.  An event returned, or lent when its endpoint was
 *    destroyed: CCI_EINVAL.  A request accepted or rejected already:
 *    CCI_EINVAL.  Pointers of a finished library keep these answers,
 *    before and after a new cci_init().
 *  - How long "closed" is recognised: the memory of a closed endpoint,
 *    connection or registration is reused for a new object only after at
 *    least 256 others of them closed after it (the library keeps at most
 *    that many closed ones beyond its peak of open ones); an old pointer
 *    then names the new object.  A returned event's memory serves the
 *    endpoint's next event at once, so a second cci_return_event() is
 *    caught only until then.  Events still lent when their endpoint is
 *    destroyed keep their memory while the library stays loaded (until
 *    dlclose() or the process's exit), as do closed objects.
 *  - An object of another endpoint: a registration of endpoint B given to
 *    cci_rma() on a connection of endpoint A gives CCI_ERR_RMA_HANDLE, to
 *    cci_rma_deregister(A, ...) CCI_EINVAL; it stays registered on B.  A
 *    peer's handle the target does not know (forged, stale, another
 *    endpoint's) fails the RMA, at the call or in its SEND event.
 *  - Memory the library never handed out (a copy of an event, a buffer):
 *    read at the mark's offset, within the first 256 bytes; CCI_EINVAL when
 *    those bytes are readable (a zeroed or foreign heap block), undefined
 *    otherwise.  Keep the library's pointers, not copies of its structs
 *    (RMA handles excepted: they are values, see cci_rma_handle_t).
 *  - The library's state: calls before cci_init() or after the last
 *    cci_finalize() give CCI_ERROR (those that take no object) and an
 *    extra cci_finalize() gives CCI_ERROR; cci_init() is counted.
 *
 * Racing a call with cci_destroy_endpoint(), cci_disconnect() or
 * cci_finalize() on the same object from another thread stays undefined.
 */

/* The name of an event type, for printing. */
static inline const char *cci_event_type_str(cci_event_type_t type)
{
	switch (type) {
	case CCI_EVENT_NONE:
		return "CCI_EVENT_NONE";
	case CCI_EVENT_SEND:
		return "CCI_EVENT_SEND";
	case CCI_EVENT_RECV:
		return "CCI_EVENT_RECV";
	case CCI_EVENT_CONNECT:
		return "CCI_EVENT_CONNECT";
	case CCI_EVENT_CONNECT_REQUEST:
		return "CCI_EVENT_CONNECT_REQUEST";
	case CCI_EVENT_ACCEPT:
		return "CCI_EVENT_ACCEPT";
	case CCI_EVENT_KEEPALIVE_TIMEDOUT:
		return "CCI_EVENT_KEEPALIVE_TIMEDOUT";
	case CCI_EVENT_ENDPOINT_DEVICE_FAILED:
		return "CCI_EVENT_ENDPOINT_DEVICE_FAILED";
	}
	return "unknown event type";
}

/* ------------------------------------------------------------------------ */
/* Extension: plugins and device ordering                                    */
/* ------------------------------------------------------------------------ */
/*
 * Not in CCI 2.  These calls let a tool (cci_info) show what the library
 * found and why: the plugins it tried, where it looked, the ini keys each
 * plugin reads, and the ordering facts of each device.  A CCI 2 program
 * never needs them and sees no change.  Each returns CCI_ERROR before
 * cci_init() (and after the last cci_finalize()) and CCI_EINVAL for a NULL
 * pointer argument; outputs are written only on success.  Safe to call
 * from any thread.
 *
 * "The starting cci_init()" below is the call that found the library
 * stopped: the first one, or the first after the last cci_finalize().
 */

/* Defined when this header has the calls below, for programs that also
 * build against CCI 2's header. */
#define CCI_EXT_PLUGIN_INFO 1

/* The outcome of one attempt to load a plugin. */
typedef enum cci_plugin_status {
	CCI_PLUGIN_LOADED = 0,   /* loaded and initialised: its transports serve devices */
	CCI_PLUGIN_SKIPPED = 1   /* not used; reason says why */
} cci_plugin_status_t;

/* One plugin module the library tried to load.  Read-only. */
typedef const struct cci_plugin_info {
	/* The plugin's name ("sm"): the one in its ops table, or, when the
	 * table could not be read, the <name> of its file cci_ctp_<name>.so. */
	const char *name;
	const char *path;        /* the module's file */
	cci_plugin_status_t status;
	/* Why it was skipped, as the library logs it: "cannot load:
	 * undefined symbol: x", "ABI version ...", "mandatory op missing
	 * (...)", "conf_keys: key ...", "init failed (...)", "excluded by
	 * CCI_CTP=...", "a plugin named x was already loaded from ..."; ""
	 * when loaded.  Never NULL. */
	const char *reason;
	/* NULL-terminated names it serves (its ini transport= values and URI
	 * schemes); never NULL, empty when its table was not usable. */
	const char *const *transports;
	/* A loaded plugin's word on what it found on this host, as it logs
	 * it: why it offers no device ("no RDMA device found (...)"); ""
	 * when it has nothing to say.  Never NULL. */
	const char *note;
} cci_plugin_info_t;

/*
 * Get the NULL-terminated list of every plugin module the starting
 * cci_init() tried, in the order it tried them (the order of cci_get_plugin_dirs()),
 * loaded ones and skipped ones alike.  A file that does not look like a
 * plugin (cci_ctp_<name>.so) is not listed.  The list and every string in
 * it are owned by the library and live until the last cci_finalize().
 */
CCI_DECLSPEC int cci_get_plugins(cci_plugin_info_t *const **plugins);

/*
 * Get the NULL-terminated list of directories the starting cci_init()
 * searched for plugins, in search order: the build tree's plugins (when
 * the library runs from its build tree), each directory of
 * CCI_PLUGIN_PATH, then the install directory (cci/ beside the library
 * itself, wherever its prefix was moved).  A directory is listed
 * whether or not it exists.  Owned by the library until the last
 * cci_finalize().
 */
CCI_DECLSPEC int cci_get_plugin_dirs(const char *const **dirs);

/*
 * The two facts that order a device list and that cci_device_t lacks:
 * *priority (0..100, the config file's priority= or its plugin's own) and
 * *is_default (1 if the config file says default = 1, else 0).  device
 * must come from cci_get_devices(), else CCI_EINVAL.
 */
CCI_DECLSPEC int cci_get_device_priority(cci_device_t *device, int *priority,
                                         int *is_default);

/* Defined when this header has cci_get_plugin_keys(). */
#define CCI_EXT_PLUGIN_KEYS 1

/* The kind of value an ini key of a plugin takes. */
typedef enum cci_conf_type {
	CCI_CONF_UINT = 1,   /* a decimal integer in min..max */
	CCI_CONF_STRING = 2, /* a string of min..max bytes */
	CCI_CONF_CHOICE = 3, /* one of the words in choices */
	CCI_CONF_CUSTOM = 4  /* a string the plugin checks by its own rule (help says which) */
} cci_conf_type_t;

/* One key a plugin reads in the config sections of its transports
 * (besides the core's transport, priority and default).  Read-only. */
typedef const struct cci_conf_key_info {
	const char *name;            /* "mss" */
	cci_conf_type_t type;
	/* CCI_CONF_UINT: the range of the value; CCI_CONF_STRING: of its
	 * length in bytes; 0 and 0 for the other types. */
	uint64_t min, max;
	/* CCI_CONF_CHOICE: the words accepted, NULL-terminated; an empty
	 * list for the other types.  Never NULL. */
	const char *const *choices;
	/* The value used when a section omits the key, as a config file
	 * would write it ("8192"), or NULL when there is none to write
	 * (the plugin decides from the host, or the key is simply off;
	 * help says which). */
	const char *def;
	const char *help;            /* one sentence, from the plugin's README; never NULL */
} cci_conf_key_info_t;

/*
 * Get the NULL-terminated list of the ini keys plugin reads, in the order
 * of its README.  plugin must come from cci_get_plugins(), else
 * CCI_EINVAL.  The list is empty for a plugin whose ops table could not
 * be read or that declares no keys; a plugin excluded by CCI_CTP, or
 * shadowed by one of the same name, still lists its keys.  The list and
 * its strings are owned by the library and live as long as plugin does,
 * until the last cci_finalize().
 */
CCI_DECLSPEC int cci_get_plugin_keys(cci_plugin_info_t *plugin,
                                     cci_conf_key_info_t *const **keys);

#ifdef __cplusplus
}
#endif

#endif /* CCI_H */
