"""The host's /proc/meminfo: the idle base minus the engine's memory, plus faults.

The idle base lives in `<root>/proc/meminfo.base` (written by `provision_host`); the engine writes
`<root>/run/mem.json` = {"used_bytes": N}; the `low-memory` fault caps MemAvailable (default 40 GiB,
param {"available_gib": X}). `render` computes the text; `refresh` writes it to `<root>/proc/meminfo`
(atomically), so a reader without the stand-ins (bash `read`) sees the same thing as `cat`. Every writer
of an input calls `refresh` after changing it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os

from cockpit.sim.tools import _host

LOW_MEMORY_GIB = 40
BASE_NAME = "meminfo.base"
LIVE_NAME = "meminfo"


def parse(text: str) -> list[tuple[str, int, bool]]:
    """(key, value, has_kb_unit) in file order."""
    rows = []
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if key and parts:
            rows.append((key, int(parts[0]), len(parts) > 1))
    return rows


def fmt(rows: list[tuple[str, int, bool]]) -> str:
    out = []
    for key, value, kb in rows:
        label = f"{key}:"
        line = f"{label:<16}{value:>8}" if len(label) < 16 else f"{label} {value:>5}"
        out.append(line + (" kB" if kb else ""))
    return "\n".join(out) + "\n"


def render(root: str | None = None) -> str:
    root = root or _host.root()
    with open(os.path.join(root, "proc", BASE_NAME)) as f:
        rows = parse(f.read())
    values = {k: v for k, v, _ in rows}
    mem = _host.read_json(os.path.join(root, "run", "mem.json"), {})
    used_kb = int(mem.get("used_bytes", 0)) // 1024 if isinstance(mem, dict) else 0
    total = values.get("MemTotal", 0)
    floor = 65536
    new = dict(values)
    if used_kb:
        new["MemFree"] = max(floor, values.get("MemFree", 0) - used_kb)
        new["MemAvailable"] = max(floor, values.get("MemAvailable", 0) - used_kb)
        new["AnonPages"] = min(total, values.get("AnonPages", 0) + used_kb)
        new["Active(anon)"] = min(total, values.get("Active(anon)", 0) + used_kb)
        new["Active"] = min(total, values.get("Active", 0) + used_kb)
        new["Committed_AS"] = values.get("Committed_AS", 0) + used_kb
    if os.path.exists(os.path.join(root, "faults", "low-memory")):
        params = _host.read_json(os.path.join(root, "faults", "low-memory"), {})
        gib = params.get("available_gib", LOW_MEMORY_GIB) if isinstance(params, dict) else LOW_MEMORY_GIB
        cap = int(float(gib) * 1024 * 1024)
        taken = max(0, new["MemAvailable"] - cap)
        new["MemAvailable"] = min(new["MemAvailable"], cap)
        new["MemFree"] = max(floor, new["MemFree"] - taken)
        new["AnonPages"] = min(total, new["AnonPages"] + taken)
    return fmt([(k, new[k], kb) for k, _, kb in rows])


def refresh(root: str | os.PathLike[str]) -> None:
    """Rewrite `<root>/proc/meminfo` from the current inputs (no-op before provisioning wrote the base).

    A lock serialises render + replace, so two writers never leave a text rendered from stale inputs.
    """
    proc = os.path.join(os.fspath(root), "proc")
    if not os.path.exists(os.path.join(proc, BASE_NAME)):
        return
    with open(os.path.join(proc, ".meminfo.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            _host.write_atomic(os.path.join(proc, LIVE_NAME), render(os.fspath(root)))
