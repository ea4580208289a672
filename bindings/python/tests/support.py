"""Helpers of the tests: two endpoints of one process driven together."""
import collections
import select
import time

import cci

# transport -> the device of tests/loopback.ini that serves it
TRANSPORT_DEVICES = {"sm": "sm", "tcp": "tcp-lo"}


class Peer:
    """An endpoint and the events it handed out that no test took yet."""

    def __init__(self, ep):
        self.ep = ep
        self.queue = collections.deque()
        self.conn = None


class Pair:
    """A server and a client endpoint (blocking) and their connection."""

    def __init__(self, srv_ep, cli_ep):
        self.srv = Peer(srv_ep)
        self.cli = Peer(cli_ep)
        self.peers = (self.srv, self.cli)
        self.poller = select.poll()
        for p in self.peers:
            self.poller.register(p.ep.fileno(), select.POLLIN)

    @classmethod
    def open(cls, device, connect=True, **kw):
        srv = cci.Endpoint(device, blocking=True)
        try:
            cli = cci.Endpoint(device, blocking=True)
        except BaseException:
            srv.close()
            raise
        pair = cls(srv, cli)
        if connect:
            pair.connect(**kw)
        return pair

    def close(self):
        for p in self.peers:
            p.ep.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def connect(self, attr=cci.RO, payload=b"", context=None, accept_context=None):
        """Connect client to server; returns the (server, client) connections."""
        self.cli.ep.connect(self.srv.ep.uri, payload, attr=attr, context=context)
        with self.next(self.srv, cci.ConnectRequestEvent) as req:
            assert req.data == bytes(payload)
            assert req.attribute == attr
            req.accept(accept_context)
        with self.next(self.srv, cci.AcceptEvent) as acc:
            acc.raise_for_status()
            self.srv.conn = acc.connection
        with self.next(self.cli, cci.ConnectEvent) as con:
            con.raise_for_status()
            self.cli.conn = con.connection
        return self.srv.conn, self.cli.conn

    def progress(self, wait_ms=0):
        """Move every queued event of both endpoints into the peers' queues."""
        got = False
        for p in self.peers:
            for ev in p.ep:
                p.queue.append(ev)
                got = True
        if not got and wait_ms:
            self.poller.poll(wait_ms)
        return got

    def next(self, peer, cls=cci.Event, timeout=5.0, where=None):
        """The first event of peer that is a cls (and passes where), waiting
        at most timeout seconds; the others stay queued."""
        deadline = time.monotonic() + timeout
        while True:
            for ev in peer.queue:
                if isinstance(ev, cls) and (where is None or where(ev)):
                    peer.queue.remove(ev)
                    return ev
            if not self.progress(wait_ms=20) and time.monotonic() > deadline:
                raise AssertionError(f"no {cls.__name__} within {timeout} s; "
                                     f"queued: {list(peer.queue)}")

    def settle(self, seconds=0.05):
        """Let events come in for a while (to check that none does)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.progress(wait_ms=10)

    def exchange(self, data, **send_kw):
        """Client sends data; returns the server's RecvEvent (not given
        back) once the client's SendEvent has come (also given back)."""
        self.cli.conn.send(data, **send_kw)
        ev = self.next(self.srv, cci.RecvEvent)
        if not send_kw.get("flags", 0) & (cci.BLOCKING | cci.SILENT):
            self.next(self.cli, cci.SendEvent).done()
        return ev


def pattern(n, seed=0):
    """n bytes counting up from seed."""
    return bytes((seed + i) & 0xFF for i in range(n))
