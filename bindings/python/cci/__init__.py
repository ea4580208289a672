"""cci: Python binding of the CCI communication library (libcci.so.2).

    import cci

    with cci.Endpoint() as ep:            # the default device
        ep.connect(server_uri, b"hello")
        for ev in iter(ep.wait, None):    # or: ev = ep.get_event()
            with ev:                      # gives the event back at the end
                if isinstance(ev, cci.ConnectEvent):
                    ev.raise_for_status()
                    ev.connection.send(b"ping")
                elif isinstance(ev, cci.RecvEvent):
                    print(bytes(ev.data))

See docs/python.md in the source tree for the guide.  The library is
loaded from CCI_LIBRARY (a full path) if set, else from the build tree when
this package is imported from the source tree, else as "libcci.so.2".
"""
from . import errors
from ._ffi import ABI_VERSION, library_path
from .connection import Connection
from .constants import CONN_REQ_LEN, Attribute, EventType, Flag, Opt, Status
from .core import PCI, Device, devices, finalize, init, initialized
from .endpoint import Alignment, Endpoint
from .errors import Error, strerror
from .events import (AcceptEvent, ConnectEvent, ConnectRequestEvent, DeviceFailedEvent, Event,
                     KeepaliveTimedOutEvent, RecvEvent, SendEvent)
from .rma import HANDLE_SIZE, RemoteHandle, RMAHandle

RO, RU, UU = Attribute.RO, Attribute.RU, Attribute.UU
BLOCKING, NO_COPY, SILENT = Flag.BLOCKING, Flag.NO_COPY, Flag.SILENT
READ, WRITE, FENCE = Flag.READ, Flag.WRITE, Flag.FENCE

# The exception classes under their C names, without the CCI_ prefix.
for _status, _cls in errors.BY_STATUS.items():
    globals()[_status.name] = _cls
del _status, _cls

__version__ = "2.0.0"
__all__ = [
    "ABI_VERSION", "AcceptEvent", "Alignment", "Attribute", "BLOCKING", "CONN_REQ_LEN",
    "ConnectEvent", "ConnectRequestEvent", "Connection", "Device", "DeviceFailedEvent",
    "Endpoint", "Error", "Event", "EventType", "FENCE", "Flag", "HANDLE_SIZE",
    "KeepaliveTimedOutEvent", "NO_COPY", "Opt", "PCI", "READ", "RMAHandle", "RO", "RU",
    "RecvEvent", "RemoteHandle", "SILENT", "SendEvent", "Status", "UU", "WRITE", "devices",
    "errors", "finalize", "init", "initialized", "library_path", "strerror",
] + [s.name for s in errors.BY_STATUS]
