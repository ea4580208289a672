"""The OS handle with selectors and asyncio, and events from another process."""
import asyncio
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cci
from support import pattern

HERE = Path(__file__).resolve().parent


def test_a_selector_wakes_up_when_an_event_is_there(pair):
    sel = selectors.DefaultSelector()
    sel.register(pair.srv.ep, selectors.EVENT_READ)  # fileno() is enough
    assert sel.select(timeout=0.05) == []
    pair.cli.conn.send(b"wake up")
    assert sel.select(timeout=5), "the OS handle never turned readable"
    got = [ev for ev in pair.srv.ep]
    recvs = [ev for ev in got if isinstance(ev, cci.RecvEvent)]
    assert [bytes(ev.data) for ev in recvs] == [b"wake up"]
    for ev in got:
        ev.done()
    assert sel.select(timeout=0) == []  # level-triggered: quiet once drained
    sel.close()


async def echo_over_asyncio(device, messages):
    """A server and a client endpoint on one event loop, each driven by
    loop.add_reader on its fileno(); the server echoes, the client checks."""
    loop = asyncio.get_running_loop()
    with cci.Endpoint(device, blocking=True) as srv, cci.Endpoint(device, blocking=True) as cli:
        connected = loop.create_future()
        echoes = asyncio.Queue()

        def on_server():
            for ev in srv:
                with ev:
                    if isinstance(ev, cci.ConnectRequestEvent):
                        ev.accept()
                    elif isinstance(ev, cci.RecvEvent):
                        ev.connection.send(ev.data)

        def on_client():
            for ev in cli:
                with ev:
                    if isinstance(ev, cci.ConnectEvent):
                        connected.set_result(ev.connection)
                    elif isinstance(ev, cci.RecvEvent):
                        echoes.put_nowait(bytes(ev.data))
                    elif isinstance(ev, cci.SendEvent):
                        ev.raise_for_status()

        loop.add_reader(srv.fileno(), on_server)
        loop.add_reader(cli.fileno(), on_client)
        try:
            cli.connect(srv.uri)
            conn = await asyncio.wait_for(connected, 5)
            for msg in messages:
                conn.send(msg)
                assert await asyncio.wait_for(echoes.get(), 5) == msg
            return len(messages)
        finally:
            loop.remove_reader(srv.fileno())
            loop.remove_reader(cli.fileno())


def test_an_asyncio_echo_with_add_reader(device):
    mss = {d.name: d for d in cci.devices()}[device].max_send_size
    messages = [pattern(n, n) for n in (0, 1, 8, 100, 4096, mss)] * 5
    assert asyncio.run(asyncio.wait_for(echo_over_asyncio(device, messages), 30)) == 30


@pytest.fixture
def echo_peer(device):
    """tests/echo_server.py in its own process, and its URI."""
    proc = subprocess.Popen([sys.executable, str(HERE / "echo_server.py"), device, "30"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        uri = proc.stdout.readline().strip()
        assert uri, "the echo server printed no URI"
        yield proc, uri
    finally:
        try:
            os.kill(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_peer_process_echoes_and_a_stopped_one_times_out_the_keepalive(echo_peer, device):
    proc, uri = echo_peer
    with cci.Endpoint(device, blocking=True) as ep:
        ep.connect(uri, context="peer")
        with ep.wait(5) as ev:
            ev.raise_for_status()
            conn = ev.connection
        conn.send(b"across processes")
        got = {}
        while len(got) < 2:
            ev = ep.wait(5)
            assert ev is not None, f"only {got} came"
            with ev:
                got[type(ev)] = bytes(ev.data) if isinstance(ev, cci.RecvEvent) else ev.status
        assert got == {cci.RecvEvent: b"across processes", cci.SendEvent: 0}

        os.kill(proc.pid, signal.SIGSTOP)
        conn.keepalive_timeout = 0.3
        start = time.monotonic()
        with ep.wait(10) as ev:
            assert isinstance(ev, cci.KeepaliveTimedOutEvent), ev
            assert ev.connection is conn
        assert time.monotonic() - start < 5
        os.kill(proc.pid, signal.SIGCONT)
        conn.send(b"still open", flags=cci.BLOCKING)
        with ep.wait(5) as ev:
            assert bytes(ev.data) == b"still open"
