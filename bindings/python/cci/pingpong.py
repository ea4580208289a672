"""pingpong: latency and throughput between two CCI endpoints.

    python3 -m cci.pingpong -s [-o FILE] [-D DEVICE] [-b]          # server
    python3 -m cci.pingpong -h URI [-i ITERS] [-m MAX] [-w|-r] ... # client

The same program as the C perf/pingpong, with the same wire protocol (so
either side may be the C one) and the same output table.  The server
serves one client and exits when it is done.  The client's connect payload
carries the mode (messages, RMA write, RMA read), the RMA size and -V.

Messages: the client sends, the server echoes, latency is one-way (half a
round trip).  RMA: the client moves the data with Connection.rma() and
waits for its SendEvent; latency is that round trip.  Throughput is bytes
divided by the printed latency (1 MB = 10^6 bytes).  From 1000 iterations
on, round trips are timed in batches of 100 and the median batch is shown.
"""
import json
import os
import signal
import struct
import sys
import time

import cci

PP_MAGIC = 0x9E3779B97F4A7C15       # control messages; its bytes do not count up by one
PP_HELLO_MAGIC = 0x70696E67         # "ping"
PP_VERSION = 2
PP_MAX_RMA = 1 << 30
PP_SEED_READ = 0x5A
PP_MAX_EXTRA_REGS = 10_000_000  # -R: other registrations per side
PP_BATCH = 100
CTL_HANDLE, CTL_RMA_DONE, CTL_ACK, CTL_DONE, CTL_DONE_ACK = range(1, 6)
HF_VERIFY = 1

HELLO = struct.Struct("=IIIIQII")    # magic, version, rma_op, flags, rma_max, extra_regs, pad
CTL = struct.Struct("=QIIQ32s")      # magic, type, size, seq, handle
ATTRS = {"ro": cci.RO, "ru": cci.RU, "uu": cci.UU}
MODES = {0: "msg", int(cci.WRITE): "rma_write", int(cci.READ): "rma_read"}

USAGE = """\
usage: python3 -m cci.pingpong -s [-o uri_file] [-D device] [-b] [-t secs]
       python3 -m cci.pingpong -h URI [-c ro|ru|uu] [-w|-r] [-m max] [-i iters]
                               [-W warmup] [-b] [-N] [-R n] [-V] [-A] [-D device] [-t secs]
                               [--json]
  -s          server: accept one client, echo, exit when it is done
  -o FILE     server: write the endpoint URI to FILE (atomically)
  -h URI      client: connect to the server at URI
  -c ATTR     connection: ro (default), ru or uu
  -w / -r     RMA write / read instead of messages (latency is round-trip)
  -m MAX      largest RMA size, k/m/g suffixes (default 4m)
  -i ITERS    timed round trips per size (default 10000; halved per
              doubling from 64 KiB)
  -W WARMUP   untimed round trips before each size (default 100)
  -b          block in poll() on the endpoint's OS handle
  -N          RMA without a completion message
  -R N        register N other one-byte regions on each side first
              (RMA lookups among many registrations; default 0)
  -V          check every payload (slower)
  -A          report the mean round trip instead of the median of
              batches of 100 (the default from 1000 iterations)
  -D NAME     use device NAME instead of the default
  -t SECS     give up after SECS without any event (default 30, 0: never)
  --json      one JSON object per row on stdout (Opened goes to stderr)
"""


class Fatal(Exception):
    """Ends the program with a message and exit status 1."""


class Options:
    server = blocking = verify = nomsg = mean = json = False
    uri = outfile = device = None
    attr = cci.RO
    rma_op = 0
    rma_max = 4 << 20
    iters = 10000
    warmup = 100
    extra_regs = 0
    timeout = 30.0


def parse_size(s):
    shift = {"k": 10, "m": 20, "g": 30}.get(s[-1:].lower(), 0)
    try:
        v = int(s[:-1] if shift else s, 0)
    except ValueError:
        v = -1
    if v < 0:
        raise Fatal(f'bad size "{s}"')
    return v << shift


def parse_count(s, lo, hi):
    v = parse_size(s)
    if not lo <= v <= hi:
        raise Fatal(f'bad count "{s}" ({lo} .. {hi})')
    return v


def parse_args(argv):
    o = Options()
    flags = {"-s": "server", "-b": "blocking", "-V": "verify", "-N": "nomsg", "-A": "mean",
             "--json": "json"}
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in ("--help", "-H"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        if a in flags:
            setattr(o, flags[a], True)
            continue
        if a in ("-w", "-r"):
            o.rma_op = int(cci.WRITE if a == "-w" else cci.READ)
            continue
        if a not in ("-h", "-o", "-D", "-c", "-m", "-i", "-W", "-R", "-t") or not args:
            sys.stderr.write(USAGE)
            sys.exit(1)
        v = args.pop(0)
        if a == "-h":
            o.uri = v
        elif a == "-o":
            o.outfile = v
        elif a == "-D":
            o.device = v
        elif a == "-c":
            if v.lower() not in ATTRS:
                raise Fatal(f'bad connection attribute "{v}" (ro, ru or uu)')
            o.attr = ATTRS[v.lower()]
        elif a == "-m":
            o.rma_max = parse_size(v)
        elif a == "-i":
            o.iters = parse_count(v, 1, 0xFFFFFFFF)
        elif a == "-W":
            o.warmup = parse_count(v, 0, 0xFFFFFFFF)
        elif a == "-R":
            o.extra_regs = parse_count(v, 0, PP_MAX_EXTRA_REGS)
        elif a == "-t":
            o.timeout = float(parse_count(v, 0, 0xFFFFFFFF))
    if o.server == (o.uri is not None):
        raise Fatal("give either -s or -h URI (--help for usage)")
    if o.extra_regs and not o.rma_op:
        raise Fatal("-R needs -w or -r")
    if o.rma_op and o.attr == cci.UU:
        raise Fatal("RMA needs a reliable connection (-c ro or ru)")
    if o.rma_op and not 0 < o.rma_max <= PP_MAX_RMA:
        raise Fatal(f"-m must be between 1 and {PP_MAX_RMA}")
    if o.verify and o.nomsg and o.rma_op == cci.WRITE:
        raise Fatal("-V with -w needs the completion message (drop -N)")
    return o


def write_uri(path, uri):
    """Write through a temporary file and a rename: a reader never sees half."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(uri + "\n")
    os.replace(tmp, path)


class Pattern:
    """Bytes that count up by one from a seed, as the C pingpong's fill()."""

    def __init__(self, size):
        self.bytes = bytes(range(256)) * (size // 256 + 2)

    def get(self, seed, n):
        s = seed & 0xFF
        return memoryview(self.bytes)[s:s + n]


class PingPong:
    def __init__(self, o):
        self.o = o
        self.ep = None
        self.conn = None
        self.stash = None      # a RecvEvent that came while waiting for something else
        self.held = None       # the last echo, given back once the next ping left
        self.inflight = 0      # sends and RMAs whose SendEvent is pending
        self.local = None
        self.extra = []        # -R registrations
        self.extra_mem = None
        self.remote = None
        self.buf = None

    # -- events ---------------------------------------------------------

    def next_event(self, timeout=None):
        """The next event, or None after timeout seconds (None: -t)."""
        limit = self.o.timeout if timeout is None else timeout
        ep = self.ep
        if self.o.blocking:
            return ep.wait(limit or None)
        get = ep.get_event
        spins = 0
        deadline = None
        while True:
            ev = get()
            if ev is not None:
                return ev
            spins += 1
            if spins & 1023 or not limit:
                continue
            now = time.monotonic()
            if deadline is None:
                deadline = now + limit
            elif now > deadline:
                return None

    def must_event(self):
        ev = self.next_event()
        if ev is None:
            raise Fatal(f"no event for {self.o.timeout:.0f} s: the peer is gone or stuck")
        return ev

    def handle_event(self, ev):
        """An event nobody waits for specifically; a RecvEvent is stashed."""
        if isinstance(ev, cci.SendEvent):
            if ev.status:
                raise Fatal(f"send completion: {ev.error}")
            if not self.inflight:
                raise Fatal("SendEvent with nothing in flight")
            self.inflight -= 1
        elif isinstance(ev, cci.RecvEvent):
            if self.stash is not None:
                raise Fatal("protocol error: two messages pending")
            self.stash = ev
            return
        elif isinstance(ev, cci.ConnectRequestEvent):
            ev.reject()  # one client at a time
        elif isinstance(ev, cci.KeepaliveTimedOutEvent):
            print("pingpong: keepalive timed out", file=sys.stderr)
        else:
            raise Fatal(f"unexpected event {ev.type.name}")
        ev.done()

    def wait_recv(self):
        while self.stash is None:
            self.handle_event(self.must_event())
        ev, self.stash = self.stash, None
        return ev

    def try_recv(self, timeout):
        while self.stash is None:
            ev = self.next_event(timeout)
            if ev is None:
                return None
            self.handle_event(ev)
        ev, self.stash = self.stash, None
        return ev

    def wait_idle(self):
        while self.inflight:
            self.handle_event(self.must_event())

    def wait_type(self, cls):
        while True:
            ev = self.must_event()
            if isinstance(ev, cls):
                return ev
            self.handle_event(ev)

    def post(self, start):
        """start() a send or RMA; while buffers are out, reap an event and
        try again (only when something in flight will give one back)."""
        while True:
            try:
                start()
                break
            except cci.errors.NoBuffers:
                if not self.inflight:
                    raise
                self.handle_event(self.must_event())
        self.inflight += 1

    def post_send(self, data):
        self.post(lambda: self.conn.send(data))

    def send_ctl(self, typ, size=0, seq=0):
        handle = self.local.bytes if typ == CTL_HANDLE else bytes(32)
        self.post_send(CTL.pack(PP_MAGIC, typ, size, seq, handle))

    @staticmethod
    def as_ctl(ev):
        """(type, size, seq, handle) of a control message, or None for a ping."""
        if ev.length != CTL.size:
            return None
        magic, typ, size, seq, handle = CTL.unpack(bytes(ev))
        return (typ, size, seq, handle) if magic == PP_MAGIC else None

    def expect_ctl(self, ev, typ):
        c = self.as_ctl(ev)
        if c is None or c[0] != typ:
            raise Fatal(f"protocol error: expected control message {typ}, "
                        f"got {ev.length} bytes")
        return c

    # -- endpoint -------------------------------------------------------

    def open_endpoint(self):
        o = self.o
        device = None
        if o.device is not None:
            names = {d.name: d for d in cci.devices()}
            if o.device not in names:
                raise Fatal(f'no device "{o.device}"; devices: ' +
                            " ".join(f"{d.name} ({d.transport})" for d in names.values()))
            device = names[o.device]
        self.ep = cci.Endpoint(device, blocking=o.blocking)
        print(f"Opened {self.ep.uri}", file=sys.stderr if o.json else sys.stdout, flush=True)
        if o.outfile:
            write_uri(o.outfile, self.ep.uri)

    # -- server ---------------------------------------------------------

    def server_accept(self):
        while True:
            ev = self.wait_type(cci.ConnectRequestEvent)
            hello = HELLO.unpack(ev.data) if len(ev.data) == HELLO.size else None
            ok = (hello is not None and hello[0] == PP_HELLO_MAGIC and hello[1] == PP_VERSION
                  and hello[4] <= PP_MAX_RMA and hello[5] <= PP_MAX_EXTRA_REGS
                  and hello[2] in MODES)
            if ok:
                ev.accept()
            else:
                ev.reject()
            ev.done()
            if not ok:
                print("pingpong: rejected a malformed request", file=sys.stderr)
                continue
            ev = self.wait_type(cci.AcceptEvent)
            ev.raise_for_status()
            self.conn = ev.connection
            ev.done()
            return hello

    def server_setup(self, hello):
        o = self.o
        _, _, o.rma_op, flags, rma_max, extra_regs, _ = hello
        o.verify = bool(flags & HF_VERIFY)
        mss = self.conn.max_send_size
        size = rma_max if o.rma_op and rma_max > mss else mss
        self.buf = bytearray(max(size, 1))
        self.view = memoryview(self.buf)
        self.pattern = Pattern(len(self.buf))
        if not o.rma_op:
            return
        self.buf[:] = self.pattern.get(PP_SEED_READ, len(self.buf))
        self.register_extra(extra_regs)
        self.local = self.ep.rma_register(self.buf, o.rma_op)
        self.send_ctl(CTL_HANDLE)

    def register_extra(self, n):
        """-R: n one-byte registrations before the one the benchmark uses."""
        self.extra_mem = bytearray(n)
        view = memoryview(self.extra_mem)
        self.extra = [self.ep.rma_register(view[i:i + 1], cci.READ | cci.WRITE) for i in range(n)]

    def serve_one(self, ev):
        """Handle one message; False once the client is done."""
        c = self.as_ctl(ev)
        if c is None:
            if ev.length > len(self.buf):
                raise Fatal(f"protocol error: {ev.length}-byte ping exceeds {len(self.buf)}")
            # answer first, give the event back after, as the C pingpong
            self.post_send(ev.data if self.o.verify else self.view[:ev.length])
            ev.done()
            return True
        ev.done()
        typ, size, seq, _ = c
        if typ == CTL_DONE:
            self.send_ctl(CTL_DONE_ACK)
            self.wait_idle()
            return False
        if typ != CTL_RMA_DONE:
            raise Fatal(f"protocol error: unexpected control message {typ}")
        if self.o.verify and self.o.rma_op == cci.WRITE:
            if size > len(self.buf):
                raise Fatal(f"protocol error: RMA size {size}")
            check(self.view[:size], self.pattern.get(seq, size), "RMA write target")
            self.send_ctl(CTL_ACK, size, seq)
        return True

    def run_server(self):
        self.server_setup(self.server_accept())
        while self.serve_one(self.wait_recv()):
            pass

    # -- client ---------------------------------------------------------

    def client_connect(self):
        o = self.o
        hello = HELLO.pack(PP_HELLO_MAGIC, PP_VERSION, o.rma_op,
                           HF_VERIFY if o.verify else 0, o.rma_max, o.extra_regs, 0)
        self.ep.connect(o.uri, hello, attr=o.attr, timeout=o.timeout or None)
        ev = self.wait_type(cci.ConnectEvent)
        if ev.status:
            raise Fatal(f"connect: {ev.error}")
        self.conn = ev.connection
        ev.done()

    def client_rma_setup(self):
        ev = self.wait_recv()
        self.remote = cci.RemoteHandle(self.expect_ctl(ev, CTL_HANDLE)[3])
        ev.done()
        self.register_extra(self.o.extra_regs)
        self.local = self.ep.rma_register(self.buf, 0)

    def ping_once(self, size, seq):
        if self.o.verify:
            self.view[:size] = self.pattern.get(seq, size)
        self.post_send(self.view[:size])
        if self.held is not None:
            self.held.done()
        ev = self.wait_recv()
        if ev.length != size:
            raise Fatal(f"echo of {ev.length} bytes for a {size}-byte ping")
        if self.o.verify:
            check(ev.data, self.pattern.get(seq, size), "echo")
        self.held = ev

    def rma_once(self, size, seq):
        o = self.o
        write = o.rma_op == cci.WRITE
        if o.verify and write:
            self.view[:size] = self.pattern.get(seq, size)
        elif o.verify:
            self.view[:size] = bytes(size)
        msg = None if o.nomsg else CTL.pack(PP_MAGIC, CTL_RMA_DONE, size, seq, bytes(32))
        self.post(lambda: self.conn.rma(self.local, 0, self.remote, 0, size, o.rma_op, msg))
        self.wait_idle()
        if not o.verify:
            return
        if not write:
            check(self.view[:size], self.pattern.get(PP_SEED_READ, size), "RMA read")
            return
        ev = self.wait_recv()
        self.expect_ctl(ev, CTL_ACK)
        ev.done()

    def time_size(self, size, iters, warmup):
        """Microseconds per round trip (the median batch of 100, or the mean)."""
        o = self.o
        nb = 0 if o.mean or iters < 10 * PP_BATCH else iters // PP_BATCH
        batches = []
        once = self.rma_once if o.rma_op else self.ping_once
        now = time.perf_counter_ns
        for i in range(warmup):
            once(size, i)
        t0 = tb = now()
        for i in range(iters):
            if nb and i and i % PP_BATCH == 0 and len(batches) < nb:
                t = now()
                batches.append(t - tb)
                tb = t
            once(size, warmup + i)
        end = now()
        if nb and len(batches) < nb:
            batches.append(end - tb)
        us = (end - t0) / 1e3 / iters
        if self.held is not None:
            self.held.done()
            self.held = None
        if nb:
            batches.sort()
            us = batches[nb // 2] / 1e3 / PP_BATCH
        self.wait_idle()
        return us

    def print_header(self, top):
        o = self.o
        if o.json:
            return
        dev = self.ep.device
        print(f"# {dev.transport} transport (device {dev.name}), {o.attr.name.lower()} "
              f"connection, {MODES[o.rma_op]}{', blocking' if o.blocking else ''}, "
              f"sizes up to {top}, {o.iters} iterations (fewer from 64 KiB)")
        print("# latency: " + ("mean of all round trips" if o.mean or o.iters < 10 * PP_BATCH
                               else "median of batches of 100 round trips"))
        print("%8s %12s %16s" % ("Bytes", "Latency (round-trip)" if o.rma_op
                                 else "Latency (one-way)", "Throughput"), flush=True)

    def print_row(self, size, iters, lat):
        o = self.o
        bw = size / lat if lat > 0 else 0.0
        if not o.json:
            print("%8u %12.2f us %12.2f MB/s" % (size, lat, bw), flush=True)
            return
        dev = self.ep.device
        print(json.dumps({
            "bytes": size, "latency_us": round(lat, 3), "throughput_MBps": round(bw, 3),
            "latency": "round-trip" if o.rma_op else "one-way", "iters": iters,
            "transport": dev.transport, "device": dev.name,
            "attribute": o.attr.name.lower(), "mode": MODES[o.rma_op],
            "blocking": o.blocking, "nocopy": False}, separators=(",", ":")), flush=True)

    def client_sweep(self, top):
        o = self.o
        size = 1 if o.rma_op else 0
        self.print_header(top)
        while True:
            iters, warmup = scaled(o.iters, size), scaled(o.warmup, size)
            lat = self.time_size(size, iters, warmup) / (1.0 if o.rma_op else 2.0)
            self.print_row(size, iters, lat)
            if size == top:
                break
            size = min(size * 2 if size else 1, top)

    def client_done(self):
        uu = self.o.attr == cci.UU
        for tries in range(11):
            self.send_ctl(CTL_DONE)
            ev = self.try_recv(0.2) if uu else self.wait_recv()
            if ev is not None:
                self.expect_ctl(ev, CTL_DONE_ACK)
                ev.done()
                break
        else:
            print("pingpong: no answer to done; leaving", file=sys.stderr)
        self.wait_idle()

    def run_client(self):
        o = self.o
        self.client_connect()
        top = o.rma_max if o.rma_op else self.conn.max_send_size
        self.buf = bytearray(max(top, 1))
        self.view = memoryview(self.buf)
        self.pattern = Pattern(len(self.buf))
        if o.rma_op:
            self.client_rma_setup()
        self.client_sweep(top)
        self.client_done()

    def teardown(self):
        if self.stash is not None:
            self.stash.done()
        if self.conn is not None:
            self.conn.disconnect()
        if self.local is not None:
            self.local.deregister()
        for h in self.extra:
            h.deregister()
        if self.ep is not None:
            self.ep.close()
        cci.finalize()


def scaled(n, size):
    """Halve the iterations for every doubling from 64 KiB on, keeping a few."""
    s = 64 * 1024
    while s <= size and n > 16:
        n //= 2
        s *= 2
    return n


def check(got, want, what):
    if got != want:
        got = bytes(got)
        want = bytes(want)
        i = next(i for i in range(len(want)) if got[i] != want[i])
        raise Fatal(f"data check failed ({what}, {len(want)} bytes): byte {i} is "
                    f"0x{got[i]:02x}, expected 0x{want[i]:02x}")


def main(argv=None):
    # like the C program: a closed stdout (| head) ends it quietly
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        o = parse_args(sys.argv[1:] if argv is None else argv)
        pp = PingPong(o)
        pp.open_endpoint()
        if o.server:
            pp.run_server()
        else:
            pp.run_client()
        pp.teardown()
        return 0
    except (Fatal, cci.Error) as exc:
        print(f"pingpong: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
