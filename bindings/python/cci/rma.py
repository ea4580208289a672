"""RMA registrations (local handles) and the handles of peers."""
from ._ffi import ffi, lib
from .constants import Flag
from .errors import check

HANDLE_SIZE = 32
"""Bytes of a serialized handle (struct cci_rma_handle)."""


class RMAHandle:
    """A registered buffer of this process (Endpoint.rma_register()).

    bytes     the 32 serialized bytes to send to a peer, which builds a
              RemoteHandle from them to reach this buffer
    buffer    the registered object; it is kept alive (and a bytearray
              cannot be resized) while the registration lasts
    length    bytes registered
    flags     the access granted to peers (cci.READ, cci.WRITE)
    writable  whether RMA reads may land in it (a writable buffer)

    The registration lasts until deregister(), the end of a ``with`` block
    or the endpoint's close, not merely until the object is dropped: the
    library may still read or write the memory for a peer.
    """
    __slots__ = ("_ep", "_ptr", "_cbuf", "buffer", "length", "flags", "writable", "bytes",
                 "__weakref__")

    def __init__(self, ep, ptr, buffer, cbuf, flags, writable):
        self._ep = ep
        self._ptr = ptr
        self._cbuf = cbuf
        self.buffer = buffer
        self.length = len(cbuf)
        self.flags = Flag(flags & (Flag.READ | Flag.WRITE))
        self.writable = writable
        self.bytes = bytes(ffi.buffer(ptr, HANDLE_SIZE))

    @property
    def registered(self):
        return self._ptr is not None

    @property
    def endpoint(self):
        return self._ep

    def _live_ptr(self):
        if self._ptr is None:
            raise ValueError("the RMA handle is deregistered")
        return self._ptr

    def remote(self):
        """This handle as a peer would hold it (a RemoteHandle of .bytes)."""
        return RemoteHandle(self.bytes)

    def deregister(self):
        """End the registration (cci_rma_deregister); later RMAs naming it
        fail at both ends.  Idempotent; done by the endpoint's close too."""
        ptr = self._ptr
        if ptr is None:
            return
        epp = self._ep._ptr
        self._forget()
        if epp is not None:
            check(lib.cci_rma_deregister(epp, ptr), "cci_rma_deregister", epp)

    def _forget(self):
        """Drop the handle without a library call (the endpoint is going)."""
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            self._ep._handles.pop(ptr, None)
        self._cbuf = None
        self.buffer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.deregister()

    def __repr__(self):
        state = "registered" if self._ptr is not None else "deregistered"
        return f"<cci.RMAHandle {self.length} bytes {self.flags!r} {state}>"


class RemoteHandle:
    """A peer's registration, from the 32 bytes it sent (RMAHandle.bytes)."""
    __slots__ = ("_h", "bytes")

    def __init__(self, data):
        raw = bytes(memoryview(data).cast("B"))
        if len(raw) != HANDLE_SIZE:
            raise ValueError(f"an RMA handle is {HANDLE_SIZE} bytes, not {len(raw)}")
        self.bytes = raw
        self._h = ffi.new("struct cci_rma_handle *")
        ffi.memmove(self._h, raw, HANDLE_SIZE)

    @classmethod
    def of(cls, handle):
        """A RemoteHandle, a local RMAHandle (as its peer sees it) or 32 bytes."""
        if isinstance(handle, cls):
            return handle
        if isinstance(handle, RMAHandle):
            return cls(handle.bytes)
        return cls(handle)

    def __eq__(self, other):
        return isinstance(other, RemoteHandle) and other.bytes == self.bytes

    def __hash__(self):
        return hash(self.bytes)

    def __repr__(self):
        return f"<cci.RemoteHandle {self.bytes.hex()}>"
