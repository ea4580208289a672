"""The C declarations of api/cci.h and the loading of libcci.so.2.

ABI mode: nothing is compiled.  The declarations below repeat the layout of
every public struct of api/cci.h; enum-typed fields are declared as int,
which is their size in the C ABI.  The library is opened with the default
dlopen flags (RTLD_NOW, RTLD_LOCAL).

Where the library comes from, first match wins:

1. the environment variable CCI_LIBRARY, a full path (nothing else is tried
   when it is set);
2. when the package is imported from the source tree,
   bindings/python/../../build/core/libcci.so.2 (the default build
   directory of the project, whose plugins the library then finds by
   itself);
3. when the package was installed by meson beside its library (a prefix
   of its own, /opt/cci/<version>), the libcci.so.2 of that prefix: the
   file cci/_libdir holds the way from the package to the prefix's
   libdir, relative unless the libdir lies outside the prefix, so the
   prefix can be moved;
4. the system's "libcci.so.2" (ld.so's search: LD_LIBRARY_PATH, ldconfig).
"""
import os
from pathlib import Path

import cffi

CDEF = """
struct cci_device {
    const char *name;
    const char *transport;
    unsigned up;
    const char *info;
    const char * const *conf_argv;
    uint32_t max_send_size;
    uint64_t rate;
    struct { uint32_t domain, bus, dev, func; } pci;
};
struct cci_endpoint { struct cci_device *device; };
struct cci_connection {
    uint32_t max_send_size;
    struct cci_endpoint *endpoint;
    int attribute;
    void *context;
};
struct cci_rma_handle { uint64_t stuff[4]; };
typedef struct {
    uint32_t rma_write_local_addr;
    uint32_t rma_write_remote_addr;
    uint32_t rma_write_length;
    uint32_t rma_read_local_addr;
    uint32_t rma_read_remote_addr;
    uint32_t rma_read_length;
} cci_alignment_t;

struct cci_event_send {
    int type; int status; struct cci_connection *connection; void *context;
};
struct cci_event_recv {
    int type; uint32_t len; const void *ptr; struct cci_connection *connection;
};
struct cci_event_connect {
    int type; int status; void *context; struct cci_connection *connection;
};
struct cci_event_connect_request {
    int type; uint32_t data_len; const void *data_ptr; int attribute;
};
struct cci_event_accept {
    int type; int status; void *context; struct cci_connection *connection;
};
struct cci_event_keepalive_timedout { int type; struct cci_connection *connection; };
struct cci_event_endpoint_device_failed { int type; struct cci_endpoint *endpoint; };
union cci_event {
    int type;
    struct cci_event_send send;
    struct cci_event_recv recv;
    struct cci_event_connect connect;
    struct cci_event_connect_request request;
    struct cci_event_accept accept;
    struct cci_event_keepalive_timedout keepalive;
    struct cci_event_endpoint_device_failed dev_failed;
};

struct timeval { long tv_sec; long tv_usec; };
struct iovec { void *iov_base; size_t iov_len; };

int cci_init(uint32_t abi_ver, uint32_t flags, uint32_t *caps);
int cci_finalize(void);
int cci_get_devices(struct cci_device ***devices);
int cci_create_endpoint(struct cci_device *device, int flags,
                        struct cci_endpoint **endpoint, int *fd);
int cci_create_endpoint_at(struct cci_device *device, const char *service, int flags,
                           struct cci_endpoint **endpoint, int *fd);
int cci_destroy_endpoint(struct cci_endpoint *endpoint);
const char *cci_strerror(struct cci_endpoint *endpoint, int status);
int cci_accept(union cci_event *conn_req, const void *context);
int cci_reject(union cci_event *conn_req);
int cci_connect(struct cci_endpoint *endpoint, const char *server_uri,
                const void *data_ptr, uint32_t data_len, int attribute,
                const void *context, int flags, const struct timeval *timeout);
int cci_disconnect(struct cci_connection *connection);
int cci_set_opt(const void *handle, int name, const void *val);
int cci_get_opt(const void *handle, int name, void *val);
int cci_arm_os_handle(struct cci_endpoint *endpoint, int flags);
int cci_get_event(struct cci_endpoint *endpoint, union cci_event **event);
int cci_return_event(union cci_event *event);
int cci_send(struct cci_connection *connection, const void *msg_ptr, uint32_t msg_len,
             const void *context, int flags);
int cci_sendv(struct cci_connection *connection, const struct iovec *data,
              uint32_t iovcnt, const void *context, int flags);
int cci_rma_register(struct cci_endpoint *endpoint, void *start, uint64_t length,
                     int flags, struct cci_rma_handle **rma_handle);
int cci_rma_deregister(struct cci_endpoint *endpoint, struct cci_rma_handle *rma_handle);
int cci_rma(struct cci_connection *connection, const void *msg_ptr, uint32_t msg_len,
            struct cci_rma_handle *local_handle, uint64_t local_offset,
            struct cci_rma_handle *remote_handle, uint64_t remote_offset,
            uint64_t data_len, const void *context, int flags);

void free(void *ptr);
"""

ABI_VERSION = 2
SONAME = "libcci.so.2"
_PKGDIR = Path(__file__).resolve().parent


def library_candidates(environ=None, pkgdir=_PKGDIR):
    """The paths tried, in order, to load the library (see the module doc)."""
    environ = os.environ if environ is None else environ
    explicit = environ.get("CCI_LIBRARY")
    if explicit:
        return [explicit]
    found = []
    # pkgdir is bindings/python/cci in the source tree; its parent holds
    # pyproject.toml there and never in an installed copy.
    tree = pkgdir.parent.parent.parent / "build" / "core" / SONAME
    if (pkgdir.parent / "pyproject.toml").is_file() and tree.is_file():
        found.append(str(tree))
    marker = pkgdir / "_libdir"
    if marker.is_file():
        prefix_lib = pkgdir / marker.read_text().strip() / SONAME
        if prefix_lib.is_file():
            found.append(os.path.normpath(prefix_lib))
    found.append(SONAME)
    return found


def _load():
    errors = []
    for name in library_candidates():
        try:
            return ffi.dlopen(name), name
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    raise ImportError("cannot load the CCI library (set CCI_LIBRARY to the full path "
                      "of libcci.so.2): " + "; ".join(errors))


ffi = cffi.FFI()
ffi.cdef(CDEF)
lib, library_path = _load()
libc = ffi.dlopen(None)
