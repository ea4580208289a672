"""Messages: every size up to max_send_size, buffer types, flags, and the
lifetime of received data."""
import array
import ctypes
import gc

import pytest

import cci
from support import pattern


def sizes(mss):
    """0, 1, the edges of small powers of two, half of mss, and mss itself."""
    picks = {0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 255, 256, 1000, 1023, 1024, 4095, 4096,
             mss // 2 + 1, mss - 1, mss}
    return sorted(s for s in picks if s <= mss)


def test_every_size_up_to_max_send_size_arrives_intact(pair):
    mss = pair.cli.conn.max_send_size
    data = pattern(mss, seed=3)
    for n in sizes(mss):
        with pair.exchange(data[:n]) as ev:
            assert ev.length == len(ev) == n
            assert ev.data == data[:n], f"{n}-byte message corrupted"
            assert bytes(ev) == data[:n]
            assert ev.connection is pair.srv.conn


def test_the_server_answers_on_the_connection_of_the_message(pair):
    for n in (0, 5, pair.srv.conn.max_send_size):
        with pair.exchange(pattern(n, n)) as ev:
            ev.connection.send(ev.data, context=n)
        with pair.next(pair.cli, cci.RecvEvent) as echo:
            assert echo.data == pattern(n, n)
        with pair.next(pair.srv, cci.SendEvent) as sent:
            assert sent.ok and sent.context == n and sent.connection is pair.srv.conn


def test_ro_keeps_the_order_of_messages(pair):
    for burst in range(10):
        for i in range(20):
            pair.cli.conn.send((burst * 20 + i).to_bytes(4, "little"), flags=cci.SILENT)
        for i in range(20):
            with pair.next(pair.srv, cci.RecvEvent) as ev:
                assert int.from_bytes(ev.data, "little") == burst * 20 + i


@pytest.mark.parametrize("make", [
    bytes, bytearray, memoryview,
    lambda b: memoryview(bytearray(b"..") + b)[2:],
    lambda b: array.array("B", b),
    lambda b: (ctypes.c_char * len(b)).from_buffer_copy(b),
], ids=["bytes", "bytearray", "memoryview", "memoryview-slice", "array", "ctypes"])
def test_send_takes_any_buffer_protocol_object(pair, make):
    data = pattern(100)
    with pair.exchange(make(data)) as ev:
        assert bytes(ev.data) == data


def test_send_of_a_multibyte_item_buffer_sends_its_bytes(pair):
    values = array.array("d", [1.5, -2.25, 1e300])
    with pair.exchange(values) as ev:
        assert ev.length == 24
        assert array.array("d", bytes(ev.data)) == values
        assert ev.data.cast("d").tolist() == values.tolist()


def test_sendv_gathers_buffers_into_one_message(pair):
    pair.cli.conn.sendv([b"ab", bytearray(b"cd"), memoryview(b"efg"), b""], context="v")
    with pair.next(pair.srv, cci.RecvEvent) as ev:
        assert bytes(ev.data) == b"abcdefg"
    with pair.next(pair.cli, cci.SendEvent) as sent:
        assert sent.ok and sent.context == "v"


def test_a_non_contiguous_buffer_or_a_str_is_refused(pair):
    with pytest.raises(BufferError):
        pair.cli.conn.send(memoryview(b"abcdef")[::2])
    with pytest.raises(TypeError):
        pair.cli.conn.send("text")


def test_a_message_over_max_send_size_is_emsgsize(pair):
    n = pair.cli.conn.max_send_size + 1
    with pytest.raises(cci.errors.MessageTooLarge) as info:
        pair.cli.conn.send(bytes(n))
    err = info.value
    assert err.status == cci.Status.EMSGSIZE and cci.EMSGSIZE is cci.errors.MessageTooLarge
    assert err.message == cci.strerror(cci.Status.EMSGSIZE)
    assert "max_send_size" in err.message and err.call == "cci_send"


def test_send_events_carry_status_and_context(pair):
    ctx = object()
    pair.cli.conn.send(b"x", context=ctx)
    with pair.next(pair.cli, cci.SendEvent) as ev:
        assert ev.status == cci.Status.SUCCESS and ev.ok and ev.error is None
        assert ev.context is ctx and ev.connection is pair.cli.conn
        assert ev.type == cci.EventType.SEND
    pair.next(pair.srv, cci.RecvEvent).done()
    assert pair.cli.ep._ctx == {}


def test_blocking_and_silent_sends_have_no_send_event(pair):
    pair.cli.conn.send(b"blocking", flags=cci.BLOCKING, context="ignored")
    pair.cli.conn.send(b"silent", flags=cci.SILENT)
    for want in (b"blocking", b"silent"):
        with pair.next(pair.srv, cci.RecvEvent) as ev:
            assert bytes(ev.data) == want
    pair.settle()
    assert not [e for e in pair.cli.queue if isinstance(e, cci.SendEvent)]


def test_a_no_copy_buffer_stays_alive_until_its_send_event(pair):
    buf = bytearray(pattern(512))
    ref = memoryview(buf)
    pair.cli.conn.send(ref, flags=cci.NO_COPY, context="nc")
    del ref
    with pytest.raises(BufferError):
        buf.extend(b"x")  # exported to the library until completion
    with pair.next(pair.srv, cci.RecvEvent) as ev:
        assert ev.data == pattern(512)
    with pair.next(pair.cli, cci.SendEvent) as sent:
        assert sent.context == "nc"
    buf.extend(b"x")  # released
    with pytest.raises(ValueError):
        pair.cli.conn.send(b"x", flags=cci.NO_COPY | cci.SILENT)


def test_received_data_is_gone_once_the_event_is_given_back(pair):
    ev = pair.exchange(b"precious")
    view = ev.data
    kept = bytes(ev.data)
    assert ev.data is view and not view.readonly
    ev.done()
    assert ev.returned
    ev.done()  # never twice
    with pytest.raises(ValueError):
        ev.data
    with pytest.raises(ValueError):
        view[0]
    with pytest.raises(ValueError):
        bytes(ev)
    assert kept == b"precious"


def test_a_with_block_gives_the_event_back(pair):
    with pair.exchange(b"abc") as ev:
        view = ev.data
        assert not ev.returned
    assert ev.returned
    with pytest.raises(ValueError):
        bytes(view)


def test_slices_of_the_data_keep_the_receive_buffer_until_dropped(pair):
    ev = pair.exchange(b"0123456789")
    part = ev.data[2:5]
    ev.done()
    assert bytes(part) == b"234"  # still lent: the bytes are intact
    assert len(pair.srv.ep._lent) == 1
    del part
    assert pair.srv.ep._lent == {}


def test_dropped_events_go_back_to_the_library(pair):
    pair.srv.ep.recv_buf_count = 4
    assert pair.srv.ep.recv_buf_count == 4
    for i in range(40):  # ten times the receive buffers
        pair.cli.conn.send(b"m%d" % i)
        ev = pair.next(pair.srv, cci.RecvEvent)
        assert bytes(ev.data) == b"m%d" % i
        del ev  # never done(): collected, hence given back
        pair.next(pair.cli, cci.SendEvent)
    gc.collect()
    assert pair.srv.ep._lent == {}


def test_closing_the_endpoint_gives_back_its_events(device):
    from support import Pair
    pair = Pair.open(device)
    ev = pair.exchange(b"held")
    view = ev.data
    pair.close()
    assert ev.returned or ev._token not in pair.srv.ep._lent
    with pytest.raises(ValueError):
        bytes(view)
    with pytest.raises(ValueError):
        ev.data
    ev.done()  # nothing left to give back: no error


def test_iterating_an_endpoint_hands_out_what_is_there(pair):
    for i in range(3):
        pair.cli.conn.send(b"%d" % i, flags=cci.BLOCKING)
    got = []
    for _ in range(100):
        got += [bytes(ev.data) for ev in pair.srv.ep if isinstance(ev, cci.RecvEvent)]
        if len(got) == 3:
            break
        pair.srv.ep.wait(0.05)
    assert got == [b"0", b"1", b"2"]


def test_connection_options_read_back(pair):
    c = pair.cli.conn
    c.send_timeout = 1.5
    c.keepalive_timeout = 3
    assert c.send_timeout == 1.5 and c.keepalive_timeout == 3.0
