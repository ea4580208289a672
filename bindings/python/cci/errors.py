"""Every CCI status other than success as an exception class.

All derive from Error, which carries the status (a Status when the library
defines it) and the library's sentence for it (cci_strerror).  Each class
also has the C name without its CCI_ prefix as an alias in the cci package:
``cci.EINVAL is cci.errors.InvalidArgument``.
"""
from ._ffi import ffi, lib
from .constants import Status


class Error(Exception):
    """A CCI call or operation failed.

    status  the cci_status_t value (a Status member when known)
    message the library's sentence for it, from cci_strerror()
    call    the C function that reported it, when known
    """

    def __init__(self, status, message=None, call=None):
        try:
            status = Status(status)
        except ValueError:
            pass
        if message is None:
            message = strerror(status)
        self.status = status
        self.message = message
        self.call = call
        name = status.name if isinstance(status, Status) else str(int(status))
        text = f"{message} (CCI_{name})"
        super().__init__(f"{call}: {text}" if call else text)


class GenericError(Error):
    """CCI_ERROR: a failure without a more precise status."""


class Disconnected(Error):
    """CCI_ERR_DISCONNECTED: the connection is closed or broken."""


class ReceiverNotReady(Error):
    """CCI_ERR_RNR: the receiver had no buffer (unreliable connections)."""


class DeviceDead(Error):
    """CCI_ERR_DEVICE_DEAD: the device failed."""


class BadRMAHandle(Error):
    """CCI_ERR_RMA_HANDLE: an RMA handle is unknown, stale or lacks access."""


class RMAFailed(Error):
    """CCI_ERR_RMA_OP: an RMA operation failed at the target."""


class NotImplementedByTransport(Error):
    """CCI_ERR_NOT_IMPLEMENTED."""


class NotFound(Error):
    """CCI_ERR_NOT_FOUND: no such device, plugin or entry."""


class InvalidArgument(Error):
    """CCI_EINVAL: an argument is invalid (a bad URI, say)."""


class TimedOut(Error):
    """CCI_ETIMEDOUT: a timeout expired."""


class OutOfMemory(Error):
    """CCI_ENOMEM."""


class NoDevice(Error):
    """CCI_ENODEV: no device to use."""


class NetworkDown(Error):
    """CCI_ENETDOWN."""


class Busy(Error):
    """CCI_EBUSY: a resource is busy (a service in use, say)."""


class OutOfRange(Error):
    """CCI_ERANGE: a value is out of range."""


class TryAgain(Error):
    """CCI_EAGAIN: nothing now.  get_event() returns None instead."""


class NoBuffers(Error):
    """CCI_ENOBUFS: every send buffer is in flight, or the application holds
    every receive buffer (return some events)."""


class MessageTooLarge(Error):
    """CCI_EMSGSIZE: a message is larger than the connection's max_send_size."""


class NoMessage(Error):
    """CCI_ENOMSG."""


class AddressNotAvailable(Error):
    """CCI_EADDRNOTAVAIL: the address cannot be used."""


class ConnectionRefused(Error):
    """CCI_ECONNREFUSED: the server rejected the connection."""


BY_STATUS = {
    Status.ERROR: GenericError,
    Status.ERR_DISCONNECTED: Disconnected,
    Status.ERR_RNR: ReceiverNotReady,
    Status.ERR_DEVICE_DEAD: DeviceDead,
    Status.ERR_RMA_HANDLE: BadRMAHandle,
    Status.ERR_RMA_OP: RMAFailed,
    Status.ERR_NOT_IMPLEMENTED: NotImplementedByTransport,
    Status.ERR_NOT_FOUND: NotFound,
    Status.EINVAL: InvalidArgument,
    Status.ETIMEDOUT: TimedOut,
    Status.ENOMEM: OutOfMemory,
    Status.ENODEV: NoDevice,
    Status.ENETDOWN: NetworkDown,
    Status.EBUSY: Busy,
    Status.ERANGE: OutOfRange,
    Status.EAGAIN: TryAgain,
    Status.ENOBUFS: NoBuffers,
    Status.EMSGSIZE: MessageTooLarge,
    Status.ENOMSG: NoMessage,
    Status.EADDRNOTAVAIL: AddressNotAvailable,
    Status.ECONNREFUSED: ConnectionRefused,
}


def strerror(status, endpoint_ptr=ffi.NULL):
    """The library's sentence for a status (cci_strerror)."""
    return ffi.string(lib.cci_strerror(endpoint_ptr, int(status))).decode(errors="replace")


def error(status, call=None, endpoint_ptr=ffi.NULL):
    """The exception for a non-success status: an instance of its class."""
    cls = BY_STATUS.get(status, Error)
    return cls(status, strerror(status, endpoint_ptr), call)


def check(rc, call, endpoint_ptr=ffi.NULL):
    """Raise the exception for rc unless it is CCI_SUCCESS."""
    if rc:
        raise error(rc, call, endpoint_ptr)
