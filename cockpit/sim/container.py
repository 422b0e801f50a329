"""Container shim: runs one container's command as a child process, like containerd-shim + runc.

`python -m cockpit.sim.container --root ROOT --id ID [--attach]`

- the command is `Entrypoint + Cmd` from the container's config.json; a command starting with `vllm`
  (the R37 image has no entrypoint) runs as `<python> -m cockpit.sim.engine vllm ...`; any other
  command runs from the host PATH (so `--entrypoint nvidia-smi` finds the stand-in);
- on a host whose sim.json says `engine: "vllm"` (`sim up --engine vllm`), the head's `vllm serve`
  runs the REAL vLLM instead (realvllm.py: argv mapped for the CPU build and the tiny model, API on
  loopback, `real-vllm.json` in the container dir records the mapping), with a rendezvous head for the
  simulated workers in the engine's process group;
- env: the host env + the container's `-e` values + `R37_SIM_ROOT` + `R37_SIM_CONTAINER_DIR`;
- every stdout/stderr line goes to docker's json-file log with an RFC3339Nano time (and, with
  `--attach`, to the shim's own stdout/stderr: the foreground `docker run`);
- `state.json` follows the process: running (Pid, StartedAt) -> exited (ExitCode, 128+N when killed
  by signal N, FinishedAt, OOMKilled when the engine created `oom_killed` before dying);
- a command that cannot be started leaves the container `created` with `State.Error` and exit code 127
  (runc's wording), as a real daemon does;
- SIGTERM/SIGINT/SIGHUP are forwarded to the child (docker signals PID 1 only) only if it has a handler
  for them: PID 1 of a container ignores a signal it does not catch, so `docker stop` of a command without
  a SIGTERM handler waits the timeout and ends in SIGKILL (137), as on a real daemon; the child leads its
  own process group, which is SIGKILLed when the child exits (a container's processes die with it);
  with AutoRemove the container dir is removed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

from cockpit.sim import layout, realvllm
from cockpit.sim.tools import _docker, _host, _meminfo

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def command(cfg: dict, python: str) -> list[str]:
    """The argv the container runs on the simulated host."""
    argv = list(cfg["Config"].get("Entrypoint") or []) + list(cfg["Config"].get("Cmd") or [])
    if argv and argv[0] == "vllm":
        return [python, "-m", "cockpit.sim.engine", *argv]
    return argv


def child_env(root: str, cfg: dict, cdir: str) -> dict[str, str]:
    env = dict(os.environ)
    for item in cfg["Config"].get("Env") or []:
        key, _, value = item.partition("=")
        if key != "PATH":  # the "container" sees the host's files: keep the host PATH (stand-ins first)
            env[key] = value
    env[layout.ROOT_ENV] = root
    env["R37_SIM_CONTAINER_DIR"] = cdir
    env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class LogWriter:
    """Appends docker json-file records; one lock so lines of both streams never interleave."""

    def __init__(self, path: str, attach: bool):
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the shim
        self._lock = threading.Lock()
        self._attach = attach

    def pump(self, stream: object, name: str) -> None:
        out = sys.stdout if name == "stdout" else sys.stderr
        for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
            line = raw.decode("utf-8", "replace")
            rec = json.dumps({"log": line, "stream": name, "time": _host.rfc3339nano()})
            with self._lock:
                self._f.write(rec + "\n")
                self._f.flush()
                if self._attach:
                    out.write(line)
                    out.flush()


START_FAILED = ("failed to create shim task: OCI runtime create failed: runc create failed: unable to start "
                "container process: exec: {cmd}: executable file not found in $PATH: unknown")


def run(root: str, cid: str, attach: bool) -> int:
    os.environ[layout.ROOT_ENV] = root
    cdir = _docker.container_dir(cid)
    cfg = _host.read_json(os.path.join(cdir, "config.json"), None)
    if not isinstance(cfg, dict):
        sys.stderr.write(f"shim: no container {cid}\n")
        return 125
    spec = _host.read_json(os.path.join(root, "sim.json"), {})
    python = (spec.get("python") if isinstance(spec, dict) else "") or sys.executable
    argv = command(cfg, python)
    env = child_env(root, cfg, cdir)
    recipe_argv = list(cfg["Config"].get("Entrypoint") or []) + list(cfg["Config"].get("Cmd") or [])
    real = realvllm.plan(recipe_argv, spec if isinstance(spec, dict) else {})
    if real is not None:
        argv, record = real
        env = realvllm.real_env(env, str(spec.get("vllm_model") or "") if isinstance(spec, dict) else "")
        _docker.write_json(os.path.join(cdir, "real-vllm.json"), record)
    st = _docker.read_state(cid)
    exe = shutil.which(argv[0], path=env.get("PATH")) if argv else None
    if exe is None:
        # like runc: the container was created but its process could not start; it stays `created`
        st.update(Status="created", Running=False, ExitCode=127,
                  Error=START_FAILED.format(cmd=json.dumps(argv[0] if argv else "")))
        _docker.write_state(cid, st)
        return 127
    log = LogWriter(_docker.log_path(cid), attach)
    child = subprocess.Popen(
        [exe, *argv[1:]],
        env=env,
        cwd=cfg["Config"].get("WorkingDir") or env.get("HOME") or "/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0,
    )

    def forward(signum: int, _frame: object) -> None:
        # The command is PID 1 of its container: the kernel drops a signal PID 1 has no handler for
        # (`docker stop` then waits its timeout and SIGKILLs: exit 137).
        if _docker.catches(child.pid, signum):
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    st.update(
        Status="running",
        Running=True,
        Pid=child.pid,
        ShimPid=os.getpid(),
        ExitCode=0,
        Error="",
        StartedAt=_host.rfc3339nano(),
        FinishedAt=_docker.ZERO_TIME,
        OOMKilled=False,
    )
    _docker.write_state(cid, st)
    pumps = [
        threading.Thread(target=log.pump, args=(child.stdout, "stdout"), daemon=True),
        threading.Thread(target=log.pump, args=(child.stderr, "stderr"), daemon=True),
    ]
    for t in pumps:
        t.start()
    if real is not None and real[1].get("head"):
        # the simulated workers' rendezvous head, in the engine's process group: it goes when the engine
        # goes (the killpg below), as the head's TCPStore does; its own output is no line of vLLM's
        with open(os.path.join(cdir, "rendezvous-head.log"), "ab") as out:
            subprocess.Popen(realvllm.head_command(real[1]["head"], python),  # type: ignore[arg-type]
                             env={**child_env(root, cfg, cdir)}, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=out, process_group=child.pid)
    rc = child.wait()
    # Like a container's PID namespace going away: whatever the command left behind dies with it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(child.pid, signal.SIGKILL)
    for t in pumps:
        t.join(timeout=5)
    # A killed engine cannot tidy up: the memory and GPU it held are free again once its container is gone.
    for name in ("mem.json", "gpu.json"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(layout.run_dir(Path(root)), name))
    _meminfo.refresh(root)
    code = 128 - rc if rc < 0 else rc
    oom = os.path.exists(os.path.join(cdir, "oom_killed"))
    st.update(
        Status="exited",
        Running=False,
        Pid=0,
        ExitCode=137 if oom and code == 0 else code,
        OOMKilled=oom,
        FinishedAt=_host.rfc3339nano(),
    )
    _docker.write_state(cid, st)
    if cfg.get("HostConfig", {}).get("AutoRemove") and not attach:
        shutil.rmtree(cdir, ignore_errors=True)
    return code


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cockpit.sim.container", description="container shim of the sim")
    p.add_argument("--root", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--attach", action="store_true", help="also copy the output to this process")
    a = p.parse_args(argv)
    return run(a.root, a.id, a.attach)


if __name__ == "__main__":
    sys.exit(main())
