"""Render the host's /proc/meminfo at read time: base state minus the engine's memory, plus faults.

Base values live in `<root>/proc/meminfo` (written by `provision_host`); the engine writes
`<root>/run/mem.json` = {"used_bytes": N}; the `low-memory` fault caps MemAvailable (default 40 GiB,
param {"available_gib": X}).
"""

from __future__ import annotations

import os

from cockpit.sim.tools import _host

LOW_MEMORY_GIB = 40


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
    with open(os.path.join(root, "proc", "meminfo")) as f:
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
