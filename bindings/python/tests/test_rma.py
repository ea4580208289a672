"""RMA: registrations, writes and reads with data checks, and their errors."""
import array

import pytest

import cci
from support import pattern

SIZE = 256 * 1024


def expose(pair, flags, size=SIZE, seed=0x5A):
    """The server registers a buffer and sends its handle; the client
    returns (server buffer, server handle, RemoteHandle built from the
    message)."""
    buf = bytearray(pattern(size, seed))
    handle = pair.srv.ep.rma_register(buf, flags)
    assert len(handle.bytes) == cci.HANDLE_SIZE == 32
    pair.srv.conn.send(handle.bytes)
    with pair.next(pair.cli, cci.RecvEvent) as ev:
        remote = cci.RemoteHandle(ev.data)
    pair.next(pair.srv, cci.SendEvent).done()
    return buf, handle, remote


@pytest.mark.parametrize("length,offset", [(1, 0), (8, 3), (4096, 4096), (SIZE, 0),
                                           (SIZE - 1000, 999)])
def test_rma_write_lands_before_its_completion_message(pair, length, offset):
    buf, handle, remote = expose(pair, cci.WRITE)
    src = bytearray(pattern(SIZE + 10, seed=1))
    local = pair.cli.ep.rma_register(src)
    pair.cli.conn.rma(local, 10, remote, offset, length, cci.WRITE, msg=b"written",
                      context="w")
    with pair.next(pair.srv, cci.RecvEvent) as note:
        assert bytes(note.data) == b"written"
        assert buf[offset:offset + length] == src[10:10 + length]
    assert buf[:offset] == pattern(offset, 0x5A)
    assert buf[offset + length:] == pattern(SIZE, 0x5A)[offset + length:]
    with pair.next(pair.cli, cci.SendEvent) as done:
        assert done.ok and done.context == "w"


@pytest.mark.parametrize("length,offset", [(1, 0), (100, 7), (SIZE, 0)])
def test_rma_read_brings_the_remote_bytes(pair, length, offset):
    buf, handle, remote = expose(pair, cci.READ)
    dst = bytearray(SIZE)
    with pair.cli.ep.rma_register(dst) as local:
        pair.cli.conn.rma(local, 0, remote, offset, length, flags=cci.READ, context=5)
        with pair.next(pair.cli, cci.SendEvent) as done:
            assert done.ok and done.context == 5
        assert dst[:length] == buf[offset:offset + length]
        assert dst[length:] == bytes(SIZE - length)
    assert not local.registered


def test_blocking_rma_and_a_local_rma_handle_as_remote(pair):
    buf, handle, remote = expose(pair, cci.READ | cci.WRITE, size=64)
    values = array.array("I", range(16))  # any writable buffer
    local = pair.cli.ep.rma_register(values)
    pair.cli.conn.rma(local, 0, remote.bytes, 0, 64, cci.WRITE | cci.BLOCKING)
    assert buf == values.tobytes()
    back = pair.cli.ep.rma_register(bytearray(64))
    pair.cli.conn.rma(back, 0, remote, 0, 64, cci.READ | cci.FENCE | cci.BLOCKING)
    assert back.buffer == buf
    assert handle.remote() == remote and cci.RemoteHandle.of(handle) == remote


def test_rma_checks_access_bounds_and_attribute(pair):
    buf, handle, remote = expose(pair, cci.READ, size=4096)
    local = pair.cli.ep.rma_register(bytearray(8192))
    with pytest.raises(cci.errors.BadRMAHandle) as info:
        pair.cli.conn.rma(local, 0, remote, 0, 16, cci.WRITE)  # read-only at the target
    assert info.value.message == cci.strerror(cci.Status.ERR_RMA_HANDLE)
    with pytest.raises(cci.errors.InvalidArgument):
        pair.cli.conn.rma(local, 0, remote, 4000, 200, cci.READ)  # past the registration
    with pytest.raises(cci.errors.InvalidArgument):
        pair.cli.conn.rma(local, 0, remote, 0, 0, cci.READ)  # zero length
    with pytest.raises(cci.errors.InvalidArgument):
        pair.cli.conn.rma(local, 0, remote, 0, 8, cci.READ | cci.WRITE)
    uu_srv, uu_cli = pair.connect(attr=cci.UU)
    with pytest.raises(cci.errors.InvalidArgument):
        uu_cli.rma(local, 0, remote, 0, 8, cci.READ)


def test_a_deregistered_target_is_never_touched(pair):
    buf, handle, remote = expose(pair, cci.WRITE, size=64)
    handle.deregister()
    handle.deregister()  # idempotent
    local = pair.cli.ep.rma_register(b"\xff" * 64)
    try:
        pair.cli.conn.rma(local, 0, remote, 0, 64, cci.WRITE)
        with pair.next(pair.cli, cci.SendEvent) as done:
            assert done.status in (cci.Status.ERR_RMA_HANDLE, cci.Status.ERR_RMA_OP)
            assert isinstance(done.error, (cci.errors.BadRMAHandle, cci.errors.RMAFailed))
    except (cci.errors.BadRMAHandle, cci.errors.RMAFailed):
        pass
    assert buf == pattern(64, 0x5A)


def test_registrations_need_the_right_kind_of_buffer(pair):
    ep = pair.cli.ep
    with pytest.raises(TypeError, match="writable"):
        ep.rma_register(b"read-only", cci.WRITE)
    ro = ep.rma_register(b"read-only bytes", cci.READ)
    assert not ro.writable and ro.length == 15 and ro.flags == cci.READ
    buf, handle, remote = expose(pair, cci.READ, size=16)
    with pytest.raises(TypeError, match="writable"):
        pair.cli.conn.rma(ro, 0, remote, 0, 8, cci.READ)  # would write into bytes
    with pytest.raises(TypeError):
        pair.cli.conn.rma(b"not a handle", 0, remote, 0, 8, cci.READ)
    with pytest.raises(ValueError):
        cci.RemoteHandle(b"short")


def test_a_registered_buffer_is_pinned_until_deregistered(pair):
    buf = bytearray(100)
    h = pair.cli.ep.rma_register(buf, cci.WRITE)
    with pytest.raises(BufferError):
        buf.extend(b"x")  # the library holds its address
    h.deregister()
    buf.extend(b"x")
    with pytest.raises(ValueError):
        pair.cli.conn.rma(h, 0, h.bytes, 0, 1, cci.WRITE)


def test_closing_the_endpoint_ends_its_registrations(device):
    from support import Pair
    pair = Pair.open(device)
    buf = bytearray(64)
    h = pair.srv.ep.rma_register(buf, cci.WRITE)
    pair.close()
    assert not h.registered
    buf.extend(b"x")
