"""Connections: accept, reject, payloads, attributes, timeouts, disconnect."""
import time

import pytest

import cci
from support import TRANSPORT_DEVICES, Pair


@pytest.mark.parametrize("attr", [cci.RO, cci.RU, cci.UU])
def test_accept_gives_both_sides_a_connection_with_its_context(device, attr):
    with Pair.open(device, connect=False) as pair:
        sconn, cconn = pair.connect(attr=attr, payload=b"hello server", context=("client", 1),
                                    accept_context={"server": 2})
        assert cconn.context == ("client", 1)
        assert sconn.context == {"server": 2}
        assert sconn.attribute == cconn.attribute == attr
        assert sconn.max_send_size == cconn.max_send_size > 0
        assert sconn.endpoint is pair.srv.ep and cconn.endpoint is pair.cli.ep
        assert pair.cli.ep.connections == [cconn]
        assert repr(cconn).startswith(f"<cci.Connection {attr.name}")


def test_reject_gives_the_client_connection_refused(device):
    with Pair.open(device, connect=False) as pair:
        pair.cli.ep.connect(pair.srv.ep.uri, b"let me in", context="ctx")
        with pair.next(pair.srv, cci.ConnectRequestEvent) as req:
            assert req.data == b"let me in"
            req.reject()
            with pytest.raises(cci.errors.InvalidArgument):
                req.accept()  # answered already
        with pair.next(pair.cli, cci.ConnectEvent) as ev:
            assert ev.status == cci.Status.ECONNREFUSED
            assert not ev.ok and ev.connection is None and ev.context == "ctx"
            assert isinstance(ev.error, cci.errors.ConnectionRefused)
            with pytest.raises(cci.errors.ConnectionRefused, match="connection refused"):
                ev.raise_for_status()
        assert pair.cli.ep.connections == []


def test_a_request_cannot_be_answered_after_it_was_given_back(device):
    with Pair.open(device, connect=False) as pair:
        pair.cli.ep.connect(pair.srv.ep.uri)
        req = pair.next(pair.srv, cci.ConnectRequestEvent)
        req.done()
        assert req.returned
        with pytest.raises(ValueError, match="given back"):
            req.accept()


@pytest.mark.parametrize("size", [0, 1, cci.CONN_REQ_LEN])
def test_connect_payloads_up_to_conn_req_len_reach_the_server(device, size):
    payload = bytes(range(256)) * 4
    with Pair.open(device, connect=False) as pair:
        pair.connect(payload=bytearray(payload[:size]))


def test_a_payload_over_conn_req_len_is_invalid(device):
    with cci.Endpoint(device) as srv, cci.Endpoint(device) as cli:
        with pytest.raises(cci.errors.InvalidArgument) as info:
            cli.connect(srv.uri, b"x" * (cci.CONN_REQ_LEN + 1))
        assert info.value.status == cci.Status.EINVAL
        assert info.value.message == "invalid argument"
        assert info.value.call == "cci_connect"


@pytest.mark.parametrize("uri", ["", "nonsense", "bogus://host:1", "tcp://", "sm://"])
def test_a_bad_uri_is_an_invalid_argument_with_the_library_message(device, uri):
    with cci.Endpoint(device) as ep:
        with pytest.raises(cci.Error) as info:
            ep.connect(uri)
        assert isinstance(info.value, (cci.errors.InvalidArgument,
                                       cci.errors.AddressNotAvailable))
        assert info.value.message == cci.strerror(info.value.status)
        assert info.value.message in str(info.value)


def test_a_uri_of_another_transport_is_invalid(transport):
    other = "tcp://127.0.0.1:1" if transport == "sm" else "sm:///tmp/cci-none/1/0"
    with cci.Endpoint(TRANSPORT_DEVICES[transport]) as ep:
        with pytest.raises(cci.errors.InvalidArgument):
            ep.connect(other)


def test_a_connect_timeout_ends_in_timed_out(device):
    with cci.Endpoint(device) as srv, cci.Endpoint(device, blocking=True) as cli:
        start = time.monotonic()
        cli.connect(srv.uri, timeout=0.2, context=7)  # the server never answers
        with cli.wait(5) as ev:
            assert isinstance(ev, cci.ConnectEvent)
            assert ev.status == cci.Status.ETIMEDOUT and ev.context == 7
            assert isinstance(ev.error, cci.errors.TimedOut)
        assert 0.15 < time.monotonic() - start < 3


def test_disconnect_tells_the_peer_whose_sends_then_fail(device):
    with Pair.open(device, connect=False) as pair:
        sconn, cconn = pair.connect()
        with cconn:
            pass  # disconnects at the end of the block
        assert cconn.closed and pair.cli.ep.connections == []
        cconn.disconnect()  # idempotent
        with pytest.raises(ValueError, match="closed"):
            cconn.send(b"x")
        deadline = time.monotonic() + 5
        while True:
            try:
                sconn.send(b"are you there?")
            except cci.errors.Disconnected as exc:
                assert exc.message == cci.strerror(cci.Status.ERR_DISCONNECTED)
                break
            ev = pair.next(pair.srv, cci.SendEvent)
            if ev.status == cci.Status.ERR_DISCONNECTED:
                assert isinstance(ev.error, cci.errors.Disconnected)
                break
            assert time.monotonic() < deadline, "the peer never learnt of the disconnect"
            time.sleep(0.01)


def test_closing_an_endpoint_closes_its_connections(device):
    with Pair.open(device, connect=False) as pair:
        sconn, cconn = pair.connect()
        pair.cli.ep.close()
        assert cconn.closed
        with pytest.raises(ValueError):
            cconn.send(b"x")
