"""Library start and stop, and the device list."""
import atexit
import collections
import threading
import weakref

from ._ffi import ABI_VERSION, ffi, lib
from .constants import Status
from .errors import NotFound, check

_lock = threading.RLock()
_initialized = False
_generation = 0          # counts cci_init() calls; devices of an older one are dead
_capabilities = 0
_devices = None
# Open endpoints, closed by finalize() before the library frees them.
_endpoints = weakref.WeakSet()

PCI = collections.namedtuple("PCI", "domain bus dev func")


def init():
    """Start the library (cci_init) unless this process already did.

    Idempotent: later calls return at once.  Every function that needs the
    library calls it, so calling it is optional; it reads CCI_CONFIG (the
    device file) the first time.  Returns the capability bits (0).
    """
    global _initialized, _generation, _capabilities
    with _lock:
        if not _initialized:
            caps = ffi.new("uint32_t *")
            check(lib.cci_init(ABI_VERSION, 0, caps), "cci_init")
            _initialized = True
            _generation += 1
            _capabilities = caps[0]
        return _capabilities


def finalize():
    """Close every open endpoint, then stop the library (cci_finalize).

    Devices, endpoints, connections and handles obtained before are dead
    afterwards; init() (or any call that needs the library) starts it
    again, reading the configuration anew.  Does nothing when the library
    is not started.
    """
    global _initialized, _devices
    with _lock:
        if not _initialized:
            return
        for ep in list(_endpoints):
            ep.close()
        _initialized = False
        _devices = None
        check(lib.cci_finalize(), "cci_finalize")


def initialized():
    """Whether the library is started."""
    return _initialized


def generation():
    return _generation


atexit.register(finalize)


class Device:
    """A device of the library's list (struct cci_device), read-only.

    name, transport, up (bool), info, conf_argv (the "key=value" strings of
    its config section), conf (the same as a dict), max_send_size, rate
    (bits/s, 0 if unknown), pci (a PCI(domain, bus, dev, func) tuple, or
    None when it is not a PCI device).
    """
    __slots__ = ("name", "transport", "up", "info", "conf_argv", "conf",
                 "max_send_size", "rate", "pci", "_ptr", "_generation")

    def __init__(self, ptr):
        self._ptr = ptr
        self._generation = _generation
        self.name = _text(ptr.name)
        self.transport = _text(ptr.transport)
        self.up = bool(ptr.up)
        self.info = _text(ptr.info)
        argv = []
        if ptr.conf_argv != ffi.NULL:
            i = 0
            while ptr.conf_argv[i] != ffi.NULL:
                argv.append(_text(ptr.conf_argv[i]))
                i += 1
        self.conf_argv = tuple(argv)
        self.conf = dict(a.split("=", 1) if "=" in a else (a, "") for a in argv)
        self.max_send_size = ptr.max_send_size
        self.rate = ptr.rate
        pci = PCI(ptr.pci.domain, ptr.pci.bus, ptr.pci.dev, ptr.pci.func)
        self.pci = None if all(v == 0xFFFFFFFF for v in pci) else pci

    def _live_ptr(self):
        if not _initialized or self._generation != _generation:
            raise ValueError(f"device {self.name!r} belongs to a finalized library")
        return self._ptr

    def __repr__(self):
        return (f"<cci.Device {self.name!r} transport={self.transport!r} "
                f"up={self.up} max_send_size={self.max_send_size}>")


def _text(p):
    return ffi.string(p).decode(errors="replace") if p != ffi.NULL else None


def devices():
    """The devices, in the library's order (up first, then the default,
    then by priority and rate).  Starts the library if needed."""
    global _devices
    with _lock:
        init()
        if _devices is None:
            out = ffi.new("struct cci_device ***")
            check(lib.cci_get_devices(out), "cci_get_devices")
            found = []
            i = 0
            while out[0][i] != ffi.NULL:
                found.append(Device(out[0][i]))
                i += 1
            _devices = found
        return list(_devices)


def find_device(name):
    """The device called name; cci.errors.NotFound if there is none."""
    for dev in devices():
        if dev.name == name:
            return dev
    raise NotFound(Status.ERR_NOT_FOUND, f"no device named {name!r}", "cci.Endpoint")


def device_of(ptr):
    """The Device object for a struct cci_device pointer."""
    for dev in devices():
        if dev._ptr == ptr:
            return dev
    return Device(ptr)
