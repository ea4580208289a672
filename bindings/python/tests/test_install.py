"""pip install of the package (into a scratch directory), and the library
lookup of an installed copy."""
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(120)
def test_pip_installs_a_package_that_finds_the_library_by_env_or_soname(tmp_path):
    for mod in ("pip", "setuptools"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"no {mod} for {sys.executable} (Debian: python3-{mod})")
    src = tmp_path / "src"
    shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                            "__pycache__"))
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-deps", "--no-index", "--target", str(target), str(src)],
                       capture_output=True, text=True, timeout=110)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "cci" / "pingpong.py").is_file()
    assert (target / "bin" / "cci-pingpong").is_file()

    lib = os.environ.get("CCI_LIBRARY") or str(PKG.parent.parent / "build/core/libcci.so.2")
    env = {k: v for k, v in os.environ.items() if k not in ("CCI_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    code = "import cci; print(cci.__file__); print(cci.library_path); print(cci.devices()[0].name)"
    # an installed copy has no build tree to look at: the system's search
    r = subprocess.run([sys.executable, "-c", code], env=dict(env, LD_LIBRARY_PATH=str(
        Path(lib).parent)), cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    file, loaded, dev = r.stdout.split()
    assert file.startswith(str(target)) and loaded == "libcci.so.2" and dev
    r = subprocess.run([sys.executable, "-c", code], env=dict(env, CCI_LIBRARY=lib),
                       cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[1] == lib
