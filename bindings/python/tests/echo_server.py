"""A peer process for the tests: accepts every client and echoes each
message back on its connection.  Prints its URI on stdout, then serves
until stdin closes or its time limit passes.

    python3 echo_server.py DEVICE [SECONDS]
"""
import select
import sys
import time

import cci


def main():
    device = sys.argv[1]
    limit = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
    with cci.Endpoint(device, blocking=True) as ep:
        print(ep.uri, flush=True)
        poller = select.poll()
        poller.register(ep.fileno(), select.POLLIN)
        poller.register(sys.stdin.fileno(), select.POLLIN | select.POLLHUP)
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for fd, _ in poller.poll(100):
                if fd == sys.stdin.fileno() and not sys.stdin.buffer.read1(4096):
                    return
            for ev in ep:
                with ev:
                    if isinstance(ev, cci.ConnectRequestEvent):
                        ev.accept()
                    elif isinstance(ev, cci.RecvEvent):
                        ev.connection.send(ev.data)


if __name__ == "__main__":
    main()
