"""What every stand-in needs: the host root, its spec (as a dict, for speed) and fault switches."""

from __future__ import annotations

import json
import os
import sys
import time

ROOT_ENV = "R37_SIM_ROOT"
DEFAULT_ROOT = "/var/lib/r37-sim"


def root() -> str:
    return os.environ.get(ROOT_ENV) or DEFAULT_ROOT


def spec() -> dict:
    """The host's `sim.json` (HostSpec fields) as a plain dict."""
    with open(os.path.join(root(), "sim.json")) as f:
        return json.load(f)


def fault(name: str) -> bool:
    return os.path.exists(os.path.join(root(), "faults", name))


def fault_params(name: str) -> dict:
    """The JSON params of an active fault ({} when none or unreadable)."""
    try:
        with open(os.path.join(root(), "faults", name)) as f:
            text = f.read().strip()
        value = json.loads(text) if text else {}
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def read_json(path: str, default: object) -> object:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def write_atomic(path: str, data: str | bytes) -> None:
    """Write via a temp file in the same directory and rename (readers never see a partial file)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode) as f:
        f.write(data)
    os.replace(tmp, path)


def ib_dir() -> str:
    return os.path.join(root(), "sys", "class", "infiniband")


def run_dir() -> str:
    return os.path.join(root(), "run")


def read_first_line(path: str, default: str = "") -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return default


def err(msg: str) -> None:
    sys.stderr.write(msg if msg.endswith("\n") else msg + "\n")


def rfc3339nano(ns: int | None = None) -> str:
    """Docker's fixed-width RFC3339Nano in UTC: 2025-10-14T10:21:33.123456789Z."""
    ns = time.time_ns() if ns is None else ns
    secs, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:09d}Z"


def quiet_pipes() -> None:
    """Die quietly like a C tool when the reader goes away (SIGPIPE) or on SIGTERM/SIGINT."""
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
