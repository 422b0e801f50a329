"""Start-up of r37-cockpit, each figure next to a bare `python -c pass` measured in the same run.

Targets (issue 15): `--version` and `--help` <= 0.15 s of wall time; a headless command's own import
cost <= 0.25 s; the TUI's first frame <= 1 s and every host connected <= 2 s on the demo cluster.

    python perf/startup.py                 # starts a 4-host demo cluster in a temp dir
    python perf/startup.py --runs 9 --json
    python perf/startup.py --dir DIR       # an already running sim cluster (DIR/cluster.toml)

- wall: median wall time of the whole process over --runs runs;
- own import cost: the command is run for real against the demo cluster and the modules it imported
  (also those imported late, inside its handler) are recorded; a fresh interpreter then imports the
  ones `python -c pass` does not have, timed by wall clock (median of --runs): first the libraries'
  (third-party and standard modules, in the order the command imported them), then the cockpit's own;
  the figure is their sum, printed with its two parts. The collector stays on (the cockpit imports
  with it off, `cockpit.startup`: the figure is the conservative one);
- the cockpit's modules are byte-compiled first, as an install does (with PYTHONDONTWRITEBYTECODE set,
  an editable install would otherwise compile them again on every start);
- TUI: the cockpit in a pseudo-terminal (160x48); first frame = the pane tabs appear on the terminal,
  connected = the header says every host is connected; both from the process's start.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import pty
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

from exact_wait import wait_exactly

PY = sys.executable
HEADLESS = {                       # command -> argv after `--config PATH`
    "hosts": ["hosts"],
    "preflight": ["preflight"],
    "status": ["status"],
    "logs": ["logs", "-n", "1"],
    "stats": ["stats", "--once"],
    "config check": ["config", "check"],
}
TARGETS = {"version": 0.15, "help": 0.15, "import": 0.25, "first_frame": 1.0, "connected": 2.0}


def wall(argv: list[str], runs: int, env: dict[str, str]) -> float:
    """Median wall seconds of running argv to its end (seen the moment it ends: `exact_wait`)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_exactly(proc, 120)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


RECORD = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(list(sys.modules))))
from cockpit.__main__ import run
sys.argv[0] = "r37-cockpit"
raise SystemExit(run())
"""
TIME_IMPORTS = """
import importlib, json, sys, time
wanted = json.load(open(sys.argv[1]))
def load(names):
    t0 = time.perf_counter()
    for name in names:
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except Exception:
                pass
    return time.perf_counter() - t0
ours = [n for n in wanted if n == "cockpit" or n.startswith("cockpit.")]
libraries = load([n for n in wanted if n not in ours])
print(libraries, load(ours))
"""


def imported_by(argv: list[str], env: dict[str, str]) -> list[str]:
    """The modules a run of the cockpit with `argv` imported, in import order (None: `python -c pass`)."""
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        code = RECORD if argv else "import atexit, json, sys\nout = sys.argv.pop(1)\n" \
            "atexit.register(lambda: open(out, 'w').write(json.dumps(list(sys.modules))))"
        subprocess.run([PY, "-c", code, out.name, *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, env=env, timeout=180)
        return json.loads(out.read() or "[]")


def own_import(argv: list[str], runs: int, env: dict[str, str]) -> dict[str, float]:
    """Median wall seconds a fresh interpreter takes to import what the command imported beyond what
    `python -c pass` has (no -X importtime: its own overhead would count): `total`, and its parts
    `libraries` (imported first) and `cockpit` (the cockpit's own modules, then)."""
    base = set(imported_by([], env))
    wanted = [m for m in imported_by(argv, env) if m not in base and m != "__main__"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(wanted, f)
    try:
        runs_ = [subprocess.run([PY, "-c", TIME_IMPORTS, f.name], capture_output=True, text=True,
                                env=env, timeout=180).stdout.split() for _ in range(runs)]
    finally:
        os.unlink(f.name)
    parts = [(float(r[0]), float(r[1])) if len(r) == 2 else (math.nan, math.nan) for r in runs_]
    return {"total": round(statistics.median(a + b for a, b in parts), 4),
            "libraries": round(statistics.median(a for a, _ in parts), 4),
            "cockpit": round(statistics.median(b for _, b in parts), 4)}


def tui_times(config: Path, env: dict[str, str], hosts: int, timeout: float = 30) -> tuple[float, float]:
    """(first frame, all hosts connected) seconds after start, the TUI in a 160x48 pseudo-terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    t0 = time.perf_counter()
    proc = subprocess.Popen([PY, "-m", "cockpit", "--config", str(config), "tui"], stdin=slave,
                            stdout=slave, stderr=slave, env={**env, "TERM": "xterm-256color"},
                            start_new_session=True)
    os.close(slave)
    seen, first, connected = b"", float("nan"), float("nan")
    want = f"{hosts}/{hosts} connected".encode()
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            seen = (seen + chunk)[-200_000:]
            now = time.perf_counter() - t0
            if first != first and b"Preflight" in seen:
                first = now
            if want in seen:
                connected = now
                break
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    return first, connected


def measure(config: Path, runs: int, hosts: int) -> dict[str, object]:
    env = {**os.environ, "XDG_STATE_HOME": tempfile.mkdtemp(prefix="r37-startup-state-")}
    base = wall([PY, "-c", "pass"], runs, env)
    out: dict[str, object] = {"python_pass_s": round(base, 4)}
    out["version_s"] = round(wall([PY, "-m", "cockpit", "--version"], runs, env), 4)
    out["help_s"] = round(wall([PY, "-m", "cockpit", "--help"], runs, env), 4)
    out["import_s"] = {name: own_import(["--config", str(config), *argv], runs, env)
                       for name, argv in HEADLESS.items()}
    frames = [tui_times(config, env, hosts) for _ in range(max(3, runs // 2))]
    out["tui_first_frame_s"] = round(statistics.median(f for f, _ in frames), 3)
    out["tui_connected_s"] = round(statistics.median(c for _, c in frames), 3)
    shutil.rmtree(env["XDG_STATE_HOME"], ignore_errors=True)
    return out


def report(r: dict[str, object]) -> str:
    base = float(r["python_pass_s"])  # type: ignore[arg-type]
    rows = [("python -c pass (baseline)", base, None),
            ("r37-cockpit --version", r["version_s"], TARGETS["version"]),
            ("r37-cockpit --help", r["help_s"], TARGETS["help"])]
    imports: dict[str, dict[str, float]] = r["import_s"]  # type: ignore[assignment]
    rows += [(f"{name}: own import cost", v["total"], TARGETS["import"]) for name, v in imports.items()]
    rows += [("TUI first frame", r["tui_first_frame_s"], TARGETS["first_frame"]),
             ("TUI all hosts connected", r["tui_connected_s"], TARGETS["connected"])]
    lines = [f"{'figure':34} {'seconds':>8} {'target':>7}  verdict  {'of which: libraries':>19}  cockpit"]
    for name, value, target in rows:
        v = float(value)  # type: ignore[arg-type]
        verdict = "" if target is None else ("ok" if v <= target else "OVER")
        split = imports.get(name.removesuffix(": own import cost"))
        parts = f"  {split['libraries']:19.3f}  {split['cockpit']:7.3f}" if split else ""
        lines.append(f"{name:34} {v:8.3f} {'' if target is None else f'{target:7.2f}'}  {verdict:7}{parts}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--dir", type=Path, help="a running sim cluster's directory")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import compileall

    import cockpit
    from cockpit.config import load_config
    from cockpit.sim import cluster
    compileall.compile_dir(Path(cockpit.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory(prefix="r37-startup-") as tmp:
        directory = args.dir or Path(tmp) / "cluster"
        toml = directory / "cluster.toml" if args.dir else cluster.demo_up(directory)
        try:
            result = measure(toml, args.runs, len(load_config(toml).hosts))
        finally:
            if not args.dir:
                cluster.down(directory)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
