"""Shared set-up of the binding's tests.

- CCI_CONFIG defaults to loopback.ini (sm, and tcp on 127.0.0.1), read
  when the library starts; meson passes sm-only.ini when tcp is not built.
- Every test is bounded: SIGALRM fails it after TEST_TIMEOUT seconds (or
  its @pytest.mark.timeout(N)), and a watchdog ends the whole process if
  a test is stuck where no signal can reach it.
- A run in which no test passed fails, whatever pytest counts.
"""
import faulthandler
import os
import signal
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
os.environ.setdefault("CCI_CONFIG", str(HERE / "loopback.ini"))
os.environ.setdefault("PYTHONPATH", str(HERE.parent))
sys.path.insert(0, str(HERE))

import cci  # noqa: E402  (after CCI_CONFIG is set)
from support import TRANSPORT_DEVICES  # noqa: E402

TEST_TIMEOUT = 60
_passed = 0


def pytest_configure(config):
    config.addinivalue_line("markers", "timeout(seconds): this test's time limit")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    marker = item.get_closest_marker("timeout")
    limit = marker.args[0] if marker else TEST_TIMEOUT

    def expired(signum, frame):
        raise TimeoutError(f"{item.nodeid} took longer than {limit} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(limit)
    faulthandler.dump_traceback_later(limit + 30, exit=True)
    try:
        yield
    finally:
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)


def pytest_runtest_logreport(report):
    global _passed
    if report.when == "call" and report.passed:
        _passed += 1


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 0 and _passed == 0:
        print("\nno test passed: failing the run", file=sys.stderr)
        session.exitstatus = 1


@pytest.fixture(params=sorted(TRANSPORT_DEVICES))
def transport(request):
    """Each test taking it runs once per transport (sm, tcp)."""
    name = TRANSPORT_DEVICES[request.param]
    if name not in {d.name for d in cci.devices()}:
        pytest.skip(f"no {name} device (CCI_CONFIG={os.environ['CCI_CONFIG']})")
    return request.param


@pytest.fixture
def device(transport):
    """The device name of the transport under test."""
    return TRANSPORT_DEVICES[transport]


@pytest.fixture
def pair(device):
    """Two connected blocking endpoints of this process (RO)."""
    from support import Pair
    p = Pair.open(device)
    yield p
    p.close()
