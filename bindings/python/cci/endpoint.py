"""Endpoints: where connections, messages and events start and end."""
import collections
import io
import itertools
import select
import threading
import time

from . import core
from ._ffi import ffi, lib, libc
from .connection import Connection
from .constants import Attribute, Flag, Opt, Status
from .errors import check, error
from .events import BY_TYPE, Event
from .rma import RMAHandle

_NULL = ffi.NULL
_EAGAIN = int(Status.EAGAIN)
_U32_MAX = 0xFFFFFFFF

Alignment = collections.namedtuple(
    "Alignment", "rma_write_local_addr rma_write_remote_addr rma_write_length "
                 "rma_read_local_addr rma_read_remote_addr rma_read_length")


class Endpoint:
    """An endpoint (cci_create_endpoint) on a device: None for the default
    one, a device name or a cci.Device.

    blocking=True opens it with an OS handle: fileno() then gives a file
    descriptor that is readable whenever get_event() has an event (level
    triggered), for select, selectors or asyncio's loop.add_reader, and
    wait() sleeps in poll() instead of spinning.  service picks the
    transport's service (a tcp port, an sm endpoint id).

    Use it as a context manager, or call close().  Attributes: uri (what
    peers pass to connect()), device, blocking.
    """

    def __init__(self, device=None, *, blocking=False, service=None):
        self._ptr = None
        core.init()
        if isinstance(device, str):
            device = core.find_device(device)
        dptr = _NULL if device is None else device._live_ptr()
        epp = ffi.new("struct cci_endpoint **")
        fdp = ffi.new("int *", -1) if blocking else _NULL
        if service is None:
            rc = lib.cci_create_endpoint(dptr, 0, epp, fdp)
        else:
            rc = lib.cci_create_endpoint_at(dptr, str(service).encode(), 0, epp, fdp)
        check(rc, "cci_create_endpoint")
        self._ptr = epp[0]
        self._fd = fdp[0] if blocking else -1
        self.blocking = bool(blocking)
        self._lent = {}       # token -> lent event pointer, until given back
        self._views = {}      # token -> memoryview of a RECV event's data
        self._ctx = {}        # key -> (connection, context, kept alive), until completion
        self._conns = {}      # struct cci_connection pointer -> Connection
        self._handles = {}    # struct cci_rma_handle pointer -> RMAHandle
        self._keys = itertools.count(1)
        self._tls = threading.local()
        self._poller = None
        try:
            self.uri = self._get_uri()
            self.device = core.device_of(self._ptr.device)
        except BaseException:
            lib.cci_destroy_endpoint(self._ptr)
            self._ptr = None
            raise
        if self._fd >= 0:
            self._poller = select.poll()
            self._poller.register(self._fd, select.POLLIN)
        core._endpoints.add(self)

    def _get_uri(self):
        out = ffi.new("char **")
        check(lib.cci_get_opt(self._ptr, Opt.ENDPT_URI, out), "cci_get_opt(URI)", self._ptr)
        try:
            return ffi.string(out[0]).decode()
        finally:
            libc.free(out[0])

    def _live_ptr(self):
        ptr = self._ptr
        if ptr is None:
            raise ValueError("the endpoint is closed")
        return ptr

    @property
    def closed(self):
        return self._ptr is None

    def fileno(self):
        """The OS handle: readable while get_event() has something to hand
        out.  Poll it, never read, write or close it."""
        self._live_ptr()
        if self._fd < 0:
            raise io.UnsupportedOperation("the endpoint has no OS handle: "
                                          "open it with Endpoint(blocking=True)")
        return self._fd

    def arm(self):
        """cci_arm_os_handle: True when the handle will turn readable at the
        next event, False when events are waiting already.  Never needed
        (get_event() re-arms it), kept for CCI 2 style loops."""
        rc = lib.cci_arm_os_handle(self._live_ptr(), 0)
        if rc == _EAGAIN:
            return False
        check(rc, "cci_arm_os_handle", self._ptr)
        return True

    # -- connections ----------------------------------------------------

    def connect(self, uri, payload=b"", attr=Attribute.RO, timeout=None, context=None):
        """Ask the server at uri for a connection (cci_connect).  Never
        blocks: a ConnectEvent carrying context tells the outcome.

        payload  bytes-like, at most cci.CONN_REQ_LEN bytes, for the server's
                 ConnectRequestEvent.data
        attr     cci.RO, cci.RU or cci.UU
        timeout  seconds (None: no limit); past it the ConnectEvent has
                 status ETIMEDOUT
        """
        ptr = self._live_ptr()
        if isinstance(uri, str):
            uri = uri.encode()
        buf = ffi.from_buffer(payload)
        tv = _NULL
        if timeout is not None:
            if timeout < 0:
                raise ValueError("timeout must be >= 0")
            sec = int(timeout)
            tv = ffi.new("struct timeval *", (sec, int(round((timeout - sec) * 1e6))))
        key, cptr = 0, _NULL
        if context is not None:
            key = next(self._keys)
            self._ctx[key] = (None, context, None)
            cptr = ffi.cast("void *", key)
        rc = lib.cci_connect(ptr, uri, buf if len(buf) else _NULL, len(buf), int(attr),
                             cptr, 0, tv)
        if rc:
            self._ctx.pop(key, None)
            raise error(rc, "cci_connect", ptr)

    def _add_connection(self, cptr, context):
        conn = self._conns[cptr] = Connection(self, cptr, context)
        return conn

    def _connection_of(self, cptr):
        conn = self._conns.get(cptr)
        if conn is None and cptr != _NULL:
            conn = self._add_connection(cptr, None)
        return conn

    def _forget_connection(self, conn):
        ptr, conn._ptr = conn._ptr, None
        self._conns.pop(ptr, None)
        for key in [k for k, v in list(self._ctx.items()) if v[0] is conn]:
            self._ctx.pop(key, None)

    @property
    def connections(self):
        """The open connections of this endpoint."""
        return list(self._conns.values())

    # -- events ---------------------------------------------------------

    def get_event(self):
        """The next event (a typed Event), or None when there is none now.
        Never blocks.  Raises cci.errors.NoBuffers when the application
        holds every receive buffer."""
        ptr = self._ptr
        if ptr is None:
            raise ValueError("the endpoint is closed")
        try:
            evp = self._tls.evp
        except AttributeError:
            evp = self._tls.evp = ffi.new("union cci_event **")
        rc = lib.cci_get_event(ptr, evp)
        if rc:
            if rc == _EAGAIN:
                return None
            raise error(rc, "cci_get_event", ptr)
        p = evp[0]
        return BY_TYPE.get(p.type, Event)(self, p)

    def __iter__(self):
        """The events available now, until get_event() returns None."""
        while True:
            ev = self.get_event()
            if ev is None:
                return
            yield ev

    def wait(self, timeout=None):
        """The next event, waiting at most timeout seconds (None: forever);
        None if none came.  Sleeps in poll() on a blocking endpoint, spins
        on get_event() otherwise."""
        ev = self.get_event()
        if ev is not None or timeout == 0:
            return ev
        deadline = None if timeout is None else time.monotonic() + timeout
        poller = self._poller
        spins = 0
        while True:
            if poller is not None:
                if deadline is None:
                    poller.poll()
                else:
                    left = deadline - time.monotonic()
                    if left > 0:
                        poller.poll(left * 1e3 + 1)
            ev = self.get_event()
            if ev is not None:
                return ev
            spins += 1
            if deadline is not None and (poller is not None or spins % 256 == 0) \
                    and time.monotonic() >= deadline:
                return None

    def _release(self, token):
        """Event.done(): drop the data view, or give the event back now."""
        view = self._views.pop(token, None) if self._views else None
        if view is None:
            self._give_back(token)
            return
        try:
            view.release()  # the view's holder gives the event back when freed
        except BufferError:
            pass  # an object made from the view still uses it; it gives back later

    def _give_back(self, token, _holder=None):
        ptr = self._lent.pop(token, None)
        if ptr is not None:
            rc = lib.cci_return_event(ptr)
            if rc and _holder is None:
                raise error(rc, "cci_return_event", self._ptr)

    # -- RMA ------------------------------------------------------------

    def rma_register(self, buffer, flags=0):
        """Register a buffer for RMA (cci_rma_register) and return its
        RMAHandle.  flags: the access granted to peers, cci.READ and/or
        cci.WRITE (local use needs neither).  WRITE needs a writable buffer
        (bytearray, memoryview of one, array, mmap, NumPy array...); so does
        using the handle as the destination of an RMA read.  The buffer is
        kept alive until the handle is deregistered."""
        ptr = self._live_ptr()
        try:
            cbuf, writable = ffi.from_buffer(buffer, require_writable=True), True
        except (BufferError, TypeError):
            if flags & Flag.WRITE:
                raise TypeError("RMA write access needs a writable buffer") from None
            cbuf, writable = ffi.from_buffer(buffer), False
        hp = ffi.new("struct cci_rma_handle **")
        check(lib.cci_rma_register(ptr, cbuf, len(cbuf), int(flags), hp),
              "cci_rma_register", ptr)
        handle = RMAHandle(self, hp[0], buffer, cbuf, flags, writable)
        self._handles[hp[0]] = handle
        return handle

    # -- options --------------------------------------------------------

    def _get_u32(self, handle, opt):
        v = ffi.new("uint32_t *")
        check(lib.cci_get_opt(handle, int(opt), v), f"cci_get_opt({opt.name})", self._ptr)
        return v[0]

    def _set_u32(self, handle, opt, value):
        if not 0 <= value <= _U32_MAX:
            raise ValueError(f"{opt.name}: {value} does not fit in 32 bits")
        v = ffi.new("uint32_t *", value)
        check(lib.cci_set_opt(handle, int(opt), v), f"cci_set_opt({opt.name})", self._ptr)

    def _get_seconds(self, handle, opt):
        return self._get_u32(handle, opt) / 1e6

    def _set_seconds(self, handle, opt, seconds):
        self._set_u32(handle, opt, 0 if seconds is None else int(round(seconds * 1e6)))

    send_timeout = property(
        lambda self: self._get_seconds(self._live_ptr(), Opt.ENDPT_SEND_TIMEOUT),
        lambda self, s: self._set_seconds(self._live_ptr(), Opt.ENDPT_SEND_TIMEOUT, s),
        doc="Send timeout of new connections, in seconds (0: none; microsecond resolution).")
    keepalive_timeout = property(
        lambda self: self._get_seconds(self._live_ptr(), Opt.ENDPT_KEEPALIVE_TIMEOUT),
        lambda self, s: self._set_seconds(self._live_ptr(), Opt.ENDPT_KEEPALIVE_TIMEOUT, s),
        doc="Keepalive timeout of new connections, in seconds (0: none).")
    recv_buf_count = property(
        lambda self: self._get_u32(self._live_ptr(), Opt.ENDPT_RECV_BUF_COUNT),
        lambda self, n: self._set_u32(self._live_ptr(), Opt.ENDPT_RECV_BUF_COUNT, n),
        doc="Receive buffers of the endpoint.")
    send_buf_count = property(
        lambda self: self._get_u32(self._live_ptr(), Opt.ENDPT_SEND_BUF_COUNT),
        lambda self, n: self._set_u32(self._live_ptr(), Opt.ENDPT_SEND_BUF_COUNT, n),
        doc="Sends in flight before cci.errors.NoBuffers.")

    @property
    def rma_align(self):
        """The transport's RMA alignment needs (an Alignment; 0 = none)."""
        a = ffi.new("cci_alignment_t *")
        ptr = self._live_ptr()
        check(lib.cci_get_opt(ptr, int(Opt.ENDPT_RMA_ALIGN), a), "cci_get_opt(RMA_ALIGN)", ptr)
        return Alignment(a.rma_write_local_addr, a.rma_write_remote_addr, a.rma_write_length,
                         a.rma_read_local_addr, a.rma_read_remote_addr, a.rma_read_length)

    def strerror(self, status):
        """The library's sentence for a status, as this endpoint's transport
        words it."""
        return ffi.string(lib.cci_strerror(self._live_ptr(), int(status))).decode()

    # -- closing --------------------------------------------------------

    def close(self):
        """Give back every lent event, end the connections and registrations,
        and destroy the endpoint (cci_destroy_endpoint).  Idempotent."""
        ptr = self._ptr
        if ptr is None:
            return
        self._ptr = None
        while self._views:
            try:
                self._views.popitem()[1].release()
            except BufferError:
                pass
        while self._lent:
            lib.cci_return_event(self._lent.popitem()[1])
        for conn in list(self._conns.values()):
            conn._ptr = None
        self._conns.clear()
        for handle in list(self._handles.values()):
            handle._forget()
        self._ctx.clear()
        core._endpoints.discard(self)
        check(lib.cci_destroy_endpoint(ptr), "cci_destroy_endpoint")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if self._ptr is not None and core.initialized():
                self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self._ptr is None else self.uri
        return f"<cci.Endpoint {state}>"
