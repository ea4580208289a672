"""python3 -m cci.pingpong as two processes, and beside the C perf/pingpong
(CCI_PINGPONG names its binary; meson passes it)."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PY = [sys.executable, "-m", "cci.pingpong"]
ROW = re.compile(r"^ *(\d+) +(\d+\.\d\d) us +(\d+\.\d\d) MB/s$")


def env():
    return dict(os.environ, PYTHONPATH=str(HERE.parent))


def run_pair(tmp_path, device, client_args, server=PY, client=PY, timeout=60):
    """Start a server with -o, run the client against its URI; return the
    client's stdout once both exited 0."""
    uri_file = tmp_path / f"uri.{time.monotonic_ns()}"
    srv = subprocess.Popen(server + ["-s", "-o", str(uri_file), "-D", device, "-t", "20"],
                           env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not uri_file.exists():
            assert srv.poll() is None, f"server died: {srv.communicate()}"
            assert time.monotonic() < deadline, "the server published no URI"
            time.sleep(0.05)
        uri = uri_file.read_text().strip()
        cli = subprocess.run(client + ["-h", uri, "-D", device, "-t", "20"] + client_args,
                             env=env(), capture_output=True, text=True, timeout=timeout)
        assert cli.returncode == 0, cli.stderr
        out, err = srv.communicate(timeout=20)
        assert srv.returncode == 0, err
        assert out.startswith("Opened " + uri)
        return cli.stdout
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


def table(out, latency):
    lines = out.splitlines()
    assert lines[0].startswith("Opened ")
    assert lines[1].startswith("# ") and "transport (device" in lines[1]
    assert lines[2].startswith("# latency: ")
    assert lines[3] == "%8s %12s %16s" % ("Bytes", f"Latency ({latency})", "Throughput")
    rows = [ROW.match(line) for line in lines[4:]]
    assert rows and all(rows), out
    return [int(m.group(1)) for m in rows], [float(m.group(2)) for m in rows]


@pytest.mark.timeout(120)
def test_pingpong_messages_cover_every_power_of_two_up_to_max_send_size(tmp_path, device):
    out = run_pair(tmp_path, device, ["-i", "200", "-W", "10", "-V"])
    sizes, lat = table(out, "one-way")
    mss = {"sm": 8192, "tcp-lo": 65536}[device]
    assert sizes == [0] + [1 << k for k in range(mss.bit_length())]
    assert all(v > 0 for v in lat)
    assert "ro connection, msg" in out and "mean of all round trips" in out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["-w", "-r"])
def test_pingpong_rma_modes(tmp_path, device, mode):
    out = run_pair(tmp_path, device, [mode, "-m", "64k", "-i", "50", "-W", "5", "-V"])
    sizes, _ = table(out, "round-trip")
    assert sizes == [1 << k for k in range(17)]
    assert ("rma_write" if mode == "-w" else "rma_read") in out


@pytest.mark.timeout(60)
def test_pingpong_json_rows(tmp_path, device):
    out = run_pair(tmp_path, device, ["-i", "100", "-W", "5", "--json"])
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows[0]["bytes"] == 0 and rows[-1]["bytes"] > 0
    assert all(r["latency"] == "one-way" and r["mode"] == "msg" and r["latency_us"] > 0
               for r in rows)


@pytest.mark.timeout(60)
def test_pingpong_median_of_batches_and_uu(tmp_path, device):
    out = run_pair(tmp_path, device, ["-i", "1000", "-W", "10", "-c", "uu"])
    assert "uu connection" in out and "median of batches of 100" in out
    table(out, "one-way")


def test_pingpong_usage_errors_exit_non_zero():
    r = subprocess.run(PY, env=env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "give either -s or -h URI" in r.stderr
    r = subprocess.run(PY + ["-h", "nonsense://x", "-t", "5"], env=env(), capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "invalid argument" in r.stderr
    r = subprocess.run(PY + ["--help"], env=env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "-o FILE" in r.stdout


def c_pingpong():
    path = os.environ.get("CCI_PINGPONG")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("CCI_PINGPONG does not name the C pingpong (meson test sets it)")
    return [path]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", [[], ["-w", "-m", "16k"], ["-r", "-m", "16k"],
                                  ["-w", "-m", "64", "-R", "300"]],
                         ids=["msg", "write", "read", "write-among-300-registrations"])
def test_pingpong_speaks_the_protocol_of_the_c_one(tmp_path, device, mode):
    c = c_pingpong()
    args = mode + ["-i", "50", "-W", "5", "-V"]
    latency = "round-trip" if mode else "one-way"
    py_client = run_pair(tmp_path, device, args, server=c, client=PY)
    c_client = run_pair(tmp_path, device, args, server=PY, client=c)
    assert table(py_client, latency)[0] == table(c_client, latency)[0]
