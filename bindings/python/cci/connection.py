"""Connections: sends and RMA."""
from ._ffi import ffi, lib
from .constants import Attribute, Flag, Opt
from .errors import check, error
from .rma import RMAHandle, RemoteHandle

_NULL = ffi.NULL
_NO_EVENT = Flag.BLOCKING | Flag.SILENT
_NO_COPY = int(Flag.NO_COPY)
_BLOCKING = int(Flag.BLOCKING)
_SILENT = int(Flag.SILENT)
_READ = int(Flag.READ)


def as_cbuffer(data):
    """A pointer the library may read (bytes are passed as they are) and
    its length in bytes.  Any C-contiguous buffer-protocol object works."""
    if type(data) is bytes:
        return data, len(data)
    cbuf = ffi.from_buffer(data)
    return cbuf, len(cbuf)


class Connection:
    """A connection (struct cci_connection), from a ConnectEvent (client) or
    an AcceptEvent (server).

    max_send_size  the largest message, the smaller of the two sides'
    attribute      cci.RO, cci.RU or cci.UU
    context        the object given to Endpoint.connect() or accept()

    It lives until disconnect() (or the end of a ``with`` block) or the
    endpoint's close; afterwards every call raises ValueError.
    """
    __slots__ = ("_ep", "_ptr", "context", "max_send_size", "attribute", "__weakref__")

    def __init__(self, ep, ptr, context):
        self._ep = ep
        self._ptr = ptr
        self.context = context
        self.max_send_size = ptr.max_send_size
        self.attribute = Attribute(ptr.attribute)

    @property
    def endpoint(self):
        return self._ep

    @property
    def closed(self):
        return self._ptr is None

    def _live_ptr(self):
        ptr = self._ptr
        if ptr is None:
            raise ValueError("the connection is closed")
        return ptr

    def _context_key(self, context, keep):
        """A void * for the library that a SendEvent turns back into context;
        keep (buffers the library still reads) lives as long."""
        key = next(self._ep._keys)
        self._ep._ctx[key] = (self, context, keep)
        return key, ffi.cast("void *", key)

    def send(self, data, flags=0, context=None):
        """Send one message (cci_send): data is any C-contiguous buffer
        (bytes, bytearray, memoryview, array.array, a NumPy array...) of at
        most max_send_size bytes (else cci.errors.MessageTooLarge).

        The buffer may be reused at once, unless flags has cci.NO_COPY: then
        it is kept alive (and must stay unchanged) until the SendEvent.
        A SendEvent carrying context follows, unless flags has
        cci.BLOCKING (wait, and raise if the send failed) or cci.SILENT.
        cci.errors.NoBuffers means every send buffer is in flight: handle
        some events and try again.
        """
        ptr = self._ptr
        if ptr is None:
            raise ValueError("the connection is closed")
        if type(data) is bytes:
            buf, n = data, len(data)
        else:
            buf = ffi.from_buffer(data)
            n = len(buf)
        if context is None and not flags & _NO_COPY or flags & _BLOCKING:
            rc = lib.cci_send(ptr, buf, n, _NULL, flags)
            if rc:
                raise error(rc, "cci_send", self._ep._ptr)
            return
        if flags & _SILENT:
            raise ValueError("NO_COPY with SILENT has no completion to release the buffer")
        key, cptr = self._context_key(context, buf if flags & _NO_COPY else None)
        rc = lib.cci_send(ptr, buf, n, cptr, flags)
        if rc:
            self._ep._ctx.pop(key, None)
            raise error(rc, "cci_send", self._ep._ptr)

    def sendv(self, buffers, flags=0, context=None):
        """Send the buffers gathered into one message (cci_sendv); as send()."""
        ptr = self._live_ptr()
        cbufs = [ffi.from_buffer(b) for b in buffers]
        iov = ffi.new("struct iovec[]", max(len(cbufs), 1))
        for i, buf in enumerate(cbufs):
            iov[i].iov_base = buf
            iov[i].iov_len = len(buf)
        keep = (iov, cbufs)
        if context is None and not flags & _NO_COPY or flags & _BLOCKING:
            check(lib.cci_sendv(ptr, iov, len(cbufs), _NULL, flags), "cci_sendv", self._ep._ptr)
            return
        if flags & _SILENT:
            raise ValueError("NO_COPY with SILENT has no completion to release the buffer")
        key, cptr = self._context_key(context, keep)
        rc = lib.cci_sendv(ptr, iov, len(cbufs), cptr, flags)
        if rc:
            self._ep._ctx.pop(key, None)
            raise error(rc, "cci_sendv", self._ep._ptr)

    def rma(self, local, local_offset, remote, remote_offset, length,
            flags=Flag.WRITE, msg=None, context=None):
        """Move length bytes between local (an RMAHandle of this endpoint) at
        local_offset and remote (a RemoteHandle, or the peer's 32 handle
        bytes) at remote_offset (cci_rma): flags cci.WRITE pushes, cci.READ
        pulls, plus cci.FENCE, cci.BLOCKING or cci.SILENT.

        msg (a buffer, optional) reaches the peer as a RecvEvent once the
        data is in place.  A SendEvent carrying context completes the
        operation (none with BLOCKING: errors raise; none with SILENT).
        Reliable connections only.
        """
        ptr = self._live_ptr()
        if not isinstance(local, RMAHandle):
            raise TypeError("local must be an RMAHandle of this endpoint")
        if local._ep is not self._ep:
            raise ValueError("local is registered on another endpoint")
        lptr = local._live_ptr()
        if flags & _READ and not local.writable:
            raise TypeError("an RMA read needs a writable local buffer")
        rh = RemoteHandle.of(remote)
        if msg is None:
            mbuf, mlen = _NULL, 0
        else:
            mbuf, mlen = as_cbuffer(msg)
        if flags & _NO_EVENT:
            check(lib.cci_rma(ptr, mbuf, mlen, lptr, local_offset, rh._h, remote_offset,
                              length, _NULL, flags), "cci_rma", self._ep._ptr)
            return
        # the registration (and so the buffer) stays alive until completion
        key, cptr = self._context_key(context, (local, mbuf))
        rc = lib.cci_rma(ptr, mbuf, mlen, lptr, local_offset, rh._h, remote_offset,
                         length, cptr, flags)
        if rc:
            self._ep._ctx.pop(key, None)
            raise error(rc, "cci_rma", self._ep._ptr)

    def disconnect(self):
        """Close the connection (cci_disconnect); the peer learns of it.
        Operations in flight are dropped without events.  Idempotent."""
        ptr = self._ptr
        if ptr is None:
            return
        check(lib.cci_disconnect(ptr), "cci_disconnect", self._ep._ptr)
        self._ep._forget_connection(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.disconnect()

    @property
    def send_timeout(self):
        """This connection's send timeout in seconds (0: none)."""
        return self._ep._get_seconds(self._live_ptr(), Opt.CONN_SEND_TIMEOUT)

    @send_timeout.setter
    def send_timeout(self, seconds):
        self._ep._set_seconds(self._live_ptr(), Opt.CONN_SEND_TIMEOUT, seconds)

    @property
    def keepalive_timeout(self):
        """This connection's keepalive timeout in seconds (0: none)."""
        return self._ep._get_seconds(self._live_ptr(), Opt.CONN_KEEPALIVE_TIMEOUT)

    @keepalive_timeout.setter
    def keepalive_timeout(self, seconds):
        self._ep._set_seconds(self._live_ptr(), Opt.CONN_KEEPALIVE_TIMEOUT, seconds)

    def __repr__(self):
        state = "closed" if self._ptr is None else f"max_send_size={self.max_send_size}"
        return f"<cci.Connection {self.attribute.name} {state}>"
