"""The README's quick start works unchanged with a Python that refuses global installs (PEP 668), as
Debian 12's and Ubuntu 24.04's `python3` do: `./scripts/demo` makes the project's .venv with that
Python, installs into it, and runs the cockpit from it; the system Python is left as it was.

It installs the package and its dependencies for real (from pip's cache after the test command's own
install), so it takes some 20-60 s."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def _refuses_global_install(python: str) -> bool:
    """True when `python -m pip install` outside a venv stops with PEP 668's error."""
    res = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-deps", "r37-no-such-package"],
                         capture_output=True, text=True, timeout=60)
    return res.returncode != 0 and "externally-managed-environment" in res.stdout + res.stderr


def _managed_python() -> str:
    for python in SYSTEM_PYTHONS:
        if os.access(python, os.X_OK) and _refuses_global_install(python):
            return python
    pytest.skip("no externally managed (PEP 668) python3 on this machine: the test needs Debian's or "
                "Ubuntu's own python3")


def _copy_project(dest: Path) -> Path:
    """The project's tracked files, as a fresh clone has them (no .venv, no caches)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=30)
    if listed.returncode != 0:
        skip = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info")
        shutil.copytree(ROOT, dest, ignore=skip)
        return dest
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src, dst = ROOT / rel, dest / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return dest


def test_demo_quick_start_with_a_python_that_refuses_global_installs(tmp_path: Path) -> None:
    python = _managed_python()
    project = _copy_project(tmp_path / "r37-cockpit")
    bin_dir = tmp_path / "bin"                      # `python3` on PATH is the managed one, as on the box
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin:/usr/sbin:/sbin"
    env["XDG_STATE_HOME"] = str(tmp_path / "state")

    res = subprocess.run(["./scripts/demo", "--help"], cwd=project, env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert "usage: r37-cockpit demo" in res.stdout
    venv_python = project / ".venv" / "bin" / "python"
    assert venv_python.exists()
    base = subprocess.run([str(venv_python), "-c", "import sys, cockpit; print(sys.base_prefix)"],
                          capture_output=True, text=True, timeout=60)
    assert base.returncode == 0, base.stderr
    prefix = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                            timeout=30).stdout.strip()
    assert Path(base.stdout.strip()) == Path(prefix)       # the venv was made from the managed python
    # nothing went into the system python
    probe = subprocess.run([python, "-c", "import cockpit"], capture_output=True, text=True, timeout=30,
                           cwd=tmp_path)
    assert probe.returncode != 0
    # a second run reuses the venv
    made = (project / ".venv" / "pyvenv.cfg").stat().st_mtime_ns
    again = subprocess.run(["./scripts/demo", "--help"], cwd=project, env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (project / ".venv" / "pyvenv.cfg").stat().st_mtime_ns == made
