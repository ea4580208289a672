"""The enumerations of api/cci.h, with the values of the C header."""
import enum


class Status(enum.IntEnum):
    """cci_status_t: what every call and every completion reports."""
    SUCCESS = 0
    ERROR = 1
    ERR_DISCONNECTED = 2
    ERR_RNR = 3
    ERR_DEVICE_DEAD = 4
    ERR_RMA_HANDLE = 5
    ERR_RMA_OP = 6
    ERR_NOT_IMPLEMENTED = 7
    ERR_NOT_FOUND = 8
    EINVAL = 22
    ETIMEDOUT = 110
    ENOMEM = 12
    ENODEV = 19
    ENETDOWN = 100
    EBUSY = 16
    ERANGE = 34
    EAGAIN = 11
    ENOBUFS = 105
    EMSGSIZE = 90
    ENOMSG = 42
    EADDRNOTAVAIL = 99
    ECONNREFUSED = 111


class Attribute(enum.IntEnum):
    """cci_conn_attribute_t: reliable-ordered, reliable-unordered, unreliable."""
    RO = 0
    RU = 1
    UU = 2
    UU_MC_TX = 3
    UU_MC_RX = 4


class EventType(enum.IntEnum):
    """cci_event_type_t."""
    NONE = 0
    SEND = 1
    RECV = 2
    CONNECT = 3
    CONNECT_REQUEST = 4
    ACCEPT = 5
    KEEPALIVE_TIMEDOUT = 6
    ENDPOINT_DEVICE_FAILED = 7


class Flag(enum.IntFlag):
    """The CCI_FLAG_* bits of sends, RMA operations and registrations."""
    BLOCKING = 1 << 0
    NO_COPY = 1 << 1
    SILENT = 1 << 3
    READ = 1 << 4
    WRITE = 1 << 5
    FENCE = 1 << 6


class Opt(enum.IntEnum):
    """cci_opt_name_t (the Endpoint and Connection properties use these)."""
    ENDPT_SEND_TIMEOUT = 0
    ENDPT_RECV_BUF_COUNT = 1
    ENDPT_SEND_BUF_COUNT = 2
    ENDPT_KEEPALIVE_TIMEOUT = 3
    ENDPT_URI = 4
    ENDPT_RMA_ALIGN = 5
    CONN_SEND_TIMEOUT = 6
    CONN_KEEPALIVE_TIMEOUT = 7


CONN_REQ_LEN = 1024
"""The most bytes a connect payload may carry."""
