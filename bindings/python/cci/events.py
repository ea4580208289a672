"""The typed events of Endpoint.get_event().

An event is lent by the library: give it back with done(), or let a
``with`` block do it.  Dropping the last reference also gives it back, and
so does the endpoint's close; it is never given back twice.

A RecvEvent's data is a memoryview of the library's receive buffer, valid
until the event is given back: afterwards ev.data raises ValueError and
so does any use of a memoryview it returned.  Copy with bytes(ev.data) (or
bytes(ev)) to keep the bytes.  Slices of the view, or objects made from it
such as a NumPy array, keep the receive buffer lent after done() until
they are dropped (the endpoint's close still ends them all).
"""
import functools

from ._ffi import ffi, lib
from .constants import Attribute, EventType, Status
from .errors import check, error

_NULL = ffi.NULL
_STATUS = {int(s): s for s in Status}   # faster than Status(value)


class Event:
    """The base of every event; type is an EventType."""
    __slots__ = ("_ep", "_ptr", "_token")
    type = EventType.NONE

    def __init__(self, ep, ptr):
        self._ep = ep
        self._ptr = ptr
        token = self._token = object()
        ep._lent[token] = ptr

    @property
    def endpoint(self):
        return self._ep

    @property
    def returned(self):
        """Whether the event went back to the library (done() was called)."""
        return self._token is None

    def done(self):
        """Give the event back (cci_return_event).  Idempotent."""
        token = self._token
        if token is None:
            return
        self._token = None
        self._ep._release(token)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.done()

    def __del__(self):
        try:
            self.done()
        except Exception:  # interpreter shutdown: nothing left to give back to
            pass

    def _fields(self):
        return ""

    def __repr__(self):
        state = " returned" if self._token is None else ""
        return f"<cci.{type(self).__name__}{self._fields()}{state}>"


def _context(ep, ptr):
    """The object behind a void * context the binding gave the library."""
    if ptr == _NULL:
        return None
    entry = ep._ctx.pop(int(ffi.cast("uintptr_t", ptr)), None)
    return entry[1] if entry is not None else None


class _StatusEvent(Event):
    __slots__ = ("status",)

    @property
    def ok(self):
        """Whether status is SUCCESS."""
        return self.status == 0

    @property
    def error(self):
        """The status as a cci.Error instance, or None on success."""
        return None if self.status == 0 else error(self.status, self.type.name.lower())

    def raise_for_status(self):
        """Raise the status as a cci.Error unless it is SUCCESS."""
        if self.status:
            raise self.error

    def _fields(self):
        return f" status={getattr(self.status, 'name', self.status)}"


class SendEvent(_StatusEvent):
    """A send or an RMA operation completed: status (a Status), context (the
    object given to send() or rma()), connection."""
    __slots__ = ("context", "connection")
    type = EventType.SEND

    def __init__(self, ep, ptr):
        Event.__init__(self, ep, ptr)
        s = ptr.send
        self.status = _STATUS.get(s.status, s.status)
        c = s.context
        self.context = None if c == _NULL else _context(ep, c)
        self.connection = ep._connection_of(s.connection)


class RecvEvent(Event):
    """A message arrived: length, data (a memoryview, valid until the event
    is given back), connection."""
    __slots__ = ("length", "connection")
    type = EventType.RECV

    def __init__(self, ep, ptr):
        Event.__init__(self, ep, ptr)
        r = ptr.recv
        self.length = r.len
        self.connection = ep._connection_of(r.connection)

    @property
    def data(self):
        """The message as a writable memoryview into the receive buffer."""
        token = self._token
        ep = self._ep
        view = ep._views.get(token) if token is not None else None
        if view is not None:
            return view
        if token is None or token not in ep._lent:
            raise ValueError("the event was given back: its data is gone "
                             "(keep a copy with bytes(ev.data) before done())")
        if self.length == 0:
            return memoryview(b"")
        # The holder gives the event back when the last view of it is gone:
        # at done() unless slices of the view are still alive.
        holder = ffi.gc(ffi.cast("char *", self._ptr.recv.ptr),
                        functools.partial(ep._give_back, token))
        view = ep._views[token] = memoryview(ffi.buffer(holder, self.length))
        return view

    def __bytes__(self):
        if self._token is None or self._token not in self._ep._lent:
            raise ValueError("the event was given back: its data is gone")
        return ffi.unpack(ffi.cast("char *", self._ptr.recv.ptr), self.length)

    def __len__(self):
        return self.length

    def _fields(self):
        return f" length={self.length}"


class _ConnResultEvent(_StatusEvent):
    """CONNECT and ACCEPT share their layout: status, context, connection
    (None unless SUCCESS)."""
    __slots__ = ("context", "connection")

    def __init__(self, ep, ptr):
        Event.__init__(self, ep, ptr)
        c = ptr.connect
        self.status = _STATUS.get(c.status, c.status)
        self.context = _context(ep, c.context)
        self.connection = None
        if self.status == 0 and c.connection != _NULL:
            self.connection = ep._add_connection(c.connection, self.context)


class ConnectEvent(_ConnResultEvent):
    """The outcome of Endpoint.connect(): status (SUCCESS, ECONNREFUSED when
    rejected, ETIMEDOUT...), context, connection (None unless SUCCESS)."""
    __slots__ = ()
    type = EventType.CONNECT


class ConnectRequestEvent(Event):
    """A client asks to connect: data (its payload, bytes), attribute.
    Answer with accept() or reject() before the event is given back."""
    __slots__ = ("data", "attribute")
    type = EventType.CONNECT_REQUEST

    def __init__(self, ep, ptr):
        Event.__init__(self, ep, ptr)
        r = ptr.request
        self.data = ffi.unpack(ffi.cast("char *", r.data_ptr), r.data_len) if r.data_len else b""
        self.attribute = Attribute(r.attribute)

    def _live_ptr(self):
        if self._token is None or self._token not in self._ep._lent:
            raise ValueError("the request was given back")
        return self._ptr

    def accept(self, context=None):
        """Accept (cci_accept): an AcceptEvent follows, with context, which
        becomes the connection's context."""
        ptr = self._live_ptr()
        key, cptr = 0, _NULL
        if context is not None:
            key = next(self._ep._keys)
            self._ep._ctx[key] = (None, context, None)
            cptr = ffi.cast("void *", key)
        rc = lib.cci_accept(ptr, cptr)
        if rc:
            self._ep._ctx.pop(key, None)
            raise error(rc, "cci_accept", self._ep._ptr)

    def reject(self):
        """Reject (cci_reject): the client's ConnectEvent has ECONNREFUSED."""
        check(lib.cci_reject(self._live_ptr()), "cci_reject", self._ep._ptr)

    def _fields(self):
        return f" attribute={self.attribute.name} data={self.data[:16]!r}"


class AcceptEvent(_ConnResultEvent):
    """The outcome of ConnectRequestEvent.accept(): status, context,
    connection (None unless SUCCESS)."""
    __slots__ = ()
    type = EventType.ACCEPT


class KeepaliveTimedOutEvent(Event):
    """The peer was silent past the keepalive timeout of connection; the
    timer is disarmed and the connection stays open."""
    __slots__ = ("connection",)
    type = EventType.KEEPALIVE_TIMEDOUT

    def __init__(self, ep, ptr):
        Event.__init__(self, ep, ptr)
        self.connection = ep._connection_of(ptr.keepalive.connection)


class DeviceFailedEvent(Event):
    """The endpoint's device failed; the endpoint is unusable."""
    __slots__ = ()
    type = EventType.ENDPOINT_DEVICE_FAILED


BY_TYPE = {cls.type: cls for cls in (SendEvent, RecvEvent, ConnectEvent, ConnectRequestEvent,
                                     AcceptEvent, KeepaliveTimedOutEvent, DeviceFailedEvent)}
