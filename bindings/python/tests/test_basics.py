"""The library, devices, endpoints, options and errors."""
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cci
from cci import _ffi

HERE = Path(__file__).resolve().parent


def run_python(code, env=None, timeout=30):
    full = dict(os.environ, PYTHONPATH=str(HERE.parent))
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=timeout)


def test_library_lookup_prefers_CCI_LIBRARY_then_the_build_tree_then_the_system(tmp_path):
    pkg = tmp_path / "bindings" / "python" / "cci"
    pkg.mkdir(parents=True)
    assert _ffi.library_candidates({"CCI_LIBRARY": "/x/libcci.so.2"}, pkg) == ["/x/libcci.so.2"]
    assert _ffi.library_candidates({}, pkg) == ["libcci.so.2"]  # not a source tree yet
    (pkg.parent / "pyproject.toml").write_text("")
    assert _ffi.library_candidates({}, pkg) == ["libcci.so.2"]  # no build yet
    lib = tmp_path / "build" / "core" / "libcci.so.2"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    assert _ffi.library_candidates({}, pkg) == [str(lib), "libcci.so.2"]


def test_a_package_installed_beside_its_library_loads_the_prefix_s_own(tmp_path):
    pkg = tmp_path / "opt" / "lib" / "python3" / "dist-packages" / "cci"
    pkg.mkdir(parents=True)
    lib = tmp_path / "opt" / "lib" / "x86_64-linux-gnu" / "libcci.so.2"
    lib.parent.mkdir(parents=True)
    (pkg / "_libdir").write_text("../../../x86_64-linux-gnu\n")
    assert _ffi.library_candidates({}, pkg) == ["libcci.so.2"]  # no library there yet
    lib.write_bytes(b"")
    assert _ffi.library_candidates({}, pkg) == [str(lib), "libcci.so.2"]
    assert _ffi.library_candidates({"CCI_LIBRARY": "/x/libcci.so.2"}, pkg) == ["/x/libcci.so.2"]


def test_a_CCI_LIBRARY_that_does_not_load_is_an_import_error_naming_it():
    r = run_python("import cci", {"CCI_LIBRARY": "/nonexistent/libcci.so.2"})
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "/nonexistent/libcci.so.2" in r.stderr


def test_the_library_loaded_is_the_one_CCI_LIBRARY_names():
    if "CCI_LIBRARY" in os.environ:
        assert cci.library_path == os.environ["CCI_LIBRARY"]
    assert cci.ABI_VERSION == 2


def test_init_is_idempotent_and_finalize_closes_endpoints():
    assert cci.init() == cci.init() == 0
    ep = cci.Endpoint()
    assert not ep.closed
    cci.finalize()
    assert not cci.initialized()
    assert ep.closed
    with pytest.raises(ValueError):
        ep.get_event()
    cci.finalize()  # a second call does nothing
    assert cci.devices()  # starts the library again
    assert cci.initialized()


def test_a_device_of_a_finalized_library_is_refused():
    dev = cci.devices()[0]
    cci.finalize()
    with pytest.raises(ValueError, match="finalized"):
        cci.Endpoint(dev)
    with cci.Endpoint(cci.devices()[0].name) as ep:
        assert ep.device.name == dev.name


def test_devices_have_the_fields_of_struct_cci_device(device):
    devs = {d.name: d for d in cci.devices()}
    d = devs[device]
    assert d.transport in ("sm", "tcp")
    assert d.up is True
    assert isinstance(d.info, str)
    assert d.max_send_size >= 64
    assert isinstance(d.rate, int)
    assert d.pci is None or len(d.pci) == 4
    assert f"transport={d.transport}" in d.conf_argv
    assert d.conf["transport"] == d.transport
    if d.transport == "tcp":
        assert d.conf["ip"] == "127.0.0.1"
    assert device in repr(d)


def test_the_default_device_is_the_configured_default():
    with cci.Endpoint() as ep:
        assert ep.device.name == "sm"
        assert ep.uri.startswith("sm://")


@pytest.mark.parametrize("how", ["name", "object"])
def test_an_endpoint_opens_on_a_device_by_name_or_object(device, how):
    dev = {d.name: d for d in cci.devices()}[device]
    with cci.Endpoint(device if how == "name" else dev) as ep:
        assert ep.device.name == device
        assert ep.uri.startswith(dev.transport + "://")
        assert not ep.blocking
    assert ep.closed


def test_an_unknown_device_name_is_not_found():
    with pytest.raises(cci.errors.NotFound, match="no device named 'nope'") as info:
        cci.Endpoint("nope")
    assert info.value.status == cci.Status.ERR_NOT_FOUND


def test_a_service_picks_the_address_and_one_in_use_is_busy():
    with cci.Endpoint("sm", service=4242) as ep:
        assert ep.uri.endswith("/4242")
        with pytest.raises((cci.errors.Busy, cci.errors.AddressNotAvailable)):
            cci.Endpoint("sm", service=4242)
    with pytest.raises(cci.errors.InvalidArgument):
        cci.Endpoint("sm", service="not-a-number")


def test_fileno_needs_an_os_handle(device):
    with cci.Endpoint(device) as ep:
        with pytest.raises(io.UnsupportedOperation):
            ep.fileno()
    with cci.Endpoint(device, blocking=True) as ep:
        fd = ep.fileno()
        assert isinstance(fd, int) and fd >= 0
        assert ep.get_event() is None
        assert ep.arm() is True
        assert ep.wait(0.05) is None


def test_a_closed_endpoint_refuses_every_call(device):
    ep = cci.Endpoint(device, blocking=True)
    ep.close()
    ep.close()  # idempotent
    for call in (ep.get_event, ep.fileno, lambda: ep.connect("sm:///x/1/0"),
                 lambda: ep.rma_register(bytearray(8)), lambda: ep.send_timeout):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_endpoint_options_read_back_what_was_set(device):
    with cci.Endpoint(device) as ep:
        ep.send_timeout = 2.5
        assert ep.send_timeout == 2.5
        ep.keepalive_timeout = 0.000125
        assert ep.keepalive_timeout == 0.000125
        ep.keepalive_timeout = None
        assert ep.keepalive_timeout == 0
        ep.recv_buf_count = 16
        assert ep.recv_buf_count == 16
        assert ep.send_buf_count > 0
        assert len(ep.rma_align) == 6
        with pytest.raises(cci.errors.OutOfRange) as info:
            ep.send_buf_count = 0
        assert info.value.message == cci.strerror(cci.Status.ERANGE)
        with pytest.raises(ValueError):
            ep.send_timeout = 5000  # past 2^32 microseconds


def test_every_status_has_its_error_class_with_the_library_message():
    seen = set()
    for status in cci.Status:
        if status == cci.Status.SUCCESS:
            continue
        cls = cci.errors.BY_STATUS[status]
        assert issubclass(cls, cci.Error)
        assert getattr(cci, status.name) is cls
        seen.add(cls)
        err = cci.errors.error(status, "cci_call")
        assert type(err) is cls
        assert err.status == status
        assert err.message == cci.strerror(status)
        assert err.message and err.message != "unknown status"
        assert str(err) == f"cci_call: {err.message} (CCI_{status.name})"
    assert len(seen) == len(cci.Status) - 1
    assert cci.strerror(cci.Status.EINVAL) == "invalid argument"
    unknown = cci.errors.error(12345)
    assert type(unknown) is cci.Error and unknown.status == 12345
